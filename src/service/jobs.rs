//! The services a reader can name, one per job, over one shared core ([`Services`]: the engine, the
//! store, the configuration, the clock):
//!
//! - [`Messages`] — a chat message: accept → route → run → commit ([`super`]'s steps);
//! - [`Cases`] — conversations handed to a person, the support board;
//! - [`FollowUps`] — recharges whose outcome came late;
//! - [`Contacts`] — WhatsApp contacts: last message, consent, templates, delivery statuses;
//! - [`Flows`] — the ten-stage flow;
//! - [`Payments`] — Pix charges of chat recharges: issued, read back, credited once, refunded;
//! - [`Outcomes`] — how conversations end, and what card holders thought of it.
//!
//! Each is a view of the core (`services.cases().claim_case(…)`): the call site names the job whose
//! rules a write obeys. The store stays inside: readers outside the service are given the narrow
//! store trait they read ([`crate::store::Stores`]).

use std::ops::Deref;

use super::Services;

macro_rules! job {
    ($(#[$doc:meta])* $name:ident, $accessor:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name<'a>(&'a Services);

        impl Deref for $name<'_> {
            type Target = Services;
            fn deref(&self) -> &Services {
                self.0
            }
        }

        impl Services {
            $(#[$doc])*
            pub fn $accessor(&self) -> $name<'_> {
                $name(self)
            }
        }
    };
}

job!(
    /// A chat message, whatever channel brought it: accept → route → run → commit.
    Messages,
    messages
);
job!(
    /// Conversations handed to a person and the support board.
    Cases,
    cases
);
job!(
    /// Recharges whose outcome came late, followed up until they settle.
    FollowUps,
    followups
);
job!(
    /// WhatsApp contacts: the last message's time, consent, templates' states, delivery statuses.
    Contacts,
    contacts
);
job!(
    /// The ten-stage flow, run for one input.
    Flows,
    flows
);
job!(
    /// Pix charges of chat recharges: issued, read back from the provider, credited once, refunded.
    Payments,
    payments
);
job!(
    /// How conversations end: each stretch's outcome once it is over, the satisfaction question.
    Outcomes,
    outcomes
);
