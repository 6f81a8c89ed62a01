//! The support board: where support agents watch cases, one thread per case — a channel's (Mattermost's
//! `canal_suporte`), which the service never names. The service writes what the board shows
//! as outbox items to [`BOARD`], in the same transaction as what they show; the board's sender renders
//! a case's root post from the case *as it is when sent*, so a late or lost update is healed by the
//! next one.
//!
//! Board items are ordered by their case (`caso:ID`), not by the card holder's conversation: a board
//! that is down never holds up the replies to the card holder.

use super::Cases;
use chrono::{DateTime, Utc};
use vt_domain::vt::card::mask_cards_in;

use super::jobs::Board;
use crate::outbox::ReplyPayload;
use vt_engine::TurnOutcome;
use vt_store::{Case, CaseEvent, CaseState, CaseWrite, NewOutboxItem, OutboxStatus};

/// The outbox destination of the support board.
pub const BOARD: &str = "suporte";

/// What a board item asks of the board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BoardKind {
    /// Post the case's root (its case file and buttons).
    Opened,
    /// Post a line in the case's thread.
    Line,
    /// Bring the root post up to the case's state.
    State,
    /// Warn the case's team (an SLA clock at risk), in the team's channel.
    Alert,
}

impl BoardKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Opened => "caso_aberto",
            Self::Line => "caso_linha",
            Self::State => "caso_estado",
            Self::Alert => "caso_alerta",
        }
    }

    pub(crate) fn parse(kind: &str) -> Option<Self> {
        [Self::Opened, Self::Line, Self::State, Self::Alert]
            .into_iter()
            .find(|k| k.as_str() == kind)
    }
}

/// Attempts for a board item: as many as a reply gets.
const BOARD_ATTEMPTS: i32 = super::commit::REPLY_ATTEMPTS;

/// A board item for case `case_id` (of conversation `conversation_id`). The payload names the case
/// where a reply names its user.
pub(crate) fn board_item(
    case_id: &str,
    conversation_id: &str,
    kind: BoardKind,
    text: String,
) -> NewOutboxItem {
    NewOutboxItem {
        kind: kind.as_str().into(),
        destination: BOARD.into(),
        payload: ReplyPayload {
            conversation_id: conversation_id.to_owned(),
            user_id: case_id.to_owned(),
            text,
            files: Vec::new(),
            reply_to: None,
            thread: None,
            confirmation: None,
            choices: Vec::new(),
            trace: None,
            template: None,
            fluxo: None,
        }
        .to_value(),
        max_attempts: BOARD_ATTEMPTS,
        next_attempt_at: Utc::now(),
        conversation_id: Some(format!("caso:{case_id}")),
        status: OutboxStatus::Pending,
    }
}

/// How a line of the case's log reads in its thread (masked); `None`: not shown there.
pub(crate) fn thread_line(line: &CaseEvent) -> Option<String> {
    let detail = mask_cards_in(line.detail.as_deref().unwrap_or_default());
    Some(match line.what.as_str() {
        "mensagem_cliente" => format!("**Cliente:** {detail}"),
        "mensagem_atendente" => format!("**@{}:** {detail}", line.who),
        "proposta_recarga" => format!("**@{} propôs:** {detail}", line.who),
        "aviso_sem_atendente" => "_O cliente foi avisado de que ainda não há atendente._".into(),
        _ => return None,
    })
}

impl Board<'_> {
    /// Whether `tenant`'s cases are shown on a support board: there is one, and it is that tenant's.
    pub(crate) fn board_on(&self, tenant: &str) -> bool {
        self.handoff.board && self.handoff.board_tenant == tenant
    }

    /// What a turn's case write shows on the board: a new case's root post, or the held message's
    /// line and what the bot answered in the case.
    pub(super) fn board_items(
        &self,
        tenant: &str,
        write: Option<&CaseWrite>,
        outcome: &TurnOutcome,
    ) -> Vec<NewOutboxItem> {
        if !self.board_on(tenant) {
            return Vec::new();
        }
        match write {
            Some(CaseWrite::Open(case)) => vec![board_item(
                &case.id,
                &case.conversation_id,
                BoardKind::Opened,
                String::new(),
            )],
            Some(CaseWrite::Held { line, .. }) => thread_line(line)
                .into_iter()
                .chain(
                    outcome
                        .replies
                        .iter()
                        .map(|r| format!("**Bot:** {}", mask_cards_in(&r.text))),
                )
                .map(|text| board_item(&line.case_id, &line.conversation_id, BoardKind::Line, text))
                .collect(),
            None => Vec::new(),
        }
    }

    /// The board item that brings `case`'s root post up to date, when there is a board.
    pub(super) fn board_state(&self, case: &Case) -> Vec<NewOutboxItem> {
        if !self.board_on(&case.tenant_id) {
            return Vec::new();
        }
        vec![board_item(
            &case.id,
            &case.conversation_id,
            BoardKind::State,
            String::new(),
        )]
    }

    /// Opens `case` (or finds the one already open on its conversation) outside any turn — a late
    /// recharge, a paid Pix not credited, a refund not made — and posts it to the support board where
    /// it is on. A conversation holds one open case: a new reason for the one already open is a line
    /// in its thread, so the person who has it hears of it.
    pub(super) async fn open_case_now(
        &self,
        case: &vt_store::NewCase,
        now: DateTime<Utc>,
    ) -> Result<Case, vt_store::StoreError> {
        let (opened, post) = match self.cases.open_case(case, now).await? {
            vt_store::CaseOpened::Opened(c) => (c, (BoardKind::Opened, String::new())),
            vt_store::CaseOpened::AlreadyOpen(c) if c.reason != case.reason => {
                (c, (BoardKind::Line, format!("Novo motivo: {}", case.reason)))
            }
            // The same reason again (a retry, another instance): the root post is already there.
            vt_store::CaseOpened::AlreadyOpen(c) => (c, (BoardKind::Opened, String::new())),
        };
        if self.board_on(&opened.tenant_id) {
            let (kind, text) = post;
            let item = board_item(&opened.id, &opened.conversation_id, kind, text);
            self.post_to_board(vec![item]).await;
        }
        Ok(opened)
    }

    /// The team named `name` (the default one for a name no longer configured).
    pub(super) fn team(&self, name: &str) -> &super::teams::Team {
        self.handoff.desk.team(name)
    }

    /// A new protocol number of `tenant`, of today in the policy's time zone.
    pub(super) async fn protocol(&self, tenant: &str) -> Result<String, vt_store::StoreError> {
        let tz = super::policy_timezone(self.engine);
        let day = tz.local(self.engine.now()).date_naive();
        self.cases.next_protocol(tenant, day).await
    }

    /// A case opened outside a turn (a late recharge, a payment not credited) for `motivo`: its team by
    /// what opened it, its protocol number (none when it could not be taken: the case still opens).
    pub(super) async fn new_case(
        &self,
        (conversation_id, tenant, channel): (&str, &str, &str),
        motivo: vt_contract::HandoffReason,
        reason: String,
        case_file: serde_json::Value,
    ) -> vt_store::NewCase {
        let opening = super::teams::Opening {
            intent: None,
            motivo,
            channel,
            tenant,
        };
        let team = self.handoff.desk.team_for(&opening).name().to_owned();
        let protocol = self.protocol(tenant).await.unwrap_or_else(|e| {
            tracing::error!(error = %e, "no protocol number for a new case");
            String::new()
        });
        vt_store::NewCase {
            id: self.engine.next_id("caso"),
            conversation_id: conversation_id.to_owned(),
            tenant_id: tenant.to_owned(),
            channel: channel.to_owned(),
            reason,
            case_file,
            notice_due_at: self.claim_notice_due(self.engine.now()),
            protocol,
            team,
            motivo,
        }
    }

    /// When a case opened at `now` is announced as unclaimed (`[handoff] claim_timeout_minutes`).
    pub(super) fn claim_notice_due(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        Some(now + chrono::Duration::minutes(i64::from(self.handoff.claim_timeout_minutes)))
    }

    /// Writes `items` for the board now (a case's state changed).
    pub(super) async fn post_to_board(&self, items: Vec<NewOutboxItem>) {
        for item in items {
            if let Err(e) = self.outbox.enqueue(&item, self.engine.now()).await {
                // The next change of the case brings its post up to date.
                tracing::warn!(error = %e, "support board item not written");
            }
        }
    }
}

/// A channel as people name it: its label, else its key.
fn channel_name(label: &str, key: &str) -> String {
    if label.is_empty() { key } else { label }.to_owned()
}

/// Where the case is, in a few words.
pub(crate) fn state_line(case: &Case) -> String {
    let owner = case.owner.as_deref().unwrap_or_default();
    match case.state {
        CaseState::Aguardando => "aguardando um atendente".into(),
        CaseState::EmAtendimento => format!("assumido por @{owner}"),
        CaseState::Devolvido if owner.is_empty() => "devolvido ao bot".into(),
        CaseState::Devolvido => format!("devolvido ao bot por @{owner}"),
        CaseState::Encerrado => "encerrado".into(),
    }
}

impl Cases<'_> {
    /// A case as support agents read it, as `(label, value)` lines: state, reason, the case file —
    /// every card masked, times in the policy's time zone. The board and the console lay them out.
    pub(crate) fn case_fields(self, case: &Case) -> Vec<(String, String)> {
        let tz = super::policy_timezone(self.engine);
        let when = |t: DateTime<Utc>| tz.local(t).format("%d/%m %H:%M").to_string();
        let file = &case.case_file;
        let mut out = Vec::new();
        if let Some(protocol) = &case.protocol {
            out.push(("Protocolo".to_owned(), protocol.clone()));
        }
        out.extend([
            ("Equipe".to_owned(), case.team.clone()),
            ("Motivo".to_owned(), case.motivo.label().to_owned()),
            ("Detalhe".to_owned(), mask_cards_in(&case.reason)),
            (
                "Canal".to_owned(),
                channel_name(self.speaker.channel(&case.channel).label, &case.channel),
            ),
            ("Aberto em".to_owned(), when(case.opened_at)),
            ("Estado".to_owned(), state_line(case)),
        ]);
        let strings = |v: &serde_json::Value| -> Vec<String> {
            v.as_array()
                .map(|a| a.iter().filter_map(|x| x.as_str()).map(mask_cards_in).collect())
                .unwrap_or_default()
        };
        let cards = strings(&file["cartoes"]);
        if !cards.is_empty() {
            out.push(("Cartões".into(), cards.join(", ")));
        }
        if let Some(p) = file["recarga_pendente"].as_object() {
            let text = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_owned();
            out.push((
                "Recarga aguardando confirmação".into(),
                format!(
                    "{} {} no cartão {} ({})",
                    text("moeda"),
                    text("valor"),
                    mask_cards_in(&text("cartao")),
                    text("meio_pagamento")
                ),
            ));
        }
        let until = [super::cases::WINDOW_UNTIL, super::cases::WINDOW_UNTIL_BEFORE]
            .iter()
            .find_map(|k| file[*k].as_str()?.parse::<DateTime<Utc>>().ok());
        if let Some(until) = until {
            let label = self.speaker.channel(&case.channel).label;
            out.push((format!("Janela do {label} até"), when(until)));
        }
        if let Some(summary) = file["contexto"]["resumo"].as_str() {
            out.push(("Resumo".into(), mask_cards_in(summary)));
        }
        if let Some(last) = file["ultimas_mensagens"].as_array() {
            for m in last {
                out.push((
                    format!("Mensagem ({})", m["de"].as_str().unwrap_or_default()),
                    mask_cards_in(m["texto"].as_str().unwrap_or_default()),
                ));
            }
        }
        out
    }

    /// [`Self::case_fields`] as a Markdown message (the board's root post).
    pub(crate) fn case_text(self, case: &Case) -> String {
        let mut out = format!(
            "#### Atendimento `{}`",
            case.protocol.as_deref().unwrap_or(&case.id)
        );
        for (label, value) in self.case_fields(case) {
            out.push_str(&format!("\n**{label}:** {value}"));
        }
        out
    }
}

impl Cases<'_> {
    /// The support board's root post of case `case_id`, kept to thread its lines under it.
    pub(crate) async fn board_posted(self, case_id: &str, post: &str) -> Result<(), vt_store::StoreError> {
        self.cases.set_board_post(case_id, post).await
    }

    /// The record of a support agent handing out what only staff see (a transcript): nothing is handed
    /// out that is not on record.
    pub async fn audited(self, record: &vt_store::AuditRecord) -> Result<(), vt_store::StoreError> {
        self.reports.record_audit(record).await
    }
}
