//! The pace of what goes to WhatsApp, in front of the Graph API: per sending number (`[whatsapp]
//! mensagens_por_segundo`, the number's tier: 80 by default, up to 1,000; 20 for a number shared with
//! the Business app) and per person (Meta's pair rate: about one message every 6 s, a short burst
//! allowed: `pessoa_intervalo_ms`, `pessoa_rajada`). The slots are kept in the store
//! ([`vt_store::OutboxStore::take_pace`]), so every instance on one database shares them. A send waits
//! for its slot when it is near; a person held back for longer is given back to the outbox for then,
//! without spending an attempt, and their later items wait behind it (the outbox's order). Meta's own
//! "slow down" moves the pace itself: 130429 (the number's throughput) for a second, 131056 (the pair
//! rate) for the person's interval — so every instance backs off, not only the one that was told.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use vt_store::{OutboxStore, Pace};

use crate::outbox::SendError;

/// The number's throughput exceeded.
pub(super) const THROUGHPUT: i64 = 130_429;
/// Too many messages to one person.
pub(super) const PAIR_RATE: i64 = 131_056;

/// The longest a send waits in place for the number's slot.
const NUMBER_WAIT: Duration = Duration::from_secs(2);
/// The longest a send waits in place for a person's slot (longer: given back to the outbox).
const PERSON_WAIT: Duration = Duration::from_secs(1);
/// How long the number rests after Meta said it sent too fast.
const THROUGHPUT_REST: Duration = Duration::from_secs(1);

pub(crate) struct Pacer {
    store: Arc<dyn OutboxStore>,
    number_key: String,
    number: Pace,
    person: Pace,
    /// The person's pace key prefix (`wa:<number>:`).
    prefix: String,
}

impl Pacer {
    /// The pace of business number `number`: `per_second` messages a second, one message per person
    /// every `person_every`, `person_burst` at once.
    pub(crate) fn new(
        store: Arc<dyn OutboxStore>,
        number: &str,
        per_second: u32,
        (person_every, person_burst): (Duration, u32),
    ) -> Self {
        let every = Duration::from_secs(1) / per_second.max(1);
        Self {
            store,
            number_key: format!("wa:{number}"),
            number: Pace {
                every,
                burst: 1,
                cost: 1,
                max_wait: NUMBER_WAIT,
            },
            person: Pace {
                every: person_every,
                burst: person_burst.max(1),
                cost: 1,
                max_wait: PERSON_WAIT,
            },
            prefix: format!("wa:{number}:"),
        }
    }

    /// Waits until `cost` messages may go to `person`: `Ok` when they may (now), `SendError::Later`
    /// when not before then (nothing was sent). The person's slots first, then the number's — taken
    /// last so the send leaves right at it; a person whose number has no slot near gives theirs back.
    pub(crate) async fn wait(&self, person: &str, cost: u32) -> Result<(), SendError> {
        let person_pace = Pace { cost, ..self.person };
        let key = format!("{}{person}", self.prefix);
        let theirs = match self.store.take_pace(&key, person_pace, Utc::now()).await {
            Ok(Ok(slot)) => slot,
            Ok(Err(earliest)) => return Err(SendError::Later(earliest)),
            Err(_) => return Err(unavailable()),
        };
        let number = Pace { cost, ..self.number };
        let slot = match self.store.take_pace(&self.number_key, number, Utc::now()).await {
            Ok(Ok(slot)) => slot.max(theirs),
            Ok(Err(earliest)) => {
                if let Err(e) = self.store.give_back_pace(&key, person_pace).await {
                    tracing::warn!(error = %e, "a person's WhatsApp pace could not be given back");
                }
                return Err(SendError::Later(earliest));
            }
            Err(_) => return Err(unavailable()),
        };
        if let Ok(wait) = (slot - Utc::now()).to_std() {
            tokio::time::sleep(wait).await;
        }
        Ok(())
    }

    /// Meta answered `code` to a send to `person`: the pace it names rests (every instance's).
    pub(crate) async fn told(&self, code: i64, person: &str) {
        let now = Utc::now();
        let (key, pace, rest) = match code {
            THROUGHPUT => (self.number_key.clone(), self.number, THROUGHPUT_REST),
            PAIR_RATE => (format!("{}{person}", self.prefix), self.person, self.person.every),
            _ => return,
        };
        let until = now + chrono::Duration::from_std(rest).unwrap_or_default();
        if let Err(e) = self.store.slow_pace(&key, pace, until).await {
            tracing::warn!(error = %e, "a WhatsApp pace could not be slowed");
        }
    }
}

fn unavailable() -> SendError {
    SendError::Retry {
        reason: "store unavailable (pace)".into(),
        after: None,
    }
}
