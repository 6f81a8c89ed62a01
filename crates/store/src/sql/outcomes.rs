//! [`OutcomeStore`], once for both backends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::{Sql, Stmt, Tx};
use crate::rows::Columns;
use crate::{
    CaseState, Desfecho, NewOutboxItem, OutcomeRecord, OutcomeStore, StoreError, Stretch, StretchHead,
    StretchTurn,
};
use vt_engine::llm::ChatMessage;

/// Conversations whose last stretch is over and has no outcome: quiet since `$2`, or ended (their
/// last turn ended the chat, or a case was closed with them), and no case open.
const OVER: &str = "SELECT c.id, c.tenant_id, c.channel, c.user_id, c.updated_at,
        (SELECT MAX(d.ate) FROM desfechos d WHERE d.conversation_id = c.id) AS desde
     FROM conversations c
     WHERE c.updated_at >= $1 AND c.agent_id <> $3
       AND (c.updated_at <= $2
            OR (c.ended AND ((SELECT u.marcas FROM usage_metrics u WHERE u.conversation_id = c.id
                              ORDER BY u.created_at DESC, u.id DESC LIMIT 1) LIKE '%encerrada%'
                 OR EXISTS (SELECT 1 FROM cases k WHERE k.conversation_id = c.id
                            AND k.state = 'encerrado' AND k.closed_at >= c.updated_at))))
       AND NOT EXISTS (SELECT 1 FROM desfechos d WHERE d.conversation_id = c.id AND d.ate >= c.updated_at)
       AND NOT EXISTS (SELECT 1 FROM cases k WHERE k.conversation_id = c.id
                       AND k.state IN ('aguardando', 'em_atendimento'))
     ORDER BY c.updated_at LIMIT $4";

/// The same person's conversations (tenant, channel, user): `$1`, `$2`, `$3`.
macro_rules! same_person {
    () => {
        "SELECT id FROM conversations WHERE tenant_id = $1 AND channel = $2 AND user_id = $3"
    };
}

/// Before every stretch: the beginning of time (a bound, never `NULL`, which PostgreSQL cannot type).
fn start(head: &StretchHead) -> DateTime<Utc> {
    head.desde.unwrap_or(DateTime::UNIX_EPOCH)
}

fn outcome(r: &impl Columns) -> Result<OutcomeRecord, StoreError> {
    let desfecho: String = r.value("desfecho")?;
    Ok(OutcomeRecord {
        id: r.value("id")?,
        conversation_id: r.value("conversation_id")?,
        tenant_id: r.value("tenant_id")?,
        channel: r.value("channel")?,
        desde: r.opt_time("desde")?,
        ate: r.time("ate")?,
        desfecho: Desfecho::parse(&desfecho)
            .ok_or_else(|| StoreError::Invalid(format!("desfecho desconhecido: {desfecho:?}")))?,
        intencao: r.value("intencao")?,
        assunto: r.value("assunto")?,
        caso_id: r.value("caso_id")?,
        custo_micro_brl: r.value("custo_micro_brl")?,
        reaberta: r.value("reaberta")?,
        reabre: r.value("reabre")?,
        pesquisa_em: r.opt_time("pesquisa_em")?,
        nota: r.value("nota")?,
        created_at: r.time("created_at")?,
    })
}

#[async_trait]
impl<S: Sql> OutcomeStore for S {
    async fn stretches_over(
        &self,
        (horizon, quiet_before): (DateTime<Utc>, DateTime<Utc>),
        except_agent: &str,
        limit: i64,
    ) -> Result<Vec<StretchHead>, StoreError> {
        let s = Stmt::new(OVER)
            .bind(horizon)
            .bind(quiet_before)
            .bind(except_agent)
            .bind(limit);
        self.read_all(s)
            .await?
            .iter()
            .map(|r| {
                Ok(StretchHead {
                    conversation_id: r.value("id")?,
                    tenant_id: r.value("tenant_id")?,
                    channel: r.value("channel")?,
                    user_id: r.value("user_id")?,
                    desde: r.opt_time("desde")?,
                    ate: r.time("updated_at")?,
                })
            })
            .collect()
    }

    async fn stretch(&self, head: &StretchHead) -> Result<Stretch, StoreError> {
        let id = head.conversation_id.as_str();
        let turns = self
            .read_all(
                Stmt::new(
                    "SELECT intent_key, marcas, custo_micro_brl, created_at FROM usage_metrics
                     WHERE conversation_id = $1 AND created_at > $2 AND created_at <= $3 ORDER BY created_at, id",
                )
                .bind(id)
                .bind(start(head))
                .bind(head.ate),
            )
            .await?
            .iter()
            .map(|r| {
                let marcas: String = r.value("marcas")?;
                Ok(StretchTurn {
                    intent_key: r.value("intent_key")?,
                    marcas: marcas.split(',').filter(|m| !m.is_empty()).map(str::to_owned).collect(),
                    custo_micro_brl: r.value("custo_micro_brl")?,
                    at: r.time("created_at")?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let case = self
            .read_one(
                Stmt::new(
                    "SELECT id, state FROM cases WHERE conversation_id = $1 AND opened_at > $2 AND opened_at <= $3
                     ORDER BY opened_at DESC LIMIT 1",
                )
                .bind(id)
                .bind(start(head))
                .bind(head.ate),
            )
            .await?
            .map(|r| -> Result<_, StoreError> {
                let state: String = r.value("state")?;
                Ok((r.value("id")?, CaseState::from_row(&state)?))
            })
            .transpose()?;
        let pix = self
            .read_all(
                Stmt::new("SELECT status FROM pix_charges WHERE conversation_id = $1 AND created_at > $2")
                    .bind(id)
                    .bind(start(head)),
            )
            .await?
            .iter()
            .map(|r| r.value("status"))
            .collect::<Result<Vec<String>, StoreError>>()?;
        let paid_messages = self
            .read_all(
                Stmt::new(
                    "SELECT custo_micro_brl FROM message_costs
                     WHERE conversation_id = $1 AND created_at > $2 AND created_at <= $3",
                )
                .bind(id)
                .bind(start(head))
                .bind(head.ate),
            )
            .await?
            .iter()
            .map(|r| r.value("custo_micro_brl"))
            .collect::<Result<Vec<Option<i64>>, StoreError>>()?;
        Ok(Stretch {
            turns,
            case,
            pix,
            paid_messages,
        })
    }

    async fn resolved_before(
        &self,
        head: &StretchHead,
        assunto: &str,
        since: DateTime<Utc>,
    ) -> Result<Option<String>, StoreError> {
        let s = Stmt::new(concat!(
            "SELECT id FROM desfechos WHERE conversation_id IN (",
            same_person!(),
            ") AND assunto = $4 AND ate >= $5 AND desfecho IN ('resolvida_pelo_bot', 'resolvida_por_pessoa')
             ORDER BY ate DESC LIMIT 1"
        ))
        .bind(&head.tenant_id)
        .bind(&head.channel)
        .bind(&head.user_id)
        .bind(assunto)
        .bind(since);
        self.read_one(s).await?.map(|r| r.value("id")).transpose()
    }

    async fn record_outcome(&self, o: &OutcomeRecord) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let inserted = tx
            .execute(
                Stmt::new(
                    "INSERT INTO desfechos (id, conversation_id, tenant_id, channel, desde, ate, desfecho, intencao,
                         assunto, caso_id, custo_micro_brl, reabre, created_at, reaberta, pesquisa_em, nota)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
                     ON CONFLICT (conversation_id, ate) DO NOTHING",
                )
                .bind(&o.id)
                .bind(&o.conversation_id)
                .bind(&o.tenant_id)
                .bind(&o.channel)
                .bind(o.desde)
                .bind(o.ate)
                .bind(o.desfecho.as_str())
                .bind(&o.intencao)
                .bind(&o.assunto)
                .bind(&o.caso_id)
                .bind(o.custo_micro_brl)
                .bind(&o.reabre)
                .bind(o.created_at)
                .bind(o.reaberta)
                .bind(o.pesquisa_em)
                .bind(o.nota),
            )
            .await?
            == 1;
        if !inserted {
            return Ok(false);
        }
        if let Some(earlier) = &o.reabre {
            tx.execute(Stmt::new("UPDATE desfechos SET reaberta = TRUE WHERE id = $1").bind(earlier))
                .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn extend_outcome(&self, head: &StretchHead) -> Result<bool, StoreError> {
        let Some(desde) = head.desde else {
            return Ok(false);
        };
        let s = Stmt::new("UPDATE desfechos SET ate = $1 WHERE conversation_id = $2 AND ate = $3")
            .bind(head.ate)
            .bind(&head.conversation_id)
            .bind(desde);
        Ok(self.write(s).await? == 1)
    }

    async fn last_survey(&self, head: &StretchHead) -> Result<Option<DateTime<Utc>>, StoreError> {
        let s = Stmt::new(concat!(
            "SELECT MAX(pesquisa_em) AS em FROM desfechos WHERE conversation_id IN (",
            same_person!(),
            ")"
        ))
        .bind(&head.tenant_id)
        .bind(&head.channel)
        .bind(&head.user_id);
        match self.read_one(s).await? {
            Some(r) => r.opt_time("em"),
            None => Ok(None),
        }
    }

    async fn ask_survey(
        &self,
        (head, outcome): (&StretchHead, &str),
        state: &Map<String, Value>,
        (message, outbox): (&ChatMessage, &[NewOutboxItem]),
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        // The conversation as the stretch left it: a message since, and the question is not asked.
        let still = Stmt::new("UPDATE conversations SET state = $1 WHERE id = $2 AND updated_at = $3")
            .sealed(state)?
            .bind(&head.conversation_id)
            .bind(head.ate);
        if tx.execute(still).await? == 0 {
            return Ok(false);
        }
        tx.execute(
            Stmt::new("UPDATE desfechos SET pesquisa_em = $1 WHERE id = $2")
                .bind(at)
                .bind(outcome),
        )
        .await?;
        super::outbox::say_late(&mut tx, &head.conversation_id, message, outbox, at).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn record_score(&self, outcome: &str, nota: i32, at: DateTime<Utc>) -> Result<bool, StoreError> {
        let s = Stmt::new("UPDATE desfechos SET nota = $1, nota_em = $2 WHERE id = $3 AND nota IS NULL")
            .bind(nota)
            .bind(at)
            .bind(outcome);
        Ok(self.write(s).await? == 1)
    }

    async fn outcomes_since(&self, since: DateTime<Utc>) -> Result<Vec<OutcomeRecord>, StoreError> {
        let s = Stmt::new("SELECT * FROM desfechos WHERE ate >= $1 ORDER BY ate, id").bind(since);
        self.read_all(s).await?.iter().map(outcome).collect()
    }
}
