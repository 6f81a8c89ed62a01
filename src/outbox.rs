//! Step 5 of the pipeline, **deliver**: the outbox worker sends what turns committed for channels that
//! deliver on their own (Mattermost, WhatsApp). A channel is a port: it turns its input into
//! a `service::Inbound` and sends one outbox item ([`ChannelSender`]).
//!
//! Each item is tried up to its `max_attempts` (the BPMN's channel send: 5×) with a growing backoff (or
//! the channel's own `Retry-After`), then dead-lettered with the reason; an error no retry can fix is
//! dead-lettered at once. Items of one conversation go out in order (the store's claim never hands out
//! an item while an earlier one of its conversation is unfinished). Several workers — several
//! instances — never send the same item: claims are leased.
#![warn(clippy::too_many_lines)] // on the main path: see clippy.toml

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use vt_contract::FileContent;

use futures::StreamExt as _;
use tracing::Instrument as _;
use vt_engine::RetryPolicy;
use vt_engine::telemetry::spans::{self, Scope};
use vt_store::{OutboxItem, OutboxStatus, OutboxStore};

/// Why a send failed, as the channel classifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// Worth another attempt (a 5xx, a rate limit, a timeout); `after` is the channel's own wait.
    Retry { reason: String, after: Option<Duration> },
    /// No retry can fix it (a 4xx, a user outside the messaging window): dead-lettered at once.
    Permanent(String),
    /// Not sent yet, by rule: the channel sent what it may (a template asking the user to come back),
    /// and the item waits — with every later item of its conversation — until the user writes.
    Held(String),
    /// Not tried: the channel's pace lets it go at this time (no attempt is spent).
    Later(chrono::DateTime<Utc>),
}

/// The product marks emphasis as WhatsApp shows it (`Responda *sim*`); `emphasis(text, mark)` writes
/// each marked span with the channel's own mark instead — `**` for Mattermost, nothing for a plain
/// text. A `*` that marks nothing (a masked card's `****7890`, a lone star) is left as it is.
pub(crate) fn emphasis(text: &str, mark: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let opens = |i: usize| {
        chars[i] == '*'
            && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '*'))
            && chars.get(i + 1).is_some_and(|c| !c.is_whitespace() && *c != '*')
    };
    let closes = |j: usize| {
        chars[j] == '*'
            && !chars[j - 1].is_whitespace()
            && chars
                .get(j + 1)
                .is_none_or(|c| !(c.is_alphanumeric() || *c == '*'))
    };
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if opens(i)
            && let Some(j) = (i + 2..chars.len())
                .take_while(|&j| chars[j] != '\n')
                .find(|&j| chars[j] == '*')
                .filter(|&j| closes(j))
        {
            out.push_str(mark);
            out.extend(&chars[i + 1..j]);
            out.push_str(mark);
            i = j + 1;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// What a reply item carries, whatever the channel: written by a turn's commit, read once by the
/// worker and handed to the channel's sender.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyPayload {
    pub conversation_id: String,
    /// Who the reply goes to, in the channel's own terms (a WhatsApp number, a Mattermost user id).
    pub user_id: String,
    pub text: String,
    #[serde(default)]
    pub files: Vec<FileContent>,
    /// The channel's id of the message this answers.
    #[serde(default)]
    pub reply_to: Option<String>,
    /// Where the channel puts the reply (a thread's root).
    #[serde(default)]
    pub thread: Option<String>,
    /// The recharge waiting for this user's confirmation: channels offer confirm / cancel buttons.
    #[serde(default)]
    pub confirmation: Option<String>,
    /// Options the text asks to choose from (masked cards), in order: a channel that can shows them as
    /// a list whose pick comes back as the option's index (`Inbound::pick`); the text names them too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
    /// The turn's trace, which the worker's `deliver` span joins.
    #[serde(default)]
    pub trace: Option<DeliveryTrace>,
    /// What to send instead when the channel's window for free text is closed (WhatsApp's 24 hours):
    /// the template of this purpose, with these parameters. `None`: nothing fits (dead-lettered then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<TemplateUse>,
    /// The flow run a notice was sent for (`execucao_id`): what it costs is put on that run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fluxo: Option<String>,
}

/// A template to send in a reply's place: its purpose and its parameters by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateUse {
    pub purpose: String,
    pub parameters: std::collections::BTreeMap<String, String>,
}

/// The trace a reply was written in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryTrace {
    /// W3C trace context (`traceparent`…).
    pub context: HashMap<String, String>,
    pub agent: String,
}

impl ReplyPayload {
    /// The reply an item carries.
    pub fn of(item: &OutboxItem) -> Result<Self, serde_json::Error> {
        vt_contract::json::from_ref(&item.payload)
    }

    /// As the store keeps it.
    pub fn to_value(&self) -> serde_json::Value {
        // A struct of strings, string maps and files: serializing it cannot fail.
        vt_contract::json::to_value(self).unwrap_or_default()
    }
}

/// One channel's sending half.
#[async_trait]
pub trait ChannelSender: Send + Sync {
    /// The channel items are addressed to (`destination`).
    fn channel(&self) -> &str;
    /// Sends `reply`, the payload of `item`; `Ok(Some(id))` when the channel gave the message an id
    /// of its own (statuses it reports later name it).
    async fn send(&self, item: &OutboxItem, reply: &ReplyPayload) -> Result<Option<String>, SendError>;
}

/// Sends due outbox items through the channels' senders.
/// `[outbox]`: how the worker retries a send that failed, and how many it sends at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct OutboxConfig {
    /// Tries of one item before it is dead-lettered (the BPMN's channel row: 5 tries, 5 s apart,
    /// doubling).
    pub retry: RetryPolicy,
    /// Items of different conversations sent at once (1 to 256; a conversation's own go one by one):
    /// a platform that takes 80 messages a second at ~250 ms each needs ~20 in flight.
    pub envios_simultaneos: usize,
}

impl Default for OutboxConfig {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::new(5, 5_000),
            envios_simultaneos: DEFAULT_CONCURRENCY,
        }
    }
}

/// Sends in flight at once by default.
const DEFAULT_CONCURRENCY: usize = 32;
/// The most `[outbox] envios_simultaneos` may be.
pub(crate) const MAX_CONCURRENCY: usize = 256;

pub struct Worker {
    store: Arc<dyn OutboxStore>,
    senders: HashMap<String, Arc<dyn ChannelSender>>,
    policy: RetryPolicy,
    lease: chrono::Duration,
    batch: i64,
    idle: Duration,
    /// Items sent at once (each of its own conversation: a claim takes one per conversation).
    concurrency: usize,
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    pub sent: usize,
    pub retried: usize,
    pub dead: usize,
    /// Held until their user writes.
    pub held: usize,
}

impl Worker {
    /// `policy.backoff_ms` is the first wait; it doubles with every attempt.
    pub fn new(store: Arc<dyn OutboxStore>, policy: RetryPolicy) -> Self {
        Self {
            store,
            senders: HashMap::new(),
            policy,
            lease: chrono::Duration::seconds(60),
            batch: 32,
            idle: Duration::from_millis(250),
            concurrency: 1,
        }
    }

    /// Sending up to `n` items at once, claiming as many per pass.
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.clamp(1, MAX_CONCURRENCY);
        // Several items per sender a pass: the claim's time is spread over more sends.
        self.batch = self
            .batch
            .max(i64::try_from(self.concurrency * 4).unwrap_or(i64::MAX));
        self
    }

    pub fn with_sender(mut self, sender: Arc<dyn ChannelSender>) -> Self {
        self.senders.insert(sender.channel().to_owned(), sender);
        self
    }

    /// Whether any channel sends through this worker.
    pub(crate) fn has_senders(&self) -> bool {
        !self.senders.is_empty()
    }

    /// Claims what is due and tries to send each item once, up to `concurrency` at a time (a claim holds
    /// at most one item per conversation, so a conversation's items still go in order).
    pub async fn pass(&self) -> Pass {
        let now = Utc::now();
        let items = match self.store.claim(self.batch, now, self.lease).await {
            Ok(items) => items,
            Err(e) => {
                tracing::warn!(error = %e, "outbox could not be read; trying again later");
                return Pass::default();
            }
        };
        let pass = std::sync::Mutex::new(Pass::default());
        futures::stream::iter(items)
            .for_each_concurrent(self.concurrency, |item| {
                let pass = &pass;
                async move {
                    let mut one = Pass::default();
                    self.deliver(&item, &mut one).await;
                    let mut pass = pass.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    pass.sent += one.sent;
                    pass.retried += one.retried;
                    pass.dead += one.dead;
                    pass.held += one.held;
                }
            })
            .await;
        pass.into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One item sent (or not) and settled, in its turn's trace.
    async fn deliver(&self, item: &OutboxItem, pass: &mut Pass) {
        let reply = ReplyPayload::of(item);
        let span = deliver_span(item, reply.as_ref().ok());
        async {
            let outcome = match (self.senders.get(&item.destination), &reply) {
                (Some(sender), Ok(reply)) => sender.send(item, reply).await,
                (None, _) => Err(SendError::Permanent(format!(
                    "nenhum canal {:?} está configurado para enviá-lo",
                    item.destination
                ))),
                (_, Err(e)) => Err(SendError::Permanent(format!("não é uma resposta: {e}"))),
            };
            if let Err(SendError::Permanent(reason) | SendError::Retry { reason, .. } | SendError::Held(reason)) =
                &outcome
            {
                spans::failed(&tracing::Span::current(), reason);
            }
            if let Err(e) = self.settle(item, outcome, pass).await {
                tracing::error!(item = item.id, error = %e, "outbox item could not be settled; its lease will expire");
            }
        }
        .instrument(span)
        .await;
    }

    async fn settle(
        &self,
        item: &OutboxItem,
        outcome: Result<Option<String>, SendError>,
        pass: &mut Pass,
    ) -> Result<(), vt_store::StoreError> {
        match outcome {
            Ok(external_id) => {
                self.store.ack(item.id).await?;
                if let Some(external_id) = external_id {
                    self.store.record_sent(item.id, &external_id).await?;
                }
                pass.sent += 1;
            }
            Err(SendError::Permanent(reason)) => {
                let reason = vt_contract::redact::secrets(&reason).into_owned();
                tracing::warn!(item = item.id, %reason, "outbox item dead-lettered");
                self.store.dead_letter(item.id, &reason).await?;
                pass.dead += 1;
            }
            Err(SendError::Later(at)) => {
                self.store.defer(item.id, at).await?;
                pass.retried += 1;
            }
            Err(SendError::Held(reason)) => {
                tracing::info!(item = item.id, %reason, "outbox item held until its user writes");
                self.store.hold(item.id, &reason).await?;
                pass.held += 1;
            }
            Err(SendError::Retry { reason, after }) => {
                let reason = vt_contract::redact::secrets(&reason).into_owned();
                let exponent = u32::try_from(item.attempts.max(1) - 1).unwrap_or(0).min(10);
                let backoff = self.policy.backoff() * 2u32.pow(exponent);
                let wait = after.map_or(backoff, |a| a.max(backoff));
                let at = Utc::now() + chrono::Duration::from_std(wait).unwrap_or_default();
                match self.store.retry_later(item.id, &reason, at).await? {
                    OutboxStatus::Failed => {
                        tracing::warn!(item = item.id, %reason, "outbox item dead-lettered after its last attempt");
                        pass.dead += 1;
                    }
                    _ => pass.retried += 1,
                }
            }
        }
        Ok(())
    }

    /// Runs passes until `shutdown` resolves; the pass in progress is finished first.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let pass = self.pass().await;
            let busy = pass.sent + pass.retried + pass.dead > 0;
            let wait = if busy { Duration::ZERO } else { self.idle };
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// Step 5's span for one item, in the trace of the turn that wrote it.
fn deliver_span(item: &OutboxItem, reply: Option<&ReplyPayload>) -> tracing::Span {
    let trace = reply.and_then(|r| r.trace.as_ref());
    let scope = Scope {
        agent: trace.map_or("", |t| t.agent.as_str()),
        session: item.conversation_id.as_deref().unwrap_or_default(),
        user: reply.map_or("", |r| r.user_id.as_str()),
    };
    spans::deliver(&scope, trace.map(|t| &t.context), &item.destination)
}

#[cfg(test)]
mod tests {
    #[test]
    fn emphasis_is_written_in_each_channels_mark_and_a_masked_card_is_left_alone() {
        let text = "Confirma a recarga no cartão ****7890? Responda *sim* ou *não*. 2 * 3";
        assert_eq!(
            super::emphasis(text, "**"),
            "Confirma a recarga no cartão ****7890? Responda **sim** ou **não**. 2 * 3"
        );
        assert_eq!(
            super::emphasis(text, ""),
            "Confirma a recarga no cartão ****7890? Responda sim ou não. 2 * 3"
        );
        assert_eq!(
            super::emphasis("*Paguei e o crédito não caiu*\nSe o", "**"),
            "**Paguei e o crédito não caiu**\nSe o"
        );
    }
}
