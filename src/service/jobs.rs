//! The services a reader can name, one per job. [`Services`] owns the parts (the engine, the store's
//! concerns, each setting); a job is a view that borrows the parts it uses and nothing else — of the
//! store, only the concerns it reads or writes ([`vt_store::Stores`]) — so its fields say which rules a
//! write obeys and which tables it may touch:
//!
//! - [`Messages`] — a chat message: accept → route → run → commit ([`super`]'s steps);
//! - [`Cases`] — conversations handed to a person, the support board;
//! - [`FollowUps`] — recharges whose outcome came late;
//! - [`Contacts`] — contacts of channels with a window: consent, templates, delivery statuses;
//! - [`Flows`] — the ten-stage flow;
//! - [`Payments`] — charges of chat recharges: issued, read back, credited once, refunded;
//! - [`Automatic`] — recharges that happen by themselves (Pix Automático): one charge per cycle and
//!   card, credited once;
//! - [`Outcomes`] — how conversations end, and what card holders thought of it;
//! - [`Spending`] — each tenant's month against its budget;
//! - [`Review`] — answers flagged and labelled into tests, FAQ entries suggested from agents' answers.
//!
//! Two rooms are shared by jobs: the [`Speaker`] (what is said in a conversation outside a turn, as
//! its channel takes it) and the [`Board`] (the support board's items). Readers outside the service
//! are given the narrow store trait they read ([`vt_store::Stores`]).

use std::collections::HashSet;

use tokio::sync::broadcast;
use tokio_util::task::TaskTracker;

use super::budgets::Budgets;
use super::hearing::Hearing;
use super::inbox::Inbox;
use super::payments::{CardSetup, PixSetup};
use super::{ChannelBook, HandoffConfig, ResultadosConfig, Said, ServiceConfig, Services};
use crate::costs::CustosConfig;
use crate::router::Router;
use vt_engine::Engine;
use vt_store::{
    CaseStore, ContactStore, ConversationStore, DeskStore, FlowStore, OutboxStore, OutcomeStore, PixStore,
    RecargasConfig, RechargeStore, RecurrenceStore, ReportStore,
};

/// What is said in a conversation outside a turn (a receipt, a late outcome, a person's words): stored,
/// queued as the conversation's channel takes it, told to this process's listeners.
#[derive(Clone, Copy)]
pub(crate) struct Speaker<'a> {
    pub(super) engine: &'a Engine,
    pub(super) cases: &'a dyn CaseStore,
    pub(super) said: &'a broadcast::Sender<Said>,
    pub(super) channels: &'a ChannelBook,
    pub(super) pushed: &'a HashSet<(String, String)>,
}

/// The support board (`[handoff]`'s channel): its items, cases opened with their post.
#[derive(Clone, Copy)]
pub(crate) struct Board<'a> {
    pub(super) engine: &'a Engine,
    pub(super) cases: &'a dyn CaseStore,
    pub(super) outbox: &'a dyn OutboxStore,
    pub(super) handoff: &'a HandoffConfig,
}

/// A chat message, whatever channel brought it: accept → route → run → commit.
#[derive(Clone, Copy)]
pub struct Messages<'a> {
    pub(super) engine: &'a Engine,
    pub(super) conversations: &'a dyn ConversationStore,
    pub(super) contacts: &'a dyn ContactStore,
    pub(super) outcomes: &'a dyn OutcomeStore,
    pub(super) config: &'a ServiceConfig,
    pub(super) router: &'a Option<Router>,
    pub(super) inbox: &'a Inbox,
    pub(super) turns: &'a TaskTracker,
    pub(super) hearing: &'a Hearing,
    pub(super) handoff: &'a HandoffConfig,
    pub(super) spending: Spending<'a>,
    pub(super) speaker: Speaker<'a>,
    pub(super) board: Board<'a>,
}

/// Conversations handed to a person and the support board.
#[derive(Clone, Copy)]
pub struct Cases<'a> {
    pub(super) engine: &'a Engine,
    pub(super) conversations: &'a dyn ConversationStore,
    pub(super) cases: &'a dyn CaseStore,
    pub(super) desk: &'a dyn DeskStore,
    pub(super) pix: &'a dyn PixStore,
    pub(super) outcomes: &'a dyn OutcomeStore,
    pub(super) reports: &'a dyn ReportStore,
    pub(super) speaker: Speaker<'a>,
    pub(super) board: Board<'a>,
    /// A person's proposal runs as a turn of the conversation.
    pub(super) messages: Messages<'a>,
}

/// The review queue and the FAQ's suggestions: what agents flag, what the product enqueues, what
/// reviewers label into tests, what agents answered by hand grouped into entries.
#[derive(Clone, Copy)]
pub struct Review<'a> {
    pub(super) engine: &'a Engine,
    pub(super) conversations: &'a dyn ConversationStore,
    pub(super) cases: &'a dyn CaseStore,
    pub(super) outcomes: &'a dyn OutcomeStore,
    pub(super) review: &'a dyn vt_store::ReviewStore,
    pub(super) settings: &'a super::ReviewSettings,
    /// When this process last looked for what the product enqueues itself.
    pub(super) swept: &'a std::sync::Mutex<Option<chrono::DateTime<chrono::Utc>>>,
}

/// Recharges whose outcome came late, followed up until they settle.
#[derive(Clone, Copy)]
pub struct FollowUps<'a> {
    pub(super) engine: &'a Engine,
    pub(super) conversations: &'a dyn ConversationStore,
    pub(super) flows: &'a dyn FlowStore,
    pub(super) recharges: &'a dyn RechargeStore,
    pub(super) recargas: &'a RecargasConfig,
    pub(super) speaker: Speaker<'a>,
    pub(super) board: Board<'a>,
}

/// Contacts of channels with a window: consent, templates' states, delivery statuses.
#[derive(Clone, Copy)]
pub struct Contacts<'a> {
    pub(super) contacts: &'a dyn ContactStore,
    pub(super) outbox: &'a dyn OutboxStore,
}

/// The ten-stage flow, run for one input.
#[derive(Clone, Copy)]
pub struct Flows<'a> {
    pub(super) engine: &'a Engine,
    pub(super) conversations: &'a dyn ConversationStore,
    pub(super) flows: &'a dyn FlowStore,
    pub(super) config: &'a ServiceConfig,
}

/// Charges of chat recharges (Pix, card): issued, read back from the provider, credited once,
/// refunded.
#[derive(Clone, Copy)]
pub struct Payments<'a> {
    pub(super) engine: &'a Engine,
    pub(super) conversations: &'a dyn ConversationStore,
    pub(super) pix: &'a dyn PixStore,
    pub(super) pix_setup: Option<&'a PixSetup>,
    pub(super) card: Option<&'a CardSetup>,
    pub(super) speaker: Speaker<'a>,
    pub(super) board: Board<'a>,
    /// A paid charge's recharge runs as a flow.
    pub(super) stages: Flows<'a>,
    /// After a receipt, the offer of a recharge that happens by itself.
    pub(super) automatic: Automatic<'a>,
}

/// Recharges that happen by themselves: recurrences read back, each cycle's charge created once,
/// debits credited once, failures retried by the provider's rules.
#[derive(Clone, Copy)]
pub struct Automatic<'a> {
    pub(super) engine: &'a Engine,
    pub(super) conversations: &'a dyn ConversationStore,
    pub(super) recurrences: &'a dyn RecurrenceStore,
    pub(super) outcomes: &'a dyn OutcomeStore,
    pub(super) pix_setup: Option<&'a PixSetup>,
    pub(super) speaker: Speaker<'a>,
    /// A debit's recharge (and a threshold's balance reading) runs as a flow.
    pub(super) stages: Flows<'a>,
    pub(super) quiet: &'a super::QuietHours,
}

/// How conversations end: each stretch's outcome once it is over, the satisfaction question.
#[derive(Clone, Copy)]
pub struct Outcomes<'a> {
    pub(super) engine: &'a Engine,
    pub(super) conversations: &'a dyn ConversationStore,
    pub(super) outcomes: &'a dyn OutcomeStore,
    pub(super) contacts: &'a dyn ContactStore,
    pub(super) resultados: &'a ResultadosConfig,
    pub(super) speaker: Speaker<'a>,
}

/// Each tenant's month (`[[orcamentos]]`, `[custos]`): what it spent, where it stands.
#[derive(Clone, Copy)]
pub struct Spending<'a> {
    pub(super) engine: &'a Engine,
    pub(super) reports: &'a dyn ReportStore,
    pub(super) budgets: &'a Budgets,
    pub(super) costs: &'a CustosConfig,
}

impl Services {
    pub(super) fn speaker(&self) -> Speaker<'_> {
        Speaker {
            engine: &self.engine,
            cases: &*self.stores.cases,
            said: &self.said,
            channels: &self.channels,
            pushed: &self.pushed,
        }
    }

    pub(super) fn board(&self) -> Board<'_> {
        Board {
            engine: &self.engine,
            cases: &*self.stores.cases,
            outbox: &*self.stores.outbox,
            handoff: &self.handoff,
        }
    }

    /// A chat message, whatever channel brought it: accept → route → run → commit.
    pub fn messages(&self) -> Messages<'_> {
        Messages {
            engine: &self.engine,
            conversations: &*self.stores.conversations,
            contacts: &*self.stores.contacts,
            outcomes: &*self.stores.outcomes,
            config: &self.config,
            router: &self.router,
            inbox: &self.inbox,
            turns: &self.turns,
            hearing: &self.hearing,
            handoff: &self.handoff,
            spending: self.spending(),
            speaker: self.speaker(),
            board: self.board(),
        }
    }

    /// Conversations handed to a person and the support board.
    pub fn cases(&self) -> Cases<'_> {
        Cases {
            engine: &self.engine,
            conversations: &*self.stores.conversations,
            cases: &*self.stores.cases,
            desk: &*self.stores.desk,
            pix: &*self.stores.pix,
            outcomes: &*self.stores.outcomes,
            reports: &*self.stores.reports,
            speaker: self.speaker(),
            board: self.board(),
            messages: self.messages(),
        }
    }

    /// The review queue and the FAQ's suggestions.
    pub fn review(&self) -> Review<'_> {
        Review {
            engine: &self.engine,
            conversations: &*self.stores.conversations,
            cases: &*self.stores.cases,
            outcomes: &*self.stores.outcomes,
            review: &*self.stores.review,
            settings: &self.review,
            swept: &self.review_swept,
        }
    }

    /// Recharges whose outcome came late, followed up until they settle.
    pub fn followups(&self) -> FollowUps<'_> {
        FollowUps {
            engine: &self.engine,
            conversations: &*self.stores.conversations,
            flows: &*self.stores.flows,
            recharges: &*self.stores.recharges,
            recargas: &self.recargas,
            speaker: self.speaker(),
            board: self.board(),
        }
    }

    /// Contacts of channels with a window: consent, templates' states, delivery statuses.
    pub fn contacts(&self) -> Contacts<'_> {
        Contacts {
            contacts: &*self.stores.contacts,
            outbox: &*self.stores.outbox,
        }
    }

    /// The ten-stage flow, run for one input.
    pub fn flows(&self) -> Flows<'_> {
        Flows {
            engine: &self.engine,
            conversations: &*self.stores.conversations,
            flows: &*self.stores.flows,
            config: &self.config,
        }
    }

    /// Charges of chat recharges: issued, read back from the provider, credited once, refunded.
    pub fn payments(&self) -> Payments<'_> {
        Payments {
            engine: &self.engine,
            conversations: &*self.stores.conversations,
            pix: &*self.stores.pix,
            pix_setup: self.pix.as_ref(),
            card: self.card.as_ref(),
            speaker: self.speaker(),
            board: self.board(),
            stages: self.flows(),
            automatic: self.automatic(),
        }
    }

    /// Recharges that happen by themselves (Pix Automático).
    pub fn automatic(&self) -> Automatic<'_> {
        Automatic {
            engine: &self.engine,
            conversations: &*self.stores.conversations,
            recurrences: &*self.stores.recurrences,
            outcomes: &*self.stores.outcomes,
            pix_setup: self.pix.as_ref(),
            speaker: self.speaker(),
            stages: self.flows(),
            quiet: &self.quiet,
        }
    }

    /// How conversations end: each stretch's outcome once it is over, the satisfaction question.
    pub fn outcomes(&self) -> Outcomes<'_> {
        Outcomes {
            engine: &self.engine,
            conversations: &*self.stores.conversations,
            outcomes: &*self.stores.outcomes,
            contacts: &*self.stores.contacts,
            resultados: &self.resultados,
            speaker: self.speaker(),
        }
    }

    /// Each tenant's month against its budget.
    pub fn spending(&self) -> Spending<'_> {
        Spending {
            engine: &self.engine,
            reports: &*self.stores.reports,
            budgets: &self.budgets,
            costs: &self.costs,
        }
    }
}

impl<'a> Payments<'a> {
    /// Whether chat recharges are paid by Pix here (a provider is configured).
    pub(crate) fn takes_pix(self) -> bool {
        self.pix_setup.is_some()
    }

    /// Whether chat recharges are paid by card on a provider's hosted checkout.
    pub(crate) fn takes_cards(self) -> bool {
        self.card.is_some()
    }

    /// The operator's Pix key, where WhatsApp shows charges as native orders (`[pix]
    /// whatsapp_order_details`).
    pub fn pix_order_key(self) -> Option<&'a str> {
        let pix = self.pix_setup.filter(|p| p.config.whatsapp_order_details)?;
        Some(pix.config.chave.as_str())
    }
}

impl FollowUps<'_> {
    /// How often recharges whose outcome came late are looked at (`[recargas]`).
    pub(crate) fn every(self) -> std::time::Duration {
        self.recargas.poll_every()
    }
}

impl Outcomes<'_> {
    /// How often quiet stretches are closed (`[resultados]`).
    pub(crate) fn every(self) -> std::time::Duration {
        self.resultados.every()
    }
}

impl<'a> Spending<'a> {
    /// The prices turns and paid messages are costed at (`[custos]`).
    pub(crate) fn costs(self) -> &'a CustosConfig {
        self.costs
    }
}
