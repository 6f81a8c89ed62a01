//! A case's SLA clocks, computed by code from its log and its team's calendar: first human response,
//! next human response, resolution. Only a person's words stop a response clock
//! ([`HUMAN_RESPONSES`]) — never the bot's acknowledgement nor the unclaimed-case notice; a clock
//! pauses while the case waits for the card holder (after a person spoke, until the card holder
//! writes again). Nothing is stored but the log: a transfer between teams keeps the history, and the
//! receiving team's clocks start at the transfer under its own promise ([`legs`]); the first response
//! stays credited to whoever gave it, under the promise of the team the case was in then
//! ([`first_response`]).

use chrono::{DateTime, Utc};

use super::{Calendar, SlaPolicy};
use vt_store::{Case, CaseEvent};

/// The case log's lines that are a person's response to the card holder.
pub(crate) const HUMAN_RESPONSES: [&str; 2] = ["mensagem_atendente", "proposta_recarga"];

/// Where a clock stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SlaStatus {
    NoPrazo,
    Vencendo,
    Vencido,
}

impl SlaStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoPrazo => "no_prazo",
            Self::Vencendo => "vencendo",
            Self::Vencido => "vencido",
        }
    }

    /// As a support agent reads it.
    pub fn label(self) -> &'static str {
        match self {
            Self::NoPrazo => "no prazo",
            Self::Vencendo => "vencendo",
            Self::Vencido => "vencido",
        }
    }
}

/// Which promise a clock keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockKind {
    PrimeiraResposta,
    ProximaResposta,
    Resolucao,
}

impl ClockKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PrimeiraResposta => "primeira_resposta",
            Self::ProximaResposta => "proxima_resposta",
            Self::Resolucao => "resolucao",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::PrimeiraResposta => "Primeira resposta",
            Self::ProximaResposta => "Próxima resposta",
            Self::Resolucao => "Resolução",
        }
    }
}

/// One clock.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Clock {
    pub kind: ClockKind,
    /// The promise, in business minutes.
    pub target: u32,
    /// Business minutes counted so far (or in all, once stopped).
    pub elapsed: f64,
    /// Counting now (not stopped, not paused).
    pub running: bool,
    /// Stopped: its promise was kept or not.
    pub stopped: bool,
    /// When it runs out, while it runs and has not.
    pub due_at: Option<DateTime<Utc>>,
    pub status: SlaStatus,
}

/// A case's clocks under its team's policy; `None` where the team promises nothing.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Clocks {
    pub primeira_resposta: Option<Clock>,
    /// The current next-response clock, or the last one.
    pub proxima_resposta: Option<Clock>,
    pub resolucao: Option<Clock>,
    /// Next-response cycles that ended: how many, how many in time.
    pub proximas: (u32, u32),
    /// When the card holder started waiting for a person's answer, while they wait.
    pub waiting_since: Option<DateTime<Utc>>,
    /// When a person first answered.
    pub first_response_at: Option<DateTime<Utc>>,
}

impl Clocks {
    /// Every clock it has.
    pub fn all(&self) -> impl Iterator<Item = &Clock> {
        [&self.primeira_resposta, &self.proxima_resposta, &self.resolucao]
            .into_iter()
            .flatten()
    }

    /// The worst status among the clocks still counting (`None`: none counts).
    pub fn at_risk(&self) -> Option<SlaStatus> {
        self.all()
            .filter(|c| !c.stopped)
            .map(|c| c.status)
            .max_by_key(|s| *s as u8)
    }
}

struct Reading<'a> {
    policy: &'a SlaPolicy,
    calendar: &'a Calendar,
    now: DateTime<Utc>,
}

impl Reading<'_> {
    /// A clock of `target` minutes over `spans` of counting (the last one open while it runs), stopped
    /// or not.
    fn clock(
        &self,
        kind: ClockKind,
        target: Option<u32>,
        spans: &[(DateTime<Utc>, Option<DateTime<Utc>>)],
        stopped: bool,
    ) -> Option<Clock> {
        let target = target?;
        let elapsed: f64 = spans
            .iter()
            .map(|(from, to)| self.calendar.minutes_between(*from, to.unwrap_or(self.now)))
            .sum();
        let running = !stopped && spans.last().is_some_and(|(_, to)| to.is_none());
        let share = elapsed / f64::from(target);
        let status = if share > 1.0 {
            SlaStatus::Vencido
        } else if !stopped && share * 100.0 >= f64::from(self.policy.aviso_pct) {
            SlaStatus::Vencendo
        } else {
            SlaStatus::NoPrazo
        };
        let left = f64::from(target) - elapsed;
        let due_at = (running && left > 0.0).then(|| self.calendar.add(self.now, left.ceil() as i64));
        Some(Clock {
            kind,
            target,
            elapsed,
            running,
            stopped,
            due_at,
            status,
        })
    }
}

/// What a case's log says of its clocks: when a person first answered; the spans resolution counts
/// (a person's words pause it until the card holder writes again); the next-response cycles (from a
/// card holder's message after a person spoke to the person's next words).
struct Walk {
    first_response_at: Option<DateTime<Utc>>,
    counting: Vec<(DateTime<Utc>, Option<DateTime<Utc>>)>,
    cycles: Vec<(DateTime<Utc>, Option<DateTime<Utc>>)>,
}

fn walk(case: &Case, log: &[CaseEvent]) -> Walk {
    let end = case.closed_at;
    let mut first_response_at = None;
    // Resolution counts while the case waits for a person; a person's words pause it until the card
    // holder writes again.
    let mut counting: Vec<(DateTime<Utc>, Option<DateTime<Utc>>)> = vec![(case.opened_at, None)];
    let mut cycles: Vec<(DateTime<Utc>, Option<DateTime<Utc>>)> = Vec::new();
    for e in log.iter().filter(|e| end.is_none_or(|end| e.at <= end)) {
        let counting_now = counting.last().is_some_and(|(_, to)| to.is_none());
        if HUMAN_RESPONSES.contains(&e.what.as_str()) {
            first_response_at.get_or_insert(e.at);
            if let Some(last) = counting.last_mut().filter(|_| counting_now) {
                last.1 = Some(e.at);
            }
            if let Some(cycle) = cycles.last_mut().filter(|c| c.1.is_none()) {
                cycle.1 = Some(e.at);
            }
        } else if e.what == "mensagem_cliente" && !counting_now {
            counting.push((e.at, None));
            cycles.push((e.at, None));
        }
    }
    Walk {
        first_response_at,
        counting,
        cycles,
    }
}

/// A stretch of a case in one team: from its opening or the transfer that brought it there.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Leg {
    pub team: String,
    pub from: DateTime<Utc>,
    /// Where it starts in the log (the transfer's line): what happened since is its own.
    pub start: usize,
}

/// The team a transfer line moved the case to (`financeiro` or `financeiro (@bia)`).
fn moved_to(line: &CaseEvent) -> Option<&str> {
    let detail = line.detail.as_deref()?;
    Some(detail.split(" (@").next().unwrap_or(detail).trim())
}

/// The case's stretches per team, oldest first: a transfer within the same team is no new stretch.
/// (A log from before the opening line named its team starts in the case's team now.)
pub(crate) fn legs(case: &Case, log: &[CaseEvent]) -> Vec<Leg> {
    let opened_in = log
        .iter()
        .find(|e| e.what == "aberto")
        .and_then(|e| e.detail.clone())
        .unwrap_or_else(|| case.team.clone());
    let mut legs = vec![Leg {
        team: opened_in,
        from: case.opened_at,
        start: 0,
    }];
    for (i, line) in log.iter().enumerate().filter(|(_, e)| e.what == "transferido") {
        if let Some(team) = moved_to(line)
            && legs.last().is_some_and(|l| l.team != team)
        {
            legs.push(Leg {
                team: team.to_owned(),
                from: line.at,
                start: i,
            });
        }
    }
    legs
}

/// Who answered the card holder first, when, and the stretch (team) the case was in then.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FirstResponse {
    pub who: String,
    pub at: DateTime<Utc>,
    pub leg: Leg,
}

pub(crate) fn first_response(case: &Case, log: &[CaseEvent]) -> Option<FirstResponse> {
    let (at, line) = log
        .iter()
        .enumerate()
        .filter(|(_, e)| case.closed_at.is_none_or(|end| e.at <= end))
        .find(|(_, e)| HUMAN_RESPONSES.contains(&e.what.as_str()))?;
    let leg = legs(case, log).into_iter().rev().find(|l| l.start <= at)?;
    Some(FirstResponse {
        who: line.who.clone(),
        at: line.at,
        leg,
    })
}

/// `case`'s clocks from its `log` (oldest first), under `policy` and `calendar` (its team's now), at
/// `now`: the stretch since it reached its team.
pub(crate) fn clocks(
    case: &Case,
    log: &[CaseEvent],
    policy: &SlaPolicy,
    calendar: &Calendar,
    now: DateTime<Utc>,
) -> Clocks {
    match legs(case, log).pop() {
        Some(leg) => clocks_from(case, log, &leg, policy, calendar, now),
        None => Clocks::default(),
    }
}

/// The next-response cycles that ended: how many, how many in time.
fn ended_cycles(
    cycles: &[(DateTime<Utc>, Option<DateTime<Utc>>)],
    policy: &SlaPolicy,
    calendar: &Calendar,
) -> (u32, u32) {
    let mut proximas = (0, 0);
    for (from, to) in cycles {
        if let (Some(to), Some(target)) = (to, policy.proxima_resposta) {
            proximas.0 += 1;
            if calendar.minutes_between(*from, *to) <= f64::from(target) {
                proximas.1 += 1;
            }
        }
    }
    proximas
}

/// `case`'s clocks over `leg` (from its opening, or a transfer, on), under `policy` and `calendar`.
pub(crate) fn clocks_from(
    case: &Case,
    log: &[CaseEvent],
    leg: &Leg,
    policy: &SlaPolicy,
    calendar: &Calendar,
    now: DateTime<Utc>,
) -> Clocks {
    let stretch = Case {
        opened_at: leg.from,
        ..case.clone()
    };
    let log = log.get(leg.start..).unwrap_or_default();
    let case = &stretch;
    let reading = Reading {
        policy,
        calendar,
        now,
    };
    let end = case.closed_at;
    let Walk {
        first_response_at,
        mut counting,
        cycles,
    } = walk(case, log);
    let closed = end.is_some();
    if let (Some(end), Some(last)) = (end, counting.last_mut())
        && last.1.is_none()
    {
        last.1 = Some(end);
    }
    let first_span = [(case.opened_at, first_response_at.or(end))];
    let primeira_resposta = reading.clock(
        ClockKind::PrimeiraResposta,
        policy.primeira_resposta,
        &first_span,
        first_response_at.is_some() || closed,
    );
    let proximas = ended_cycles(&cycles, policy, calendar);
    let proxima_resposta = cycles.last().and_then(|(from, to)| {
        let to = to.or(end);
        reading.clock(
            ClockKind::ProximaResposta,
            policy.proxima_resposta,
            &[(*from, to)],
            to.is_some(),
        )
    });
    let resolucao = reading.clock(ClockKind::Resolucao, policy.resolucao, &counting, closed);
    let waiting_since = if closed {
        None
    } else if first_response_at.is_none() {
        Some(case.opened_at)
    } else {
        cycles.last().filter(|c| c.1.is_none()).map(|c| c.0)
    };
    Clocks {
        primeira_resposta,
        proxima_resposta,
        resolucao,
        proximas,
        waiting_since,
        first_response_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::Hours;
    use vt_domain::vt::timezone::Timezone;
    use vt_store::CaseState;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).expect("time").with_timezone(&Utc)
    }

    fn case(opened: &str) -> Case {
        Case {
            id: "caso_1".into(),
            conversation_id: "c1".into(),
            tenant_id: "default".into(),
            channel: "canal-a".into(),
            reason: "pedido".into(),
            state: CaseState::Aguardando,
            owner: None,
            opened_at: at(opened),
            claimed_at: None,
            closed_at: None,
            acknowledged: false,
            case_file: serde_json::Value::Null,
            notice_due_at: None,
            noticed: false,
            board_post: None,
            ..Case::default()
        }
    }

    fn line(c: &Case, when: &str, who: &str, what: &str) -> CaseEvent {
        c.event(at(when), who, what, None)
    }

    fn desk() -> Calendar {
        let hours = Hours::try_from("seg-sex 08:00-18:00".to_owned()).expect("hours");
        Calendar::new(Some(hours), [], Timezone::sao_paulo())
    }

    fn policy() -> SlaPolicy {
        SlaPolicy {
            primeira_resposta: Some(30),
            proxima_resposta: Some(20),
            resolucao: Some(120),
            aviso_pct: 80,
        }
    }

    #[test]
    fn a_transfer_starts_the_receiving_teams_clocks_and_the_first_response_stays_its_givers() {
        // Monday 10:00 opened in geral; ana answers at 10:05; moved to financeiro (bia) at 10:10.
        let c = Case {
            team: "financeiro".into(),
            ..case("2026-11-23T13:00:00Z")
        };
        let mut opened = line(&c, "2026-11-23T13:00:00Z", "sistema", "aberto");
        opened.detail = Some("geral".into());
        let mut within = line(&c, "2026-11-23T13:08:00Z", "ana", "transferido");
        within.detail = Some("geral (@caio)".into());
        let mut moved = line(&c, "2026-11-23T13:10:00Z", "ana", "transferido");
        moved.detail = Some("financeiro (@bia)".into());
        let log = [
            opened,
            line(&c, "2026-11-23T13:05:00Z", "ana", "mensagem_atendente"),
            within,
            moved,
        ];
        // A move inside a team is no new stretch.
        let stretches = legs(&c, &log);
        assert_eq!(
            stretches
                .iter()
                .map(|l| (l.team.as_str(), l.start))
                .collect::<Vec<_>>(),
            [("geral", 0), ("financeiro", 3)]
        );
        let first = first_response(&c, &log).expect("a first response");
        assert_eq!((first.who.as_str(), first.leg.team.as_str()), ("ana", "geral"));
        // Under geral's promise it took 5 minutes and is kept.
        let then = clocks_from(
            &c,
            &log,
            &first.leg,
            &policy(),
            &desk(),
            at("2026-11-23T13:20:00Z"),
        );
        let given = then.primeira_resposta.expect("first");
        assert!(given.stopped && given.elapsed == 5.0 && given.status == SlaStatus::NoPrazo);
        // financeiro's own clock runs from the transfer: 10 minutes at 10:20, nobody of theirs spoke.
        let now = clocks(&c, &log, &policy(), &desk(), at("2026-11-23T13:20:00Z"));
        let theirs = now.primeira_resposta.expect("financeiro's");
        assert!(theirs.running && theirs.elapsed == 10.0, "{theirs:?}");
        assert_eq!(now.waiting_since, Some(at("2026-11-23T13:10:00Z")));
    }

    #[test]
    fn friday_1755_is_due_monday_0825_and_a_bot_message_stops_no_clock() {
        // Friday 17:55 in São Paulo.
        let c = case("2026-11-27T20:55:00Z");
        let log = [
            line(&c, "2026-11-27T20:55:00Z", "sistema", "aberto"),
            // The bot's notice to the card holder and a card holder's message: no person yet.
            line(&c, "2026-11-30T11:05:00Z", "sistema", "aviso_sem_atendente"),
            line(&c, "2026-11-30T11:06:00Z", "cliente", "mensagem_cliente"),
        ];
        let friday = clocks(&c, &log[..1], &policy(), &desk(), at("2026-11-27T20:56:00Z"));
        let first = friday.primeira_resposta.expect("first");
        assert_eq!(first.due_at, Some(at("2026-11-30T11:25:00Z")));
        assert_eq!(first.status, SlaStatus::NoPrazo);
        // Monday 08:20: 25 of 30 minutes, past 80 %: at risk — the bot's lines stopped nothing.
        let monday = clocks(&c, &log, &policy(), &desk(), at("2026-11-30T11:20:00Z"));
        let first = monday.primeira_resposta.clone().expect("first");
        assert!(first.running && !first.stopped);
        assert_eq!(first.status, SlaStatus::Vencendo);
        assert_eq!(monday.at_risk(), Some(SlaStatus::Vencendo));
        // Monday 08:40 with no person: breached.
        let late = clocks(&c, &log, &policy(), &desk(), at("2026-11-30T11:40:00Z"));
        assert_eq!(late.primeira_resposta.expect("first").status, SlaStatus::Vencido);
    }

    #[test]
    fn a_persons_answer_stops_the_clock_and_waiting_for_the_card_holder_pauses_resolution() {
        // Monday 09:00.
        let c = case("2026-11-30T12:00:00Z");
        let log = [
            line(&c, "2026-11-30T12:00:00Z", "sistema", "aberto"),
            line(&c, "2026-11-30T12:10:00Z", "ana", "mensagem_atendente"),
            // The card holder answers two hours later: resolution was paused meanwhile.
            line(&c, "2026-11-30T14:10:00Z", "cliente", "mensagem_cliente"),
            line(&c, "2026-11-30T14:40:00Z", "ana", "mensagem_atendente"),
        ];
        let now = at("2026-11-30T15:00:00Z");
        let k = clocks(&c, &log, &policy(), &desk(), now);
        let first = k.primeira_resposta.clone().expect("first");
        assert!(first.stopped && first.status == SlaStatus::NoPrazo);
        assert_eq!(first.elapsed, 10.0);
        // The next response took 30 of 20 minutes: one cycle, not in time.
        assert_eq!(k.proximas, (1, 0));
        assert_eq!(
            k.proxima_resposta.as_ref().expect("next").status,
            SlaStatus::Vencido
        );
        // Resolution: 10 + 30 minutes counted, the two hours waiting for the card holder not.
        let resolution = k.resolucao.clone().expect("resolution");
        assert_eq!(resolution.elapsed, 40.0);
        assert!(!resolution.running, "paused while the card holder is to answer");
        assert_eq!(k.waiting_since, None);
        // Closed at 12:20: resolution stops there, in time.
        let closed = Case {
            closed_at: Some(at("2026-11-30T15:20:00Z")),
            state: CaseState::Encerrado,
            ..c
        };
        let k = clocks(&closed, &log, &policy(), &desk(), at("2026-12-01T15:00:00Z"));
        let resolution = k.resolucao.clone().expect("resolution");
        assert!(resolution.stopped && resolution.status == SlaStatus::NoPrazo);
        assert_eq!(k.at_risk(), None);
    }
}
