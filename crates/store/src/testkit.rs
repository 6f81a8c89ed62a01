//! What the tests of the crates above the store share with its own (the `testkit` feature): a
//! PostgreSQL store in a private schema.

use std::str::FromStr;
use std::sync::Arc;

use sqlx::postgres::PgConnectOptions;

use chrono::{DateTime, Utc};
use serde_json::json;
use vt_engine::Participant;
use vt_engine::conversation::{Conversation, ExecutionRecord, ExecutionStatus, Handoff, ModelCallRecord};
use vt_engine::llm::ChatMessage;

use crate::PgStore;

/// Two handles (two pools, as two instances would have) on a private schema. The PostgreSQL tests are
/// `#[ignore]`d with their reason, so that a run without a server reports them as not run, never as
/// passed; asked to run (`-- --ignored`, as `.ci/run` does) without `VT_TEST_POSTGRES_URL`, they fail.
pub struct PgFixture {
    pub store: Arc<PgStore>,
    pub second: Arc<PgStore>,
    pub url: String,
    pub schema: String,
}

impl PgFixture {
    pub async fn start() -> Self {
        let url = std::env::var("VT_TEST_POSTGRES_URL")
            .ok()
            .filter(|u| !u.is_empty())
            .expect("VT_TEST_POSTGRES_URL: a PostgreSQL test was asked to run without a server (see the tests chapter)");
        let schema = format!("vt_test_{}", uuid::Uuid::new_v4().simple());
        let admin = sqlx::PgPool::connect(&url)
            .await
            .expect("connect to VT_TEST_POSTGRES_URL");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&admin)
            .await
            .expect("schema");
        admin.close().await;
        let options = || {
            PgConnectOptions::from_str(&url)
                .expect("url")
                .options([("search_path", schema.as_str())])
        };
        let store = Arc::new(PgStore::connect_with(options()).await.expect("pg store"));
        let second = Arc::new(PgStore::connect_with(options()).await.expect("pg store 2"));
        Self {
            store,
            second,
            url,
            schema,
        }
    }

    /// The URL a `vt-agent` process reaches this fixture's schema at.
    pub fn process_url(&self) -> String {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-c%20search_path%3D{}", self.url, self.schema)
    }

    pub async fn cleanup(self) {
        if let Ok(admin) = sqlx::PgPool::connect(&self.url).await {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP SCHEMA {} CASCADE",
                self.schema
            )))
            .execute(&admin)
            .await;
        }
    }
}

/// A time written as RFC 3339.
pub fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).expect("time").into()
}

/// A conversation with state, memory, a window and a handoff: every field a turn writes.
pub fn conversation(id: &str) -> Conversation {
    let mut c = Conversation::new(
        id.into(),
        "vt",
        "atendimento".into(),
        Participant {
            user_id: "u-1".into(),
            user_login: "maria".into(),
            channel: "terminal".into(),
        },
    );
    c.state
        .insert("pendente".into(), json!({"valor": 50.0, "cartao": "1234567890"}));
    c.memory.insert("entrada".into(), json!({"cartao": "1"}));
    c.window = vec![ChatMessage::user("oi"), ChatMessage::assistant("olá")];
    c.handoff = Some(Handoff {
        from_skill: "a".into(),
        response: "resposta".into(),
    });
    c
}

/// A failed execution with one model call.
pub fn execution(id: &str, conv: &str) -> ExecutionRecord {
    ExecutionRecord {
        execucao_id: id.into(),
        conversation_id: conv.into(),
        agent_id: "vt".into(),
        status: ExecutionStatus::Falhou,
        error: Some("modelo indisponível".into()),
        model_calls: vec![ModelCallRecord {
            skill: "atendimento".into(),
            model: "m".into(),
            tokens_input: 120,
            tokens_output: 30,
            tokens_cached: 0,
            tokens_cache_write: 0,
            latencia_ms: 450,
            stop_reason: "tool_use".into(),
            attempts: 2,
            error: None,
            request: None,
        }],
        started_at: t("2026-11-22T10:00:00Z"),
        finished_at: t("2026-11-22T10:00:01.250Z"),
    }
}

/// A Pix charge of recharge `recharge`, its `n`-th code, as the service puts one on record.
pub fn pix_charge(recharge: &str, n: i64, now: DateTime<Utc>) -> crate::records::PixCharge {
    crate::records::PixCharge {
        meio: crate::records::ChargeMeans::Pix,
        txid: vt_domain::pix::txid(recharge, u32::try_from(n).expect("n")),
        recharge_key: recharge.into(),
        n,
        conversation_id: "conv-pix".into(),
        request: json!({"cartao": "1234567890", "recarga": {"valor": 20}}),
        amount: rust_decimal::Decimal::new(2000, 2),
        copia_e_cola: "000201…6304ABCD".into(),
        status: crate::records::ChargeStatus::Ativa,
        expires_at: now + chrono::Duration::minutes(15),
        end_to_end_id: None,
        paid_at: None,
        created_at: now,
        refund: None,
        execucao_id: None,
    }
}

/// A batch job's record, as a job about to run would open it.
pub fn batch_job(id: &str, tenant: &str, now: DateTime<Utc>) -> crate::records::BatchJob {
    crate::records::BatchJob {
        id: id.into(),
        tenant_id: tenant.into(),
        digest: "d".into(),
        total: 3,
        dry_run: false,
        source: None,
        created_at: now,
        finished_at: None,
    }
}
