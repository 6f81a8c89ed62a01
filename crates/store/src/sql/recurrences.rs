//! [`RecurrenceStore`], once for both backends: Pix Automático recurrences and their charges. The
//! unique `(tenant_id, card_index, cycle)` is what makes a cycle's charge one, whoever asks.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Sql, Stmt, Tx};
use crate::rows::Columns;
use crate::{
    Recurrence, RecurrenceKind, RecurrenceListed, RecurrenceStatus, RecurrenceStore, RecurringCharge,
    RecurringChargeStatus, StoreError,
};

#[async_trait]
impl<S: Sql> RecurrenceStore for S {
    async fn put_recurrence(&self, r: &Recurrence) -> Result<(), StoreError> {
        let (kind, threshold, day) = match r.kind {
            RecurrenceKind::Limite(l) => ("limite", Some(l.to_string()), None),
            RecurrenceKind::Dia(d) => ("dia", None, Some(i64::from(d))),
        };
        let insert = Stmt::new(
            "INSERT INTO recurrences (id, id_rec, tenant_id, conversation_id, user_id, card_index, card_masked,
                 request, kind, threshold, day_of_month, amount, periodicidade, status, copia_e_cola,
                 last_outcome, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
        )
        .bind(&r.id)
        .bind(&r.id_rec)
        .bind(&r.tenant_id)
        .bind(&r.conversation_id)
        .bind(&r.user_id)
        .bind(&r.card_index)
        .bind(&r.card_masked)
        .sealed(&r.request)?
        .bind(kind)
        .bind(threshold)
        .bind(day)
        .bind(r.amount.to_string())
        .bind(&r.periodicidade)
        .bind(r.status.as_str())
        .bind(&r.copia_e_cola)
        .bind(&r.last_outcome)
        .bind(r.created_at);
        self.write(insert).await?;
        Ok(())
    }

    async fn recurrence(&self, id: &str) -> Result<Option<Recurrence>, StoreError> {
        let row = self
            .read_one(Stmt::new("SELECT * FROM recurrences WHERE id = $1").bind(id))
            .await?;
        row.as_ref().map(recurrence).transpose()
    }

    async fn recurrence_by_rec(&self, id_rec: &str) -> Result<Option<Recurrence>, StoreError> {
        let row = self
            .read_one(Stmt::new("SELECT * FROM recurrences WHERE id_rec = $1").bind(id_rec))
            .await?;
        row.as_ref().map(recurrence).transpose()
    }

    async fn move_recurrence(
        &self,
        id: &str,
        from: &[RecurrenceStatus],
        to: RecurrenceStatus,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let sql = match to {
            RecurrenceStatus::Aprovada => {
                "UPDATE recurrences SET status = $3, approved_at = $4, copia_e_cola = NULL
                 WHERE id = $1 AND status = $2"
            }
            _ => {
                "UPDATE recurrences SET status = $3, ended_at = $4, copia_e_cola = NULL
                 WHERE id = $1 AND status = $2"
            }
        };
        for status in from {
            let s = Stmt::new(sql)
                .bind(id)
                .bind(status.as_str())
                .bind(to.as_str())
                .bind(at);
            if self.write(s).await? == 1 {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn recurrences_in(
        &self,
        status: RecurrenceStatus,
        limit: i64,
    ) -> Result<Vec<Recurrence>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new("SELECT * FROM recurrences WHERE status = $1 ORDER BY created_at LIMIT $2")
                    .bind(status.as_str())
                    .bind(limit),
            )
            .await?;
        rows.iter().map(recurrence).collect()
    }

    async fn user_recurrences(&self, tenant_id: &str, user_id: &str) -> Result<Vec<Recurrence>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new(
                    "SELECT * FROM recurrences WHERE tenant_id = $1 AND user_id = $2 ORDER BY created_at DESC",
                )
                .bind(tenant_id)
                .bind(user_id),
            )
            .await?;
        rows.iter().map(recurrence).collect()
    }

    async fn recurrence_listing(
        &self,
        tenant_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<RecurrenceListed>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new(
                    "SELECT r.*,
                         (SELECT MIN(c.due_on) FROM recurrence_charges c
                          WHERE c.recurrence_id = r.id AND c.status IN ('nova', 'agendada')) AS next_debit,
                         (SELECT COUNT(*) FROM recurrence_charges c
                          WHERE c.recurrence_id = r.id AND c.status = 'creditada') AS credited
                     FROM recurrences r WHERE ($1 IS NULL OR r.tenant_id = $1)
                     ORDER BY r.created_at DESC LIMIT $2",
                )
                .bind(tenant_id)
                .bind(limit),
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(RecurrenceListed {
                    recurrence: recurrence(r)?,
                    next_debit: r.value("next_debit")?,
                    credited: r.value("credited")?,
                })
            })
            .collect()
    }

    async fn take_daily_check(&self, id: &str, day: &str) -> Result<bool, StoreError> {
        let s = Stmt::new(
            "UPDATE recurrences SET checked_on = $2
             WHERE id = $1 AND (checked_on IS NULL OR checked_on <> $2)",
        )
        .bind(id)
        .bind(day);
        Ok(self.write(s).await? == 1)
    }

    async fn note_recurrence(&self, id: &str, outcome: &str) -> Result<(), StoreError> {
        let s = Stmt::new("UPDATE recurrences SET last_outcome = $2 WHERE id = $1")
            .bind(id)
            .bind(outcome);
        self.write(s).await?;
        Ok(())
    }

    async fn open_recurring_charge(&self, c: &RecurringCharge) -> Result<bool, StoreError> {
        let insert = Stmt::new(
            "INSERT INTO recurrence_charges (txid, recurrence_id, tenant_id, card_index, cycle, due_on, amount,
                 status, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
        )
        .bind(&c.txid)
        .bind(&c.recurrence_id)
        .bind(&c.tenant_id)
        .bind(&c.card_index)
        .bind(&c.cycle)
        .bind(&c.due_on)
        .bind(c.amount.to_string())
        .bind(c.status.as_str())
        .bind(c.created_at);
        Ok(self.write(insert).await? == 1)
    }

    async fn recurring_charge(&self, txid: &str) -> Result<Option<RecurringCharge>, StoreError> {
        let row = self
            .read_one(Stmt::new("SELECT * FROM recurrence_charges WHERE txid = $1").bind(txid))
            .await?;
        row.as_ref().map(charge).transpose()
    }

    async fn recurring_charges_in(
        &self,
        status: RecurringChargeStatus,
        limit: i64,
    ) -> Result<Vec<RecurringCharge>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new("SELECT * FROM recurrence_charges WHERE status = $1 ORDER BY created_at LIMIT $2")
                    .bind(status.as_str())
                    .bind(limit),
            )
            .await?;
        rows.iter().map(charge).collect()
    }

    async fn charges_of_recurrence(&self, recurrence_id: &str) -> Result<Vec<RecurringCharge>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new(
                    "SELECT * FROM recurrence_charges WHERE recurrence_id = $1 ORDER BY due_on, created_at",
                )
                .bind(recurrence_id),
            )
            .await?;
        rows.iter().map(charge).collect()
    }

    async fn move_recurring_charge(
        &self,
        txid: &str,
        from: RecurringChargeStatus,
        to: RecurringChargeStatus,
    ) -> Result<bool, StoreError> {
        let s = Stmt::new("UPDATE recurrence_charges SET status = $3 WHERE txid = $1 AND status = $2")
            .bind(txid)
            .bind(from.as_str())
            .bind(to.as_str());
        Ok(self.write(s).await? == 1)
    }

    async fn claim_recurring_payment(
        &self,
        txid: &str,
        end_to_end_id: &str,
        paid_at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let s = Stmt::new(
            "UPDATE recurrence_charges SET status = $2, end_to_end_id = $3, paid_at = $4
             WHERE txid = $1 AND status = $5 AND end_to_end_id IS NULL",
        )
        .bind(txid)
        .bind(RecurringChargeStatus::Paga.as_str())
        .bind(end_to_end_id)
        .bind(paid_at)
        .bind(RecurringChargeStatus::Agendada.as_str());
        Ok(self.write(s).await? == 1)
    }

    async fn count_retry(&self, txid: &str, seen: i64) -> Result<bool, StoreError> {
        let s = Stmt::new("UPDATE recurrence_charges SET retries = $2 WHERE txid = $1 AND retries = $3")
            .bind(txid)
            .bind(seen + 1)
            .bind(seen);
        Ok(self.write(s).await? == 1)
    }

    async fn take_funds_notice(&self, txid: &str) -> Result<bool, StoreError> {
        let s = Stmt::new("UPDATE recurrence_charges SET funds_told = 1 WHERE txid = $1 AND funds_told = 0")
            .bind(txid);
        Ok(self.write(s).await? == 1)
    }

    async fn offer_automatic(
        &self,
        conversation_id: &str,
        state: &serde_json::Map<String, serde_json::Value>,
        (message, outbox): (&vt_engine::llm::ChatMessage, &[crate::NewOutboxItem]),
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        tx.execute(
            Stmt::new("UPDATE conversations SET state = $1 WHERE id = $2")
                .sealed(state)?
                .bind(conversation_id),
        )
        .await?;
        super::outbox::say_late(&mut tx, conversation_id, message, outbox, at).await?;
        tx.commit().await
    }

    async fn recurrence_counts(&self) -> Result<(Vec<(String, i64)>, Vec<(String, i64)>), StoreError> {
        let count =
            |r: &S::Row| -> Result<(String, i64), StoreError> { Ok((r.value("status")?, r.value("n")?)) };
        let recs = self
            .read_all(Stmt::new(
                "SELECT status, COUNT(*) AS n FROM recurrences GROUP BY status ORDER BY status",
            ))
            .await?;
        let charges = self
            .read_all(Stmt::new(
                "SELECT status, COUNT(*) AS n FROM recurrence_charges GROUP BY status ORDER BY status",
            ))
            .await?;
        Ok((
            recs.iter().map(count).collect::<Result<_, _>>()?,
            charges.iter().map(count).collect::<Result<_, _>>()?,
        ))
    }
}

fn money(r: &impl Columns, col: &str) -> Result<rust_decimal::Decimal, StoreError> {
    let text: String = r.value(col)?;
    text.parse()
        .map_err(|_| StoreError::Invalid(format!("valor guardado inválido em {col}")))
}

fn recurrence(r: &impl Columns) -> Result<Recurrence, StoreError> {
    let kind = match r.value::<String>("kind")?.as_str() {
        "dia" => {
            let day: i64 = r.value::<Option<i64>>("day_of_month")?.unwrap_or(1);
            RecurrenceKind::Dia(u32::try_from(day).unwrap_or(1))
        }
        _ => RecurrenceKind::Limite(money(r, "threshold")?),
    };
    Ok(Recurrence {
        id: r.value("id")?,
        id_rec: r.value("id_rec")?,
        tenant_id: r.value("tenant_id")?,
        conversation_id: r.value("conversation_id")?,
        user_id: r.value("user_id")?,
        card_index: r.value("card_index")?,
        card_masked: r.value("card_masked")?,
        request: r.json("request")?,
        kind,
        amount: money(r, "amount")?,
        periodicidade: r.value("periodicidade")?,
        status: RecurrenceStatus::from_row(&r.value::<String>("status")?)?,
        copia_e_cola: r.value("copia_e_cola")?,
        checked_on: r.value("checked_on")?,
        last_outcome: r.value("last_outcome")?,
        created_at: r.time("created_at")?,
        approved_at: r.opt_time("approved_at")?,
        ended_at: r.opt_time("ended_at")?,
    })
}

fn charge(r: &impl Columns) -> Result<RecurringCharge, StoreError> {
    Ok(RecurringCharge {
        txid: r.value("txid")?,
        recurrence_id: r.value("recurrence_id")?,
        tenant_id: r.value("tenant_id")?,
        card_index: r.value("card_index")?,
        cycle: r.value("cycle")?,
        due_on: r.value("due_on")?,
        amount: money(r, "amount")?,
        status: RecurringChargeStatus::from_row(&r.value::<String>("status")?)?,
        retries: r.value("retries")?,
        funds_told: r.value::<i64>("funds_told")? != 0,
        end_to_end_id: r.value("end_to_end_id")?,
        paid_at: r.opt_time("paid_at")?,
        created_at: r.time("created_at")?,
    })
}
