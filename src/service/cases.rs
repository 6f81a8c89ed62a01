//! A transfer to a person (SPEC's `TransferToHuman`): the case a turn's transfer opens, with a case
//! file built by code (no model), and the conversation's messages while a person has it — stored as
//! every message is, kept in the case's log, never answered by the router or the model; the first one
//! while the case waits gets one short acknowledgement.

use super::Cases;
use std::time::Instant;

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use vt_domain::tools::{RecargaPendente, STATE_PENDENTE};
use vt_domain::vt::card::{mask_card, mask_cards_in};

use super::commit::Ran;
use super::{Handled, Inbound, Messages, Routing, ServiceError};
use vt_engine::llm::ChatMessage;
use vt_engine::{Conversation, Reply, TurnEvent, TurnOutcome};
use vt_store::{Case, CaseEvent, CaseState, CaseWrite, Claim, ConversationContext, NewCase};

/// The one acknowledgement of a message that waits for a person.
pub(crate) const ACK_TEXT: &str = "Sua mensagem foi encaminhada a um atendente. Assim que alguém assumir o \
                                   atendimento, a conversa continua por aqui.";

/// What the card holder reads when nobody has claimed their case in time.
pub(crate) const UNCLAIMED_TEXT: &str = "Ainda não há um atendente disponível. Sua mensagem está guardada e \
                                         alguém vai responder assim que possível; não é preciso repetir.";

/// `[handoff]`: a transfer to a person.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct HandoffConfig {
    /// Minutes a case may wait unclaimed before the card holder is told, once (default 10).
    pub claim_timeout_minutes: u32,
    /// When people answer cases (`"seg-sex 08:00-18:00"`, in the policy's time zone); a case opened
    /// outside them says at once when to expect an answer. None: always.
    #[schemars(with = "Option<String>")]
    pub hours: Option<super::Hours>,
    /// State and municipal holidays (`"2026-01-25"`) on which nobody answers, besides the national
    /// ones (computed: fixed dates, Carnival, Good Friday, Corpus Christi).
    pub feriados: Vec<chrono::NaiveDate>,
    /// Whether a support board shows cases (a channel keeps one: Mattermost's `canal_suporte`); set
    /// by the composition from the channels. No board: cases are worked from the console and commands.
    #[serde(skip)]
    pub board: bool,
    /// The tenant whose board that channel is (the Mattermost bot's, `[vt] tenant_id`): only its
    /// cases are posted there; other tenants' cases stay in their console and `vt-agent cases`.
    #[serde(skip)]
    pub board_tenant: String,
    /// `[[equipes]]`, as the configuration gives them.
    #[serde(skip)]
    #[schemars(skip)]
    pub equipes: Vec<super::Equipe>,
    /// The teams with their calendars: built by the service from `equipes`, the hours and holidays.
    #[serde(skip)]
    #[schemars(skip)]
    pub desk: super::Desk,
}

impl Default for HandoffConfig {
    fn default() -> Self {
        Self {
            claim_timeout_minutes: 10,
            hours: None,
            board: false,
            feriados: Vec::new(),
            board_tenant: vt_engine::DEFAULT_TENANT.to_owned(),
            equipes: Vec::new(),
            desk: super::Desk::default(),
        }
    }
}

/// How far back the case file quotes the conversation.
const LAST_MESSAGES: usize = 6;

/// The case file's field: until when a windowed channel's person can be answered freely.
pub(super) const WINDOW_UNTIL: &str = "janela_ate";
/// The same, as case files written before channels declared their rules name it.
pub(super) const WINDOW_UNTIL_BEFORE: &str = "janela_whatsapp_ate";

impl Messages<'_> {
    /// What a turn writes about a case: the line of a message `held` for a person, or the case it
    /// opens — the first `TransferToHuman` among its events, with its case file, its team (by
    /// `intent` among the rest), and its protocol number, said at the end of the transfer's answer
    /// with, out of the team's hours, when a person answers.
    pub(super) async fn case_write(
        &self,
        held: Option<CaseWrite>,
        conv: &Conversation,
        outcome: &mut TurnOutcome,
        (context, intent): (&ConversationContext, &str),
    ) -> Option<CaseWrite> {
        if held.is_some() {
            return held;
        }
        let (reason, motivo) = outcome.events.iter().find_map(|e| match e {
            TurnEvent::TransferToHuman(t) => Some((mask_cards_in(&t.reason), t.motivo)),
            _ => None,
        })?;
        let now = self.engine.now();
        let timeout = Duration::minutes(i64::from(self.handoff.claim_timeout_minutes));
        let team = self.handoff.desk.team_for(&super::teams::Opening {
            intent: Some(intent),
            motivo,
            channel: &conv.channel,
            tenant: &conv.tenant_id,
        });
        let protocol = match self.board.protocol(&conv.tenant_id).await {
            Ok(p) => p,
            Err(e) => {
                // The turn's commit would most likely fail too; the case opens without a number.
                tracing::error!(error = %e, "no protocol number for a new case");
                String::new()
            }
        };
        let mut case = NewCase {
            id: self.engine.next_id("caso"),
            conversation_id: conv.id.clone(),
            tenant_id: conv.tenant_id.clone(),
            channel: conv.channel.clone(),
            case_file: case_file(conv, self.speaker.channel(&conv.channel), &reason, context, now),
            reason,
            notice_due_at: Some(now + timeout),
            protocol,
            team: team.name().to_owned(),
            motivo,
        };
        // Outside the team's hours the answer says when to expect a person, and that stands for the
        // unclaimed-case notice.
        if team.calendar.next_opening(now).is_some() {
            case.notice_due_at = None;
        }
        if let Some(line) = super::teams::case_opened_line(&case.protocol, team, now) {
            say_with_last_reply(outcome, &line);
        }
        Some(CaseWrite::Open(case))
    }

    /// A message that arrived while `case` is open: kept in the case's log and committed as a turn
    /// of its own with no model and no router — silent, but for the one acknowledgement while the
    /// case waits.
    pub(super) async fn held_for_case(
        &self,
        conv: &mut Conversation,
        msg: &Inbound,
        case: Case,
        ran_at: (DateTime<Utc>, Instant, i64),
        context: Option<ConversationContext>,
    ) -> Result<Handled, ServiceError> {
        let (now, started, accepted_message) = ran_at;
        let line = case.event(now, "cliente", "mensagem_cliente", Some(msg.text.clone()));
        // Under the turn lock: no other turn of the conversation reads the flag before this commit.
        let acknowledge = case.state == CaseState::Aguardando && !case.acknowledged;
        let outcome = self.without_engine(conv, &msg.text, acknowledge.then(|| ACK_TEXT.to_owned()));
        let ran = Ran {
            outcome,
            routing: Routing::deterministic("atendimento_humano", false),
            context,
            started,
            now,
            accepted_message,
            held: Some(CaseWrite::Held {
                line,
                acknowledged: acknowledge,
            }),
            listened: super::hearing::Listened::default(),
        };
        let deliver = msg.delivery == super::Delivery::Inline;
        Ok(self.commit_traced(conv, msg, ran, deliver).await)
    }
}

/// What a support agent needs to pick the conversation up, built by code: every card masked.
fn case_file(
    conv: &Conversation,
    channel: &super::ChannelRules,
    reason: &str,
    context: &ConversationContext,
    now: DateTime<Utc>,
) -> Value {
    let cards: Vec<String> = vt_domain::tools::cartao::cards_held(&conv.state, &conv.memory)
        .iter()
        .map(|c| mask_card(c))
        .collect();
    let pending = conv
        .state
        .get(STATE_PENDENTE)
        .and_then(|v| vt_contract::json::from_ref::<RecargaPendente>(v).ok())
        .map(|p| {
            json!({
                "cartao": mask_card(&p.cartao),
                "valor": p.valor.to_string(),
                "moeda": p.moeda,
                "meio_pagamento": p.meio_pagamento,
                "expira_em": p.expira_em,
            })
        });
    let last: Vec<Value> = conv
        .window
        .iter()
        .filter_map(|m| match m {
            ChatMessage::User { content } => Some(("cliente", content.as_str())),
            ChatMessage::Assistant {
                content: Some(text), ..
            } => Some(("bot", text.as_str())),
            _ => None,
        })
        .rev()
        .take(LAST_MESSAGES)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .map(|(who, text)| json!({"de": who, "texto": mask_cards_in(text)}))
        .collect();
    let mut file = json!({
        "motivo": reason,
        "canal": conv.channel,
        "cartoes": cards,
        "recarga_pendente": pending,
        "contexto": {
            "resumo": context.summary.as_deref().map(mask_cards_in),
            "fatos": context.key_facts,
        },
        "ultimas_mensagens": last,
    });
    if let Some(window) = channel.window {
        // The transfer came with the user's message: the window is whole.
        file[WINDOW_UNTIL] = json!(now + window);
    }
    file
}

/// What became of a post in a case's thread on the support board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Relayed {
    /// The owner's words, sent to the card holder.
    ToCardHolder,
    /// Someone else's: kept in the case's log only.
    InternalNote,
}

/// A support agent acting on a case, as the surface that signed them in names them.
#[derive(Debug, Clone, Copy)]
pub struct SupportAgent<'a> {
    pub login: &'a str,
    /// What the card holder reads beside the agent's words.
    pub name: &'a str,
    /// The tenant whose cases they may see (`None`: an administrator, every tenant).
    pub tenant: Option<&'a str>,
}

/// Why a support agent's action on a case was refused.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// No such case — or another tenant's, said the same way.
    #[error("o atendimento {0} não existe")]
    NotFound(String),
    #[error("o atendimento está com {0}")]
    NotOwner(String),
    #[error("o atendimento não está em andamento")]
    NotClaimed,
    #[error("o atendimento já foi encerrado")]
    Closed,
    /// The action could not be done, and why (for the support agent).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] vt_store::StoreError),
}

/// A turn the card holder did not start (a support agent's proposal), addressed as their own turns
/// are: on the conversation's channel, sent by its worker where it has one.
pub(super) fn addressed_to_card_holder(conv: &Conversation, text: String, sends_itself: bool) -> Inbound {
    Inbound {
        agent_id: conv.agent_id.clone(),
        conversation_id: Some(conv.id.clone()),
        tenant_id: Some(conv.tenant_id.clone()),
        user: vt_engine::Participant {
            user_id: conv.user_id.clone(),
            user_login: conv.user_login.clone(),
            channel: conv.channel.clone(),
        },
        text,
        delivery: if sends_itself {
            super::Delivery::Outbox
        } else {
            super::Delivery::Inline
        },
        ..Default::default()
    }
}

/// `text` at the end of the turn's last reply (one message, as the transfer's answer); a reply of its
/// own when the turn said nothing.
fn say_with_last_reply(outcome: &mut TurnOutcome, text: &str) {
    if !outcome.append_to_last_reply(text) {
        outcome.messages.push(ChatMessage::assistant(text));
        outcome.replies.push(Reply {
            text: text.to_owned(),
            files: Vec::new(),
        });
    }
}

/// What the card holder reads when a support agent closes the conversation.
/// How a person may say a case was resolved when they close it (key, as an agent reads it): the month's
/// report counts them, the review reads them.
pub(crate) const RESOLUTIONS: [(&str, &str); 8] = [
    ("resolvido", "Resolvido"),
    ("orientado", "Cliente orientado"),
    ("recarga_feita", "Recarga feita"),
    ("cartao_bloqueado", "Cartão bloqueado ou segunda via"),
    ("encaminhado", "Encaminhado a outra área"),
    ("sem_resposta", "Cliente não respondeu"),
    ("duplicado", "Duplicado"),
    ("outro", "Outro"),
];

pub(crate) const CLOSING_TEXT: &str = "Atendimento encerrado. Obrigado pelo contato! Se precisar de algo sobre o seu vale-transporte, é só chamar.";

impl Cases<'_> {
    /// The case `id`, when `agent` may see it.
    async fn visible_case(&self, id: &str, agent: SupportAgent<'_>) -> Result<Case, CaseError> {
        match self.cases.case(id).await? {
            Some(case) if agent.tenant.is_none_or(|t| t == case.tenant_id) => Ok(case),
            _ => Err(CaseError::NotFound(id.to_owned())),
        }
    }

    /// The agent's words to the card holder, shown on the board too unless they were written there.
    async fn relay_agent_words(
        &self,
        case: &Case,
        agent: SupportAgent<'_>,
        text: &str,
        show_on_board: bool,
    ) -> Result<(), CaseError> {
        let said = case.event(
            self.engine.now(),
            agent.login,
            "mensagem_atendente",
            Some(text.to_owned()),
        );
        let message = ChatMessage::HumanAgent {
            name: agent.name.to_owned(),
            content: text.to_owned(),
        };
        let lock = self
            .conversations
            .lock_conversation(&case.conversation_id)
            .await?;
        let sent = self
            .say_to_card_holder(case, message, Some(&said), show_on_board)
            .await;
        lock.release().await;
        sent
    }

    /// A case `agent` may act on now: open, and — once claimed — theirs.
    async fn open_case_for(&self, id: &str, agent: SupportAgent<'_>) -> Result<Case, CaseError> {
        let case = self.visible_case(id, agent).await?;
        match (case.state, case.owner.as_deref()) {
            (s, _) if !s.is_open() => Err(CaseError::Closed),
            (CaseState::EmAtendimento, Some(owner)) if owner != agent.login => {
                Err(CaseError::NotOwner(owner.to_owned()))
            }
            _ => Ok(case),
        }
    }

    /// A case `agent` owns: claimed by them.
    /// The case `id` when it is `agent`'s (claimed by them and open).
    pub async fn owned_case_of(self, id: &str, agent: SupportAgent<'_>) -> Result<Case, CaseError> {
        self.owned_case(id, agent).await
    }

    pub(super) async fn owned_case(&self, id: &str, agent: SupportAgent<'_>) -> Result<Case, CaseError> {
        let case = self.open_case_for(id, agent).await?;
        if case.state != CaseState::EmAtendimento {
            return Err(CaseError::NotClaimed);
        }
        Ok(case)
    }

    /// Stores `message` in the case's conversation with its outbox item for the conversation's channel
    /// (sent by the channel's worker; the terminal and HTTP read it from the conversation) and `said`
    /// in the case's log — one transaction; with `show_on_board`, the log's line goes to the case's
    /// thread on the support board in it too.
    async fn say_to_card_holder(
        &self,
        case: &Case,
        message: ChatMessage,
        said: Option<&CaseEvent>,
        show_on_board: bool,
    ) -> Result<(), CaseError> {
        let now = self.engine.now();
        let conv = self
            .conversations
            .conversation(&case.conversation_id)
            .await?
            .ok_or_else(|| CaseError::NotFound(case.id.clone()))?;
        let text = match &message {
            ChatMessage::HumanAgent { name, content } => format!("{name}: {content}"),
            other => other.text().unwrap_or_default().to_owned(),
        };
        // An agent's words reach a person whose window closed through the template that asks them to
        // come back; the words follow when they answer.
        let template = match &message {
            ChatMessage::HumanAgent { name, .. } => Some(crate::outbox::TemplateUse {
                purpose: "retomar_atendimento".into(),
                parameters: [("atendente".to_owned(), name.clone())].into(),
            }),
            _ => None,
        };
        let item = self
            .speaker
            .late_reply(&conv, text, template, (Vec::new(), Vec::new()));
        let mut items = vec![item];
        if show_on_board && self.board.board_on(&case.tenant_id) {
            items.extend(said.and_then(super::board::thread_line).map(|text| {
                super::board::board_item(&case.id, &conv.id, super::board::BoardKind::Line, text)
            }));
        }
        self.cases
            .say_in_case(&conv.id, &message, &items, said, now)
            .await?;
        self.speaker.tell_listeners(&conv.id, &message);
        Ok(())
    }
}

/// Whether `text` answers the recharge waiting for the card holder's confirmation (yes or no): the one
/// thing the bot still answers while a person has the conversation.
fn answers_pending_recharge(conv: &Conversation, text: &str) -> bool {
    use vt_domain::vt::parse::{is_confirmation, is_refusal};
    RecargaPendente::id_in(&conv.state).is_some() && (is_confirmation(text) || is_refusal(text))
}

/// What an open case makes of a turn.
pub(super) enum InCase {
    /// No case is open: the turn runs as always.
    NoCase,
    /// A person has the conversation: the message is held for them.
    Held(Box<Case>),
    /// The card holder answers a recharge waiting for them: the turn runs, and its line is written in
    /// the case.
    Answered(Box<CaseWrite>),
}

/// What the case open for `conv` (if any) makes of `msg`.
pub(super) fn in_case(open: Option<Case>, conv: &Conversation, msg: &Inbound, now: DateTime<Utc>) -> InCase {
    let Some(case) = open else {
        return InCase::NoCase;
    };
    if !answers_pending_recharge(conv, &msg.text) {
        return InCase::Held(Box::new(case));
    }
    InCase::Answered(Box::new(CaseWrite::Held {
        line: case.event(now, "cliente", "mensagem_cliente", Some(msg.text.clone())),
        acknowledged: false,
    }))
}

impl Cases<'_> {
    /// `agent` claims a waiting case: of two at once, exactly one wins.
    pub async fn claim_case(self, id: &str, agent: SupportAgent<'_>) -> Result<Claim, CaseError> {
        self.visible_case(id, agent).await?;
        let claim = self.cases.claim_case(id, agent.login, self.engine.now()).await?;
        if let Claim::Claimed(case) = &claim {
            self.board.post_to_board(self.board.board_state(case)).await;
        }
        Ok(claim)
    }

    /// The case's owner writes to the card holder: stored in the conversation as the agent's message
    /// and sent on the conversation's own channel, after everything already on its way.
    pub async fn agent_reply(self, id: &str, agent: SupportAgent<'_>, text: &str) -> Result<(), CaseError> {
        let case = self.owned_case(id, agent).await?;
        self.relay_agent_words(&case, agent, text, true).await
    }

    /// What the owner of the case whose thread root is `post` wrote in that thread: relayed to the card
    /// holder (it is on the board already). Anyone else's post there is an internal note, kept in the
    /// case's log and never relayed. `None`: no case has that thread.
    ///
    /// The board may name its author two ways (a claim by a click without a username kept the user
    /// id): `author_id` is the other.
    pub(crate) async fn board_thread_post(
        self,
        post: &str,
        agent: SupportAgent<'_>,
        author_id: &str,
        text: &str,
    ) -> Result<Option<Relayed>, CaseError> {
        let Some(case) = self.cases.case_of_board_post(post).await? else {
            return Ok(None);
        };
        if agent.tenant.is_some_and(|t| t != case.tenant_id) {
            return Ok(None);
        }
        let owner = case
            .owner
            .as_deref()
            .filter(|o| *o == agent.login || *o == author_id);
        if let (CaseState::EmAtendimento, Some(owner)) = (case.state, owner) {
            let agent = SupportAgent {
                login: owner,
                ..agent
            };
            self.relay_agent_words(&case, agent, text, false).await?;
            return Ok(Some(Relayed::ToCardHolder));
        }
        let note = case.event(
            self.engine.now(),
            agent.login,
            "nota_interna",
            Some(text.to_owned()),
        );
        self.cases.note_case(&note, &[], self.engine.now()).await?;
        Ok(Some(Relayed::InternalNote))
    }

    /// Hands the conversation back to the bot, with an optional note: the note and a line on the human
    /// part go into the compressed context, which the model reads from the next turn on.
    pub async fn hand_back(
        self,
        id: &str,
        agent: SupportAgent<'_>,
        note: Option<&str>,
    ) -> Result<Case, CaseError> {
        let case = self.open_case_for(id, agent).await?;
        let now = self.engine.now();
        let note = note.map(str::trim).filter(|n| !n.is_empty()).map(mask_cards_in);
        let closed = self
            .cases
            .close_case(
                &case.id,
                agent.login,
                CaseState::Devolvido,
                vt_store::Closing {
                    note: note.as_deref(),
                    resolution: None,
                },
                now,
            )
            .await?
            .ok_or(CaseError::Closed)?;
        let log = self.cases.case_events(&case.id).await?;
        let count = |what: &str| log.iter().filter(|e| e.what == what).count();
        let mut context = self
            .conversations
            .context(&case.conversation_id)
            .await?
            .unwrap_or_else(|| ConversationContext::empty(&case.conversation_id, "", now));
        context.key_facts.push(format!(
            "atendimento humano ({}): {} mensagens do cliente, {} do atendente; devolvido ao bot",
            agent.name,
            count("mensagem_cliente"),
            count("mensagem_atendente"),
        ));
        if let Some(note) = note {
            context.key_facts.push(format!("nota do atendente: {note}"));
        }
        context.updated_at = now;
        self.conversations.save_context(&context).await?;
        self.board.post_to_board(self.board.board_state(&closed)).await;
        Ok(closed)
    }

    /// Tells the card holders of the waiting cases whose claim time ran out that nobody has it yet, once
    /// per case (whichever instance gets to it). Returns how many were told.
    pub async fn send_due_case_notices(self) -> usize {
        let mut sent = 0;
        loop {
            let now = self.engine.now();
            let case = match self.cases.take_due_notice(now).await {
                Ok(Some(case)) => case,
                Ok(None) => return sent,
                Err(e) => {
                    tracing::error!(error = %e, "due case notices could not be read");
                    return sent;
                }
            };
            let line = case.event(now, "sistema", "aviso_sem_atendente", None);
            let message = ChatMessage::assistant(UNCLAIMED_TEXT);
            match self.say_to_card_holder(&case, message, Some(&line), true).await {
                Ok(()) => sent += 1,
                Err(e) => tracing::error!(case = %case.id, error = %e, "unclaimed-case notice not sent"),
            }
        }
    }

    /// Closes the case and the conversation, with a polite closing message to the card holder.
    pub async fn close_case(self, id: &str, agent: SupportAgent<'_>) -> Result<Case, CaseError> {
        self.close_resolved(id, agent, None, None).await
    }

    /// [`Self::close_case`] with how it was resolved (one of [`RESOLUTIONS`]) and an optional note,
    /// which the month's report and the review read.
    pub async fn close_resolved(
        self,
        id: &str,
        agent: SupportAgent<'_>,
        resolution: Option<&str>,
        note: Option<&str>,
    ) -> Result<Case, CaseError> {
        if let Some(r) = resolution
            && !RESOLUTIONS.iter().any(|(key, _)| *key == r)
        {
            return Err(CaseError::Refused(format!("a resolução {r} não existe")));
        }
        let case = self.open_case_for(id, agent).await?;
        let now = self.engine.now();
        let note = note.map(str::trim).filter(|n| !n.is_empty()).map(mask_cards_in);
        let closed = self
            .cases
            .close_case(
                &case.id,
                agent.login,
                CaseState::Encerrado,
                vt_store::Closing {
                    note: note.as_deref(),
                    resolution,
                },
                now,
            )
            .await?
            .ok_or(CaseError::Closed)?;
        let lock = self
            .conversations
            .lock_conversation(&case.conversation_id)
            .await?;
        let ended = async {
            if let Some(mut conv) = self.conversations.conversation(&case.conversation_id).await? {
                conv.ended = true;
                self.conversations.save_conversation(&conv, now).await?;
            }
            self.say_to_card_holder(&case, ChatMessage::assistant(CLOSING_TEXT), None, false)
                .await
        }
        .await;
        lock.release().await;
        ended?;
        self.board.post_to_board(self.board.board_state(&closed)).await;
        Ok(closed)
    }

    /// An internal note on a case: in its log for the team (cards masked), never sent to the card
    /// holder.
    pub async fn note(self, id: &str, agent: SupportAgent<'_>, text: &str) -> Result<(), CaseError> {
        let case = self.visible_case(id, agent).await?;
        let text = text.trim();
        if text.is_empty() {
            return Err(CaseError::Refused("a nota está vazia".into()));
        }
        let now = self.engine.now();
        let line = case.event(now, agent.login, "nota_interna", Some(mask_cards_in(text)));
        Ok(self.cases.note_case(&line, &[], now).await?)
    }
}

impl Cases<'_> {
    /// Moves an open case to `team` (and, when given, to `to_agent`, whose case it then is) without
    /// ending it: the protocol and the log go with it, and the card holder is told once.
    pub async fn transfer_case(
        self,
        id: &str,
        agent: SupportAgent<'_>,
        team: &str,
        to_agent: Option<&str>,
        note: Option<&str>,
    ) -> Result<Case, CaseError> {
        let case = self.open_case_for(id, agent).await?;
        let Some(team) = self.board.handoff.desk.named(team) else {
            return Err(CaseError::Refused(format!("a equipe {team} não existe")));
        };
        let to_agent = to_agent.map(str::trim).filter(|a| !a.is_empty());
        let transfer = vt_store::CaseTransfer {
            case_id: case.id.clone(),
            who: agent.login.to_owned(),
            team: team.name().to_owned(),
            owner: to_agent.map(str::to_owned),
            note: note.map(str::trim).filter(|n| !n.is_empty()).map(mask_cards_in),
            now: self.engine.now(),
        };
        let moved = self
            .cases
            .transfer_case(&transfer)
            .await?
            .ok_or(CaseError::Closed)?;
        let mut text = format!("Seu atendimento foi passado para a equipe {}", team.name());
        if let Some(protocol) = &moved.protocol {
            text.push_str(&format!("; o protocolo continua o mesmo: {protocol}"));
        }
        text.push('.');
        // A team that is closed now says when a person will answer, as a case opened there does.
        if let Some(when) = super::teams::when_a_person_answers(team, self.engine.now()) {
            text.push(' ');
            text.push_str(&when);
        }
        let said = moved.event(self.engine.now(), "sistema", "aviso_transferencia", None);
        let lock = self
            .conversations
            .lock_conversation(&moved.conversation_id)
            .await?;
        let told = self
            .say_to_card_holder(&moved, ChatMessage::assistant(text), Some(&said), true)
            .await;
        lock.release().await;
        told?;
        self.board.post_to_board(self.board.board_state(&moved)).await;
        Ok(moved)
    }

    /// `login` is away (no case is offered to them) or back.
    pub async fn set_away(self, login: &str, away: bool) -> Result<(), CaseError> {
        Ok(self.cases.set_away(login, away, self.engine.now()).await?)
    }

    /// The case's SLA clocks now, under its team's policy and calendar.
    pub async fn clocks(self, id: &str) -> Result<super::Clocks, CaseError> {
        let case = self
            .cases
            .case(id)
            .await?
            .ok_or_else(|| CaseError::NotFound(id.to_owned()))?;
        let log = self.cases.case_events(id).await?;
        let team = self.board.handoff.desk.team(&case.team);
        Ok(super::sla::clocks(
            &case,
            &log,
            &team.config.sla,
            &team.calendar,
            self.engine.now(),
        ))
    }

    /// The case whose protocol number is `protocol`, when `agent` may see it.
    pub async fn case_by_protocol(self, protocol: &str, agent: SupportAgent<'_>) -> Result<Case, CaseError> {
        self.cases
            .case_by_protocol(agent.tenant, protocol)
            .await?
            .ok_or_else(|| CaseError::NotFound(protocol.to_owned()))
    }
}
