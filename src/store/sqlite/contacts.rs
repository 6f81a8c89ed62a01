//! [`ContactStore`] on SQLite.

use super::*;
use crate::store::{ConsentChange, ContactStore, TemplateState};

#[async_trait]
impl ContactStore for SqliteStore {
    async fn touch_contact(&self, wa_id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO whatsapp_contacts (wa_id, last_inbound_at) VALUES (?, ?) \
             ON CONFLICT (wa_id) DO UPDATE SET last_inbound_at = MAX(whatsapp_contacts.last_inbound_at, excluded.last_inbound_at)",
        )
        .bind(wa_id)
        .bind(ms(at))
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    async fn last_inbound(&self, wa_id: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        let row = sqlx::query("SELECT last_inbound_at FROM whatsapp_contacts WHERE wa_id = ?")
            .bind(wa_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(|r| r.time("last_inbound_at")).transpose()
    }

    async fn set_template_state(&self, state: &TemplateState) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO whatsapp_templates (name, language, status, category, reason, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name, language) DO UPDATE SET \
             status = COALESCE(excluded.status, whatsapp_templates.status), \
             category = COALESCE(excluded.category, whatsapp_templates.category), \
             reason = COALESCE(excluded.reason, whatsapp_templates.reason), updated_at = excluded.updated_at",
        )
        .bind(&state.name)
        .bind(&state.language)
        .bind(&state.status)
        .bind(&state.category)
        .bind(&state.reason)
        .bind(ms(state.updated_at))
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    async fn template_states(&self) -> Result<Vec<TemplateState>, StoreError> {
        let rows = sqlx::query("SELECT * FROM whatsapp_templates ORDER BY name, language")
            .fetch_all(&self.pool)
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
        let mut tx = self.writer.begin().await?;
        sqlx::query(
            "INSERT INTO whatsapp_consent (wa_id, opted_in, source, at) VALUES (?, ?, ?, ?) \
             ON CONFLICT (wa_id) DO UPDATE SET opted_in = excluded.opted_in, source = excluded.source, at = excluded.at",
        )
        .bind(&change.wa_id)
        .bind(change.opted_in)
        .bind(&change.source)
        .bind(ms(change.at))
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO whatsapp_consent_events (wa_id, opted_in, source, who, at) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(&change.wa_id)
        .bind(change.opted_in)
        .bind(&change.source)
        .bind(&change.who)
        .bind(ms(change.at))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn consent(&self, wa_id: &str) -> Result<Option<ConsentChange>, StoreError> {
        let row = sqlx::query("SELECT * FROM whatsapp_consent WHERE wa_id = ?")
            .bind(wa_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref()
            .map(|r| {
                Ok(ConsentChange {
                    wa_id: r.value("wa_id")?,
                    opted_in: r.value("opted_in")?,
                    source: r.value("source")?,
                    who: String::new(),
                    at: r.time("at")?,
                })
            })
            .transpose()
    }

    async fn consent_events(&self, wa_id: &str) -> Result<Vec<ConsentChange>, StoreError> {
        let rows = sqlx::query("SELECT * FROM whatsapp_consent_events WHERE wa_id = ? ORDER BY seq")
            .bind(wa_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(ConsentChange {
                    wa_id: r.value("wa_id")?,
                    opted_in: r.value("opted_in")?,
                    source: r.value("source")?,
                    who: r.value("who")?,
                    at: r.time("at")?,
                })
            })
            .collect()
    }

    async fn take_low_balance_notice(
        &self,
        card_hash: &str,
        not_before: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        // Inserted, or updated only when the card is not below since its last notice and that notice
        // is older than the interval.
        let taken = sqlx::query(
            "INSERT INTO low_balance_notices (card_hash, below, last_notice_at) VALUES (?, TRUE, ?) \
             ON CONFLICT (card_hash) DO UPDATE SET below = TRUE, last_notice_at = excluded.last_notice_at \
             WHERE NOT low_balance_notices.below \
               AND (low_balance_notices.last_notice_at IS NULL OR low_balance_notices.last_notice_at <= ?)",
        )
        .bind(card_hash)
        .bind(ms(now))
        .bind(ms(not_before))
        .execute(&self.writer)
        .await?
        .rows_affected();
        Ok(taken == 1)
    }

    async fn balance_recovered(&self, card_hash: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE low_balance_notices SET below = FALSE WHERE card_hash = ? AND below")
            .bind(card_hash)
            .execute(&self.writer)
            .await?;
        Ok(())
    }
}
