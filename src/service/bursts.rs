//! Bursts: people type "oi" / "quero recarregar" / "50 no pix" as three quick messages. A channel that
//! asks for it ([`super::Received::join_within`], WhatsApp's `juntar_ms`) has a conversation's messages
//! that arrive within that time of each other answered as one turn, their texts joined in order —
//! with a fence around money: a yes, a no, a tap, a consent word or a media message is never joined
//! and is processed alone, in its place; nothing is joined while a recharge waits for its answer.
//! Each message is still stored on arrival, and a joined turn marks all of them processed in its one
//! commit.

use super::Inbound;

/// A stored, unprocessed message about to be processed, and who waits for its outcome.
pub(super) struct Pending {
    pub id: i64,
    pub msg: Inbound,
    pub waiting: Waiting,
}

/// Who waits for a message's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Waiting {
    /// The task processing now (it holds the turn lock).
    Caller,
    /// Another task of this process, which gets the outcome through the inbox.
    OtherTask,
    /// Nobody (another instance received it, or a restart lost its task).
    Nobody,
}

/// Whether `msg` may share a turn with its neighbours: plain words that neither answer a question of
/// ours nor change consent.
fn joinable(msg: &Inbound) -> bool {
    use vt_domain::vt::parse::{is_confirmation, is_refusal, is_yes_with_details};
    let text = msg.text.trim();
    msg.tap.is_none()
        && msg.media.is_none()
        && msg.unsupported.is_none()
        && !text.is_empty()
        && super::consent::consent_word(text).is_none()
        && !is_confirmation(text)
        && !is_refusal(text)
        && !is_yes_with_details(text)
}

/// `pending` (oldest first) cut into the turns it makes: with `join` on, runs of joinable messages
/// together; everything else alone.
pub(super) fn turns(pending: Vec<Pending>, join: bool) -> Vec<Vec<Pending>> {
    let mut turns: Vec<Vec<Pending>> = Vec::new();
    for p in pending {
        let joins = join
            && joinable(&p.msg)
            && turns
                .last()
                .and_then(|t| t.last())
                .is_some_and(|prev| joinable(&prev.msg));
        match turns.last_mut() {
            Some(turn) if joins => turn.push(p),
            _ => turns.push(vec![p]),
        }
    }
    turns
}

/// The one message a turn of several stands for: the last one's, with every text in order, naming
/// the first stored message it answers too.
pub(super) fn joined(turn: &[Pending]) -> Option<Inbound> {
    let (first, last) = (turn.first()?, turn.last()?);
    Some(Inbound {
        text: turn
            .iter()
            .map(|p| p.msg.text.trim())
            .collect::<Vec<_>>()
            .join("\n"),
        joined_from: (turn.len() > 1).then_some(first.id),
        ..last.msg.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(id: i64, text: &str) -> Pending {
        Pending {
            id,
            msg: Inbound {
                text: text.into(),
                ..Inbound::default()
            },
            waiting: Waiting::Nobody,
        }
    }

    fn shape(turns: &[Vec<Pending>]) -> Vec<Vec<i64>> {
        turns.iter().map(|t| t.iter().map(|p| p.id).collect()).collect()
    }

    #[test]
    fn words_join_and_answers_stand_alone_in_their_place() {
        let burst = [
            "oi",
            "quero recarregar",
            "sim",
            "50 no pix",
            "não",
            "PARAR",
            "obrigado",
            "valeu",
        ];
        let pending = |join| {
            turns(
                burst
                    .iter()
                    .enumerate()
                    .map(|(i, t)| pending(i as i64, t))
                    .collect(),
                join,
            )
        };
        assert_eq!(
            shape(&pending(true)),
            vec![vec![0, 1], vec![2], vec![3], vec![4], vec![5], vec![6, 7]]
        );
        assert_eq!(shape(&pending(false)).len(), burst.len(), "off: one turn each");
    }

    #[test]
    fn a_joined_turn_reads_in_order_and_names_its_first_message() {
        let turn = vec![
            pending(7, "oi"),
            pending(8, " quero recarregar "),
            pending(9, "50 no pix"),
        ];
        let msg = joined(&turn).expect("a turn");
        assert_eq!(msg.text, "oi\nquero recarregar\n50 no pix");
        assert_eq!(msg.joined_from, Some(7));
        assert_eq!(joined(&turn[2..]).expect("one").joined_from, None);
    }

    #[test]
    fn a_voice_note_or_a_tap_is_never_joined() {
        let mut voice = pending(2, "");
        voice.msg.media = Some(vt_store::Media {
            kind: vt_store::MediaKind::Audio,
            id: "1".into(),
            mime: "audio/ogg".into(),
        });
        let turns = turns(vec![pending(1, "oi"), voice, pending(3, "tudo bem")], true);
        assert_eq!(shape(&turns), vec![vec![1], vec![2], vec![3]]);
    }
}
