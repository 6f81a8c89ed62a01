//! Paying a chat recharge by card, as the tools see it: a port the service implements (a checkout
//! link at the card provider, put on record), so a confirmed card recharge gets a link to pay on the
//! provider's page, and the recharge goes only once the provider says it was paid. A card number never
//! enters the chat. Without the port (no card provider), the recharge goes as before — where real
//! systems are behind it, it is refused before anything is prepared ([`super::MeiosIndisponiveis`]).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::vt::FlowInput;
use vt_contract::action::ActionError;
use vt_contract::context::ActionContext;

/// A link the card holder pays at.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkCartao {
    /// The provider's id of the checkout.
    pub id: String,
    /// The line with the link: amount, masked VT card, until when, the link itself.
    pub texto: String,
    pub url: String,
    pub expira_em: DateTime<Utc>,
}

/// What asking for a new link found.
#[derive(Debug, Clone, PartialEq)]
pub enum NovoLink {
    /// A new checkout (the recharge's next link).
    Emitido(LinkCartao),
    /// The last link still holds: shown again, no new checkout.
    AindaValido(LinkCartao),
    /// `[cartao] novos_links_max` new links were issued already.
    Limite,
    /// The recharge was paid already.
    JaPago,
}

#[async_trait]
pub trait CardCheckouts: Send + Sync {
    /// Link `n` of the recharge `input` under `recharge_key`, in the calling turn's conversation: the
    /// same key and `n` are the same checkout.
    async fn link(
        &self,
        ctx: &ActionContext,
        input: &FlowInput,
        recharge_key: &str,
        n: u32,
    ) -> Result<LinkCartao, ActionError>;

    /// A new link for the recharge `recharge_key`, whose last one expired (or the last one again,
    /// while it holds).
    async fn novo_link(&self, ctx: &ActionContext, recharge_key: &str) -> Result<NovoLink, ActionError>;
}

/// How tools find the port in their context.
pub type SharedCardCheckouts = Arc<dyn CardCheckouts>;

/// What a reply's file id starts with when the file stands for a checkout link: the rest is the
/// checkout's id, and a channel that shows a link as a button (WhatsApp's `cta_url`, the HTTP
/// reply's `cartao` field) draws it from the checkout on record when it sends it.
pub const LINK_FILE: &str = "cartao-link:";

/// Checkout `id`'s link, as a reply's file.
pub fn link_file(id: &str) -> vt_contract::response::FileContent {
    vt_contract::response::FileContent {
        file_id: format!("{LINK_FILE}{id}"),
        file_name: format!("pagamento-{id}.url"),
        file_type: "text/uri-list".into(),
    }
}

/// The checkout whose link `file` is, if it is one.
pub fn link_of(file: &vt_contract::response::FileContent) -> Option<&str> {
    file.file_id.strip_prefix(LINK_FILE)
}

/// The conversation's card checkout waiting for payment: `{"recarga": <key>, "id", "descricao"}` (a
/// new link is asked for it).
pub const STATE_CARTAO: &str = "cartao_pendente";

/// A link as the card holder is shown it: the line with the URL (a channel that shows buttons adds
/// one from the file).
pub(crate) fn mostrar(link: &LinkCartao, instruction: String) -> vt_contract::response::ResponseToUser {
    vt_contract::response::ResponseToUser::new(link.texto.clone(), instruction).with_file(link_file(&link.id))
}
