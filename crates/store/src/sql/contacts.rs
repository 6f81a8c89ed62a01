//! [`ContactStore`], once for both backends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Sql, Stmt};
use crate::rows::Columns;
use crate::{ConsentChange, ContactStore, StoreError, TemplateState, WhatsAppIds};

/// A contact wrote at `at`: their last message's time, never moved back.
pub(crate) fn touch(dialect: super::Dialect, wa_id: &str, at: DateTime<Utc>) -> Stmt {
    let sql = match dialect {
        super::Dialect::Sqlite => TOUCH_SQLITE,
        super::Dialect::Postgres => TOUCH_POSTGRES,
    };
    Stmt::new(sql).bind(wa_id).bind(at)
}

/// A contact wrote at `at`, in `conversation_id` (their message is being stored, `now`): their last
/// message's time, and the replies held there for want of an open window released — in the message's
/// own transaction, so a message on record always has its window opened.
pub(crate) fn seen(
    dialect: super::Dialect,
    (wa_id, at): (&str, DateTime<Utc>),
    conversation_id: &str,
    now: DateTime<Utc>,
) -> [Stmt; 2] {
    let release = Stmt::new(
        "UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = $1
         WHERE conversation_id = $2 AND status = 'held'",
    )
    .bind(now)
    .bind(conversation_id);
    [touch(dialect, wa_id, at), release]
}

#[async_trait]
impl<S: Sql> ContactStore for S {
    async fn touch_contact(&self, wa_id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.write(touch(self.dialect(), wa_id, at)).await?;
        Ok(())
    }

    async fn last_inbound(&self, wa_id: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        let row = self
            .read_one(Stmt::new("SELECT last_inbound_at FROM whatsapp_contacts WHERE wa_id = $1").bind(wa_id))
            .await?;
        row.as_ref().map(|r| r.time("last_inbound_at")).transpose()
    }

    async fn set_template_state(&self, state: &TemplateState) -> Result<(), StoreError> {
        let s = Stmt::new(
            "INSERT INTO whatsapp_templates (name, language, status, category, reason, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name, language) DO UPDATE SET \
             status = COALESCE(excluded.status, whatsapp_templates.status), \
             category = COALESCE(excluded.category, whatsapp_templates.category), \
             reason = COALESCE(excluded.reason, whatsapp_templates.reason), updated_at = excluded.updated_at",
        )
        .bind(&state.name)
        .bind(&state.language)
        .bind(&state.status)
        .bind(&state.category)
        .bind(&state.reason)
        .bind(state.updated_at);
        self.write(s).await?;
        Ok(())
    }

    async fn template_states(&self) -> Result<Vec<TemplateState>, StoreError> {
        let rows = self
            .read_all(Stmt::new(
                "SELECT * FROM whatsapp_templates ORDER BY name, language",
            ))
            .await?;
        rows.iter()
            .map(|r| {
                Ok(TemplateState {
                    name: r.value("name")?,
                    language: r.value("language")?,
                    status: r.value("status")?,
                    category: r.value("category")?,
                    reason: r.value("reason")?,
                    updated_at: r.time("updated_at")?,
                })
            })
            .collect()
    }

    async fn record_consent(&self, change: &ConsentChange) -> Result<(), StoreError> {
        let current = Stmt::new(
            "INSERT INTO whatsapp_consent (wa_id, opted_in, source, at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (wa_id) DO UPDATE SET opted_in = excluded.opted_in, source = excluded.source, at = excluded.at",
        )
        .bind(&change.wa_id)
        .bind(change.opted_in)
        .bind(&change.source)
        .bind(change.at);
        let event = Stmt::new(
            "INSERT INTO whatsapp_consent_events (wa_id, opted_in, source, who, at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&change.wa_id)
        .bind(change.opted_in)
        .bind(&change.source)
        .bind(&change.who)
        .bind(change.at);
        self.write_all(vec![current, event]).await
    }

    async fn consent(&self, wa_id: &str) -> Result<Option<ConsentChange>, StoreError> {
        let row = self
            .read_one(Stmt::new("SELECT * FROM whatsapp_consent WHERE wa_id = $1").bind(wa_id))
            .await?;
        row.as_ref().map(|r| consent_change(r, false)).transpose()
    }

    async fn consent_events(&self, wa_id: &str) -> Result<Vec<ConsentChange>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new("SELECT * FROM whatsapp_consent_events WHERE wa_id = $1 ORDER BY seq").bind(wa_id),
            )
            .await?;
        rows.iter().map(|r| consent_change(r, true)).collect()
    }

    async fn take_low_balance_notice(
        &self,
        card_hash: &str,
        not_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        // Inserted, or updated only when the card is not below since its last notice and that notice
        // is older than the interval.
        let taken = self
            .write(
                Stmt::new(
                    "INSERT INTO low_balance_notices (card_hash, below, last_notice_at) VALUES ($1, TRUE, $2) \
                     ON CONFLICT (card_hash) DO UPDATE SET below = TRUE, last_notice_at = excluded.last_notice_at \
                     WHERE NOT low_balance_notices.below \
                       AND (low_balance_notices.last_notice_at IS NULL OR low_balance_notices.last_notice_at <= $3)",
                )
                .bind(card_hash)
                .bind(now)
                .bind(not_before),
            )
            .await?;
        Ok(taken == 1)
    }

    async fn whatsapp_person(
        &self,
        number: &str,
        seen: &WhatsAppIds,
        now: DateTime<Utc>,
    ) -> Result<String, StoreError> {
        super::identities::person(self, number, seen, now).await
    }

    async fn whatsapp_person_of(&self, number: &str, identifier: &str) -> Result<Option<String>, StoreError> {
        super::identities::person_of(self, number, identifier).await
    }

    async fn whatsapp_moved(
        &self,
        number: &str,
        change: (&str, &str),
        now: DateTime<Utc>,
    ) -> Result<Option<String>, StoreError> {
        super::identities::moved(self, number, change, now).await
    }

    async fn whatsapp_address(&self, number: &str, person: &str) -> Result<WhatsAppIds, StoreError> {
        super::identities::address(self, number, person).await
    }

    async fn balance_recovered(&self, card_hash: &str) -> Result<(), StoreError> {
        self.write(
            Stmt::new("UPDATE low_balance_notices SET below = FALSE WHERE card_hash = $1 AND below")
                .bind(card_hash),
        )
        .await?;
        Ok(())
    }
}

const TOUCH_SQLITE: &str = "INSERT INTO whatsapp_contacts (wa_id, last_inbound_at) VALUES ($1, $2) \
     ON CONFLICT (wa_id) DO UPDATE SET last_inbound_at = MAX(whatsapp_contacts.last_inbound_at, excluded.last_inbound_at)";
const TOUCH_POSTGRES: &str = "INSERT INTO whatsapp_contacts (wa_id, last_inbound_at) VALUES ($1, $2) \
     ON CONFLICT (wa_id) DO UPDATE SET last_inbound_at = GREATEST(whatsapp_contacts.last_inbound_at, excluded.last_inbound_at)";

/// A consent row (`whatsapp_consent`) or one of its events (`whatsapp_consent_events`, with `who`).
fn consent_change(r: &impl Columns, event: bool) -> Result<ConsentChange, StoreError> {
    Ok(ConsentChange {
        wa_id: r.value("wa_id")?,
        opted_in: r.value("opted_in")?,
        source: r.value("source")?,
        who: if event { r.value("who")? } else { String::new() },
        at: r.time("at")?,
    })
}
