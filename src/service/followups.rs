//! Recharges whose outcome came late (`pendente`: the recharge system answered 202; `enviando`: a
//! timeout, or a process that died while sending). Each has a follow-up in the store, written with its
//! attempt before it was sent; `serve` runs the due ones (`run_due_followups`):
//! - the same request goes again under the same idempotency key (the recharge system answers from its
//!   idempotency store, or processes it once if it never arrived — the user confirmed it);
//! - an outcome settles the attempt, the follow-up (its request dropped) and the flow run (one more
//!   stage, `acompanhamento_recarga`: when and how), and the card holder is told — on a chat's channel
//!   (WhatsApp's `resultado_recarga` template outside the window), or a flow's recipient as RF10 would;
//! - still unknown: the next check waits twice as long, never past `[recargas] resolver_em_minutos`;
//! - at that deadline a case is opened for a person, with the attempt in its case file, the card
//!   holder is told a person will check, and nothing is sent again.
//!
//! A follow-up is claimed with a lease (on PostgreSQL `FOR UPDATE SKIP LOCKED`): of several instances
//! one checks it; a process that dies mid-check leaves it to the next once the lease runs out. The card
//! holder is told before the follow-up is settled: a crash in between tells them again (RF10's notice
//! is deduplicated by its key) rather than never.

use super::FollowUps;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use vt_domain::journal::AttemptStatus;
use vt_domain::stages::acompanhamento::{self, Aviso, Desfecho};
use vt_domain::stages::channel_notices::ChannelNoticesPort;
use vt_domain::systems::SystemsPort;
use vt_domain::vt::FlowInput;
use vt_domain::vt::texts::RecargaStatus;

use vt_engine::Conversation;
use vt_store::{Checked, FlowRunRecord, FollowUp, OUTCOME_CASE, RunStatus, StoreError};

/// How long a claimed follow-up is this process's: longer than a recharge request may take.
const LEASE_MINUTES: i64 = 2;
/// Follow-ups claimed at a time.
const CLAIM: i64 = 16;
/// The stage a follow-up adds to its flow run.
pub const STAGE: &str = "acompanhamento_recarga";

/// A follow-up could not be carried through; its lease runs out and it is checked again.
#[derive(Debug, thiserror::Error)]
enum FollowUpError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Missing(&'static str),
}

/// Who hears of the recharge: a chat's card holder on the conversation's channel, or a flow's
/// recipient as RF10 tells them.
enum Audience {
    Chat(Box<Conversation>),
    Recipient,
}

impl FollowUps<'_> {
    /// One check: the request again, then what its answer says.
    async fn follow_up(&self, f: FollowUp) -> Result<(), FollowUpError> {
        let systems = self
            .engine
            .extensions()
            .get::<SystemsPort>()
            .ok_or(FollowUpError::Missing(
                "nenhum sistema de recarga está configurado",
            ))?
            .get();
        let key = f.attempt.attempt.idempotency_key.clone();
        let run = self.flows.flow_run(&f.attempt.attempt.execucao_id).await?;
        let input = flow_input(run.as_ref(), &f)?;
        // On record as sent again before it goes, as RF7 does.
        self.recharges
            .begin_recharge(&f.attempt.attempt, None, self.engine.now())
            .await?;
        let answer = acompanhamento::reenviar(systems, &f.request).await;
        let now = self.engine.now();
        let desfecho = acompanhamento::conciliar(&answer, &input, now);
        if desfecho.resolvido() {
            return self.resolved(&f, run, &input, &desfecho, now).await;
        }
        self.recharges
            .resolve_recharge(&key, AttemptStatus::Pendente, now)
            .await?;
        // A recharge waiting for its boleto is followed until the payment could have cleared.
        let boleto = desfecho.boleto().map(|b| acompanhamento::prazo_boleto(b, &input));
        let deadline = boleto.map_or(f.deadline_at, |b| b.max(f.deadline_at));
        if now >= deadline {
            return self.hand_to_a_person(&f, &input, now).await;
        }
        let next = if boleto.is_some() {
            self.recargas.next_boleto_check(f.checks + 1, now, deadline)
        } else {
            self.recargas.next_check(f.checks + 1, now, deadline)
        };
        self.recharges
            .followup_checked(&key, &Checked::Again { next, deadline }, now)
            .await?;
        Ok(())
    }

    /// The recharge system said what became of it: the card holder is told, then the attempt, the
    /// follow-up and the flow run are settled.
    async fn resolved(
        &self,
        f: &FollowUp,
        run: Option<FlowRunRecord>,
        input: &FlowInput,
        desfecho: &Desfecho,
        now: DateTime<Utc>,
    ) -> Result<(), FollowUpError> {
        let key = &f.attempt.attempt.idempotency_key;
        let status = desfecho.status.as_str();
        self.tell(f, input, &desfecho.aviso(input)).await?;
        self.recharges
            .followup_checked(key, &Checked::Settled(status.to_owned()), now)
            .await?;
        self.recharges
            .resolve_recharge(key, AttemptStatus::from(desfecho.status), now)
            .await?;
        if let Some(run) = run {
            let stage = json!({
                "status_recarga": status,
                "quando": acompanhamento::hora_local(now, input),
                "como": "reenvio da mesma requisição com a mesma chave de idempotência",
                "verificacoes": f.checks + 1,
                "conciliacao": desfecho.saida,
            });
            let status = match desfecho.status {
                RecargaStatus::Aprovada => RunStatus::Concluido,
                RecargaStatus::Pendente => RunStatus::Pendente,
                RecargaStatus::Negada | RecargaStatus::Erro => RunStatus::Falhou,
            };
            self.flows
                .settle_flow_run(&run.execucao_id, status, (STAGE, &stage), now)
                .await?;
        }
        Ok(())
    }

    /// The deadline passed with the outcome still unknown: a case for a person, with the attempt in its
    /// case file; the card holder is told a person will check. Nothing is sent again.
    async fn hand_to_a_person(
        &self,
        f: &FollowUp,
        input: &FlowInput,
        now: DateTime<Utc>,
    ) -> Result<(), FollowUpError> {
        let a = &f.attempt.attempt;
        let valor = vt_domain::vt::money_for_people(&a.moeda, a.valor, vt_domain::vt::Idioma::PtBr);
        let reason = format!(
            "Recarga de {valor} no cartão {} sem resultado após {} min: verificar com o sistema de recarga",
            a.cartao_mascarado, self.recargas.resolver_em_minutos
        );
        let conv = self.conversations.conversation(&a.origin).await?;
        let (tenant, channel) = conv.as_ref().map_or_else(
            // A flow run's recharge (no chat): its case is on the flow's channel.
            || (input.tenant_id.clone(), crate::flow::API_CHANNEL.to_owned()),
            |c| (c.tenant_id.clone(), c.channel.clone()),
        );
        let file = json!({
            "motivo": "recarga_sem_resultado",
            "recarga": {
                "chave_idempotencia": a.idempotency_key,
                "execucao_id": a.execucao_id,
                "cartao": a.cartao_mascarado,
                "valor": vt_domain::vt::money_json(a.valor),
                "moeda": a.moeda,
                "status": f.attempt.status.as_str(),
                "envios": f.attempt.sends,
                "verificacoes": f.checks + 1,
                "enviada_em": f.attempt.created_at,
            },
        });
        let opening = (a.origin.as_str(), tenant.as_str(), channel.as_str());
        let motivo = vt_contract::HandoffReason::FalhaDeSistema;
        let case = self.board.new_case(opening, motivo, reason, file).await;
        let opened = self.board.open_case_now(&case, now).await?;
        // The explanation first, then the case's line (its protocol, when a person answers).
        self.tell(f, input, &acompanhamento::aviso_verificacao(input))
            .await?;
        let team = self.board.team(&case.team);
        if let (Some(conv), true) = (&conv, opened.id == case.id)
            && let Some(line) = super::teams::case_opened_line(&case.protocol, team, now)
        {
            self.speaker.say_now(conv, line, None, Vec::new()).await?;
        }
        self.recharges
            .followup_checked(&a.idempotency_key, &Checked::Settled(OUTCOME_CASE.into()), now)
            .await?;
        Ok(())
    }

    /// Tells the card holder `aviso`: in their chat, or as the flow's recipient.
    async fn tell(&self, f: &FollowUp, input: &FlowInput, aviso: &Aviso) -> Result<(), FollowUpError> {
        match self.audience(&f.attempt.attempt.origin).await? {
            Audience::Chat(conv) => {
                let template = crate::outbox::TemplateUse {
                    purpose: "resultado_recarga".into(),
                    parameters: aviso.parametros().into_iter().collect(),
                };
                let text = aviso.mensagem();
                self.speaker
                    .say_now(&conv, text, Some(template), Vec::new())
                    .await?;
            }
            Audience::Recipient => {
                let systems = self
                    .engine
                    .extensions()
                    .get::<SystemsPort>()
                    .ok_or(FollowUpError::Missing(
                        "nenhum sistema de notificação está configurado",
                    ))?
                    .get();
                let port = self.engine.extensions().get::<ChannelNoticesPort>();
                let sent = acompanhamento::avisar_destinatario(
                    systems,
                    port,
                    (input, &f.attempt.attempt.execucao_id),
                    aviso,
                )
                .await;
                if !sent.enviado {
                    tracing::warn!(key = %f.attempt.attempt.idempotency_key, "a late recharge outcome's notice was not sent");
                }
            }
        }
        Ok(())
    }

    async fn audience(&self, origin: &str) -> Result<Audience, StoreError> {
        Ok(match self.conversations.conversation(origin).await? {
            Some(conv) if conv.agent_id != crate::flow::FLOW_AGENT => Audience::Chat(Box::new(conv)),
            _ => Audience::Recipient,
        })
    }
}

/// The flow input the recharge was made for: the run's, else (a run killed before it was recorded)
/// what the request itself says — card, value, currency.
fn flow_input(run: Option<&FlowRunRecord>, f: &FollowUp) -> Result<FlowInput, FollowUpError> {
    if let Some(input) = run.and_then(|r| FlowInput::from_value(&r.input).ok()) {
        return Ok(input);
    }
    let body = &f.request.body;
    let value = json!({
        "cartao": body.get("cartao").cloned().unwrap_or(Value::Null),
        "recarga": {
            "valor": body.get("valor").cloned().unwrap_or(Value::Null),
            "moeda": body.get("moeda").cloned().unwrap_or(Value::Null),
        },
    });
    FlowInput::from_value(&value)
        .map_err(|_| FollowUpError::Missing("o pedido da recarga não tem cartão ou valor"))
}

impl FollowUps<'_> {
    /// Checks every follow-up due now, once each among all processes and instances. Returns how many
    /// were checked.
    pub async fn run_due_followups(self) -> usize {
        let mut checked = 0;
        loop {
            let now = self.engine.now();
            let lease = now + Duration::minutes(LEASE_MINUTES);
            let due = match self.recharges.claim_followups(now, lease, CLAIM).await {
                Ok(due) if !due.is_empty() => due,
                Ok(_) => return checked,
                Err(e) => {
                    tracing::error!(error = %e, "due recharge follow-ups could not be read");
                    return checked;
                }
            };
            for follow_up in due {
                let key = follow_up.attempt.attempt.idempotency_key.clone();
                match self.follow_up(follow_up).await {
                    Ok(()) => checked += 1,
                    Err(e) => {
                        tracing::error!(key = %key, error = %e, "recharge follow-up not carried through")
                    }
                }
            }
        }
    }
}
