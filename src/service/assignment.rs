//! Cases reaching a team's members by themselves (`atribuicao = "rodizio" | "menos_ocupado"`): a
//! waiting case is offered to one available member below capacity; an offer not accepted (claimed) in
//! `aceitar_em_minutos` moves to the next member, never back to one who let it expire. Manual claim
//! keeps working for everyone. Every offer is one conditional update ([`CaseStore::offer_case`]):
//! of several instances passing at once, one offer of a case wins. And the SLA pass: a clock at
//! `aviso_pct` pings the team once ([`CaseStore::warn_sla`]).
//!
//! [`CaseStore::offer_case`]: vt_store::CaseStore::offer_case
//! [`CaseStore::warn_sla`]: vt_store::CaseStore::warn_sla

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Duration, Utc};

use super::Cases;
use super::board::{BoardKind, board_item};
use super::teams::{Atribuicao, Equipe};
use vt_store::{Case, CaseOffer, CaseState};

/// Open cases each agent holds: claimed, or offered and not yet expired.
pub(crate) fn loads(open: &[Case], now: DateTime<Utc>) -> HashMap<String, u32> {
    let mut loads = HashMap::new();
    for case in open {
        let holder = match case.state {
            CaseState::EmAtendimento => case.owner.as_deref(),
            CaseState::Aguardando if case.offer_due_at.is_some_and(|d| d > now) => case.offered_to.as_deref(),
            _ => None,
        };
        if let Some(agent) = holder {
            *loads.entry(agent.to_owned()).or_insert(0) += 1;
        }
    }
    loads
}

/// Who is offered the next case of `team`: among its members not away, below capacity and not in
/// `skip`, the next after `last` in turn (`rodizio`) or the one holding fewest (`menos_ocupado`, ties
/// in turn). `None`: nobody may have it now.
pub(crate) fn choose(
    team: &Equipe,
    loads: &HashMap<String, u32>,
    away: &HashSet<String>,
    skip: &HashSet<String>,
    last: Option<&str>,
) -> Option<String> {
    let members = &team.membros;
    let start = last
        .and_then(|l| members.iter().position(|m| m == l))
        .map_or(0, |i| i + 1);
    let in_turn = (0..members.len()).map(|k| &members[(start + k) % members.len()]);
    let load = |m: &String| loads.get(m).copied().unwrap_or(0);
    let mut eligible =
        in_turn.filter(|m| !away.contains(*m) && !skip.contains(*m) && load(m) < team.capacidade);
    match team.atribuicao {
        Atribuicao::Manual => None,
        Atribuicao::Rodizio => eligible.next().cloned(),
        // `min_by_key` keeps the first of equals: ties go in turn.
        Atribuicao::MenosOcupado => eligible.min_by_key(|m| load(m)).cloned(),
    }
}

impl Cases<'_> {
    /// Offers the waiting cases of teams that assign by themselves, and moves the offers that expired:
    /// once, whichever instance gets to each first. Returns how many offers were made.
    pub async fn assign_waiting(self) -> usize {
        let now = self.engine.now();
        let (open, away) = match (self.cases.open_cases().await, self.cases.away_agents().await) {
            (Ok(open), Ok(away)) => (open, away.into_iter().collect::<HashSet<_>>()),
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!(error = %e, "waiting cases could not be read for assignment");
                return 0;
            }
        };
        let mut loads = loads(&open, now);
        let mut offered = 0;
        for case in open.iter().filter(|c| c.state == CaseState::Aguardando) {
            let team = self.board.handoff.desk.team(&case.team);
            let live = case.offered_to.is_some() && case.offer_due_at.is_some_and(|d| d > now);
            // Nobody is at the desk out of hours: offers wait for it to open.
            if team.config.atribuicao == Atribuicao::Manual
                || live
                || team.calendar.next_opening(now).is_some()
            {
                continue;
            }
            match self.offer(case, &team.config, (&mut loads, &away), now).await {
                Ok(true) => offered += 1,
                Ok(false) => {}
                Err(e) => tracing::error!(case = %case.id, error = %e, "case not offered"),
            }
        }
        offered
    }

    /// Offers `case` to the next member of `team` who may have it (or takes an expired offer back when
    /// nobody may): whether someone was offered it.
    async fn offer(
        &self,
        case: &Case,
        team: &Equipe,
        (loads, away): (&mut HashMap<String, u32>, &HashSet<String>),
        now: DateTime<Utc>,
    ) -> Result<bool, vt_store::StoreError> {
        let mut skip: HashSet<String> = HashSet::new();
        if let Some(previous) = &case.offered_to {
            // Whoever let this case's offer expire is not offered it again.
            skip.insert(previous.clone());
            let log = self.cases.case_events(&case.id).await?;
            skip.extend(
                log.into_iter()
                    .filter(|e| e.what == "oferta_expirada")
                    .filter_map(|e| e.detail),
            );
        }
        let last = self.cases.team_turn(&team.nome).await?;
        let to = choose(team, loads, away, &skip, last.as_deref());
        if to.is_none() && case.offered_to.is_none() {
            return Ok(false);
        }
        let offer = CaseOffer {
            case_id: case.id.clone(),
            conversation_id: case.conversation_id.clone(),
            team: team.nome.clone(),
            previous: case.offered_to.clone(),
            to: to.clone(),
            due_at: to
                .as_ref()
                .map(|_| now + Duration::minutes(i64::from(team.aceitar_em_minutos))),
            now,
        };
        if !self.cases.offer_case(&offer).await? {
            return Ok(false);
        }
        let Some(agent) = to else {
            return Ok(false);
        };
        *loads.entry(agent.clone()).or_insert(0) += 1;
        if self.board.board_on(&case.tenant_id) {
            let text = format!(
                "Oferecido a @{agent}: aceite (assuma) em até {} min, ou passa ao próximo da equipe {}.",
                team.aceitar_em_minutos, team.nome
            );
            let item = board_item(&case.id, &case.conversation_id, BoardKind::Line, text);
            self.board.post_to_board(vec![item]).await;
        }
        Ok(true)
    }

    /// Pings the team of every open case whose SLA clock reached `aviso_pct` (and again once it is
    /// breached): once per clock and state, whichever instance gets to it. Returns how many pings.
    pub async fn warn_sla_at_risk(self) -> usize {
        let now = self.engine.now();
        let open = match self.cases.open_cases().await {
            Ok(open) => open,
            Err(e) => {
                tracing::error!(error = %e, "open cases could not be read for their SLA");
                return 0;
            }
        };
        let mut warned = 0;
        for case in &open {
            let team = self.board.handoff.desk.team(&case.team);
            let policy = &team.config.sla;
            if [
                policy.primeira_resposta,
                policy.proxima_resposta,
                policy.resolucao,
            ] == [None; 3]
            {
                continue;
            }
            let Ok(log) = self.cases.case_events(&case.id).await else {
                continue;
            };
            let clocks = super::sla::clocks(case, &log, policy, &team.calendar, now);
            let Some(clock) = clocks
                .all()
                .filter(|c| !c.stopped && c.status != super::SlaStatus::NoPrazo)
                .max_by_key(|c| c.status as u8)
            else {
                continue;
            };
            let key = format!(
                "{}:{}:{}",
                clock.kind.as_str(),
                clocks.waiting_since.map_or(0, |w| w.timestamp()),
                clock.status.as_str()
            );
            match self.cases.warn_sla(&case.id, &key).await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::error!(case = %case.id, error = %e, "SLA warning not recorded");
                    continue;
                }
            }
            warned += 1;
            self.announce_at_risk(case, team, clock).await;
        }
        warned
    }
}

impl Cases<'_> {
    /// Tells `case`'s team that `clock` is at risk: the log, and its channel on the board.
    async fn announce_at_risk(&self, case: &Case, team: &super::Team, clock: &super::sla::Clock) {
        tracing::warn!(case = %case.id, team = %team.name(), clock = clock.kind.as_str(), status = clock.status.as_str(), "SLA at risk");
        if !self.board.board_on(&case.tenant_id) {
            return;
        }
        let text = format!(
            "⚠️ Equipe {}: o prazo de {} do atendimento {} está {} ({:.0} de {} min úteis).",
            team.name(),
            clock.kind.label().to_lowercase(),
            case.protocol.as_deref().unwrap_or(&case.id),
            clock.status.label(),
            clock.elapsed,
            clock.target
        );
        let mut item = board_item(&case.id, &case.conversation_id, BoardKind::Alert, text);
        if let Some(channel) = &team.config.canal_alertas {
            item.payload["reply_to"] = serde_json::json!(channel);
        }
        self.board.post_to_board(vec![item]).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn team(atribuicao: Atribuicao, capacidade: u32) -> Equipe {
        let desk = super::super::Desk::default();
        Equipe {
            nome: "suporte".into(),
            membros: vec!["ana".into(), "bia".into(), "caio".into()],
            atribuicao,
            capacidade,
            ..desk.default_team().config.clone()
        }
    }

    fn set<const N: usize>(names: [&str; N]) -> HashSet<String> {
        names.into_iter().map(str::to_owned).collect()
    }

    #[test]
    fn round_robin_skips_the_away_and_the_full_and_whoever_let_it_expire() {
        let t = team(Atribuicao::Rodizio, 2);
        let none = HashMap::new();
        // In turn, with bia away: ana, caio, ana, …
        let away = set(["bia"]);
        let mut last = None;
        let mut order = Vec::new();
        for _ in 0..4 {
            let next = choose(&t, &none, &away, &HashSet::new(), last.as_deref()).expect("someone");
            order.push(next.clone());
            last = Some(next);
        }
        assert_eq!(order, ["ana", "caio", "ana", "caio"]);
        // Capacity reached: caio holds two, so after ana comes ana again.
        let loads = HashMap::from([("caio".to_owned(), 2)]);
        assert_eq!(
            choose(&t, &loads, &away, &HashSet::new(), Some("ana")).as_deref(),
            Some("ana")
        );
        // An offer ana let expire goes to the next one, never back to her.
        assert_eq!(
            choose(&t, &none, &away, &set(["ana"]), Some("ana")).as_deref(),
            Some("caio")
        );
        // Nobody left: no offer.
        assert_eq!(choose(&t, &none, &away, &set(["ana", "caio"]), None), None);
        assert_eq!(
            choose(&team(Atribuicao::Manual, 2), &none, &away, &HashSet::new(), None),
            None
        );
    }

    #[test]
    fn least_busy_takes_the_one_with_fewest_open_cases_ties_in_turn() {
        let t = team(Atribuicao::MenosOcupado, 5);
        let loads = HashMap::from([
            ("ana".to_owned(), 3),
            ("bia".to_owned(), 1),
            ("caio".to_owned(), 1),
        ]);
        assert_eq!(
            choose(&t, &loads, &HashSet::new(), &HashSet::new(), None).as_deref(),
            Some("bia")
        );
        assert_eq!(
            choose(&t, &loads, &HashSet::new(), &HashSet::new(), Some("bia")).as_deref(),
            Some("caio")
        );
    }
}
