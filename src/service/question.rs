//! Which recharge a typed "sim" answers: the one whose question was the last thing we said to the
//! person (`vt_actions::tools::Perguntada`). The mark is set by the turn that asks — the tools'
//! question, the router's restatement — or by a tap on the waiting request's own button, and this
//! module clears it after every other turn, so a "sim" that follows another answer of ours gets the
//! question again, never a charge. Code, not prompt: it holds whatever the router or the model did.

use vt_actions::tools::{Perguntada, RecargaPendente, STATE_PERGUNTADA};

use crate::engine::Conversation;

/// A tap on the confirm button of `tapped`: when that recharge is the one waiting, the tap names it,
/// as if its question had just been asked. Any other id names nothing.
pub(super) fn tapped(conv: &mut Conversation, tapped: Option<&str>) {
    let waiting = RecargaPendente::id_in(&conv.state);
    if let Some(id) = tapped.filter(|id| waiting.as_deref() == Some(*id)) {
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
}
