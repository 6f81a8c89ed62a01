//! The conversational tools of the VT agent, one file each, registered in [`register`].

mod encerrar_atendimento;
mod transferir_para_humano;

pub use encerrar_atendimento::EncerrarAtendimento;
pub use transferir_para_humano::TransferirParaHumano;

use crate::action::{ActionRegistry, DuplicateAction};

/// Registers every conversational tool.
pub fn register(registry: &mut ActionRegistry) -> Result<(), DuplicateAction> {
    registry.register(TransferirParaHumano)?;
    registry.register(EncerrarAtendimento)?;
    Ok(())
}
