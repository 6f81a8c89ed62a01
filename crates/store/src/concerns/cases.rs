//! Cases: a conversation handed to a person, offered, claimed, transferred, closed.

use super::*;

/// Cases: a conversation handed to a person — opened once, claimed by one support agent, handed back
/// or closed — every transition one conditional update, written with its line in the case's log.
#[async_trait]
pub trait CaseStore: Send + Sync {
    /// Opens `case` unless its conversation has an open case (then that one comes back).
    async fn open_case(&self, case: &NewCase, now: DateTime<Utc>) -> Result<CaseOpened, StoreError>;

    async fn case(&self, id: &str) -> Result<Option<Case>, StoreError>;

    /// The conversation's open case, if any.
    async fn open_case_of(&self, conversation_id: &str) -> Result<Option<Case>, StoreError>;

    /// How many cases are open (waiting or claimed), every tenant's.
    async fn open_case_count(&self) -> Result<i64, StoreError>;

    /// The times of the cases opened since `since` and of every case still waiting, `tenant`'s only
    /// when given: what the case figures are made of (no sealed column is read).
    async fn case_times(
        &self,
        tenant: Option<&str>,
        since: DateTime<Utc>,
    ) -> Result<Vec<CaseTimes>, StoreError>;

    /// Cases, `tenant`'s only when given: open ones first (waiting, then claimed; oldest first), then
    /// the closed ones, newest first.
    async fn cases(&self, tenant: Option<&str>, limit: i64) -> Result<Vec<Case>, StoreError>;

    /// `owner` claims a waiting case.
    async fn claim_case(&self, id: &str, owner: &str, now: DateTime<Utc>) -> Result<Claim, StoreError>;

    /// Closes an open case as `to` (`Devolvido` or `Encerrado`) for `who`, with what they said of it;
    /// `None` when it was not open.
    async fn close_case(
        &self,
        id: &str,
        who: &str,
        to: CaseState,
        said: Closing<'_>,
        now: DateTime<Utc>,
    ) -> Result<Option<Case>, StoreError>;

    /// The case's log, oldest first.
    async fn case_events(&self, case_id: &str) -> Result<Vec<CaseEvent>, StoreError>;

    /// Takes one waiting case whose notice is due by `now` and marks its notice sent: one conditional
    /// update, so among several processes each notice is taken once.
    async fn take_due_notice(&self, now: DateTime<Utc>) -> Result<Option<Case>, StoreError>;

    /// What a person says to the card holder in a case, in one transaction: the message in the
    /// conversation, its outbox items (to the card holder, to the support board) and, when given, its
    /// line in the case's log.
    async fn say_in_case(
        &self,
        conversation_id: &str,
        message: &ChatMessage,
        outbox: &[NewOutboxItem],
        event: Option<&CaseEvent>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// A line in a case's log that says nothing to the card holder (an internal note), with the board
    /// items that show it — one transaction.
    async fn note_case(
        &self,
        event: &CaseEvent,
        outbox: &[NewOutboxItem],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// The case's root post on the support board is `post`.
    async fn set_board_post(&self, case_id: &str, post: &str) -> Result<(), StoreError>;

    /// The case whose root post on the support board is `post`.
    async fn case_of_board_post(&self, post: &str) -> Result<Option<Case>, StoreError>;

    /// The next protocol number of `tenant`'s `day` (`AAAAMMDD-NNNNNN`): one upsert, so of several
    /// processes opening cases at once no two get the same. A case that is then not written leaves a
    /// gap, never a repeat.
    async fn next_protocol(&self, tenant: &str, day: NaiveDate) -> Result<String, StoreError>;

    /// The case with protocol number `protocol`, `tenant`'s only when given.
    async fn case_by_protocol(
        &self,
        tenant: Option<&str>,
        protocol: &str,
    ) -> Result<Option<Case>, StoreError>;

    /// Every open case (waiting or claimed), every tenant's, oldest first.
    async fn open_cases(&self) -> Result<Vec<Case>, StoreError>;

    /// Cases opened in `[from, to)`, `tenant`'s only when given, oldest first.
    async fn cases_opened_between(
        &self,
        tenant: Option<&str>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Case>, StoreError>;

    /// Offers a waiting case to `offer.to` (or takes an expired offer back when `to` is `None`) if it
    /// is still offered to `offer.previous` and waiting — one conditional update, so of several
    /// processes one offer wins — with its lines in the case's log and the team's round-robin turn.
    async fn offer_case(&self, offer: &CaseOffer) -> Result<bool, StoreError>;

    /// The team's last agent offered a case (round robin), if any.
    async fn team_turn(&self, team: &str) -> Result<Option<String>, StoreError>;

    /// Moves an open case to `team` and, when given, to `owner` (then it is theirs, claimed), keeping
    /// its protocol and log; without an owner it waits in the team's queue again. `None`: not open.
    async fn transfer_case(&self, transfer: &CaseTransfer) -> Result<Option<Case>, StoreError>;

    /// Records that `key`'s SLA warning went for the case: `false` when it had (another process).
    async fn warn_sla(&self, case_id: &str, key: &str) -> Result<bool, StoreError>;

    /// `login` is away (no case is offered to them) or back.
    async fn set_away(&self, login: &str, away: bool, now: DateTime<Utc>) -> Result<(), StoreError>;

    /// The support agents who are away.
    async fn away_agents(&self) -> Result<Vec<String>, StoreError>;
}

/// An offer of a waiting case ([`CaseStore::offer_case`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CaseOffer {
    pub case_id: String,
    pub conversation_id: String,
    pub team: String,
    /// Whom it is offered to now (`None` when nobody may have it).
    pub previous: Option<String>,
    /// Whom it goes to (`None`: the expired offer is taken back and nobody is offered it).
    pub to: Option<String>,
    pub due_at: Option<DateTime<Utc>>,
    pub now: DateTime<Utc>,
}

/// What a person says of a case they close ([`CaseStore::close_case`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Closing<'a> {
    /// A note, in the close line of its log (sealed).
    pub note: Option<&'a str>,
    /// How it was resolved (a category of the product's list).
    pub resolution: Option<&'a str>,
}

/// A case moved to another team or agent ([`CaseStore::transfer_case`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CaseTransfer {
    pub case_id: String,
    pub who: String,
    /// Why, for the team that receives it: an internal note written with the move.
    pub note: Option<String>,
    pub team: String,
    pub owner: Option<String>,
    pub now: DateTime<Utc>,
}
