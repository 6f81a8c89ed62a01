//! Paying a chat recharge by Pix, as the tools see it: a port the service implements (the charge at
//! the provider, its code checked and put on record), so a confirmed Pix recharge is charged, not
//! sent unpaid. Without the port (no provider), the recharge goes as before.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::vt::FlowInput;
use vt_contract::action::ActionError;
use vt_contract::context::ActionContext;

/// A code the card holder pays.
#[derive(Debug, Clone, PartialEq)]
pub struct CodigoPix {
    pub txid: String,
    /// The line before the code: amount, masked card, until when.
    pub texto: String,
    /// The BR Code to copy, checked.
    pub copia_e_cola: String,
    pub expira_em: DateTime<Utc>,
    /// Shown as WhatsApp's native order (`order_details` with the code), on accounts Meta enabled for
    /// payments (`[pix] whatsapp_order_details`), instead of the code as text and its QR image.
    pub pedido_nativo: bool,
}

/// What a reply's file id starts with when the file is a charge's QR code: the rest is the txid, and
/// the image is drawn from the code on record when the channel sends it (nothing else is kept).
pub const QR_FILE: &str = "pix-qr:";

/// Charge `txid`'s QR code, as a reply's file.
pub fn qr_file(txid: &str) -> vt_contract::response::FileContent {
    vt_contract::response::FileContent {
        file_id: format!("{QR_FILE}{txid}"),
        file_name: format!("pix-{txid}.png"),
        file_type: "image/png".into(),
    }
}

/// The charge whose QR code `file` is, if it is one.
pub fn qr_of(file: &vt_contract::response::FileContent) -> Option<&str> {
    file.file_id.strip_prefix(QR_FILE)
}

/// A charge as a channel shows it natively (WhatsApp's `order_details`, then its `order_status`), as
/// a reply's file: drawn from the charge on record when it is sent, like [`QR_FILE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PedidoPix {
    /// The order to pay: the amount and the code.
    Pagar,
    /// Where the order stands now (paid and credited, withdrawn, returned).
    Situacao,
}

impl PedidoPix {
    const fn prefix(self) -> &'static str {
        match self {
            Self::Pagar => "pix-pedido:",
            Self::Situacao => "pix-situacao:",
        }
    }

    /// Charge `txid`'s order, as a reply's file.
    pub fn file(self, txid: &str) -> vt_contract::response::FileContent {
        vt_contract::response::FileContent {
            file_id: format!("{}{txid}", self.prefix()),
            file_name: format!("pix-{txid}.json"),
            file_type: "application/json".into(),
        }
    }

    /// The order and the charge `file` stands for, if it is one.
    pub fn of(file: &vt_contract::response::FileContent) -> Option<(Self, &str)> {
        [Self::Pagar, Self::Situacao]
            .into_iter()
            .find_map(|kind| Some((kind, file.file_id.strip_prefix(kind.prefix())?)))
    }
}

#[async_trait]
pub trait PixCharges: Send + Sync {
    /// Issues code `n` of the recharge `input` under `recharge_key`, in the calling turn's conversation:
    /// the same key and `n` are the same charge.
    async fn issue(
        &self,
        ctx: &ActionContext,
        input: &FlowInput,
        recharge_key: &str,
        n: u32,
    ) -> Result<CodigoPix, ActionError>;

    /// A new code for the recharge `recharge_key`, whose last code expired (or the last one again,
    /// while it holds).
    async fn novo_codigo(&self, ctx: &ActionContext, recharge_key: &str) -> Result<NovoCodigo, ActionError>;
}

/// What asking for a new code found.
#[derive(Debug, Clone, PartialEq)]
pub enum NovoCodigo {
    /// A new charge (the next code of the recharge).
    Emitido(CodigoPix),
    /// The last code still holds: shown again, no new charge.
    AindaValido(CodigoPix),
    /// `[pix] novos_codigos_max` new codes were issued already.
    Limite,
    /// The recharge was paid already.
    JaPago,
}

/// How tools find the port in their context.
pub type SharedPixCharges = Arc<dyn PixCharges>;

/// The conversation's Pix charge waiting for payment: `{"recarga": <key>, "codigo": n, "txid", "descricao"}`
/// (a new code is asked for it).
pub const STATE_PIX: &str = "pix_pendente";

/// A code as the card holder is shown it: the line, then the code on its own (easy to copy), then its
/// QR code — an image where the channel shows one, drawn in text in a terminal. As a native order, the
/// line and then the order, which carries the code (and WhatsApp's button to copy it).
pub(crate) fn mostrar(
    ctx: &ActionContext,
    codigo: &CodigoPix,
    instruction: String,
) -> vt_contract::response::ResponseToUser {
    if codigo.pedido_nativo {
        return vt_contract::response::ResponseToUser::new(codigo.texto.clone(), instruction)
            .with_file(PedidoPix::Pagar.file(&codigo.txid));
    }
    let mut response = vt_contract::response::ResponseToUser::new(codigo.texto.clone(), instruction)
        .then(codigo.copia_e_cola.clone())
        .with_file(qr_file(&codigo.txid));
    if ctx.channel == "terminal"
        && let Ok(qr) = crate::pix::qr::text(&codigo.copia_e_cola)
    {
        response = response.then(qr);
    }
    response
}
