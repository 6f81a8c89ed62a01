//! Recharges that happen by themselves (issue "Step 29"), paid by Pix Automático: the card holder
//! authorises a recurrence once in their bank app, and each charge is then debited on its date
//! without a new approval, announced beforehand, cancellable until the day before.
//!
//! - **Authorise** ([`port`], the tool's side): `/locrec`, then `/rec` with our id as its contract and
//!   the card masked as its object; the authorisation code checked before it is shown. The recurrence
//!   is the card holder's only once the provider, read back, says `APROVADA` — a notice only names it.
//! - **Charge** ([`Automatic::pass`], every sweep): a date recurrence's charge is created
//!   `[pix.automatico] antecedencia_dias` before its day; a threshold's balance is read once a local
//!   day (RF1–RF3, no notice sent) and, below it, a charge is created for two days later (the soonest
//!   the arrangement allows). A charge is put on record before the provider hears of it, under the
//!   unique (tenant, card, cycle), and its txid comes from the recurrence and the cycle: of two
//!   instances, a rerun or a retry, one charge per cycle and card. Whoever moves it to `agendada`
//!   tells the card holder the debit's date.
//! - **Credit**: a charge read back as debited is claimed once, then recharged (RF6–RF10) with the
//!   payment's endToEndId as token under its own key (`pixauto-<endToEndId>`); a credit a kill cut is
//!   resumed under the same key, which the recharge system answers as a replay. The one that moves
//!   the charge on speaks.
//! - **Fail**: an attempt without funds is retried by the provider's rules (`PERMITE_3R_7D`: the day
//!   after, up to three times within seven days of the date), the card holder told once.
//! - **Control**: listed and cancelled in the chat (`PATCH /rec`), or cancelled in the bank (the
//!   notice, read back). Every notice keeps the quiet hours; the channel keeps consent and its window.

use std::sync::Arc;

use chrono::{Datelike as _, Duration, NaiveDate};
use rust_decimal::Decimal;
use vt_connectors::pix::PixError;
use vt_contract::{ActionContext, ActionError};
use vt_domain::pix::BrCode;
use vt_domain::pix::automatico::{
    ANTECEDENCIA, CalendarioCobR, CalendarioRec, CobR, CobRPedido, CobRStatus, Devedor, Periodicidade,
    PoliticaRetentativa, RETENTATIVAS, RecPedido, RecStatus, ValorRec, Vinculo, txid_ciclo,
};
use vt_domain::tools::{Autorizacao, Gatilho, RecargasAutomaticas, Resumo, Termos};
use vt_domain::vt::{FlowInput, MeioPagamento, PaymentToken, Recarga, mask_card};

use super::FlowOptions;
use super::jobs::Automatic;
use super::payments::PixSetup;
use crate::flow::FlowStatus;
use vt_store::{
    Recurrence, RecurrenceKind, RecurrenceStatus, RecurrenceStore, RecurringCharge, RecurringChargeStatus,
};

/// Where an automatic recharge's outcome is counted: no conversation of the card holder's.
mod tool;
mod requests;
mod textos;

use requests::{
    cancel_open_charges, cobr_pedido, date, debit_recharge, final_of, next_day_of_month, rec_pedido,
    request_of,
};
pub use tool::port;

pub(crate) const OUTCOME_PREFIX: &str = "recarga-automatica:";

/// How long a recurrence waiting for the card holder's bank is read back by every pass (people
/// authorise within minutes; later, the provider's notice alone moves it).
const WAIT_READ_BACK_DAYS: i64 = 1;

/// How many of each kind one pass reads.
const PASS_BATCH: i64 = 500;

/// Why an automatic recharge's step did not happen: a payment's reasons (the provider, its code,
/// the store, the flow).
type AutoError = super::payments::PaymentError;

/// What reading a scheduled charge back led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settlement {
    /// Not debited yet, or handled before (by a notice, another pass, another instance).
    Nothing,
    /// Debited and credited: the receipt went out.
    Credited,
    /// Debited; the recharge is pending, or could not be credited and the money went back.
    Debited,
    /// An attempt failed for funds: a retry was asked of the provider.
    Retried,
    /// Expired, rejected or cancelled at the provider.
    Ended,
}

/// What one pass did (a `serve` log line, the tests' figures).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassFigures {
    /// Recurrences whose status moved (approved, ended).
    pub recurrences: usize,
    /// Charges created at the provider.
    pub scheduled: usize,
    /// Debits credited (receipt sent).
    pub credited: usize,
    /// Retries asked of the provider.
    pub retried: usize,
}

impl Automatic<'_> {
    fn setup(&self) -> Result<&PixSetup, AutoError> {
        self.pix_setup
            .filter(|p| p.config.automatico.ativo)
            .ok_or(AutoError::NotConfigured)
    }

    /// Whether recharges happen by themselves here (`[pix.automatico] ativo`, a provider).
    pub(crate) fn active(self) -> bool {
        self.setup().is_ok()
    }

    /// Recurrence `id_rec`, named by a notice (a hint), read back from the provider and its status
    /// taken: approved → it charges (an older one of the same card ends); ended in the bank → no
    /// more charges. A recurrence this product never created is not even read.
    pub async fn rec_notice(self, id_rec: &str) -> Result<bool, AutoError> {
        let Some(rec) = self.recurrences.recurrence_by_rec(id_rec).await? else {
            tracing::warn!("a Pix Automático notice for a recurrence not on record was ignored");
            return Ok(false);
        };
        self.read_back(&rec).await
    }

    /// Charge `txid`, named by a notice (a hint), read back and settled.
    pub async fn cobr_notice(self, txid: &str) -> Result<bool, AutoError> {
        let Some(charge) = self.recurrences.recurring_charge(txid).await? else {
            tracing::warn!("a Pix Automático notice for a charge not on record was ignored");
            return Ok(false);
        };
        Ok(self.settle(&charge).await? != Settlement::Nothing)
    }

    /// One pass over everything that may move: recurrences waiting for authorisation read back,
    /// each approved one's cycle looked at (a charge created when due), charges not yet confirmed
    /// created again under their txid, scheduled ones read back, debits a stop left uncredited
    /// credited again under their key.
    pub async fn pass(self) -> PassFigures {
        let mut figures = PassFigures::default();
        if !self.active() {
            return figures;
        }
        // One waiting longer than a day is left to the provider's notice (it expires there).
        let recent = self.engine.now() - Duration::days(WAIT_READ_BACK_DAYS);
        for rec in self.listed(RecurrenceStatus::Criada).await {
            if rec.created_at >= recent {
                figures.recurrences += usize::from(self.logged(self.read_back(&rec).await, "read back"));
            }
        }
        for rec in self.listed(RecurrenceStatus::Aprovada).await {
            figures.scheduled += usize::from(self.logged(self.cycle(&rec).await, "cycle"));
        }
        for charge in self.charges(RecurringChargeStatus::Nova).await {
            figures.scheduled += usize::from(self.logged(self.create_at_provider(&charge).await, "create"));
        }
        // A debit happens on its date, not before: until then only a notice reads a charge back (a
        // cancellation in the bank comes as the recurrence's).
        let today = super::policy_timezone(self.engine)
            .local(self.engine.now())
            .date_naive();
        for charge in self.charges(RecurringChargeStatus::Agendada).await {
            if date(&charge.due_on).is_ok_and(|due| due > today) {
                continue;
            }
            match self.settle(&charge).await {
                Ok(Settlement::Credited) => figures.credited += 1,
                Ok(Settlement::Retried) => figures.retried += 1,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "a recurring charge could not be read back; the next pass tries again");
                }
            }
        }
        let resume_after = Duration::seconds(i64::from(
            self.pix_setup.map_or(120, |p| p.config.retomar_credito_segundos),
        ));
        let now = self.engine.now();
        for charge in self.charges(RecurringChargeStatus::Paga).await {
            let stuck = charge.paid_at.is_some_and(|at| now - at >= resume_after);
            if let (true, Some(e2e)) = (stuck, charge.end_to_end_id.clone()) {
                figures.credited += usize::from(self.logged(self.credit(&charge, &e2e).await, "resume"));
            }
        }
        figures
    }

    fn logged(self, outcome: Result<bool, AutoError>, what: &str) -> bool {
        outcome.unwrap_or_else(|e| {
            tracing::warn!(error = %e, step = what, "an automatic recharge step failed; the next pass tries again");
            false
        })
    }

    async fn listed(self, status: RecurrenceStatus) -> Vec<Recurrence> {
        self.recurrences
            .recurrences_in(status, PASS_BATCH)
            .await
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "recurrences could not be read");
                Vec::new()
            })
    }

    async fn charges(self, status: RecurringChargeStatus) -> Vec<RecurringCharge> {
        self.recurrences
            .recurring_charges_in(status, PASS_BATCH)
            .await
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "recurring charges could not be read");
                Vec::new()
            })
    }

    /// Recurrence `rec` as the provider has it now, its status taken once.
    async fn read_back(self, rec: &Recurrence) -> Result<bool, AutoError> {
        let setup = self.setup()?;
        let Some(id_rec) = rec.id_rec.as_deref() else {
            return Ok(false);
        };
        let read = setup.psp.rec(id_rec).await?;
        let now = self.engine.now();
        let live = [RecurrenceStatus::Criada, RecurrenceStatus::Aprovada];
        let (to, from): (RecurrenceStatus, &[RecurrenceStatus]) = match read.status {
            RecStatus::Criada => return Ok(false),
            RecStatus::Aprovada => (RecurrenceStatus::Aprovada, &live[..1]),
            RecStatus::Rejeitada => (RecurrenceStatus::Rejeitada, &live),
            RecStatus::Expirada => (RecurrenceStatus::Expirada, &live),
            RecStatus::Cancelada => (RecurrenceStatus::Cancelada, &live),
        };
        if !self.recurrences.move_recurrence(&rec.id, from, to, now).await? {
            return Ok(false);
        }
        let text = match to {
            RecurrenceStatus::Aprovada => {
                self.replace_older(rec).await?;
                self.recurrences
                    .note_recurrence(&rec.id, "autorizada no banco")
                    .await?;
                textos::ativada(rec)
            }
            RecurrenceStatus::Cancelada => {
                self.recurrences
                    .note_recurrence(&rec.id, "cancelada no banco")
                    .await?;
                cancel_open_charges(self.recurrences, &self.setup()?.psp, rec).await?;
                textos::cancelada_no_banco(rec)
            }
            _ => {
                self.recurrences
                    .note_recurrence(&rec.id, "não autorizada")
                    .await?;
                textos::nao_autorizada(rec)
            }
        };
        self.tell(rec, text).await?;
        Ok(true)
    }

    /// Once `rec` is approved, the card's older live recurrences end (a change of terms is a new
    /// authorisation): cancelled at the provider, then on record.
    async fn replace_older(self, rec: &Recurrence) -> Result<(), AutoError> {
        let setup = self.setup()?;
        let mine = self
            .recurrences
            .user_recurrences(&rec.tenant_id, &rec.user_id)
            .await?;
        for old in mine
            .iter()
            .filter(|o| o.id != rec.id && o.card_index == rec.card_index && o.status.live())
        {
            if let Some(id_rec) = old.id_rec.as_deref() {
                setup.psp.cancelar_rec(id_rec).await?;
            }
            let from = [RecurrenceStatus::Criada, RecurrenceStatus::Aprovada];
            let now = self.engine.now();
            if self
                .recurrences
                .move_recurrence(&old.id, &from, RecurrenceStatus::Cancelada, now)
                .await?
            {
                self.recurrences
                    .note_recurrence(&old.id, "substituída por uma nova autorização")
                    .await?;
                cancel_open_charges(self.recurrences, &setup.psp, old).await?;
            }
        }
        Ok(())
    }

    /// An approved recurrence's cycle: a charge put on record and created at the provider when one
    /// is due (a date's, `antecedencia_dias` ahead; a threshold's, after the day's reading is below it).
    async fn cycle(self, rec: &Recurrence) -> Result<bool, AutoError> {
        let Some(due) = self.due(rec).await? else {
            return Ok(false);
        };
        let Some(id_rec) = rec.id_rec.as_deref() else {
            return Ok(false);
        };
        let periodicidade = Periodicidade::parse(&rec.periodicidade).unwrap_or(Periodicidade::Mensal);
        let cycle = periodicidade.cycle(due);
        let charge = RecurringCharge {
            txid: txid_ciclo(id_rec, &cycle),
            recurrence_id: rec.id.clone(),
            tenant_id: rec.tenant_id.clone(),
            card_index: rec.card_index.clone(),
            cycle,
            due_on: due.to_string(),
            amount: rec.amount,
            status: RecurringChargeStatus::Nova,
            retries: 0,
            funds_told: false,
            end_to_end_id: None,
            paid_at: None,
            created_at: self.engine.now(),
        };
        if !self.recurrences.open_recurring_charge(&charge).await? {
            return Ok(false);
        }
        self.create_at_provider(&charge).await
    }

    /// The date of the charge `rec` is due to create now, if one is: a day of the month's, when it is
    /// `antecedencia_dias` away or less; a threshold's, two days on, when the day's reading (taken
    /// once, in a cycle with no charge yet) is below it.
    async fn due(self, rec: &Recurrence) -> Result<Option<NaiveDate>, AutoError> {
        let setup = self.setup()?;
        let today = self.tz(rec).local(self.engine.now()).date_naive();
        let periodicidade = Periodicidade::parse(&rec.periodicidade).unwrap_or(Periodicidade::Mensal);
        match rec.kind {
            RecurrenceKind::Dia(day) => {
                let due = next_day_of_month(today + Duration::days(ANTECEDENCIA.0), day);
                let ahead = i64::from(setup.config.automatico.antecedencia_dias).max(ANTECEDENCIA.0);
                Ok(((due - today).num_days() <= ahead).then_some(due))
            }
            RecurrenceKind::Limite(limite) => {
                // Read today already (the row says so): no query at all.
                if rec.checked_on.as_deref() == Some(today.to_string().as_str()) {
                    return Ok(None);
                }
                let due = today + Duration::days(ANTECEDENCIA.0);
                if self.cycle_taken(rec, &periodicidade.cycle(due)).await?
                    || !self
                        .recurrences
                        .take_daily_check(&rec.id, &today.to_string())
                        .await?
                {
                    return Ok(None);
                }
                let (note, due) = match self.balance(rec).await? {
                    Some(saldo) if saldo < limite => (
                        format!("saldo {} abaixo do limite", textos::brl(saldo)),
                        Some(due),
                    ),
                    Some(_) => return Ok(None),
                    None => ("saldo não lido; nova leitura amanhã".to_owned(), None),
                };
                self.recurrences.note_recurrence(&rec.id, &note).await?;
                Ok(due)
            }
        }
    }

    /// Whether the card already has a charge (not failed or cancelled) in `cycle`.
    async fn cycle_taken(self, rec: &Recurrence, cycle: &str) -> Result<bool, AutoError> {
        let charges = self.recurrences.charges_of_recurrence(&rec.id).await?;
        Ok(charges.iter().any(|c| {
            c.cycle == cycle
                && !matches!(
                    c.status,
                    RecurringChargeStatus::Cancelada | RecurringChargeStatus::Falhou
                )
        }))
    }

    /// The card's balance now (RF1–RF3 through the flow, on record as a run; no notice: the
    /// recharge is the answer to a low balance). `None`: the systems did not say.
    async fn balance(self, rec: &Recurrence) -> Result<Option<Decimal>, AutoError> {
        let mut input = request_of(rec)?;
        input.recarga = None;
        input.politicas.limite_saldo_baixo = Decimal::ZERO;
        let ran = self.stages.run_flow(input, FlowOptions::default()).await?;
        let etapas = ran.output.etapas.iter().map(|e| (e.etapa.as_str(), &e.saida));
        Ok(vt_domain::stages::saldo_lido(etapas))
    }

    /// Charge `charge` (`nova`) created at the provider under its txid (the same charge however many
    /// times this runs); the one that moves it to `agendada` tells the card holder its date.
    async fn create_at_provider(self, charge: &RecurringCharge) -> Result<bool, AutoError> {
        let setup = self.setup()?;
        let Some(rec) = self.recurrences.recurrence(&charge.recurrence_id).await? else {
            return Err(AutoError::Invalid("a recorrência da cobrança não existe"));
        };
        let Some(id_rec) = rec.id_rec.clone() else {
            return Err(AutoError::Invalid("a recorrência não foi criada no provedor"));
        };
        match setup
            .psp
            .criar_cobr(&charge.txid, &cobr_pedido(&rec, id_rec, charge))
            .await
        {
            Ok(_) => {}
            Err(PixError::Refused { status, title }) if status < 500 => {
                // Refused for good (the recurrence ended, the date out of the window): no charge.
                tracing::warn!(status, title = %title, "the provider refused a recurring charge");
                self.recurrences
                    .move_recurring_charge(
                        &charge.txid,
                        RecurringChargeStatus::Nova,
                        RecurringChargeStatus::Falhou,
                    )
                    .await?;
                self.recurrences
                    .note_recurrence(&rec.id, "cobrança recusada pelo provedor")
                    .await?;
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        }
        if !self
            .recurrences
            .move_recurring_charge(
                &charge.txid,
                RecurringChargeStatus::Nova,
                RecurringChargeStatus::Agendada,
            )
            .await?
        {
            return Ok(false);
        }
        self.announce(&rec, charge).await?;
        Ok(true)
    }

    /// Charge `charge` of `rec`, scheduled: on record, and the card holder told its date.
    async fn announce(self, rec: &Recurrence, charge: &RecurringCharge) -> Result<(), AutoError> {
        let due = date(&charge.due_on)?;
        let day = |d: NaiveDate| d.format("%d/%m/%Y").to_string();
        self.recurrences
            .note_recurrence(&rec.id, &format!("cobrança agendada para {}", day(due)))
            .await?;
        let template = textos::modelo(
            "recarga_automatica_agendada",
            [
                ("valor", textos::brl(charge.amount)),
                ("cartao_final", final_of(rec)),
                ("data", day(due)),
                ("cancelar_ate", day(due - Duration::days(1))),
            ],
        );
        self.tell_as(rec, textos::agendada(rec, charge.amount, due), Some(template))
            .await
    }

    /// Charge `charge` (`agendada`) read back: debited → claimed once and credited; an attempt failed
    /// for funds → a retry asked by the provider's rules, the card holder told once; expired,
    /// rejected or cancelled → on record.
    async fn settle(self, charge: &RecurringCharge) -> Result<Settlement, AutoError> {
        let setup = self.setup()?;
        if charge.status != RecurringChargeStatus::Agendada {
            return Ok(Settlement::Nothing);
        }
        let read = setup.psp.cobr(&charge.txid).await?;
        if let Some((e2e, valor)) = read.paga() {
            if valor != charge.amount {
                return Err(AutoError::Invalid("o valor debitado não é o da cobrança"));
            }
            let now = self.engine.now();
            if !self
                .recurrences
                .claim_recurring_payment(&charge.txid, e2e, now)
                .await?
            {
                return Ok(Settlement::Nothing);
            }
            let charge = RecurringCharge {
                paid_at: Some(now),
                ..charge.clone()
            };
            return Ok(match self.credit(&charge, e2e).await? {
                true => Settlement::Credited,
                false => Settlement::Debited,
            });
        }
        let ended = match read.status {
            CobRStatus::Expirada | CobRStatus::Rejeitada => Some(RecurringChargeStatus::Falhou),
            CobRStatus::Cancelada => Some(RecurringChargeStatus::Cancelada),
            _ => None,
        };
        if let Some(to) = ended {
            let moved = self
                .recurrences
                .move_recurring_charge(&charge.txid, RecurringChargeStatus::Agendada, to)
                .await?;
            if moved {
                let outcome = match to {
                    RecurringChargeStatus::Cancelada => "cobrança cancelada",
                    _ => "cobrança não debitada",
                };
                self.recurrences
                    .note_recurrence(&charge.recurrence_id, outcome)
                    .await?;
                return Ok(Settlement::Ended);
            }
            return Ok(Settlement::Nothing);
        }
        if read.falhas() > 0 && read.pendente().is_none() && self.retry(charge, &read).await? {
            return Ok(Settlement::Retried);
        }
        Ok(Settlement::Nothing)
    }

    /// A charge whose attempt failed (no funds), tried again the next day while the policy allows:
    /// the retry counted once (of two instances one asks), the card holder told once.
    async fn retry(self, charge: &RecurringCharge, read: &CobR) -> Result<bool, AutoError> {
        let setup = self.setup()?;
        let Some(rec) = self.recurrences.recurrence(&charge.recurrence_id).await? else {
            return Ok(false);
        };
        let today = self.tz(&rec).local(self.engine.now()).date_naive();
        let due = date(&charge.due_on)?;
        let on = today + Duration::days(1);
        let allowed = read.politica_retentativa == Some(PoliticaRetentativa::Permite3r7d)
            && charge.retries < i64::from(RETENTATIVAS.0)
            && on <= due + Duration::days(RETENTATIVAS.1);
        if !allowed || !self.recurrences.count_retry(&charge.txid, charge.retries).await? {
            return Ok(false);
        }
        if let Err(e) = setup.psp.retentativa(&charge.txid, &on.to_string()).await {
            tracing::warn!(error = %e, "a retry of a recurring charge was refused");
            return Ok(false);
        }
        self.recurrences
            .note_recurrence(
                &rec.id,
                &format!("sem saldo na conta; nova tentativa em {}", on.format("%d/%m/%Y")),
            )
            .await?;
        if self.recurrences.take_funds_notice(&charge.txid).await? {
            let template = textos::modelo(
                "recarga_automatica_sem_saldo",
                [
                    ("valor", textos::brl(charge.amount)),
                    ("cartao_final", final_of(&rec)),
                    ("nova_data", on.format("%d/%m/%Y").to_string()),
                ],
            );
            self.tell_as(&rec, textos::sem_saldo(&rec, charge.amount, on), Some(template))
                .await?;
        }
        Ok(true)
    }

    /// The debited recharge sent (RF6–RF10), with the payment as its token, under the payment's own
    /// key; the one that moves the charge on sends the receipt.
    async fn credit(self, charge: &RecurringCharge, e2e: &str) -> Result<bool, AutoError> {
        let Some(rec) = self.recurrences.recurrence(&charge.recurrence_id).await? else {
            return Err(AutoError::Invalid("a recorrência da cobrança não existe"));
        };
        let input = debit_recharge(&rec, charge, e2e)?;
        let tz = input.politicas.timezone.clone();
        let ran = self.stages.run_flow(input, FlowOptions::default()).await?;
        let paid = charge.paid_at.unwrap_or_else(|| self.engine.now());
        let told = Told::of(&rec, (charge, e2e, paid), &ran.output, &tz);
        if told.to == RecurringChargeStatus::Devolvida {
            // Debited and not credited: the money goes back, once (the refund's id is the payment's).
            let setup = self.setup()?;
            setup
                .psp
                .devolver(e2e, &vt_domain::pix::refund_id(e2e), charge.amount)
                .await?;
        }
        if !self
            .recurrences
            .move_recurring_charge(&charge.txid, RecurringChargeStatus::Paga, told.to)
            .await?
        {
            return Ok(false);
        }
        if told.to == RecurringChargeStatus::Creditada {
            self.resolved_without_a_conversation(&rec, charge).await?;
        }
        self.recurrences.note_recurrence(&rec.id, told.outcome).await?;
        self.tell_as(&rec, told.text, told.template).await?;
        Ok(told.to == RecurringChargeStatus::Creditada)
    }

    /// A credited automatic recharge counted where outcomes are (step 22): resolved by the bot, with no
    /// conversation (its own pseudo-conversation, `recarga-automatica:<txid>`, so no stretch of the
    /// card holder's is cut) and no model cost.
    async fn resolved_without_a_conversation(
        self,
        rec: &Recurrence,
        charge: &RecurringCharge,
    ) -> Result<(), AutoError> {
        let now = self.engine.now();
        let record = vt_store::OutcomeRecord {
            id: self.engine.next_id("desfecho"),
            conversation_id: format!("{OUTCOME_PREFIX}{}", charge.txid),
            tenant_id: rec.tenant_id.clone(),
            channel: "pix_automatico".into(),
            desde: None,
            ate: now,
            desfecho: vt_store::Desfecho::ResolvidaPeloBot,
            intencao: "recarga_automatica".into(),
            assunto: "recarga_automatica".into(),
            caso_id: None,
            custo_micro_brl: Some(0),
            reaberta: false,
            reabre: None,
            pesquisa_em: None,
            nota: None,
            created_at: now,
        };
        self.outcomes.record_outcome(&record).await?;
        Ok(())
    }

    /// `text` to the card holder in `rec`'s conversation, held until the quiet hours end.
    async fn tell(self, rec: &Recurrence, text: String) -> Result<(), AutoError> {
        self.tell_as(rec, text, None).await
    }

    /// [`Self::tell`], with the WhatsApp `template` that stands in for `text` outside the 24-hour
    /// window (a notice days after the conversation; sent only with the card holder's opt-in).
    async fn tell_as(
        self,
        rec: &Recurrence,
        text: String,
        template: Option<crate::outbox::TemplateUse>,
    ) -> Result<(), AutoError> {
        let Some(conv) = self.conversations.conversation(&rec.conversation_id).await? else {
            return Err(AutoError::Invalid("a conversa da recorrência não existe"));
        };
        let due = self.quiet.release(self.engine.now(), &self.tz(rec));
        self.speaker
            .say_at(&conv, (text, template), Vec::new(), Some(due))
            .await?;
        Ok(())
    }

    fn tz(self, rec: &Recurrence) -> vt_domain::vt::timezone::Timezone {
        request_of(rec).map_or_else(|_| super::policy_timezone(self.engine), |i| i.politicas.timezone)
    }

    /// After a recharge of `input`'s card in conversation `conversation_id` (a receipt said): the
    /// offer of an automatic recharge on the operator's terms, kept for the card holder's next
    /// message (a yes creates it), with its two options as a list where the channel shows one. Not
    /// made when off, or when the card has one already.
    pub async fn offer(self, conversation_id: &str, input: &FlowInput) -> Result<bool, AutoError> {
        let Ok(setup) = self.setup() else {
            return Ok(false);
        };
        let Some(conv) = self.conversations.conversation(conversation_id).await? else {
            return Ok(false);
        };
        let index = vt_store::seal::card_index(&input.cartao);
        let mine = self
            .recurrences
            .user_recurrences(&conv.tenant_id, &conv.user_id)
            .await?;
        if mine.iter().any(|r| r.status.live() && r.card_index == index) {
            return Ok(false);
        }
        let masked = mask_card(&input.cartao);
        let text = vt_domain::tools::oferta(&masked, &setup.config.automatico);
        let lock = self.conversations.lock_conversation(conversation_id).await?;
        let offered = async {
            let Some(mut conv) = self.conversations.conversation(conversation_id).await? else {
                return Ok(false);
            };
            conv.state.insert(
                vt_domain::tools::STATE_OFERTA_AUTOMATICA.into(),
                serde_json::json!({"cartao": masked}),
            );
            let choices = super::offers::AUTOMATIC_CHOICES
                .iter()
                .map(|c| (*c).to_owned())
                .collect();
            let mut item = self
                .speaker
                .late_reply(&conv, text.clone(), None, (Vec::new(), choices));
            let now = self.engine.now();
            item.next_attempt_at = self.quiet.release(now, &input.politicas.timezone);
            let message = vt_engine::llm::ChatMessage::assistant(text.clone());
            self.recurrences
                .offer_automatic(&conv.id, &conv.state, (&message, &[item]), now)
                .await?;
            self.speaker.tell_listeners(&conv.id, &message);
            Ok::<_, AutoError>(true)
        }
        .await;
        lock.release().await;
        offered
    }
}

/// What a debit's recharge led to: where its charge moves, what the operator and the card holder read.
struct Told {
    to: RecurringChargeStatus,
    outcome: &'static str,
    text: String,
    template: Option<crate::outbox::TemplateUse>,
}

impl Told {
    /// The recharge of `charge` (paid by `e2e` at `paid`) ran to `output`.
    fn of(
        rec: &Recurrence,
        (charge, e2e, paid): (&RecurringCharge, &str, chrono::DateTime<chrono::Utc>),
        output: &crate::flow::FlowOutput,
        tz: &vt_domain::vt::timezone::Timezone,
    ) -> Self {
        match output.status {
            FlowStatus::Concluido => {
                let etapas = output.etapas.iter().map(|e| (e.etapa.as_str(), &e.saida));
                let novo = vt_domain::stages::novo_saldo(etapas);
                // Outside the window, the Pix receipt's template: the same facts.
                let parameters = vt_domain::pix::textos::comprovante_parametros(
                    charge.amount,
                    &final_of(rec),
                    novo,
                    paid,
                    e2e,
                    tz,
                );
                Self {
                    to: RecurringChargeStatus::Creditada,
                    outcome: "recarga feita",
                    text: textos::comprovante(rec, charge.amount, novo, paid, e2e, tz),
                    template: Some(crate::outbox::TemplateUse {
                        purpose: "comprovante_recarga".into(),
                        parameters,
                    }),
                }
            }
            // Its late outcome is the recharge follow-up's, which tells the holder.
            FlowStatus::Pendente => Self {
                to: RecurringChargeStatus::Enviada,
                outcome: "recarga em processamento",
                text: textos::em_processamento(rec, charge.amount),
                template: None,
            },
            FlowStatus::Falhou => Self {
                to: RecurringChargeStatus::Devolvida,
                outcome: "recarga não creditada; Pix devolvido",
                text: textos::devolvida(rec, charge.amount),
                template: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_of_the_month_is_the_next_one_or_the_months_last() {
        let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("date");
        assert_eq!(next_day_of_month(d("2026-12-03"), 5), d("2026-12-05"));
        assert_eq!(next_day_of_month(d("2026-12-06"), 5), d("2027-01-05"));
        assert_eq!(next_day_of_month(d("2027-02-01"), 31), d("2027-02-28"));
        assert_eq!(next_day_of_month(d("2026-12-31"), 31), d("2026-12-31"));
    }
}
