//! Pix charges of chat recharges (step 20): a charge issued at the operator's provider once the card
//! holder confirmed, its code checked before anyone sees it; a payment credited once, whatever reports
//! it. A webhook's body is a hint, never proof: the charge is read back from the provider, and only a
//! `CONCLUIDA` charge with a payment of its amount goes on. The payment is claimed in the store (one
//! claim wins among webhooks, follow-ups and processes), then the recharge is sent under its own key
//! (the confirmation's; `pix-<endToEndId>` for one that came without), so even a second sender would be
//! answered as a replay. Each call to the provider is a span of its own (`pix: …`) in the trace of
//! what made it (a turn, a notice, the sweep).
//!
//! A recharge paid by card (step 24) is a charge too, with the same life and the same gate: a checkout
//! link at the card provider ([`vt_domain::cartao::Checkouts`]) instead of a code, its payment read
//! back before anything happens, claimed once, credited under the recharge's key with the payment id as
//! its token, refunded when it cannot be credited. Where the two differ — which provider a charge is
//! read from, withdrawn at and refunded by, and what the card holder reads — is [`Rail`].

use chrono::{DateTime, Duration, Utc};
use vt_connectors::pix::{PixConfig, PixError, Psp};
use vt_domain::pix::api::{Calendario, CobPedido, CobStatus, DevolucaoStatus, ValorOriginal};
use vt_domain::pix::{BrCode, BrCodeError, textos};
use vt_domain::vt::{FlowInput, PaymentToken};

mod card;
mod pix;
mod rail;
mod second_copy;
use second_copy::{is_second_copy, what_is_paid};

pub use card::card_port;
pub use pix::pix_port;
use rail::{Rail, Texts};

use super::jobs::Payments;
use super::{FlowOptions, ServiceError};
use crate::flow::FlowStatus;
use std::sync::Arc;

use tracing::Instrument as _;

use vt_contract::{ActionContext, ActionError};
use vt_domain::tools::{CodigoPix, NovoCodigo};

use vt_connectors::cartao::CartaoConfig;
use vt_domain::cartao::{CartaoError, Checkouts, EstornoStatus, LinkStatus, PedidoLink};
use vt_domain::tools::{LinkCartao, NovoLink};
use vt_engine::telemetry::spans;
use vt_store::{
    ChargeMeans, ChargeStatus, PaymentClaim, PixCharge, PixStore, REFUND_IN_PROGRESS, StoreError,
};

/// The provider and its settings, when the service takes Pix.
#[derive(Debug, Clone)]
pub struct PixSetup {
    pub psp: Psp,
    pub config: PixConfig,
}

/// The card provider and its settings, when the service takes card payments on a hosted checkout.
#[derive(Debug, Clone)]
pub struct CardSetup {
    pub provider: Arc<dyn Checkouts>,
    pub config: CartaoConfig,
}

/// What reading a charge back led to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Paid, claimed here, recharged: the receipt went to the conversation.
    Credited,
    /// Paid, claimed here; the recharge system has not said yet (its follow-up goes on).
    Processing,
    /// Paid, claimed here, not credited: the money went back.
    Refunded,
    /// Another code of the same recharge was paid first: this payment went back.
    RefundedDuplicate,
    /// Expired unpaid: withdrawn at the provider, the card holder told.
    Expired,
    /// A refund in progress got the provider's final word (returned, or not: then a person looks).
    RefundSettled,
    /// Nothing to do: not paid (yet), or handled before (by another webhook, follow-up or process).
    Nothing,
}

/// The WhatsApp template purpose of a receipt sent after the 24-hour window closed.
const RECEIPT_TEMPLATE: &str = "comprovante_recarga";
/// The same for a recharge paid by card (its identifier is the card payment's).
const CARD_RECEIPT_TEMPLATE: &str = "comprovante_cartao";

/// The WhatsApp template purpose of a receipt of a charge paid by `meio`.
fn receipt_template(meio: ChargeMeans) -> &'static str {
    match meio {
        ChargeMeans::Pix => RECEIPT_TEMPLATE,
        ChargeMeans::CartaoCredito => CARD_RECEIPT_TEMPLATE,
    }
}

/// How many charges of each status one sweep reads.
const SWEEP_BATCH: i64 = 200;

#[derive(Debug, thiserror::Error)]
pub enum PaymentError {
    #[error("o meio de pagamento desta cobrança não está configurado")]
    NotConfigured,
    #[error(transparent)]
    Provider(#[from] PixError),
    #[error(transparent)]
    Card(#[from] CartaoError),
    /// The provider's code failed its check: never shown.
    #[error("o código Pix do provedor não confere: {0}")]
    Code(#[from] BrCodeError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Flow(#[from] ServiceError),
    #[error("{0}")]
    Invalid(&'static str),
}

impl Payments<'_> {
    fn setup(&self) -> Result<&PixSetup, PaymentError> {
        self.pix_setup.ok_or(PaymentError::NotConfigured)
    }

    /// Issues code `n` of recharge `recharge_key` (0 first, one more per "novo código") for
    /// `recharge`, in conversation `conversation_id`. The same key and `n` are the same charge at the
    /// provider and on record: a retry or a restart shows the same code.
    pub async fn issue(
        self,
        conversation_id: &str,
        recharge: &FlowInput,
        recharge_key: &str,
        n: u32,
    ) -> Result<CodigoPix, PaymentError> {
        let setup = self.setup()?;
        let charge = Charge {
            conversation_id,
            recharge,
            recharge_key,
            n,
        };
        issue(self.pix, setup, charge, self.engine.now()).await
    }

    /// Reads charge `txid` back from the provider and, when it is paid with its amount, credits its
    /// recharge once. A txid this product never issued is not even read.
    pub async fn settle(self, txid: &str) -> Result<Settled, PaymentError> {
        let Some(charge) = self.pix.pix_charge(txid).await? else {
            tracing::warn!("a Pix notice for a charge not on record was ignored");
            return Ok(Settled::Nothing);
        };
        if charge
            .refund
            .as_ref()
            .is_some_and(|r| r.status == REFUND_IN_PROGRESS)
        {
            return self.check_refund(&charge).await;
        }
        if !matches!(charge.status, ChargeStatus::Ativa | ChargeStatus::Expirada) {
            return Ok(Settled::Nothing);
        }
        let Some((payment, paid_at)) = self.rail(&charge)?.paid(&charge, self.engine.now()).await? else {
            return Ok(Settled::Nothing);
        };
        match self.pix.claim_payment(txid, &payment, paid_at).await? {
            PaymentClaim::First => self.credit(&charge, &payment, paid_at).await,
            PaymentClaim::OtherCodePaid => {
                self.refund(&charge, &payment).await?;
                // Moved once: a notice or a sweep that reads it again finds it returned already.
                if !self
                    .pix
                    .settle_charge(txid, charge.status, ChargeStatus::Devolvida)
                    .await?
                {
                    return Ok(Settled::Nothing);
                }
                let input = recharge_of(&charge)?;
                let cartao = vt_domain::vt::mask_card(&input.cartao);
                let text = (Texts::of(charge.meio).duplicado)(charge.amount, &cartao);
                self.tell(&charge, text, None, true).await?;
                Ok(Settled::RefundedDuplicate)
            }
            PaymentClaim::Again | PaymentClaim::OtherPayment | PaymentClaim::Unknown => Ok(Settled::Nothing),
        }
    }

    /// The checkouts a card provider's notice names, once its signature checks: a hint, each read
    /// back before anything happens.
    pub fn card_notice(
        self,
        signature: Option<&str>,
        body: &[u8],
    ) -> Result<Vec<String>, vt_domain::cartao::AvisoInvalido> {
        let Some(card) = self.card.as_ref() else {
            return Err(vt_domain::cartao::AvisoInvalido::Assinatura);
        };
        card.provider.aviso(signature, body, self.engine.now())
    }

    /// The charges of conversation `conversation_id` waiting for a payment or for its credit.
    pub(crate) async fn open_in(self, conversation_id: &str) -> Result<Vec<PixCharge>, PaymentError> {
        let mut charges = self.pix.conversation_charges(conversation_id).await?;
        charges.retain(|c| matches!(c.status, ChargeStatus::Ativa | ChargeStatus::Paga));
        Ok(charges)
    }

    /// Reads back every open charge: an expired one is withdrawn at the provider and the card holder
    /// told (unless it was paid meanwhile: then it is credited); an open one is credited if it was
    /// paid and its notice never came; a paid one whose credit a stop interrupted (`[pix]
    /// retomar_credito_segundos` after its payment) is credited again under the same key, which the
    /// recharge system answers as a replay if it got there; a refund still in progress is read again.
    /// Returns how many charges changed.
    pub async fn sweep(self) -> usize {
        let mut changed = 0;
        let now = self.engine.now();
        let resume_after = |charge: &PixCharge| {
            let seconds = match (charge.meio, &self.pix_setup, &self.card) {
                (ChargeMeans::Pix, Some(p), _) => p.config.retomar_credito_segundos,
                (ChargeMeans::CartaoCredito, _, Some(c)) => c.config.retomar_credito_segundos,
                _ => PixConfig::default().retomar_credito_segundos,
            };
            Duration::seconds(i64::from(seconds))
        };
        let open = self.pix.charges_in(ChargeStatus::Ativa, SWEEP_BATCH).await;
        let stuck = self.pix.charges_in(ChargeStatus::Paga, SWEEP_BATCH).await;
        let (open, stuck) = match (open, stuck) {
            (Ok(o), Ok(s)) => (o, s),
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!(error = %e, "open Pix charges could not be read");
                return 0;
            }
        };
        for charge in open {
            let outcome = if now >= charge.expires_at {
                self.expire(&charge).await
            } else {
                self.settle(&charge.txid).await
            };
            changed += tally(outcome, &charge, "a Pix charge could not be read back");
        }
        match self.pix.refunds_in_progress(SWEEP_BATCH).await {
            Ok(refunding) => {
                for charge in refunding {
                    let outcome = self.check_refund(&charge).await;
                    changed += tally(outcome, &charge, "a Pix refund could not be read back");
                }
            }
            Err(e) => tracing::error!(error = %e, "Pix refunds in progress could not be read"),
        }
        for charge in stuck {
            let resume = charge.paid_at.is_some_and(|at| now - at >= resume_after(&charge));
            let Some(e2e) = charge.end_to_end_id.as_deref().filter(|_| resume) else {
                continue;
            };
            let outcome = self.credit(&charge, e2e, charge.paid_at.unwrap_or(now)).await;
            changed += tally(outcome, &charge, "a paid Pix charge could not be credited");
        }
        changed
    }

    /// An expired charge withdrawn at the provider, and the card holder told how to get a new code; a
    /// charge the provider says was paid meanwhile is settled instead.
    async fn expire(&self, charge: &PixCharge) -> Result<Settled, PaymentError> {
        match withdraw(self.pix, &self.rail(charge)?, charge).await? {
            Withdrawal::Withdrawn => {}
            // Paid before it could be withdrawn (a race at expiry): it still credits, once.
            Withdrawal::PaidMeanwhile => return self.settle(&charge.txid).await,
            Withdrawal::AlreadyMoved => return Ok(Settled::Nothing),
        }
        let input = recharge_of(charge)?;
        let cartao = vt_domain::vt::mask_card(&input.cartao);
        let text = (Texts::of(charge.meio).expirado)(charge.amount, &cartao);
        self.tell(charge, text, None, true).await?;
        Ok(Settled::Expired)
    }

    /// The recharge `charge` pays for, paid by payment `e2e`: the payment its token, under the
    /// payment's own key.
    async fn paid_recharge(&self, charge: &PixCharge, e2e: &str) -> Result<FlowInput, PaymentError> {
        let mut input = recharge_of(charge)?;
        // The run is the paying conversation's: its tenant's, and told there (by `credit`), not by a
        // notice of the flow's own that would say something else.
        if let Some(conv) = self.conversations.conversation(&charge.conversation_id).await? {
            input.tenant_id = conv.tenant_id;
        }
        input.avisado_na_conversa = Some(charge.conversation_id.clone());
        if let Some(recarga) = input.recarga.as_mut() {
            recarga.meio_pagamento.tipo = charge.meio.as_str().into();
            recarga.meio_pagamento.token = Some(PaymentToken::new(e2e));
        }
        // The recharge's own key (the confirmation's, in the chat), else one of the payment's: one
        // paid code per recharge, so either way one payment is one key.
        input
            .with_request_key(&format!("{}-{e2e}", charge.meio.as_str()))
            .map_err(|_| PaymentError::Invalid("chave da recarga inválida"))
    }

    /// Sends the paid recharge, with the payment as its token, under the payment's own key. A paid
    /// fee of a second copy orders it instead ([`Self::order_second_copy`]).
    async fn credit(
        &self,
        charge: &PixCharge,
        e2e: &str,
        paid_at: DateTime<Utc>,
    ) -> Result<Settled, PaymentError> {
        if is_second_copy(charge) {
            return self.order_second_copy(charge, e2e).await;
        }
        let input = self.paid_recharge(charge, e2e).await?;
        let cartao = vt_domain::vt::mask_card(&input.cartao);
        let final_ = vt_domain::vt::card::last_four(&input.cartao);
        let tz = input.politicas.timezone.clone();
        let ran = self.stages.run_flow(input, FlowOptions::default()).await?;
        self.pix
            .note_credit_run(&charge.txid, &ran.output.execucao_id)
            .await?;
        // Moving the charge on is what lets this caller speak: where a resumed credit and a slow first
        // one both got an answer (the second a replay), one moves it, one receipt goes out.
        let (settled, text, template) = match ran.output.status {
            FlowStatus::Concluido => {
                let etapas = ran.output.etapas.iter().map(|e| (e.etapa.as_str(), &e.saida));
                let novo = vt_domain::stages::novo_saldo(etapas);
                let text =
                    (Texts::of(charge.meio).comprovante)(charge.amount, &cartao, novo, paid_at, e2e, &tz);
                if !self.moved(charge, ChargeStatus::Creditada).await? {
                    return Ok(Settled::Nothing);
                }
                // On WhatsApp after the window closed, the receipt goes as its template.
                let template = crate::outbox::TemplateUse {
                    purpose: receipt_template(charge.meio).into(),
                    parameters: textos::comprovante_parametros(
                        charge.amount,
                        &final_,
                        novo,
                        paid_at,
                        e2e,
                        &tz,
                    ),
                };
                (Settled::Credited, text, Some(template))
            }
            FlowStatus::Pendente => {
                // Its late outcome is the recharge follow-up's (step 15), which tells the holder.
                if !self.moved(charge, ChargeStatus::Enviada).await? {
                    return Ok(Settled::Nothing);
                }
                let text = (Texts::of(charge.meio).em_processamento)(charge.amount, &cartao);
                (Settled::Processing, text, None)
            }
            FlowStatus::Falhou => match self
                .returned(charge, e2e, &ran.output.execucao_id, &cartao)
                .await?
            {
                Some(text) => (Settled::Refunded, text, None),
                None => return Ok(Settled::Nothing),
            },
        };
        let ended = settled != Settled::Processing;
        self.tell(charge, text, template, ended).await?;
        if settled == Settled::Credited {
            self.offer_automatic(charge).await;
        }
        Ok(settled)
    }

    /// A paid charge whose recharge failed: refunded before it is moved (a refund that fails leaves it
    /// for the next sweep; asked twice, the provider answers the same refund, its id the payment's),
    /// then a person gets the case. What the card holder is told, the case's line after it; `None`
    /// when another caller moved it first.
    async fn returned(
        &self,
        charge: &PixCharge,
        e2e: &str,
        execucao_id: &str,
        cartao: &str,
    ) -> Result<Option<String>, PaymentError> {
        self.refund(charge, e2e).await?;
        if !self.moved(charge, ChargeStatus::Devolvida).await? {
            return Ok(None);
        }
        let case = self
            .hand_to_a_person(charge, e2e, Handover::NotCredited(execucao_id))
            .await?;
        let text = (Texts::of(charge.meio).devolvido)(charge.amount, cartao);
        Ok(Some(match case {
            Some(line) => format!("{text}\n{line}"),
            None => text,
        }))
    }

    /// After `charge`'s receipt: the offer of a recharge that happens by itself (where Pix Automático
    /// is on and the card has none). A failure costs the offer, never the receipt.
    async fn offer_automatic(&self, charge: &PixCharge) {
        let Ok(input) = recharge_of(charge) else {
            return;
        };
        if let Err(e) = self.automatic.offer(&charge.conversation_id, &input).await {
            tracing::warn!(error = %e, "the offer of an automatic recharge could not be made");
        }
    }

    /// Paid charge `charge` moved on to `to`; false when another caller moved it first.
    async fn moved(&self, charge: &PixCharge, to: ChargeStatus) -> Result<bool, PaymentError> {
        Ok(self
            .pix
            .settle_charge(&charge.txid, ChargeStatus::Paga, to)
            .await?)
    }

    /// Payment `e2e` of `charge` returned to its payer (once: the refund's id or key comes from the
    /// payment), and the provider's word on it on record. A refund the provider says it could not make
    /// goes to a person.
    async fn refund(&self, charge: &PixCharge, e2e: &str) -> Result<(), PaymentError> {
        let status = self.rail(charge)?.refund(charge, e2e).await?;
        tracing::warn!(txid = %charge.txid, status = ?status, "a payment was refunded");
        self.refund_said(charge, e2e, status).await?;
        Ok(())
    }

    /// A refund still in progress read back from the provider: its final word recorded once it has
    /// one.
    async fn check_refund(&self, charge: &PixCharge) -> Result<Settled, PaymentError> {
        let Some(refund) = &charge.refund else {
            return Ok(Settled::Nothing);
        };
        let status = self.rail(charge)?.refund_status(&refund.end_to_end_id).await?;
        match status {
            None | Some(DevolucaoStatus::EmProcessamento) => Ok(Settled::Nothing),
            Some(status) => {
                self.refund_said(charge, &refund.end_to_end_id, status).await?;
                Ok(Settled::RefundSettled)
            }
        }
    }

    /// What the provider said of the refund of `e2e`, on record; a refund not made goes to a person
    /// (the card holder was told their money would come back: someone must see that it does).
    async fn refund_said(
        &self,
        charge: &PixCharge,
        e2e: &str,
        status: DevolucaoStatus,
    ) -> Result<(), PaymentError> {
        let text = match status {
            DevolucaoStatus::EmProcessamento => REFUND_IN_PROGRESS,
            DevolucaoStatus::Devolvido => "DEVOLVIDO",
            DevolucaoStatus::NaoRealizado => "NAO_REALIZADO",
        };
        self.pix.record_refund(&charge.txid, e2e, text).await?;
        if status == DevolucaoStatus::NaoRealizado
            && let Some(line) = self
                .hand_to_a_person(charge, e2e, Handover::RefundNotMade)
                .await?
            && let Some(conv) = self.conversations.conversation(&charge.conversation_id).await?
        {
            let text = format!(
                "A devolução do seu pagamento não pôde ser feita automaticamente: uma pessoa da equipe vai cuidar disso.\n{line}"
            );
            self.speaker.say_now(&conv, text, None, Vec::new()).await?;
        }
        Ok(())
    }

    /// Payment `e2e` of `charge` handed to a person, `why`: the payment, its refund and the run (when
    /// a recharge ran) go in the case file, the card masked.
    async fn hand_to_a_person(
        &self,
        charge: &PixCharge,
        e2e: &str,
        why: Handover<'_>,
    ) -> Result<Option<String>, PaymentError> {
        let Some(conv) = self.conversations.conversation(&charge.conversation_id).await? else {
            return Err(PaymentError::Invalid("a conversa da cobrança não existe"));
        };
        let cartao = &vt_domain::vt::mask_card(&recharge_of(charge)?.cartao);
        let valor = vt_domain::vt::money_for_people("BRL", charge.amount, vt_domain::vt::Idioma::PtBr);
        let card = charge.meio == ChargeMeans::CartaoCredito;
        let (motivo, reason, execucao_id) = why.words(card, &valor, cartao);
        let file = serde_json::json!({
            "motivo": motivo,
            "cobranca": {
                "meio": charge.meio.as_str(),
                "txid": charge.txid,
                "end_to_end_id": e2e,
                "valor": vt_domain::vt::money_json(charge.amount),
                "cartao": cartao,
                "devolucao": (!card).then(|| vt_domain::pix::refund_id(e2e)),
                "execucao_id": execucao_id,
            },
        });
        let handoff = vt_contract::HandoffReason::PagamentoNaoCreditado;
        let opening = (conv.id.as_str(), conv.tenant_id.as_str(), conv.channel.as_str());
        let case = self.board.new_case(opening, handoff, reason, file).await;
        let now = self.engine.now();
        let opened = self.board.open_case_now(&case, now).await?;
        // The case's line (its protocol, when a person answers) goes after the explanation, in it.
        let team = self.board.team(&case.team);
        Ok((opened.id == case.id)
            .then(|| super::teams::case_opened_line(&case.protocol, team, now))
            .flatten())
    }

    /// `text` to the card holder in `charge`'s conversation, through the outbox; where the channel has
    /// a window, with the `template` that stands in for it outside (sent only with their opt-in) and,
    /// when the charge `ended` and its code was shown as a native order, the order's status after it
    /// (`order_status`).
    async fn tell(
        &self,
        charge: &PixCharge,
        text: String,
        template: Option<crate::outbox::TemplateUse>,
        ended: bool,
    ) -> Result<(), PaymentError> {
        let Some(conv) = self.conversations.conversation(&charge.conversation_id).await? else {
            return Err(PaymentError::Invalid("a conversa da cobrança não existe"));
        };
        let native = self.speaker.channel(&conv.channel).native_orders
            && self
                .pix_setup
                .as_ref()
                .is_some_and(|p| p.config.whatsapp_order_details);
        let files = (ended && native)
            .then(|| vt_domain::tools::PedidoPix::Situacao.file(&charge.txid))
            .into_iter()
            .collect();
        self.speaker.say_now(&conv, text, template, files).await?;
        Ok(())
    }
}

/// 1 when the sweep's `outcome` for `charge` changed something; a failure logged as `failed` (the next
/// sweep reads it again).
fn tally(outcome: Result<Settled, PaymentError>, charge: &PixCharge, failed: &str) -> usize {
    match outcome {
        Ok(Settled::Nothing) => 0,
        Ok(_) => 1,
        Err(e) => {
            tracing::warn!(error = %e, txid = %charge.txid, "{failed}");
            0
        }
    }
}

/// Why a payment goes to a person.
enum Handover<'a> {
    /// Paid, and its recharge (run `.0`) could not be credited: the money went back.
    NotCredited(&'a str),
    /// The provider could not make the refund: the money did not go back.
    RefundNotMade,
    /// A second copy's fee paid and returned: the card system refused the order (why, in its words).
    SecondCopyRefused(&'a str),
}

impl<'a> Handover<'a> {
    /// The case's reason code, its line (the amount `valor`, the card masked) and the run, if one ran.
    fn words(self, card: bool, valor: &str, cartao: &str) -> (&'static str, String, Option<&'a str>) {
        match (self, card) {
            (Handover::NotCredited(execucao_id), false) => (
                "pix_pago_nao_creditado",
                format!("Pix de {valor} pago e devolvido: a recarga no cartão {cartao} não foi creditada"),
                Some(execucao_id),
            ),
            (Handover::NotCredited(execucao_id), true) => (
                "cartao_pago_nao_creditado",
                format!(
                    "Pagamento no cartão de crédito de {valor} estornado: a recarga no cartão {cartao} não foi creditada"
                ),
                Some(execucao_id),
            ),
            (Handover::RefundNotMade, false) => (
                "pix_devolucao_nao_realizada",
                format!(
                    "Devolução de Pix de {valor} não realizada pelo provedor (cartão {cartao}): o dinheiro do titular não voltou"
                ),
                None,
            ),
            (Handover::SecondCopyRefused(why), _) => (
                "segunda_via_paga_recusada",
                format!(
                    "Taxa de {valor} da segunda via do cartão {cartao} paga e devolvida: o sistema de cartões recusou o pedido ({why})"
                ),
                None,
            ),
            (Handover::RefundNotMade, true) => (
                "cartao_estorno_nao_realizado",
                format!(
                    "Estorno de {valor} no cartão de crédito não realizado pelo provedor (cartão {cartao}): o dinheiro do titular não voltou"
                ),
                None,
            ),
        }
    }
}

/// A charge to issue: a Pix code or a card checkout, the `n`-th of its recharge.
struct Charge<'a> {
    conversation_id: &'a str,
    recharge: &'a FlowInput,
    recharge_key: &'a str,
    n: u32,
}

impl Charge<'_> {
    /// The recharge's amount.
    fn amount(&self) -> Result<rust_decimal::Decimal, PaymentError> {
        self.recharge
            .recarga
            .as_ref()
            .and_then(|r| r.valor)
            .ok_or(PaymentError::Invalid("a recarga não tem valor"))
    }

    /// The charge put on record (or the one already there under `txid`), open until `expires_at`,
    /// showing `shown` (the checked code, or the checkout's link).
    async fn open(
        &self,
        store: &dyn PixStore,
        (meio, txid, shown): (ChargeMeans, String, String),
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<PixCharge, PaymentError> {
        let request =
            vt_contract::json::to_value(self.recharge).map_err(|e| StoreError::Invalid(e.to_string()))?;
        Ok(store
            .open_charge(&PixCharge {
                txid,
                meio,
                recharge_key: self.recharge_key.to_owned(),
                n: i64::from(self.n),
                conversation_id: self.conversation_id.to_owned(),
                request,
                amount: self.amount()?,
                copia_e_cola: shown,
                status: ChargeStatus::Ativa,
                expires_at,
                end_to_end_id: None,
                paid_at: None,
                created_at: now,
                refund: None,
                execucao_id: None,
            })
            .await?)
    }
}

/// The charge at the provider, its code checked, then on record; what the card holder is shown.
async fn issue(
    store: &dyn PixStore,
    setup: &PixSetup,
    charge: Charge<'_>,
    now: DateTime<Utc>,
) -> Result<CodigoPix, PaymentError> {
    let valor = charge.amount()?;
    let cartao = vt_domain::vt::mask_card(&charge.recharge.cartao);
    let txid = vt_domain::pix::txid(charge.recharge_key, charge.n);
    let segundos = setup.config.expiracao_minutos * 60;
    let pedido = CobPedido {
        calendario: Calendario {
            criacao: None,
            expiracao: segundos,
        },
        valor: ValorOriginal { original: valor },
        chave: setup.config.chave.clone(),
        solicitacao_pagador: Some(what_is_paid(charge.recharge_key, &cartao)),
    };
    let cob = setup
        .psp
        .criar_cob(&txid, &pedido)
        .instrument(spans::step("pix: criar cobrança"))
        .await?;
    let code = cob.pix_copia_e_cola.as_deref().unwrap_or_default();
    let code = BrCode::checked(code, valor)?.as_str().to_owned();
    let expires_at = now + Duration::seconds(i64::from(segundos));
    let stored = charge
        .open(store, (ChargeMeans::Pix, txid, code), expires_at, now)
        .await?;
    shown(&stored, charge.recharge)
}

/// What withdrawing an unpaid charge found.
#[derive(Debug, PartialEq, Eq)]
enum Withdrawal {
    /// Withdrawn at the provider and moved to `expirada` here, by this call.
    Withdrawn,
    /// Withdrawn, but another caller (the sweep, a "novo código") moved it first.
    AlreadyMoved,
    /// The provider refused: it was paid meanwhile, and will be credited.
    PaidMeanwhile,
}

/// Withdraws `charge` at the provider (`PATCH /cob/{txid}`), then on record.
async fn withdraw(
    store: &dyn PixStore,
    rail: &Rail<'_>,
    charge: &PixCharge,
) -> Result<Withdrawal, PaymentError> {
    if !rail.withdraw(charge).await? {
        return Ok(Withdrawal::PaidMeanwhile);
    }
    let moved = store
        .settle_charge(&charge.txid, ChargeStatus::Ativa, ChargeStatus::Expirada)
        .await?;
    Ok(if moved {
        Withdrawal::Withdrawn
    } else {
        Withdrawal::AlreadyMoved
    })
}

/// A charge on record as the card holder is shown it: the line, the code, its QR.
fn shown(charge: &PixCharge, recharge: &FlowInput) -> Result<CodigoPix, PaymentError> {
    let cartao = vt_domain::vt::mask_card(&recharge.cartao);
    Ok(CodigoPix {
        txid: charge.txid.clone(),
        texto: (if is_second_copy(charge) {
            textos::cobranca_taxa
        } else {
            textos::cobranca
        })(
            charge.amount,
            &cartao,
            charge.expires_at,
            &recharge.politicas.timezone,
        ),
        copia_e_cola: charge.copia_e_cola.clone(),
        expira_em: charge.expires_at,
        pedido_nativo: false,
    })
}

/// The recharge a charge carries, as it was confirmed.
fn recharge_of(charge: &PixCharge) -> Result<FlowInput, PaymentError> {
    FlowInput::from_value(&charge.request).map_err(|_| PaymentError::Invalid("a recarga guardada é inválida"))
}
