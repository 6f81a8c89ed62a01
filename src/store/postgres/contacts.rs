//! [`ContactStore`] on PostgreSQL.

use super::*;
use crate::store::{ContactStore, TemplateState};

#[async_trait]
impl ContactStore for PgStore {
    async fn touch_contact(&self, wa_id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO whatsapp_contacts (wa_id, last_inbound_at) VALUES ($1, $2) \
             ON CONFLICT (wa_id) DO UPDATE SET last_inbound_at = GREATEST(whatsapp_contacts.last_inbound_at, excluded.last_inbound_at)",
        )
        .bind(wa_id)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn last_inbound(&self, wa_id: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        let row = sqlx::query("SELECT last_inbound_at FROM whatsapp_contacts WHERE wa_id = $1")
            .bind(wa_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(|r| r.time("last_inbound_at")).transpose()
    }

    async fn set_template_state(&self, state: &TemplateState) -> Result<(), StoreError> {
        sqlx::query(
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
        .bind(state.updated_at)
        .execute(&self.pool)
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
}
