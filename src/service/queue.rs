//! The desk as the people on it read it: each open case with its clocks, who it is with and what was
//! said last (the queue, ordered per team), each team's figures (waiting, oldest wait, at risk, each
//! agent's load) and a month's report per team and agent — for the console, `/metrics` and
//! `vt-agent cases`. Everything is computed by code from the cases, their logs and their outcomes.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Datelike, NaiveDate, Utc};

use super::Cases;
use super::sla::{Clocks, HUMAN_RESPONSES, SlaStatus};
use super::teams::Ordem;
use vt_store::{Case, CaseState, StoreError};

/// One open case in a queue.
#[derive(Debug, Clone)]
pub struct QueueEntry {
    pub case: Case,
    pub clocks: Clocks,
    /// Who the card holder is, as their channel names them.
    pub person: String,
    /// The cards the case file names, masked.
    pub cards: Vec<String>,
    /// The last thing said in the case (the card holder's or a person's), masked; else its reason.
    pub last_line: String,
}

impl QueueEntry {
    /// Since when the card holder waits for a person (`None`: a person spoke last).
    pub fn waiting_since(&self) -> Option<DateTime<Utc>> {
        self.clocks.waiting_since
    }
}

/// A team's queue and its people, now.
#[derive(Debug, Clone, Default)]
pub struct TeamFigures {
    pub team: String,
    pub waiting: u32,
    /// Seconds the longest-waiting card holder has waited for a person.
    pub oldest_wait_secs: i64,
    pub at_risk: u32,
    pub breached: u32,
    /// Open cases per member (claimed or offered).
    pub loads: Vec<(String, u32)>,
}

/// A month's figures of a team or an agent.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ReportLine {
    /// The team, or the agent (`equipe/agente`).
    pub nome: String,
    pub casos: u32,
    /// First human response, business minutes: median and p90 (`None`: no response yet).
    pub primeira_resposta_mediana: Option<i64>,
    pub primeira_resposta_p90: Option<i64>,
    /// Clocks that stopped in the month and kept their promise, of those that stopped.
    pub sla_cumpridos: u32,
    pub sla_medidos: u32,
    pub reabertos: u32,
    /// Mean 1–5 score of the cases' outcomes, and how many answered.
    pub csat: Option<f64>,
    pub notas: u32,
}

impl ReportLine {
    /// The share of SLA clocks kept, in percent (`None`: none measured).
    pub fn sla_pct(&self) -> Option<f64> {
        (self.sla_medidos > 0).then(|| 100.0 * f64::from(self.sla_cumpridos) / f64::from(self.sla_medidos))
    }
}

/// A month's report: per team, then per agent.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub month: NaiveDate,
    pub teams: Vec<ReportLine>,
    pub agents: Vec<ReportLine>,
    /// How the month's cases closed by a person were resolved: (resolution, cases), in the list's order.
    pub resolutions: Vec<(String, u32)>,
    /// Canned answers sent in the month: (shortcut, times), most used first.
    pub canned: Vec<(String, u32)>,
}

impl Cases<'_> {
    /// The open cases `tenant` may see (every tenant's with `None`), each team's in its order, teams in
    /// configuration order.
    pub async fn queue(self, tenant: Option<&str>) -> Result<Vec<QueueEntry>, StoreError> {
        let now = self.engine.now();
        let open = self.cases.open_cases().await?;
        let mut entries = Vec::new();
        for case in open
            .into_iter()
            .filter(|c| tenant.is_none_or(|t| t == c.tenant_id))
        {
            entries.push(self.entry(case).await?);
        }
        let desk = &self.board.handoff.desk;
        let rank = |e: &QueueEntry| {
            let team = desk
                .teams()
                .iter()
                .position(|t| t.name() == e.case.team)
                .unwrap_or(usize::MAX);
            let key = match desk.team(&e.case.team).config.ordem {
                Ordem::MaisAntigo => e.case.opened_at,
                Ordem::MaiorEspera => e.waiting_since().unwrap_or(now),
            };
            (team, e.case.state != CaseState::Aguardando, key)
        };
        entries.sort_by_key(rank);
        Ok(entries)
    }

    /// `case` as a queue shows it: its clocks now, its person, cards and last line.
    pub async fn entry(self, case: Case) -> Result<QueueEntry, StoreError> {
        let log = self.cases.case_events(&case.id).await?;
        let team = self.board.handoff.desk.team(&case.team);
        let clocks = super::sla::clocks(&case, &log, &team.config.sla, &team.calendar, self.engine.now());
        let conv = self.conversations.conversation(&case.conversation_id).await?;
        let person = match &conv {
            // A visitor who gave their channel no name (the web chat's): when they came, not a raw id.
            Some(c) if c.user_login == c.user_id && self.speaker.channel(&c.channel).visitor.is_some() => {
                let tz = super::policy_timezone(self.engine);
                let visitor = self.speaker.channel(&c.channel).visitor.unwrap_or_default();
                format!("{visitor} · {}", tz.local(case.opened_at).format("%H:%M"))
            }
            Some(c) if !c.user_login.is_empty() => c.user_login.clone(),
            Some(c) => c.user_id.clone(),
            None => String::new(),
        };
        // What was said last in the conversation — the bot's answer too — else the case's log.
        let stored = self.conversations.messages(&case.conversation_id).await?;
        let said_last = stored.iter().rev().find_map(|m| match &m.message {
            vt_engine::llm::ChatMessage::User { content }
            | vt_engine::llm::ChatMessage::HumanAgent { content, .. } => Some(content.clone()),
            vt_engine::llm::ChatMessage::Assistant {
                content: Some(text), ..
            } if !text.trim().is_empty() => Some(text.clone()),
            _ => None,
        });
        let last_line = said_last
            .or_else(|| {
                log.iter()
                    .rev()
                    .filter(|e| e.what == "mensagem_cliente" || HUMAN_RESPONSES.contains(&e.what.as_str()))
                    .find_map(|e| e.detail.clone())
            })
            .unwrap_or_else(|| case.reason.clone());
        let cards = case.case_file["cartoes"]
            .as_array()
            .map(|a| a.iter().filter_map(|c| c.as_str()).map(str::to_owned).collect())
            .unwrap_or_default();
        Ok(QueueEntry {
            last_line: vt_domain::vt::card::mask_cards_in(&last_line),
            cards,
            person,
            clocks,
            case,
        })
    }

    /// Each team's figures now, from `queue` (all tenants' open cases).
    pub fn team_figures(self, queue: &[QueueEntry]) -> Vec<TeamFigures> {
        let now = self.engine.now();
        let loads = super::assignment::loads(&queue.iter().map(|e| e.case.clone()).collect::<Vec<_>>(), now);
        self.board
            .handoff
            .desk
            .teams()
            .iter()
            .map(|team| {
                let mine: Vec<&QueueEntry> = queue.iter().filter(|e| e.case.team == team.name()).collect();
                let status =
                    |s: SlaStatus| mine.iter().filter(|e| e.clocks.at_risk() == Some(s)).count() as u32;
                TeamFigures {
                    team: team.name().to_owned(),
                    waiting: mine
                        .iter()
                        .filter(|e| e.case.state == CaseState::Aguardando)
                        .count() as u32,
                    oldest_wait_secs: mine
                        .iter()
                        .filter_map(|e| e.waiting_since())
                        .map(|w| (now - w).num_seconds().max(0))
                        .max()
                        .unwrap_or(0),
                    at_risk: status(SlaStatus::Vencendo),
                    breached: status(SlaStatus::Vencido),
                    loads: team
                        .config
                        .membros
                        .iter()
                        .map(|m| (m.clone(), loads.get(m).copied().unwrap_or(0)))
                        .collect(),
                }
            })
            .collect()
    }

    /// The report of the month holding `month` for `tenant` (every tenant's with `None`): the cases
    /// opened in it, per team and per agent (whoever claimed it last).
    pub async fn report(self, tenant: Option<&str>, month: NaiveDate) -> Result<Report, StoreError> {
        let first = month.with_day(1).unwrap_or(month);
        let next = first.checked_add_months(chrono::Months::new(1)).unwrap_or(first);
        let tz = super::policy_timezone(self.engine);
        let start = |d: NaiveDate| tz.instant(d.and_time(chrono::NaiveTime::MIN));
        let (from, to) = (start(first), start(next));
        let cases = self.cases.cases_opened_between(tenant, from, to).await?;
        let outcomes: HashMap<String, vt_store::OutcomeRecord> = self
            .outcomes
            .outcomes_since(from)
            .await?
            .into_iter()
            .filter_map(|o| o.caso_id.clone().map(|c| (c, o)))
            .collect();
        let now = self.engine.now();
        let mut tally = Tallies::default();
        for case in &cases {
            let log = self.cases.case_events(&case.id).await?;
            self.tally_case(&mut tally, case, &log, outcomes.get(&case.id), now);
        }
        let Tallies { mut teams, agents } = tally;
        // Every configured team has a line, with no cases too.
        for team in self.board.handoff.desk.teams() {
            teams.entry(team.name().to_owned()).or_default();
        }
        let resolutions = super::RESOLUTIONS
            .iter()
            .map(|(key, _)| {
                let n = cases
                    .iter()
                    .filter(|c| c.resolution.as_deref() == Some(*key))
                    .count();
                ((*key).to_owned(), n as u32)
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        let canned = self.canned_counts(tenant, from, to).await?;
        Ok(Report {
            month: first,
            teams: teams.into_iter().map(|(n, t)| t.line(n)).collect(),
            agents: agents.into_iter().map(|(n, t)| t.line(n)).collect(),
            resolutions,
            canned,
        })
    }
}

/// A month's tallies, per team and per agent (`equipe/agente`).
#[derive(Default)]
struct Tallies {
    teams: BTreeMap<String, Tally>,
    agents: BTreeMap<String, Tally>,
}

impl Cases<'_> {
    /// What `case` adds to the month: its clocks in its team now to that team and its owner; its first
    /// response to whoever gave it, under the promise of the team the case was in then (a receiving
    /// team's own first-response clock is theirs).
    fn tally_case(
        self,
        tally: &mut Tallies,
        case: &Case,
        log: &[vt_store::CaseEvent],
        outcome: Option<&vt_store::OutcomeRecord>,
        now: DateTime<Utc>,
    ) {
        let desk = &self.board.handoff.desk;
        let team = desk.team(&case.team);
        let clocks = super::sla::clocks(case, log, &team.config.sla, &team.calendar, now);
        let first = super::sla::first_response(case, log);
        let here = super::sla::legs(case, log).last().map(|l| l.start);
        let earlier = first.as_ref().is_some_and(|f| Some(f.leg.start) != here);
        let fact = CaseFact::of(&clocks, outcome, earlier);
        tally.teams.entry(case.team.clone()).or_default().add(&fact);
        // The agent it counts for: its owner, else (moved back to a queue) the last person on it.
        let owner = case.owner.clone().or_else(|| {
            log.iter()
                .rev()
                .find(|e| e.what == "assumido" || HUMAN_RESPONSES.contains(&e.what.as_str()))
                .map(|e| e.who.clone())
        });
        if let Some(owner) = owner {
            tally
                .agents
                .entry(format!("{}/{owner}", case.team))
                .or_default()
                .add(&fact);
        }
        let Some(first) = first else {
            return;
        };
        let then = desk.team(&first.leg.team);
        let at_first = super::sla::clocks_from(case, log, &first.leg, &then.config.sla, &then.calendar, now);
        if let Some(clock) = at_first.primeira_resposta.as_ref().filter(|c| c.stopped) {
            let credit = (clock.elapsed.round() as i64, clock.status != SlaStatus::Vencido);
            tally
                .teams
                .entry(first.leg.team.clone())
                .or_default()
                .add_first(credit);
            tally
                .agents
                .entry(format!("{}/{}", first.leg.team, first.who))
                .or_default()
                .add_first(credit);
        }
    }
}

/// What one case adds to a report.
struct CaseFact {
    kept: u32,
    measured: u32,
    reopened: bool,
    score: Option<i32>,
}

impl CaseFact {
    /// What the case's clocks in its team now add. The first response is credited apart, to whoever
    /// gave it ([`Tally::add_first`]); `moved` (it was given in an earlier team) leaves the receiving
    /// team's own first-response clock among this team's promises.
    fn of(clocks: &Clocks, outcome: Option<&vt_store::OutcomeRecord>, moved: bool) -> Self {
        let stopped: Vec<_> = clocks.all().filter(|c| c.stopped).collect();
        let (next_total, next_kept) = clocks.proximas;
        // The next-response clock's cycles are counted one by one; its last clock is one of them.
        let others = stopped.iter().filter(|c| match c.kind {
            super::sla::ClockKind::ProximaResposta => false,
            super::sla::ClockKind::PrimeiraResposta => moved,
            super::sla::ClockKind::Resolucao => true,
        });
        let kept = others.clone().filter(|c| c.status != SlaStatus::Vencido).count() as u32 + next_kept;
        let measured = others.count() as u32 + next_total;
        Self {
            kept,
            measured,
            reopened: outcome.is_some_and(|o| o.reaberta),
            score: outcome.and_then(|o| o.nota),
        }
    }
}

#[derive(Default)]
struct Tally {
    cases: u32,
    first_responses: Vec<i64>,
    kept: u32,
    measured: u32,
    reopened: u32,
    scores: Vec<i32>,
}

impl Tally {
    fn add(&mut self, fact: &CaseFact) {
        self.cases += 1;
        self.kept += fact.kept;
        self.measured += fact.measured;
        self.reopened += u32::from(fact.reopened);
        self.scores.extend(fact.score);
    }

    /// A first response in business minutes and whether it kept its promise.
    fn add_first(&mut self, (minutes, kept): (i64, bool)) {
        self.first_responses.push(minutes);
        self.measured += 1;
        self.kept += u32::from(kept);
    }

    fn line(mut self, nome: String) -> ReportLine {
        let responded = !self.first_responses.is_empty();
        ReportLine {
            nome,
            casos: self.cases,
            primeira_resposta_mediana: responded.then(|| super::percentile(&mut self.first_responses, 50)),
            primeira_resposta_p90: responded.then(|| super::percentile(&mut self.first_responses, 90)),
            sla_cumpridos: self.kept,
            sla_medidos: self.measured,
            reabertos: self.reopened,
            csat: (!self.scores.is_empty())
                .then(|| f64::from(self.scores.iter().sum::<i32>()) / self.scores.len() as f64),
            notas: self.scores.len() as u32,
        }
    }
}
