//! How conversations end (issue "Step 22"), computed by code. Each turn's usage row keeps what the
//! turn achieved ([`marks`]); a stretch of a conversation — from its previous outcome to its last
//! activity — gets one outcome once it has been quiet for `[resultados] encerrar_apos_minutos` or
//! ended ([`super::jobs::Outcomes::close_stretches`], a job of `serve`): resolved by the bot, by a person,
//! abandoned, or without an objective, and `reaberta` on an earlier one when the same person comes
//! back on the same subject within 7 days. A resolved stretch gets the satisfaction question (at most
//! once per person per `pesquisa_intervalo_dias`); a 1–5 answer is stored with its outcome, anything
//! else is a normal message.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::offers::{SCALE, STATE_PESQUISA};
use super::{Inbound, Messages};
use vt_engine::{Conversation, TurnEvent, TurnOutcome};
use vt_store::{CaseState, Desfecho, OutcomeRecord, StoreError, Stretch, StretchHead};

/// A balance read (RF3 `sucesso`).
const SALDO: &str = "saldo";
/// A recharge credited (RF8 `aprovada`).
const CREDITADA: &str = "creditada";
/// The card desk answered from the card system: a card's situation or statement read, a card blocked
/// or its second copy ordered — self-service, no person.
const BALCAO: &str = "balcao";
/// A recharge (or a block, a second copy) left waiting for the person's "sim".
const PEDIDA: &str = "pedida";
/// The turn's answer asked something it waits for (a missing parameter, a card to choose).
const PERGUNTA: &str = "pergunta";
/// The turn ended the chat.
const ENCERRADA: &str = "encerrada";

/// The turn that answers the satisfaction question (its usage row's intent).
pub(super) const SURVEY_INTENT: &str = "pesquisa_satisfacao";
/// A return within this many days on the same subject reopens a resolved stretch.
const REOPEN_DAYS: i64 = 7;
/// Stretches looked at per sweep, oldest first (the next sweep takes the rest).
const PER_SWEEP: i64 = 200;
/// How far back a sweep looks for stretches without an outcome (a server down longer loses none of
/// the last week's).
const HORIZON_DAYS: i64 = 7;

/// The question (its scale, `offers::SCALE`, a list or buttons where the channel has them).
const QUESTION: &str =
    "Como você avalia este atendimento? Responda com uma nota de 1 (muito ruim) a 5 (ótimo).";
const THANKS: &str = "Obrigado pela avaliação! Se precisar de algo, é só escrever.";

/// The quick replies a message said outside a turn offers, where a channel shows them: the
/// satisfaction question's scale (its pick, or the number alone, is the score).
pub(crate) fn late_choices(text: &str) -> Option<&'static [&'static str]> {
    (text == QUESTION).then_some(&super::offers::SCALE[..])
}

/// `[resultados]`: when a conversation's stretch is over, and the satisfaction question.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ResultadosConfig {
    /// Minutes without a message after which a stretch is over (default 30).
    pub encerrar_apos_minutos: u32,
    /// Whether resolved stretches get the satisfaction question (default true).
    pub pesquisa: bool,
    /// Days between two questions to the same person (default 30).
    pub pesquisa_intervalo_dias: u32,
    /// Seconds between two looks for stretches that are over (default 60).
    pub verificar_segundos: u32,
}

impl Default for ResultadosConfig {
    fn default() -> Self {
        Self {
            encerrar_apos_minutos: 30,
            pesquisa: true,
            pesquisa_intervalo_dias: 30,
            verificar_segundos: 60,
        }
    }
}

impl ResultadosConfig {
    /// `Some((field, why))` for a value that cannot work.
    pub(crate) fn problem(&self) -> Option<(&'static str, &'static str)> {
        if !(1..=24 * 60).contains(&self.encerrar_apos_minutos) {
            return Some((
                "resultados.encerrar_apos_minutos",
                "deve ser de 1 a 1440 (24 horas)",
            ));
        }
        if !(1..=365).contains(&self.pesquisa_intervalo_dias) {
            return Some(("resultados.pesquisa_intervalo_dias", "deve ser de 1 a 365"));
        }
        if self.verificar_segundos == 0 {
            return Some(("resultados.verificar_segundos", "deve ser pelo menos 1"));
        }
        None
    }

    /// How often `serve` looks for stretches that are over.
    pub fn every(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.verificar_segundos.into())
    }
}

/// What a turn achieved, kept on its usage row (comma-separated): the balance its flow read, the
/// recharge its flow credited, the recharge it left waiting for a "sim", a question it left waiting
/// for its answer, the chat it ended. Read off the turn's stages and the state it leaves, never off
/// its words.
pub(super) fn marks(outcome: &TurnOutcome, conv: &Conversation) -> String {
    let mut marks = Vec::new();
    let stages = outcome.inner_runs.iter().flat_map(|r| &r.outcome.stages);
    let field = |output: &Value, name: &str| output.get(name).and_then(Value::as_str).map(str::to_owned);
    let mut read = false;
    let mut credited = false;
    for stage in stages {
        match stage.skill.as_str() {
            "rf03_normalizar_saldo" => {
                read |= field(&stage.output, "status_consulta").as_deref() == Some("sucesso");
            }
            "rf08_conciliar_recarga" => {
                credited |= field(&stage.output, "status_recarga").as_deref() == Some("aprovada");
            }
            _ => {}
        }
    }
    if read {
        marks.push(SALDO);
    }
    if outcome.events.iter().any(desk_answered) {
        marks.push(BALCAO);
    }
    if credited {
        marks.push(CREDITADA);
    }
    let waiting = [
        vt_domain::tools::STATE_PENDENTE,
        vt_domain::tools::STATE_PEDIDO_CARTAO,
    ];
    if waiting
        .iter()
        .any(|k| conv.state.get(*k).is_some_and(|v| !v.is_null()))
    {
        marks.push(PEDIDA);
    }
    // A question whose answer the conversation waits for: a missing parameter, cards to choose from.
    let waits = [
        crate::router::STATE_AGUARDANDO,
        vt_domain::tools::cartao::STATE_OFERECIDOS,
    ];
    if waits.iter().any(|k| conv.state.contains_key(*k)) {
        marks.push(PERGUNTA);
    }
    if outcome.events.iter().any(|e| matches!(e, TurnEvent::EndChat(_))) {
        marks.push(ENCERRADA);
    }
    marks.join(",")
}

/// Whether `event` is the card system answering the desk (`/api/v1/cartoes/…`, a 2xx), the holder's
/// check aside (it resolves nothing by itself).
fn desk_answered(event: &TurnEvent) -> bool {
    matches!(event, TurnEvent::Exchanged(x)
        if x.path.starts_with("/api/v1/cartoes/")
            && !x.path.contains("/titular/")
            && x.status.is_some_and(|s| (200..300).contains(&s)))
}

/// A stretch's outcome, by these rules in order: a case closed or handed back is a person's; a
/// recharge credited is the bot's; a recharge (a block, a second copy) left for its "sim" or its Pix
/// code never paid is abandoned; a balance read, or the card desk's answer, is the bot's; a question of ours left unanswered is abandoned; anything
/// else had no objective.
pub(crate) fn classify(stretch: &Stretch) -> Desfecho {
    let has = |mark: &str| stretch.turns.iter().any(|t| t.marcas.iter().any(|m| m == mark));
    let last_has = |mark: &str| {
        stretch
            .turns
            .last()
            .is_some_and(|t| t.marcas.iter().any(|m| m == mark))
    };
    if stretch
        .case
        .as_ref()
        .is_some_and(|(_, s)| matches!(s, CaseState::Encerrado | CaseState::Devolvido))
    {
        return Desfecho::ResolvidaPorPessoa;
    }
    if has(CREDITADA) || stretch.pix.iter().any(|s| s == "creditada") {
        return Desfecho::ResolvidaPeloBot;
    }
    if last_has(PEDIDA) || stretch.pix.iter().any(|s| s == "ativa" || s == "expirada") {
        return Desfecho::Abandonada;
    }
    if has(SALDO) || has(BALCAO) {
        return Desfecho::ResolvidaPeloBot;
    }
    if last_has(PERGUNTA) {
        return Desfecho::Abandonada;
    }
    Desfecho::SemObjetivo
}

/// What the person came for, by intent: `saldo`, `recarga`, `pessoa`, or the intent itself.
fn subject(intent: &str) -> &str {
    match intent {
        "consultar_saldo" => "saldo",
        "preparar_recarga" | "confirmar_recarga" | "cancelar_recarga" | "novo_codigo_pix" => "recarga",
        "transferir_para_humano" => "pessoa",
        "consultar_situacao"
        | "extrato"
        | "bloquear_cartao"
        | "pedir_segunda_via"
        | "confirmar_pedido_cartao" => "cartao",
        other => other,
    }
}

/// Subjects a return reopens (a greeting or a help request is no subject).
const SUBJECTS: [&str; 4] = ["saldo", "recarga", "pessoa", "cartao"];

/// The stretch's main intent: the first with a subject, else the first that is not small talk.
fn main_intent(stretch: &Stretch) -> String {
    let intents = || stretch.turns.iter().map(|t| t.intent_key.as_str());
    intents()
        .find(|i| SUBJECTS.contains(&subject(i)))
        .or_else(|| intents().find(|i| !matches!(*i, "ajuda" | "general_chat" | SURVEY_INTENT)))
        .or_else(|| intents().next())
        .unwrap_or("nenhuma")
        .to_owned()
}

/// The stretch's cost: its turns and paid messages, `None` when any had no price.
fn cost(stretch: &Stretch) -> Option<i64> {
    let turns = stretch.turns.iter().map(|t| t.custo_micro_brl);
    turns.chain(stretch.paid_messages.iter().copied()).sum()
}

/// The question a conversation was asked, when it waits for its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Asked {
    desfecho: String,
}

/// A 1–5 score, as a person writes it alone: "4", "nota 4", "5!", "⭐ 5".
fn score(text: &str) -> Option<i32> {
    let t = text.trim().to_lowercase();
    let t = t.strip_prefix("nota").unwrap_or(&t);
    let digits: String = t.chars().filter(char::is_ascii_digit).collect();
    let rest_is_noise = t
        .chars()
        .all(|c| c.is_ascii_digit() || c.is_whitespace() || matches!(c, '!' | '.' | ':' | '⭐' | '/'));
    match (digits.as_str(), rest_is_noise) {
        (d, true) if d.len() == 1 => d.parse().ok().filter(|n| (1..=5).contains(n)),
        // "5/5"
        (d, true) if d.len() == 2 && d.ends_with('5') && t.contains('/') => d[..1].parse().ok(),
        _ => None,
    }
}

/// The answer to the satisfaction question, when `msg` is one: the outcome it rates and the score.
/// The question is dropped either way: a reply that is not a score is a normal message.
pub(super) fn answer_to_survey(conv: &mut Conversation, msg: &Inbound) -> Option<(String, i32)> {
    let asked: Asked = vt_contract::json::from_value(conv.state.remove(STATE_PESQUISA)?).ok()?;
    Some((asked.desfecho, score(&msg.text)?))
}

impl Messages<'_> {
    /// Records the score of the answered question; the thanks.
    pub(super) async fn take_score(&self, (outcome, nota): (String, i32)) -> String {
        if let Err(e) = self
            .outcomes
            .record_score(&outcome, nota, self.engine.now())
            .await
        {
            tracing::error!(error = %e, outcome = %outcome, "a satisfaction score could not be stored");
        }
        THANKS.to_owned()
    }
}

impl super::jobs::Outcomes<'_> {
    /// Gives every stretch that is over its outcome (and, resolved, the satisfaction question); how
    /// many got one. Two instances may sweep at once: a stretch's outcome is written once.
    pub async fn close_stretches(self) -> usize {
        let now = self.engine.now();
        let quiet = Duration::minutes(i64::from(self.resultados.encerrar_apos_minutos));
        let heads = match self
            .outcomes
            .stretches_over(
                (now - Duration::days(HORIZON_DAYS), now - quiet),
                crate::flow::FLOW_AGENT,
                PER_SWEEP,
            )
            .await
        {
            Ok(heads) => heads,
            Err(e) => {
                tracing::warn!(error = %e, "stretches without an outcome could not be read");
                return 0;
            }
        };
        let mut closed = 0;
        for head in heads {
            match self.close(&head, now).await {
                Ok(true) => closed += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, conversation = %head.conversation_id, "a stretch's outcome could not be written");
                }
            }
        }
        closed
    }

    async fn close(self, head: &StretchHead, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let stretch = self.outcomes.stretch(head).await?;
        // Only the answer to the last question (or nothing we keep): it belongs to the stretch it rates.
        let rated_only =
            stretch.case.is_none() && stretch.turns.iter().all(|t| t.intent_key == SURVEY_INTENT);
        if rated_only && self.outcomes.extend_outcome(head).await? {
            return Ok(false);
        }
        let desfecho = classify(&stretch);
        let intencao = main_intent(&stretch);
        let assunto = subject(&intencao).to_owned();
        let reabre = match SUBJECTS.contains(&assunto.as_str()) {
            true => {
                // Counted back from the return: the stretch's first turn.
                let back = stretch.turns.first().map_or(head.ate, |t| t.at);
                let since = back - Duration::days(REOPEN_DAYS);
                self.outcomes.resolved_before(head, &assunto, since).await?
            }
            false => None,
        };
        let record = OutcomeRecord {
            id: self.engine.next_id("desfecho"),
            conversation_id: head.conversation_id.clone(),
            tenant_id: head.tenant_id.clone(),
            channel: head.channel.clone(),
            desde: head.desde,
            ate: head.ate,
            desfecho,
            intencao,
            assunto,
            caso_id: stretch.case.as_ref().map(|(id, _)| id.clone()),
            custo_micro_brl: cost(&stretch),
            reaberta: false,
            reabre,
            pesquisa_em: None,
            nota: None,
            created_at: now,
        };
        if !self.outcomes.record_outcome(&record).await? {
            return Ok(false);
        }
        tracing::info!(conversation = %record.conversation_id, desfecho = desfecho.as_str(), "stretch closed");
        if desfecho.resolved() && self.survey_due(head, now).await? {
            self.ask(head, &record.id, now).await?;
        }
        Ok(true)
    }

    /// Whether `head`'s person may be asked now: the question is on, they were not asked within the
    /// interval, and on WhatsApp their 24-hour window is open or they opted in (a template then).
    async fn survey_due(self, head: &StretchHead, now: DateTime<Utc>) -> Result<bool, StoreError> {
        if !self.resultados.pesquisa {
            return Ok(false);
        }
        let interval = Duration::days(i64::from(self.resultados.pesquisa_intervalo_dias));
        if self
            .outcomes
            .last_survey(head)
            .await?
            .is_some_and(|t| now - t < interval)
        {
            return Ok(false);
        }
        let Some(window) = self.speaker.channel(&head.channel).window else {
            return Ok(true);
        };
        if self
            .contacts
            .last_inbound(&head.user_id)
            .await?
            .is_some_and(|t| now - t < window)
        {
            return Ok(true);
        }
        Ok(self
            .contacts
            .consent(&head.user_id)
            .await?
            .is_some_and(|c| c.opted_in))
    }

    /// Puts the question to `head`'s person, under the conversation's lock: kept in its history and
    /// state, sent through the outbox with the scale as a list (the `pesquisa_satisfacao` template
    /// outside WhatsApp's window) — unless they wrote since the stretch ended.
    async fn ask(self, head: &StretchHead, outcome: &str, now: DateTime<Utc>) -> Result<(), StoreError> {
        let lock = self
            .conversations
            .lock_conversation(&head.conversation_id)
            .await?;
        let asked = async {
            let Some(mut conv) = self.conversations.conversation(&head.conversation_id).await? else {
                return Ok(false);
            };
            let asked = Asked {
                desfecho: outcome.to_owned(),
            };
            conv.state.insert(
                STATE_PESQUISA.into(),
                vt_contract::json::to_value(&asked).unwrap_or(Value::Null),
            );
            let template = crate::outbox::TemplateUse {
                purpose: SURVEY_INTENT.into(),
                parameters: std::collections::BTreeMap::new(),
            };
            let choices = SCALE.iter().map(|s| (*s).to_owned()).collect();
            let item = self
                .speaker
                .late_reply(&conv, QUESTION.into(), Some(template), (Vec::new(), choices));
            let message = vt_engine::llm::ChatMessage::assistant(QUESTION);
            let asked = self
                .outcomes
                .ask_survey((head, outcome), &conv.state, (&message, &[item]), now)
                .await?;
            if asked {
                self.speaker.tell_listeners(&conv.id, &message);
            }
            Ok::<_, StoreError>(asked)
        }
        .await;
        lock.release().await;
        asked.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vt_store::StretchTurn;

    fn turn(intent: &str, marcas: &[&str]) -> StretchTurn {
        StretchTurn {
            intent_key: intent.into(),
            marcas: marcas.iter().map(|m| (*m).to_owned()).collect(),
            custo_micro_brl: Some(10),
            at: DateTime::UNIX_EPOCH,
        }
    }

    fn stretch(turns: Vec<StretchTurn>) -> Stretch {
        Stretch {
            turns,
            ..Stretch::default()
        }
    }

    #[test]
    fn outcomes_follow_the_rules_in_order() {
        let read = stretch(vec![turn("consultar_saldo", &[SALDO])]);
        assert_eq!(classify(&read), Desfecho::ResolvidaPeloBot);
        let credited = stretch(vec![
            turn("preparar_recarga", &[PEDIDA, PERGUNTA]),
            turn("confirmar_recarga", &[CREDITADA]),
        ]);
        assert_eq!(classify(&credited), Desfecho::ResolvidaPeloBot);
        let left = stretch(vec![
            turn("consultar_saldo", &[SALDO]),
            turn("preparar_recarga", &[PEDIDA, PERGUNTA]),
        ]);
        assert_eq!(
            classify(&left),
            Desfecho::Abandonada,
            "a recharge never confirmed"
        );
        let unanswered = stretch(vec![turn("consultar_saldo", &[PERGUNTA])]);
        assert_eq!(
            classify(&unanswered),
            Desfecho::Abandonada,
            "our question left unanswered"
        );
        let desk = stretch(vec![
            turn("bloquear_cartao", &[BALCAO, PEDIDA]),
            turn("confirmar_pedido_cartao", &[BALCAO]),
        ]);
        assert_eq!(
            classify(&desk),
            Desfecho::ResolvidaPeloBot,
            "a card blocked by itself"
        );
        let unconfirmed = stretch(vec![turn("bloquear_cartao", &[BALCAO, PEDIDA])]);
        assert_eq!(
            classify(&unconfirmed),
            Desfecho::Abandonada,
            "a block never confirmed"
        );
        let chat = stretch(vec![turn("general_chat", &[])]);
        assert_eq!(classify(&chat), Desfecho::SemObjetivo);
        let mut unpaid = stretch(vec![turn("confirmar_recarga", &[])]);
        unpaid.pix = vec!["ativa".into()];
        assert_eq!(classify(&unpaid), Desfecho::Abandonada, "a Pix code never paid");
        unpaid.pix = vec!["creditada".into()];
        assert_eq!(classify(&unpaid), Desfecho::ResolvidaPeloBot);
        let mut person = stretch(vec![turn("transferir_para_humano", &[])]);
        person.case = Some(("caso-1".into(), CaseState::Encerrado));
        assert_eq!(classify(&person), Desfecho::ResolvidaPorPessoa);
        person.case = Some(("caso-1".into(), CaseState::Devolvido));
        assert_eq!(classify(&person), Desfecho::ResolvidaPorPessoa);
    }

    #[test]
    fn the_main_intent_is_the_first_with_a_subject() {
        let s = stretch(vec![
            turn("ajuda", &[]),
            turn("general_chat", &[]),
            turn("preparar_recarga", &[]),
            turn("consultar_saldo", &[]),
        ]);
        assert_eq!(main_intent(&s), "preparar_recarga");
        assert_eq!(subject(&main_intent(&s)), "recarga");
        assert_eq!(main_intent(&stretch(vec![turn("ajuda", &[])])), "ajuda");
        assert_eq!(main_intent(&stretch(Vec::new())), "nenhuma");
    }

    #[test]
    fn a_missing_price_makes_the_stretch_cost_unknown() {
        let mut s = stretch(vec![turn("ajuda", &[]), turn("ajuda", &[])]);
        s.paid_messages = vec![Some(5)];
        assert_eq!(cost(&s), Some(25));
        s.paid_messages.push(None);
        assert_eq!(cost(&s), None);
    }

    #[test]
    fn scores_are_a_lone_number_from_one_to_five() {
        for (text, want) in [
            ("5", Some(5)),
            (" 4 ", Some(4)),
            ("nota 3", Some(3)),
            ("Nota: 2", Some(2)),
            ("1!", Some(1)),
            ("5/5", Some(5)),
            ("⭐ 4", Some(4)),
            ("0", None),
            ("6", None),
            ("10", None),
            ("recarga de 5", None),
            ("qual o saldo?", None),
            ("45", None),
            ("", None),
        ] {
            assert_eq!(score(text), want, "{text:?}");
        }
    }

    #[test]
    fn config_problems_name_their_field() {
        let mut c = ResultadosConfig::default();
        assert_eq!(c.problem(), None);
        c.encerrar_apos_minutos = 0;
        assert_eq!(c.problem().map(|p| p.0), Some("resultados.encerrar_apos_minutos"));
        c = ResultadosConfig {
            pesquisa_intervalo_dias: 0,
            ..ResultadosConfig::default()
        };
        assert_eq!(
            c.problem().map(|p| p.0),
            Some("resultados.pesquisa_intervalo_dias")
        );
    }
}
