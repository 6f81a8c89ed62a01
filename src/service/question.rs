//! Which recharge a typed "sim" answers: the one whose question was the last thing we said to the
//! person (`vt_domain::tools::Perguntada`). The mark is set by the turn that asks — the tools'
//! question, the router's restatement — or by a tap on the waiting request's own button, and this
//! module clears it after every other turn, so a "sim" that follows another answer of ours gets the
//! question again, never a charge. Code, not prompt: it holds whatever the router or the model did.

use vt_domain::tools::{PedidoCartao, Perguntada, RecargaPendente, STATE_PEDIDO_CARTAO, STATE_PERGUNTADA};

use std::borrow::Cow;

use super::{Inbound, NotWaiting, ServiceError, Tap};
use vt_engine::Conversation;

/// `msg` as the turn reads it: a tap becomes the words it stands for — "sim" or "não" when the
/// recharge it names is the one waiting in `conv` for this very user; otherwise what the channel said
/// such a tap becomes ([`NotWaiting`]). Read with the conversation the turn reads anyway: no read of
/// its own. Under the turn lock the confirm tap is checked again ([`tapped`]), and the confirmation
/// tool checks the mark it sets: a tap read here before another turn changed the request moves no
/// money.
pub(super) fn resolve_tap<'m>(
    msg: &'m Inbound,
    conv: Option<&Conversation>,
) -> Result<Cow<'m, Inbound>, ServiceError> {
    let Some(tap) = &msg.tap else {
        return Ok(Cow::Borrowed(msg));
    };
    let waiting = conv
        .filter(|c| c.user_id == msg.user.user_id)
        .and_then(|c| RecargaPendente::id_in(&c.state));
    let mut resolved = msg.clone();
    if waiting.as_deref() == Some(tap.recharge.as_str()) {
        resolved.text = if tap.confirm { "sim" } else { "não" }.into();
        return Ok(Cow::Owned(resolved));
    }
    match &tap.otherwise {
        NotWaiting::Refuse => Err(ServiceError::TapNotWaiting),
        NotWaiting::Say(text) => {
            resolved.text.clone_from(text);
            resolved.tap = None;
            Ok(Cow::Owned(resolved))
        }
    }
}

/// A tap on the confirm button of the recharge waiting names it, as if its question had just been
/// asked. A cancel tap, or a tap on any other request, names nothing.
pub(super) fn tapped(conv: &mut Conversation, tap: Option<&Tap>) {
    let waiting = RecargaPendente::id_in(&conv.state);
    let confirmed = tap.filter(|t| t.confirm).map(|t| t.recharge.as_str());
    if let Some(id) = confirmed.filter(|id| waiting.as_deref() == Some(*id)) {
        conv.state
            .insert(STATE_PERGUNTADA.into(), Perguntada::mark(id, Perguntada::TAP));
    }
}

/// After turn `turn` (which, when `restated` names a recharge, said its question again in the
/// router's words): the mark stands only if that turn asked the waiting recharge's question.
pub(super) fn settle(conv: &mut Conversation, turn: &str, restated: Option<&str>) {
    if let Some(pending) = restated {
        conv.state
            .insert(STATE_PERGUNTADA.into(), Perguntada::mark(pending, turn));
    }
    if conv.state.contains_key(STATE_PERGUNTADA) && !Perguntada::stands_after(&conv.state, turn) {
        conv.state.remove(STATE_PERGUNTADA);
    }
    // A block or a second copy waits for the very next message only: a "sim" said later, to something
    // else, never changes a card.
    if conv.state.contains_key(STATE_PEDIDO_CARTAO) && !PedidoCartao::stands_after(&conv.state, turn) {
        conv.state.remove(STATE_PEDIDO_CARTAO);
    }
}
