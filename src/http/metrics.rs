//! The figures `/metrics` serves in Prometheus text: turns, zero-token turns, tokens, turn latency,
//! flows by status, spans dropped by the trace exporter, and — read from the store — the outbox's
//! depth and dead letters, the open and waiting cases, and the time cases waited to be claimed over
//! the last 24 hours (`vt_case_claim_seconds{quantile="0.5"|"0.9"}`: the same for every instance, as
//! it is the store's).
//!
//! The same figures are recorded on OpenTelemetry instruments of the global meter: when an OTLP
//! endpoint is configured ([`vt_engine::telemetry`]) they are exported as OTLP metrics too; otherwise the
//! global meter is a no-op and costs nothing.

use opentelemetry::KeyValue;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct Direction {
    pub direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct Quantile {
    pub quantile: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct Tenant {
    pub tenant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct Team {
    pub equipe: String,
}

/// Each support team's figures (`[[equipes]]`).
#[derive(Default)]
struct TeamGauges {
    waiting: Family<Team, Gauge>,
    oldest_wait: Family<Team, Gauge>,
    at_risk: Family<Team, Gauge>,
    breached: Family<Team, Gauge>,
    met: Family<Team, Gauge<f64, std::sync::atomic::AtomicU64>>,
}

impl TeamGauges {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "equipe_aguardando",
            "Cases waiting in each support team's queue",
            self.waiting.clone(),
        );
        registry.register(
            "equipe_maior_espera_segundos",
            "Seconds the longest-waiting card holder of each team has waited for a person's answer",
            self.oldest_wait.clone(),
        );
        registry.register(
            "equipe_prazo_vencendo",
            "Open cases of each team with an SLA clock past its warning share (aviso_pct)",
            self.at_risk.clone(),
        );
        registry.register(
            "equipe_prazo_vencido",
            "Open cases of each team with an SLA clock breached",
            self.breached.clone(),
        );
        registry.register(
            "equipe_sla_cumprido_mes",
            "Share of the SLA clocks of this month's cases that stopped in time, per team (absent while none stopped)",
            self.met.clone(),
        );
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct TenantOutcome {
    pub tenant: String,
    pub desfecho: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct TenantWho {
    pub tenant: String,
    pub quem: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct Status {
    pub status: &'static str,
}

pub struct Metrics {
    registry: Registry,
    turns: Counter,
    zero_token_turns: Counter,
    tokens: Family<Direction, Counter>,
    turn_seconds: Histogram,
    flows: Family<Status, Counter>,
    pub outbox_depth: Gauge,
    pub dead_letters: Gauge,
    /// Conversations a person has or is about to have (open cases).
    pub cases_open: Gauge,
    /// Cases nobody has claimed yet.
    cases_waiting: Gauge,
    /// Seconds from opened to claimed, of the cases claimed in the last 24 hours, by quantile.
    case_claim_seconds: Family<Quantile, Gauge>,
    pix_charges: Family<Status, Gauge>,
    /// Pix Automático recurrences and their charges, by status.
    pix_recurrences: Family<Status, Gauge>,
    pix_recurring_charges: Family<Status, Gauge>,
    /// Seconds from code to payment, of the Pix charges paid in the last 24 hours, by quantile.
    pix_payment_seconds: Family<Quantile, Gauge>,
    /// Each budgeted tenant's share of its monthly budget spent (1 = spent: no model calls).
    budget_share: Family<Tenant, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// What each tenant's turns and paid messages with a price cost this month, in reais.
    month_cost: Family<Tenant, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// How the last 30 days' stretches ended, per tenant and outcome (`reaberta` among them).
    outcomes: Family<TenantOutcome, Gauge>,
    /// The last 30 days' mean satisfaction score, per tenant, bot versus person.
    scores: Family<TenantWho, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// The last 30 days' cost per resolved case, per tenant, in reais (where every cost is known).
    per_resolved: Family<Tenant, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// The last 30 days' cost per conversation, per tenant, in reais (where every cost is known).
    per_conversation: Family<Tenant, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// The last 30 days' cost per flow run, per tenant, in reais (where every notice's cost is known).
    per_flow: Family<Tenant, Gauge<f64, std::sync::atomic::AtomicU64>>,
    teams: TeamGauges,
    otel: Otel,
}

/// The OTLP side of the same figures.
struct Otel {
    turns: opentelemetry::metrics::Counter<u64>,
    zero_token_turns: opentelemetry::metrics::Counter<u64>,
    tokens: opentelemetry::metrics::Counter<u64>,
    turn_seconds: opentelemetry::metrics::Histogram<f64>,
    flows: opentelemetry::metrics::Counter<u64>,
    _gauges: Vec<opentelemetry::metrics::ObservableGauge<i64>>,
    _dropped: opentelemetry::metrics::ObservableCounter<u64>,
}

impl Otel {
    fn new(outbox_depth: &Gauge, dead_letters: &Gauge, cases_open: &Gauge) -> Self {
        let meter = opentelemetry::global::meter("vt-agent");
        let gauge = |name: &'static str, help: &'static str, g: &Gauge| {
            let g = g.clone();
            meter
                .i64_observable_gauge(name)
                .with_description(help)
                .with_callback(move |o| o.observe(g.get(), &[]))
                .build()
        };
        Self {
            turns: meter
                .u64_counter("vt.turns")
                .with_description("Conversation turns handled")
                .build(),
            zero_token_turns: meter
                .u64_counter("vt.zero_token_turns")
                .with_description("Turns answered without any model token")
                .build(),
            tokens: meter
                .u64_counter("vt.tokens")
                .with_description("Model tokens spent, by direction")
                .build(),
            turn_seconds: meter
                .f64_histogram("vt.turn_latency")
                .with_unit("s")
                .with_description("Time to handle one turn, accept to commit")
                .build(),
            flows: meter
                .u64_counter("vt.flows")
                .with_description("Ten-stage flow runs, by status")
                .build(),
            _gauges: vec![
                gauge("vt.outbox_depth", "Outbox items waiting to be sent", outbox_depth),
                gauge(
                    "vt.outbox_dead_letters",
                    "Outbox items dead-lettered",
                    dead_letters,
                ),
                gauge(
                    "vt.cases_open",
                    "Cases open: conversations waiting for or with a support agent",
                    cases_open,
                ),
            ],
            _dropped: meter
                .u64_observable_counter("vt.otlp_spans_dropped")
                .with_description("Spans the trace exporter dropped")
                .with_callback(|o| o.observe(vt_engine::telemetry::otlp::spans_dropped().get(), &[]))
                .build(),
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("vt");
        let turns = Counter::default();
        let zero_token_turns = Counter::default();
        let tokens = Family::<Direction, Counter>::default();
        let buckets = [
            0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
        ];
        let turn_seconds = Histogram::new(buckets);
        let flows = Family::<Status, Counter>::default();
        let outbox_depth = Gauge::default();
        let dead_letters = Gauge::default();
        let cases_open = Gauge::default();
        let cases_waiting = Gauge::default();
        let case_claim_seconds = Family::<Quantile, Gauge>::default();
        let pix_charges = Family::<Status, Gauge>::default();
        let pix_recurrences = Family::<Status, Gauge>::default();
        let pix_recurring_charges = Family::<Status, Gauge>::default();
        let pix_payment_seconds = Family::<Quantile, Gauge>::default();
        let budget_share = Family::<Tenant, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        let month_cost = Family::<Tenant, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        let outcomes = Family::<TenantOutcome, Gauge>::default();
        let scores = Family::<TenantWho, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        let per_resolved = Family::<Tenant, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        let per_conversation = Family::<Tenant, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        let per_flow = Family::<Tenant, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register("turns", "Conversation turns handled", turns.clone());
        registry.register(
            "zero_token_turns",
            "Turns answered without any model token",
            zero_token_turns.clone(),
        );
        registry.register("tokens", "Model tokens spent, by direction", tokens.clone());
        registry.register(
            "turn_latency_seconds",
            "Time to handle one turn, accept to commit",
            turn_seconds.clone(),
        );
        registry.register("flows", "Ten-stage flow runs, by status", flows.clone());
        registry.register(
            "outbox_depth",
            "Outbox items waiting to be sent",
            outbox_depth.clone(),
        );
        registry.register(
            "outbox_dead_letters",
            "Outbox items dead-lettered",
            dead_letters.clone(),
        );
        registry.register(
            "cases_open",
            "Cases open: conversations waiting for or with a support agent",
            cases_open.clone(),
        );
        registry.register(
            "cases_waiting",
            "Cases waiting for a support agent to claim them",
            cases_waiting.clone(),
        );
        registry.register(
            "case_claim_seconds",
            "Seconds cases waited to be claimed, over the last 24 hours (nearest-rank quantiles)",
            case_claim_seconds.clone(),
        );
        registry.register(
            "pix_charges",
            "Pix charges of chat recharges, by status (ativa, paga, creditada, enviada, devolvida, expirada)",
            pix_charges.clone(),
        );
        registry.register(
            "pix_recurrences",
            "Automatic recharges' Pix Automático recurrences, by status (criada, aprovada, rejeitada, expirada, cancelada, falhou)",
            pix_recurrences.clone(),
        );
        registry.register(
            "pix_recurring_charges",
            "Automatic recharges' charges, by status (nova, agendada, paga, creditada, enviada, devolvida, falhou, cancelada)",
            pix_recurring_charges.clone(),
        );
        registry.register(
            "pix_payment_seconds",
            "Seconds from a Pix code shown to its payment, over the last 24 hours (nearest-rank quantiles)",
            pix_payment_seconds.clone(),
        );
        registry.register(
            "custo_mes_reais",
            "What each tenant's turns and paid messages cost this month in reais, at the [custos] prices (those without a price are not counted)",
            month_cost.clone(),
        );
        registry.register(
            "orcamento_uso",
            "Share of each budgeted tenant's monthly budget spent ([[orcamentos]]); at 0.8 the operator is told, at 1 the model is not called for it",
            budget_share.clone(),
        );
        registry.register(
            "desfechos_30d",
            "How the last 30 days' conversation stretches ended, per tenant: resolvida_pelo_bot, resolvida_por_pessoa, abandonada, sem_objetivo, and reaberta (the same person back on the same subject within 7 days)",
            outcomes.clone(),
        );
        registry.register(
            "nota_media_30d",
            "The last 30 days' mean satisfaction score (1-5), per tenant, of what the bot resolved (quem=bot) and what a person did (quem=pessoa)",
            scores.clone(),
        );
        registry.register(
            "custo_por_resolvida_reais_30d",
            "What the last 30 days' stretches cost in reais over the resolved ones, per tenant (absent while a cost is unknown)",
            per_resolved.clone(),
        );
        registry.register(
            "custo_por_conversa_reais_30d",
            "What the last 30 days' turns and paid messages cost in reais over the conversations they were in, per tenant (absent while a cost is unknown)",
            per_conversation.clone(),
        );
        registry.register(
            "custo_por_fluxo_reais_30d",
            "What the last 30 days' flow runs cost in reais (their paid notices) over the runs, per tenant (absent while a notice's cost is unknown)",
            per_flow.clone(),
        );
        registry.register(
            "otlp_spans_dropped",
            "Spans the trace exporter dropped (queue full, collector refusing or away)",
            vt_engine::telemetry::otlp::spans_dropped(),
        );
        let teams = TeamGauges::default();
        teams.register(&mut registry);
        let otel = Otel::new(&outbox_depth, &dead_letters, &cases_open);
        Self {
            registry,
            turns,
            zero_token_turns,
            tokens,
            turn_seconds,
            flows,
            outbox_depth,
            dead_letters,
            cases_open,
            cases_waiting,
            case_claim_seconds,
            pix_charges,
            pix_recurrences,
            pix_recurring_charges,
            pix_payment_seconds,
            budget_share,
            month_cost,
            outcomes,
            scores,
            per_resolved,
            per_conversation,
            per_flow,
            teams,
            otel,
        }
    }
}

/// Sets the figure of `label`, or takes it away when it is unknown now: a figure that became unknown
/// (a price missing, no scores left in the window) must not stay at its last value.
fn set_or_remove<L>(
    gauge: &Family<L, Gauge<f64, std::sync::atomic::AtomicU64>>,
    label: &L,
    value: Option<f64>,
) where
    L: Clone + std::hash::Hash + Eq,
{
    match value {
        Some(v) => {
            gauge.get_or_create(label).set(v);
        }
        None => {
            gauge.remove(label);
        }
    }
}

impl Metrics {
    pub fn turn(&self, tokens: (u64, u64), seconds: f64) {
        self.turns.inc();
        if tokens == (0, 0) {
            self.zero_token_turns.inc();
        }
        self.tokens
            .get_or_create(&Direction { direction: "input" })
            .inc_by(tokens.0);
        self.tokens
            .get_or_create(&Direction { direction: "output" })
            .inc_by(tokens.1);
        self.turn_seconds.observe(seconds);
        self.otel.turns.add(1, &[]);
        if tokens == (0, 0) {
            self.otel.zero_token_turns.add(1, &[]);
        }
        self.otel
            .tokens
            .add(tokens.0, &[KeyValue::new("direction", "input")]);
        self.otel
            .tokens
            .add(tokens.1, &[KeyValue::new("direction", "output")]);
        self.otel.turn_seconds.record(seconds, &[]);
    }

    /// Reads the outbox's depth and dead letters and the case figures from the store (the last 24
    /// hours by the service's clock).
    pub(crate) async fn refresh_outbox(&self, service: &crate::service::Services) {
        let store = service.stores();
        use vt_store::OutboxStatus;
        if let Ok(n) = store.outbox.outbox_count(OutboxStatus::Pending).await {
            self.outbox_depth.set(n);
        }
        if let Ok(n) = store.outbox.outbox_count(OutboxStatus::Failed).await {
            self.dead_letters.set(n);
        }
        if let Ok(n) = store.cases.open_case_count().await {
            self.cases_open.set(n);
        }
        let day = service.engine().now() - chrono::Duration::hours(24);
        if let Ok(cases) = store.cases.case_times(None, day).await {
            let figures = crate::service::CaseFigures::of(&cases, day);
            self.cases_waiting.set(figures.waiting_now);
            for (quantile, value) in [("0.5", figures.claim_p50_s), ("0.9", figures.claim_p90_s)] {
                let g = self.case_claim_seconds.get_or_create(&Quantile { quantile });
                g.set(value.unwrap_or(0));
            }
        }
        if service.payments().takes_pix()
            && let Ok(counts) = store.pix.charge_counts().await
        {
            use vt_store::ChargeStatus as C;
            for status in C::ALL {
                let n = counts.iter().find(|(s, _)| *s == status).map_or(0, |(_, n)| *n);
                self.pix_charges
                    .get_or_create(&Status {
                        status: status.as_str(),
                    })
                    .set(n);
            }
        }
        if service.automatic().active()
            && let Ok((recurrences, charges)) = store.recurrences.recurrence_counts().await
        {
            let statuses = vt_store::RecurrenceStatus::ALL.map(|s| s.as_str());
            for status in statuses {
                let n = recurrences
                    .iter()
                    .find(|(s, _)| s == status)
                    .map_or(0, |(_, n)| *n);
                self.pix_recurrences.get_or_create(&Status { status }).set(n);
            }
            for status in vt_store::RecurringChargeStatus::ALL.map(|s| s.as_str()) {
                let n = charges.iter().find(|(s, _)| s == status).map_or(0, |(_, n)| *n);
                self.pix_recurring_charges
                    .get_or_create(&Status { status })
                    .set(n);
            }
        }
        use rust_decimal::prelude::ToPrimitive as _;
        for (tenant, share) in service.spending().budget_shares().await {
            self.budget_share
                .get_or_create(&Tenant { tenant })
                .set(share.to_f64().unwrap_or_default());
        }
        if let Ok(costs) = service.spending().month_costs().await {
            for (tenant, brl) in costs {
                self.month_cost
                    .get_or_create(&Tenant { tenant })
                    .set(brl.to_f64().unwrap_or_default());
            }
        }
        self.refresh_outcomes(service).await;
        self.refresh_spending(service).await;
        self.refresh_teams(service).await;
        if service.payments().takes_pix()
            && let Ok(mut seconds) = store.pix.payment_seconds(day).await
        {
            for (quantile, p) in [("0.5", 50), ("0.9", 90)] {
                let value = crate::service::percentile(&mut seconds, p);
                self.pix_payment_seconds
                    .get_or_create(&Quantile { quantile })
                    .set(value);
            }
        }
    }

    /// Each team's queue now, and the share of this month's SLA clocks it kept.
    async fn refresh_teams(&self, service: &crate::service::Services) {
        let cases = service.cases();
        let Ok(queue) = cases.queue(None).await else {
            return;
        };
        for f in cases.team_figures(&queue) {
            let team = Team { equipe: f.team };
            self.teams.waiting.get_or_create(&team).set(i64::from(f.waiting));
            self.teams
                .oldest_wait
                .get_or_create(&team)
                .set(f.oldest_wait_secs);
            self.teams.at_risk.get_or_create(&team).set(i64::from(f.at_risk));
            self.teams
                .breached
                .get_or_create(&team)
                .set(i64::from(f.breached));
        }
        let month = service
            .policy_timezone()
            .local(service.engine().now())
            .date_naive();
        let Ok(report) = cases.report(None, month).await else {
            return;
        };
        for line in report.teams {
            let met = line.sla_pct().map(|p| p / 100.0);
            set_or_remove(&self.teams.met, &Team { equipe: line.nome }, met);
        }
    }

    /// How the last 30 days' stretches ended, per tenant.
    async fn refresh_outcomes(&self, service: &crate::service::Services) {
        use rust_decimal::prelude::ToPrimitive as _;
        let since = service.engine().now() - chrono::Duration::days(30);
        let Ok(records) = service.stores().outcomes.outcomes_since(since).await else {
            return;
        };
        for (tenant, t) in crate::usage::outcomes::by_tenant(&records) {
            let counts = [
                ("resolvida_pelo_bot", t.pelo_bot),
                ("resolvida_por_pessoa", t.por_pessoa),
                ("abandonada", t.abandonadas),
                ("sem_objetivo", t.sem_objetivo),
                ("reaberta", t.reabertas),
            ];
            for (desfecho, n) in counts {
                let label = TenantOutcome {
                    tenant: tenant.clone(),
                    desfecho,
                };
                self.outcomes.get_or_create(&label).set(n as i64);
            }
            for (quem, score) in [("bot", t.nota_bot()), ("pessoa", t.nota_pessoa())] {
                let label = TenantWho {
                    tenant: tenant.clone(),
                    quem,
                };
                set_or_remove(&self.scores, &label, score);
            }
            let cost = t.per_resolved().map(|c| c.to_f64().unwrap_or_default());
            set_or_remove(&self.per_resolved, &Tenant { tenant }, cost);
        }
    }

    /// The last 30 days' cost per conversation and per flow run, per tenant.
    async fn refresh_spending(&self, service: &crate::service::Services) {
        use rust_decimal::prelude::ToPrimitive as _;
        let since = service.engine().now() - chrono::Duration::days(30);
        let Ok(spending) = service.stores().reports.spending_by_tenant_since(since).await else {
            return;
        };
        for s in &spending {
            let Some(tenant) = &s.tenant_id else {
                continue;
            };
            let row = crate::usage::CostRow::of_period(s);
            let figures = [
                (&self.per_conversation, row.per_conversation()),
                (&self.per_flow, row.per_flow()),
            ];
            for (gauge, cost) in figures {
                let label = Tenant {
                    tenant: tenant.clone(),
                };
                set_or_remove(gauge, &label, cost.map(|c| c.to_f64().unwrap_or_default()));
            }
        }
    }

    pub fn flow(&self, status: crate::flow::FlowStatus) {
        self.flows
            .get_or_create(&Status {
                status: status.as_str(),
            })
            .inc();
        self.otel
            .flows
            .add(1, &[KeyValue::new("status", status.as_str())]);
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "metrics could not be encoded");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_that_becomes_unknown_is_taken_away_not_left_at_its_last_value() {
        let mut registry = Registry::default();
        let gauge = Family::<Tenant, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register("custo", "a cost", gauge.clone());
        let acme = Tenant {
            tenant: "acme".into(),
        };
        let text = |registry: &Registry| {
            let mut out = String::new();
            prometheus_client::encoding::text::encode(&mut out, registry).expect("encode");
            out
        };
        set_or_remove(&gauge, &acme, Some(0.25));
        assert!(text(&registry).contains("custo{tenant=\"acme\"} 0.25"));
        set_or_remove(&gauge, &acme, None);
        assert!(
            !text(&registry).contains("tenant=\"acme\""),
            "{}",
            text(&registry)
        );
    }
}
