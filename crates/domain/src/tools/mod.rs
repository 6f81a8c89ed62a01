//! The conversational tools of the VT agent, one file each, registered in [`register`], plus what
//! they share: the settings of the conversation ([`VtSettings`]), the flow runner they use to go
//! through the stage chain ([`FlowRunner`], implemented by the engine's side), and the pending-recharge
//! record behind the confirmation rule ([`RecargaPendente`]).
#![warn(clippy::too_many_lines)] // on a message's path: see clippy.toml

pub mod automatica;
mod balcao;
mod bloquear_cartao;
mod buscar_faq;
mod calcular;
mod cancelar_recarga;
pub mod cartao;
mod checkout;
mod confirmar_pedido_cartao;
mod confirmar_recarga;
mod consultar_saldo;
mod encerrar_atendimento;
mod extrato;
mod ficha;
mod meios;
mod notificar;
mod novo_codigo;
mod pedido_cartao;
mod pendente;
mod pix;
mod preparar_recarga;
mod recarga_automatica;
mod segunda_via;
mod taxa;
mod runner;
mod settings;
mod situacao;
mod transferir_para_humano;
mod verificar_pagamento;

pub use automatica::{
    Autorizacao, Gatilho, OFERTA, RecargasAutomaticas, Resumo, STATE_OFERTA_AUTOMATICA,
    SharedRecargasAutomaticas, Termos, oferta,
};
pub use bloquear_cartao::BloquearCartao;
pub use buscar_faq::BuscarFaq;
pub use calcular::{Calcular, decimal_pt, evaluate};
pub use cancelar_recarga::CancelarRecarga;
pub use checkout::{
    CardCheckouts, LINK_FILE, LinkCartao, NovoLink, STATE_CARTAO, SharedCardCheckouts, link_file, link_of,
};
pub use confirmar_pedido_cartao::{ConfirmarPedidoCartao, SegundaViaPaga, segunda_via_paga};
pub use confirmar_recarga::{ConfirmarRecarga, user_confirms};
pub use consultar_saldo::ConsultarSaldo;
pub use encerrar_atendimento::EncerrarAtendimento;
pub use extrato::Extrato;
pub use ficha::{Ficha, bloquear_por_atendente, ficha};
pub use meios::MeiosIndisponiveis;
pub use notificar::Notificar;
pub use novo_codigo::NovoCodigoPix;
pub use pedido_cartao::{
    AcaoCartao, Autoatendimento, PedidoCartao, STATE_PEDIDO_CARTAO, STATE_ULTIMO_PEDIDO, Verificacao,
};
pub use pendente::{Perguntada, RecargaPendente, STATE_PENDENTE, STATE_PERGUNTADA};
pub use pix::{
    CodigoPix, NovoCodigo, PedidoPix, PixCharges, QR_FILE, STATE_PIX, SharedPixCharges, qr_file, qr_of,
};
pub use preparar_recarga::PrepararRecarga;
pub use recarga_automatica::{Acao, RecargaAutomatica};
pub use runner::{FlowResult, FlowRunner, SharedFlowRunner};
pub use segunda_via::PedirSegundaVia;
pub use settings::VtSettings;
pub use situacao::ConsultarSituacao;
pub use transferir_para_humano::TransferirParaHumano;
pub use verificar_pagamento::{
    PagamentoVisto, Pagamentos, SharedPagamentos, Situacao, Veredito, VerificarPagamento, veredito,
};

use vt_contract::action::{ActionRegistry, DuplicateAction};

/// Registers every conversational tool.
pub fn register(registry: &mut ActionRegistry) -> Result<(), DuplicateAction> {
    registry.register(ConsultarSaldo)?;
    registry.register(PrepararRecarga)?;
    registry.register(ConfirmarRecarga)?;
    registry.register(NovoCodigoPix)?;
    registry.register(CancelarRecarga)?;
    registry.register(Notificar)?;
    registry.register(TransferirParaHumano)?;
    registry.register(EncerrarAtendimento)?;
    registry.register(BuscarFaq)?;
    registry.register(Calcular)?;
    registry.register(RecargaAutomatica)?;
    registry.register(VerificarPagamento)?;
    registry.register(ConsultarSituacao)?;
    registry.register(Extrato)?;
    registry.register(BloquearCartao)?;
    registry.register(PedirSegundaVia)?;
    registry.register(ConfirmarPedidoCartao)?;
    Ok(())
}
