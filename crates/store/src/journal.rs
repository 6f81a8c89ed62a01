//! The recharge journal over the store: what `vt-domain` asks for ([`RechargeJournal`]) written in
//! the database the rest of the product uses, so its promises hold across processes and instances.

use std::sync::Arc;

use async_trait::async_trait;
use vt_domain::journal::{
    Confirmation, Consumption, JournalError, RechargeAttempt, RechargeJournal, RechargeRequest,
};
use vt_domain::vt::texts::RecargaStatus;

use super::{RecargasConfig, Store, StoreError};
use vt_engine::Clock;

/// The journal on top of a [`Store`], in the engine's time; `[recargas]` times each attempt's
/// follow-up.
pub struct StoreJournal {
    store: Arc<dyn Store>,
    clock: Clock,
    recargas: RecargasConfig,
}

impl StoreJournal {
    pub fn new(store: Arc<dyn Store>, clock: Clock, recargas: RecargasConfig) -> Self {
        Self {
            store,
            clock,
            recargas,
        }
    }
}

fn err(e: StoreError) -> JournalError {
    JournalError(e.to_string())
}

#[async_trait]
impl RechargeJournal for StoreJournal {
    async fn consume_confirmation(
        &self,
        confirmation: Confirmation<'_>,
        attempt: Option<&RechargeAttempt>,
    ) -> Result<Consumption, JournalError> {
        self.store
            .consume_confirmation(confirmation, attempt, self.clock.now())
            .await
            .map_err(err)
    }

    async fn consumer_of(&self, pending_id: &str) -> Result<Option<String>, JournalError> {
        self.store.confirmation_consumer(pending_id).await.map_err(err)
    }

    async fn begin(&self, attempt: &RechargeAttempt, request: &RechargeRequest) -> Result<(), JournalError> {
        let now = self.clock.now();
        let follow_up = self.recargas.follow_up(request.clone(), now);
        self.store
            .begin_recharge(attempt, Some(&follow_up), now)
            .await
            .map_err(err)
    }

    async fn resolve(&self, idempotency_key: &str, status: RecargaStatus) -> Result<(), JournalError> {
        self.store
            .resolve_recharge(idempotency_key, status.into(), self.clock.now())
            .await
            .map_err(err)
    }

    async fn unresolved(&self, scope: &str, fingerprint: &str) -> Result<Option<String>, JournalError> {
        self.store
            .unresolved_recharge(scope, fingerprint)
            .await
            .map_err(err)
    }
}
