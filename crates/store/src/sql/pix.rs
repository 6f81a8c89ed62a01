//! [`PixStore`], once for both backends: the charges issued for confirmed chat recharges, and the
//! one gate a payment passes before its recharge is sent.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Sql, Stmt};
use crate::rows::Columns;
use crate::{
    ChargeMeans, ChargeStatus, PaymentClaim, PixCharge, PixRefund, PixStore, REFUND_IN_PROGRESS, StoreError,
};

#[async_trait]
impl<S: Sql> PixStore for S {
    async fn open_charge(&self, charge: &PixCharge) -> Result<PixCharge, StoreError> {
        let insert = Stmt::new(
            "INSERT INTO pix_charges (txid, recharge_key, n, conversation_id, request, amount, copia_e_cola,
                 status, expires_at, created_at, meio)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (txid) DO NOTHING",
        )
        .bind(&charge.txid)
        .bind(&charge.recharge_key)
        .bind(charge.n)
        .bind(&charge.conversation_id)
        .sealed(&charge.request)?
        .bind(charge.amount.to_string())
        .bind(&charge.copia_e_cola)
        .bind(charge.status.as_str())
        .bind(charge.expires_at)
        .bind(charge.created_at)
        .bind(charge.meio.as_str());
        self.write(insert).await?;
        self.pix_charge(&charge.txid)
            .await?
            .ok_or_else(|| StoreError::Invalid("cobrança Pix não encontrada depois de gravada".into()))
    }

    async fn note_credit_run(&self, txid: &str, execucao_id: &str) -> Result<(), StoreError> {
        self.write(
            Stmt::new("UPDATE pix_charges SET execucao_id = $1 WHERE txid = $2")
                .bind(execucao_id)
                .bind(txid),
        )
        .await?;
        Ok(())
    }

    async fn pix_charge(&self, txid: &str) -> Result<Option<PixCharge>, StoreError> {
        let row = self
            .read_one(Stmt::new("SELECT * FROM pix_charges WHERE txid = $1").bind(txid))
            .await?;
        row.as_ref().map(charge).transpose()
    }

    async fn recharge_charges(&self, recharge_key: &str) -> Result<Vec<PixCharge>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new("SELECT * FROM pix_charges WHERE recharge_key = $1 ORDER BY n").bind(recharge_key),
            )
            .await?;
        rows.iter().map(charge).collect()
    }

    async fn claim_payment(
        &self,
        txid: &str,
        end_to_end_id: &str,
        paid_at: DateTime<Utc>,
    ) -> Result<PaymentClaim, StoreError> {
        // One statement; the unique index on a recharge's paid charge is the gate between processes:
        // a second code of the same recharge paid too cannot be claimed, and is refunded instead.
        let claim = Stmt::new(
            "UPDATE pix_charges SET status = $2, end_to_end_id = $3, paid_at = $4
             WHERE txid = $1 AND end_to_end_id IS NULL",
        )
        .bind(txid)
        .bind(ChargeStatus::Paga.as_str())
        .bind(end_to_end_id)
        .bind(paid_at);
        match self.write(claim).await {
            Ok(1) => return Ok(PaymentClaim::First),
            Ok(_) => {}
            Err(StoreError::Database(e))
                if e.as_database_error().is_some_and(|d| d.is_unique_violation()) =>
            {
                return Ok(PaymentClaim::OtherCodePaid);
            }
            Err(e) => return Err(e),
        }
        Ok(match self.pix_charge(txid).await? {
            None => PaymentClaim::Unknown,
            Some(c) if c.end_to_end_id.as_deref() == Some(end_to_end_id) => PaymentClaim::Again,
            Some(_) => PaymentClaim::OtherPayment,
        })
    }

    async fn settle_charge(
        &self,
        txid: &str,
        from: ChargeStatus,
        to: ChargeStatus,
    ) -> Result<bool, StoreError> {
        let s = Stmt::new("UPDATE pix_charges SET status = $3 WHERE txid = $1 AND status = $2")
            .bind(txid)
            .bind(from.as_str())
            .bind(to.as_str());
        Ok(self.write(s).await? == 1)
    }

    async fn payment_seconds(&self, since: DateTime<Utc>) -> Result<Vec<i64>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new("SELECT created_at, paid_at FROM pix_charges WHERE paid_at >= $1").bind(since),
            )
            .await?;
        rows.iter()
            .map(|r| Ok((r.time("paid_at")? - r.time("created_at")?).num_seconds()))
            .collect()
    }

    async fn record_refund(&self, txid: &str, end_to_end_id: &str, status: &str) -> Result<(), StoreError> {
        let s = Stmt::new(
            "UPDATE pix_charges SET refunded_end_to_end_id = $2, refund_status = $3 WHERE txid = $1",
        )
        .bind(txid)
        .bind(end_to_end_id)
        .bind(status);
        self.write(s).await?;
        Ok(())
    }

    async fn refunds_in_progress(&self, limit: i64) -> Result<Vec<PixCharge>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new("SELECT * FROM pix_charges WHERE refund_status = $1 ORDER BY created_at LIMIT $2")
                    .bind(REFUND_IN_PROGRESS)
                    .bind(limit),
            )
            .await?;
        rows.iter().map(charge).collect()
    }

    async fn charges_in(&self, status: ChargeStatus, limit: i64) -> Result<Vec<PixCharge>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new("SELECT * FROM pix_charges WHERE status = $1 ORDER BY expires_at LIMIT $2")
                    .bind(status.as_str())
                    .bind(limit),
            )
            .await?;
        rows.iter().map(charge).collect()
    }

    async fn conversation_charges(&self, conversation_id: &str) -> Result<Vec<PixCharge>, StoreError> {
        let rows = self
            .read_all(
                Stmt::new("SELECT * FROM pix_charges WHERE conversation_id = $1 ORDER BY created_at, n")
                    .bind(conversation_id),
            )
            .await?;
        rows.iter().map(charge).collect()
    }

    async fn charge_counts(&self) -> Result<Vec<(ChargeStatus, i64)>, StoreError> {
        let rows = self
            .read_all(Stmt::new(
                "SELECT status, COUNT(*) AS n FROM pix_charges GROUP BY status ORDER BY status",
            ))
            .await?;
        rows.iter().map(count).collect()
    }
}

fn count(r: &impl Columns) -> Result<(ChargeStatus, i64), StoreError> {
    Ok((
        ChargeStatus::from_row(&r.value::<String>("status")?)?,
        r.value("n")?,
    ))
}

fn charge(r: &impl Columns) -> Result<PixCharge, StoreError> {
    let amount: String = r.value("amount")?;
    Ok(PixCharge {
        txid: r.value("txid")?,
        meio: ChargeMeans::from_row(&r.value::<String>("meio")?)?,
        recharge_key: r.value("recharge_key")?,
        n: r.value("n")?,
        conversation_id: r.value("conversation_id")?,
        request: r.json("request")?,
        amount: amount
            .parse()
            .map_err(|_| StoreError::Invalid("valor de cobrança Pix guardado inválido".into()))?,
        copia_e_cola: r.value("copia_e_cola")?,
        status: ChargeStatus::from_row(&r.value::<String>("status")?)?,
        expires_at: r.time("expires_at")?,
        end_to_end_id: r.value("end_to_end_id")?,
        paid_at: r.opt_time("paid_at")?,
        created_at: r.time("created_at")?,
        refund: match (
            r.value::<Option<String>>("refunded_end_to_end_id")?,
            r.value::<Option<String>>("refund_status")?,
        ) {
            (Some(end_to_end_id), Some(status)) => Some(PixRefund {
                end_to_end_id,
                status,
            }),
            _ => None,
        },
        execucao_id: r.value("execucao_id")?,
    })
}
