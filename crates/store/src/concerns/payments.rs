//! Payments kept: the chat's Pix charges and the automatic recharges' recurrences and charges.

use super::*;

/// The Pix charges of chat recharges (step 20).
#[async_trait]
pub trait PixStore: Send + Sync {
    /// Puts `charge` on record, or finds the one already there under its txid (a retry, a restart):
    /// the stored one is returned either way.
    async fn open_charge(&self, charge: &PixCharge) -> Result<PixCharge, StoreError>;

    async fn pix_charge(&self, txid: &str) -> Result<Option<PixCharge>, StoreError>;

    /// The flow run `execucao_id` sent the recharge charge `txid` paid for (what a replay lists).
    async fn note_credit_run(&self, txid: &str, execucao_id: &str) -> Result<(), StoreError>;

    /// Every code issued for one recharge, oldest first.
    async fn recharge_charges(&self, recharge_key: &str) -> Result<Vec<PixCharge>, StoreError>;

    /// The gate a payment passes before its recharge is sent: claimed once, whatever reports it
    /// (webhooks, follow-ups, several processes), and at most one paid code per recharge.
    async fn claim_payment(
        &self,
        txid: &str,
        end_to_end_id: &str,
        paid_at: DateTime<Utc>,
    ) -> Result<PaymentClaim, StoreError>;

    /// Seconds from code to payment of the charges paid since `since` (a `/metrics` figure).
    async fn payment_seconds(&self, since: DateTime<Utc>) -> Result<Vec<i64>, StoreError>;

    /// Records that charge `txid` returned payment `end_to_end_id`, and the provider's `status` for
    /// the refund (again, as it changes).
    async fn record_refund(&self, txid: &str, end_to_end_id: &str, status: &str) -> Result<(), StoreError>;

    /// Charges whose refund the provider has not settled yet (`EM_PROCESSAMENTO`), at most `limit`.
    async fn refunds_in_progress(&self, limit: i64) -> Result<Vec<PixCharge>, StoreError>;

    /// Moves a charge from `from` to `to`; `false` when it was not in `from` (someone else moved it).
    async fn settle_charge(
        &self,
        txid: &str,
        from: ChargeStatus,
        to: ChargeStatus,
    ) -> Result<bool, StoreError>;

    /// The charges in `status`, soonest to expire first.
    async fn charges_in(&self, status: ChargeStatus, limit: i64) -> Result<Vec<PixCharge>, StoreError>;

    /// Every charge of conversation `conversation_id`, oldest first (a few: each recharge has at most
    /// `[pix] novos_codigos_max` + 1 codes).
    async fn conversation_charges(&self, conversation_id: &str) -> Result<Vec<PixCharge>, StoreError>;

    /// How many charges are in each status (the ones with none are absent).
    async fn charge_counts(&self) -> Result<Vec<(ChargeStatus, i64)>, StoreError>;
}

/// Recharges that happen by themselves (issue "Step 29"): Pix Automático recurrences and the charge of
/// each cycle. Every move is one conditional statement, so of two instances (or a rerun) one does it.
#[async_trait]
pub trait RecurrenceStore: Send + Sync {
    /// Puts `recurrence` on record (`criada` or `falhou`).
    async fn put_recurrence(&self, recurrence: &Recurrence) -> Result<(), StoreError>;

    async fn recurrence(&self, id: &str) -> Result<Option<Recurrence>, StoreError>;

    /// The recurrence the provider knows as `id_rec`.
    async fn recurrence_by_rec(&self, id_rec: &str) -> Result<Option<Recurrence>, StoreError>;

    /// Moves recurrence `id` from one of `from` to `to` at `at` (its approval or end time); `false`
    /// when it was in none of them.
    async fn move_recurrence(
        &self,
        id: &str,
        from: &[RecurrenceStatus],
        to: RecurrenceStatus,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// The recurrences in `status`, oldest first, at most `limit`.
    async fn recurrences_in(
        &self,
        status: RecurrenceStatus,
        limit: i64,
    ) -> Result<Vec<Recurrence>, StoreError>;

    /// A user's recurrences, newest first.
    async fn user_recurrences(&self, tenant_id: &str, user_id: &str) -> Result<Vec<Recurrence>, StoreError>;

    /// Every recurrence (of `tenant_id` when given), newest first, at most `limit`, each with its next
    /// debit and how many were credited — one query, as the operator lists them.
    async fn recurrence_listing(
        &self,
        tenant_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<RecurrenceListed>, StoreError>;

    /// Takes the day's balance reading of recurrence `id`: `true` for the first caller on `day`.
    async fn take_daily_check(&self, id: &str, day: &str) -> Result<bool, StoreError>;

    /// What last happened to recurrence `id`, as the operator reads it.
    async fn note_recurrence(&self, id: &str, outcome: &str) -> Result<(), StoreError>;

    /// Puts `charge` on record unless its txid or its card's cycle is there already: `true` when this
    /// call put it (the caller creates it at the provider and speaks of it).
    async fn open_recurring_charge(&self, charge: &RecurringCharge) -> Result<bool, StoreError>;

    async fn recurring_charge(&self, txid: &str) -> Result<Option<RecurringCharge>, StoreError>;

    /// The charges in `status`, oldest first, at most `limit`.
    async fn recurring_charges_in(
        &self,
        status: RecurringChargeStatus,
        limit: i64,
    ) -> Result<Vec<RecurringCharge>, StoreError>;

    /// A recurrence's charges, oldest first.
    async fn charges_of_recurrence(&self, recurrence_id: &str) -> Result<Vec<RecurringCharge>, StoreError>;

    /// Moves charge `txid` from `from` to `to`; `false` when it was not in `from`.
    async fn move_recurring_charge(
        &self,
        txid: &str,
        from: RecurringChargeStatus,
        to: RecurringChargeStatus,
    ) -> Result<bool, StoreError>;

    /// The gate a debit passes before its recharge is sent: charge `txid` (`agendada`) moves to `paga`
    /// with payment `end_to_end_id` once, whatever reports it.
    async fn claim_recurring_payment(
        &self,
        txid: &str,
        end_to_end_id: &str,
        paid_at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Counts a retry of charge `txid` asked after `seen` others: `true` for the one caller that does.
    async fn count_retry(&self, txid: &str, seen: i64) -> Result<bool, StoreError>;

    /// Marks that the card holder was told charge `txid` failed for funds: `true` the first time.
    async fn take_funds_notice(&self, txid: &str) -> Result<bool, StoreError>;

    /// The offer of an automatic recharge made in conversation `conversation_id` outside a turn: its
    /// `state` (the offer kept for the next message), the `message` said and its `outbox` items, in
    /// one transaction (the caller holds the conversation's lock).
    async fn offer_automatic(
        &self,
        conversation_id: &str,
        state: &serde_json::Map<String, Value>,
        said: (&vt_engine::llm::ChatMessage, &[NewOutboxItem]),
        at: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// How many recurrences are in each status, and charges in each status (`/metrics`).
    async fn recurrence_counts(&self) -> Result<(Vec<(String, i64)>, Vec<(String, i64)>), StoreError>;
}
