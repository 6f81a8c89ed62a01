//! `[[equipes]]`: the support desk as teams. A case goes to the first team whose filters all match
//! what opened it (intent, handoff reason, channel, tenant; an empty filter matches anything), else
//! to the default team. Each team has its members, how cases reach them (`atribuicao`), its hours and
//! holidays ([`Calendar`]) and its SLA policy ([`SlaPolicy`]). With no `[[equipes]]`, one team,
//! `atendimento`, answers with `[handoff]`'s hours and every case is claimed by hand.

use chrono::NaiveDate;
use vt_contract::HandoffReason;
use vt_domain::vt::timezone::Timezone;

use super::{Calendar, Hours};

/// The team every case goes to when no `[[equipes]]` is configured.
pub(crate) const DEFAULT_TEAM: &str = "atendimento";

/// How a case's protocol number is said to the card holder.
pub(crate) fn protocol_line(protocol: &str) -> String {
    format!("Protocolo do seu atendimento: {protocol}.")
}

/// What the card holder is told when a case opens, after whatever explains it — however it opened (a
/// request in the chat, a payment not credited, a late recharge): its protocol number, and, while
/// `team` is closed, when a person will answer. `None` for nothing to say.
pub(crate) fn case_opened_line(
    protocol: &str,
    team: &Team,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<String> {
    let mut said = Vec::new();
    if !protocol.is_empty() {
        said.push(protocol_line(protocol));
    }
    said.extend(when_a_person_answers(team, now));
    (!said.is_empty()).then(|| said.join(" "))
}

/// While `team` is closed, when a person will answer ("amanhã às 08:00"); `None` while it is open.
pub(crate) fn when_a_person_answers(team: &Team, now: chrono::DateTime<chrono::Utc>) -> Option<String> {
    let opening = team.calendar.next_opening(now)?;
    Some(format!(
        "Nosso atendimento humano está fora do horário agora; uma pessoa responde {}.",
        team.calendar.when_said(now, opening)
    ))
}

/// How a team's cases reach its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Atribuicao {
    /// Someone claims it (the console, the board, `/vt assumir`).
    #[default]
    Manual,
    /// Offered in turn to the members who are available and below capacity.
    Rodizio,
    /// Offered to the available member with the fewest open cases.
    MenosOcupado,
}

/// Which waiting case comes first in the team's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Ordem {
    /// The one opened first.
    #[default]
    MaisAntigo,
    /// The one whose card holder has waited longest for a person's answer.
    MaiorEspera,
}

/// What a team promises, in minutes of its business time. Only a person's message is a response; a
/// clock pauses while the case waits for the card holder.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SlaPolicy {
    /// From the case's opening to a person's first message. None: no promise.
    pub primeira_resposta: Option<u32>,
    /// From a card holder's message to a person's next one.
    pub proxima_resposta: Option<u32>,
    /// From the case's opening to its end, less the time it waited for the card holder.
    pub resolucao: Option<u32>,
    /// The share of a clock (percent) at which it is `vencendo` and the team is told (default 80).
    pub aviso_pct: u8,
}

impl Default for SlaPolicy {
    fn default() -> Self {
        Self {
            primeira_resposta: None,
            proxima_resposta: None,
            resolucao: None,
            aviso_pct: 80,
        }
    }
}

/// One `[[equipes]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Equipe {
    /// The team's name, as cases, reports and `/metrics` show it.
    pub nome: String,
    /// The team a case goes to when no team's filters match it (default: the first team).
    #[serde(default)]
    pub padrao: bool,
    /// The intents whose transfers come here (the router's keys: `consultar_saldo`, `recarga`, …).
    #[serde(default)]
    pub intents: Vec<String>,
    /// The handoff reasons that come here (`pagamento_nao_creditado`, `cartao_perdido_ou_bloqueado`, …).
    #[serde(default)]
    pub motivos: Vec<HandoffReason>,
    /// The channels whose cases come here (`whatsapp`, `webchat`, `mattermost`, `http`, …).
    #[serde(default)]
    pub canais: Vec<String>,
    /// The tenants whose cases come here.
    #[serde(default)]
    pub tenants: Vec<String>,
    /// The support agents: Mattermost usernames and console users, as each signs in.
    #[serde(default)]
    pub membros: Vec<String>,
    /// `manual`, `rodizio` (round robin) or `menos_ocupado` (fewest open cases).
    #[serde(default)]
    pub atribuicao: Atribuicao,
    /// Open cases an agent holds at most before the next one is offered to someone else (default 5).
    #[serde(default = "default_capacity")]
    pub capacidade: u32,
    /// Minutes an agent has to accept an offered case before it moves to the next (default 5).
    #[serde(default = "default_accept_minutes")]
    pub aceitar_em_minutos: u32,
    /// `mais_antigo` (default) or `maior_espera`: the queue's order.
    #[serde(default)]
    pub ordem: Ordem,
    /// When the team answers (`"seg-sex 08:00-12:00,13:00-18:00; sab 08:00-12:00"`), in the policy's
    /// time zone; national holidays are closed. None: `[handoff] hours`.
    #[schemars(with = "Option<String>")]
    pub horario: Option<Hours>,
    /// State and municipal holidays (`"2026-01-25"`), besides the national ones.
    #[serde(default)]
    pub feriados: Vec<NaiveDate>,
    /// Where on the support board the team is told when a clock is at risk (Mattermost: a channel the
    /// bot is a member of). None: the board's own channel. Was `canal_mattermost`.
    #[serde(alias = "canal_mattermost")]
    pub canal_alertas: Option<String>,
    /// `[equipes.sla]`: the team's promise.
    #[serde(default)]
    pub sla: SlaPolicy,
}

fn default_capacity() -> u32 {
    5
}

fn default_accept_minutes() -> u32 {
    5
}

impl Equipe {
    fn implicit() -> Self {
        Self {
            nome: DEFAULT_TEAM.into(),
            padrao: true,
            intents: Vec::new(),
            motivos: Vec::new(),
            canais: Vec::new(),
            tenants: Vec::new(),
            membros: Vec::new(),
            atribuicao: Atribuicao::Manual,
            capacidade: default_capacity(),
            aceitar_em_minutos: default_accept_minutes(),
            ordem: Ordem::MaisAntigo,
            horario: None,
            feriados: Vec::new(),
            canal_alertas: None,
            sla: SlaPolicy::default(),
        }
    }

    /// Whether a case opened by `opening` matches every filter this team sets.
    fn takes(&self, opening: &Opening<'_>) -> bool {
        let fits = |list: &[String], value: Option<&str>| {
            list.is_empty() || value.is_some_and(|v| list.iter().any(|x| x == v))
        };
        fits(&self.intents, opening.intent)
            && (self.motivos.is_empty() || self.motivos.contains(&opening.motivo))
            && fits(&self.canais, Some(opening.channel))
            && fits(&self.tenants, Some(opening.tenant))
    }

    /// Whether `login` is one of its members.
    pub fn has_member(&self, login: &str) -> bool {
        self.membros.iter().any(|m| m == login)
    }
}

/// What opened a case, as teams filter it.
#[derive(Debug, Clone, Copy)]
pub struct Opening<'a> {
    pub intent: Option<&'a str>,
    pub motivo: HandoffReason,
    pub channel: &'a str,
    pub tenant: &'a str,
}

/// A team with its calendar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Team {
    pub config: Equipe,
    pub calendar: Calendar,
}

impl Team {
    pub fn name(&self) -> &str {
        &self.config.nome
    }
}

/// The desk: every team, the default one first among equals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desk {
    teams: Vec<Team>,
    default: usize,
}

impl Default for Desk {
    fn default() -> Self {
        Self::new(&[], None, &[], Timezone::sao_paulo())
    }
}

impl Desk {
    /// The teams of `equipes` (or the one implicit team), each team without hours of its own answering
    /// `handoff_hours` and every team closed on `handoff_holidays`, in `tz`.
    pub fn new(
        equipes: &[Equipe],
        handoff_hours: Option<&Hours>,
        handoff_holidays: &[NaiveDate],
        tz: Timezone,
    ) -> Self {
        let configured = if equipes.is_empty() {
            vec![Equipe::implicit()]
        } else {
            equipes.to_vec()
        };
        let teams: Vec<Team> = configured
            .into_iter()
            .map(|config| {
                let hours = config.horario.clone().or_else(|| handoff_hours.cloned());
                let holidays = config.feriados.iter().chain(handoff_holidays).copied();
                let calendar = Calendar::new(hours, holidays, tz.clone());
                Team { config, calendar }
            })
            .collect();
        let default = teams.iter().position(|t| t.config.padrao).unwrap_or(0);
        Self { teams, default }
    }

    /// The teams' names, in the configuration's order.
    pub fn team_names(&self) -> Vec<String> {
        self.teams().iter().map(|t| t.name().to_owned()).collect()
    }

    pub fn teams(&self) -> &[Team] {
        &self.teams
    }

    pub fn default_team(&self) -> &Team {
        &self.teams[self.default]
    }

    /// The team a case opened by `opening` goes to.
    pub fn team_for(&self, opening: &Opening<'_>) -> &Team {
        self.teams
            .iter()
            .find(|t| !t.config.padrao && t.config.takes(opening))
            .unwrap_or_else(|| self.default_team())
    }

    /// The team named `name` — the default one for a name no longer configured (a case opened before a
    /// change of teams).
    pub fn team(&self, name: &str) -> &Team {
        self.named(name).unwrap_or_else(|| self.default_team())
    }

    /// The team named `name`, if configured.
    pub fn named(&self, name: &str) -> Option<&Team> {
        self.teams.iter().find(|t| t.config.nome == name)
    }
}

/// The first problem of `[[equipes]]`, naming its field.
pub(crate) fn teams_problem(equipes: &[Equipe]) -> Option<(String, &'static str)> {
    if equipes.iter().filter(|t| t.padrao).count() > 1 {
        return Some(("equipes.padrao".into(), "só uma equipe pode ser a padrão"));
    }
    for (i, t) in equipes.iter().enumerate() {
        let field = |name: &str| format!("equipes[{i}].{name}");
        let problem = if t.nome.trim().is_empty() {
            Some(("nome", "não pode ser vazio"))
        } else if equipes[..i].iter().any(|o| o.nome == t.nome) {
            Some(("nome", "já é o nome de outra equipe"))
        } else if t.capacidade == 0 {
            Some(("capacidade", "deve ser pelo menos 1"))
        } else if t.aceitar_em_minutos == 0 {
            Some(("aceitar_em_minutos", "deve ser pelo menos 1"))
        } else if t.atribuicao != Atribuicao::Manual && t.membros.is_empty() {
            Some((
                "membros",
                "uma equipe com atribuição automática precisa de membros",
            ))
        } else if t.membros.iter().any(|m| m.trim().is_empty()) {
            Some(("membros", "um membro não pode ser vazio"))
        } else if !(1..=99).contains(&t.sla.aviso_pct) {
            Some(("sla.aviso_pct", "deve estar entre 1 e 99"))
        } else if [t.sla.primeira_resposta, t.sla.proxima_resposta, t.sla.resolucao].contains(&Some(0)) {
            Some(("sla", "um prazo deve ser de pelo menos 1 minuto"))
        } else {
            None
        };
        if let Some((name, message)) = problem {
            return Some((field(name), message));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn team(nome: &str) -> Equipe {
        Equipe {
            nome: nome.into(),
            padrao: false,
            ..Equipe::implicit()
        }
    }

    #[test]
    fn a_case_goes_to_the_first_team_whose_filters_all_match_else_the_default() {
        let financeiro = Equipe {
            motivos: vec![HandoffReason::PagamentoNaoCreditado],
            ..team("financeiro")
        };
        let cartoes = Equipe {
            motivos: vec![HandoffReason::CartaoPerdidoOuBloqueado],
            canais: vec!["canal-a".into()],
            ..team("cartoes")
        };
        let geral = Equipe {
            padrao: true,
            ..team("geral")
        };
        let desk = Desk::new(&[financeiro, cartoes, geral], None, &[], Timezone::sao_paulo());
        let opening = |motivo, channel| Opening {
            intent: None,
            motivo,
            channel,
            tenant: "default",
        };
        let to = |o| desk.team_for(&o).name().to_owned();
        assert_eq!(
            to(opening(HandoffReason::PagamentoNaoCreditado, "canal-b")),
            "financeiro"
        );
        assert_eq!(
            to(opening(HandoffReason::CartaoPerdidoOuBloqueado, "canal-a")),
            "cartoes"
        );
        assert_eq!(
            to(opening(HandoffReason::CartaoPerdidoOuBloqueado, "canal-b")),
            "geral"
        );
        assert_eq!(to(opening(HandoffReason::PedidoDoCliente, "canal-a")), "geral");
        assert_eq!(desk.team("apagada").name(), "geral");
        assert_eq!(Desk::default().default_team().name(), DEFAULT_TEAM);
    }

    #[test]
    fn teams_are_checked_naming_the_field() {
        let auto = Equipe {
            atribuicao: Atribuicao::Rodizio,
            ..team("a")
        };
        assert_eq!(
            teams_problem(&[auto]).map(|p| p.0),
            Some("equipes[0].membros".into())
        );
        assert_eq!(
            teams_problem(&[team("a"), team("a")]).map(|p| p.0),
            Some("equipes[1].nome".into())
        );
        let warn = Equipe {
            sla: SlaPolicy {
                aviso_pct: 100,
                ..SlaPolicy::default()
            },
            ..team("a")
        };
        assert_eq!(
            teams_problem(&[warn]).map(|p| p.0),
            Some("equipes[0].sla.aviso_pct".into())
        );
        assert_eq!(teams_problem(&[team("a"), team("b")]), None);
    }
}
