//! What an automatic recharge sends: the provider's requests (a recurrence, its charges, cancelling them) and the recharge a debit pays for.

use super::*;

/// The charges of `rec` not yet debited, cancelled at the provider, then on record. One the provider
/// cannot cancel any more (its first attempt is today or past), could not be read, or debited already
/// stays as it is: the pass settles it, and a debit is credited — never a debit marked cancelled.
/// Returns the dates of those that stay.
pub(super) async fn cancel_open_charges(
    store: &dyn RecurrenceStore,
    psp: &vt_connectors::pix::Psp,
    rec: &Recurrence,
) -> Result<Vec<String>, AutoError> {
    let mut kept = Vec::new();
    for charge in store.charges_of_recurrence(&rec.id).await? {
        if !matches!(
            charge.status,
            RecurringChargeStatus::Nova | RecurringChargeStatus::Agendada
        ) {
            continue;
        }
        let cancelled = match psp.cobr(&charge.txid).await {
            Ok(c) if c.status == CobRStatus::Cancelada => true,
            Ok(c) if matches!(c.status, CobRStatus::Criada | CobRStatus::Ativa) => {
                psp.cancelar_cobr(&charge.txid).await.is_ok()
            }
            // Never created there (its creation got no answer): nothing to stop.
            Err(e) => e.is_not_found(),
            Ok(_) => false,
        };
        if cancelled {
            store
                .move_recurring_charge(&charge.txid, charge.status, RecurringChargeStatus::Cancelada)
                .await?;
        } else {
            tracing::warn!(txid = %charge.txid, "a recurring charge could not be cancelled; the pass settles it");
            kept.push(charge.due_on);
        }
    }
    Ok(kept)
}

/// `POST /rec`'s body: our `id` as its contract, the card `masked` as its object and its payer's name
/// (no personal data of the card holder's reaches the provider), from `first` every `periodicidade`,
/// `valor` fixed, retries allowed, its QR code at location `loc`.
pub(super) fn rec_pedido(
    id: &str,
    masked: &str,
    (first, periodicidade): (NaiveDate, Periodicidade),
    valor: Decimal,
    loc: u64,
) -> RecPedido {
    RecPedido {
        vinculo: Vinculo {
            objeto: Some(format!("Recarga VT cartão {masked}")),
            contrato: id.to_owned(),
            devedor: Devedor {
                cpf: None,
                nome: format!("Titular do cartão {masked}"),
            },
        },
        calendario: CalendarioRec {
            data_inicial: first.to_string(),
            data_final: None,
            periodicidade,
        },
        valor: ValorRec {
            valor_rec: Some(valor),
            valor_minimo_recebedor: None,
        },
        politica_retentativa: PoliticaRetentativa::Permite3r7d,
        loc: Some(loc),
    }
}

/// `PUT /cobr`'s body for `charge` of `rec` (the provider's `id_rec`).
pub(super) fn cobr_pedido(rec: &Recurrence, id_rec: String, charge: &RecurringCharge) -> CobRPedido {
    CobRPedido {
        id_rec,
        info_adicional: Some(format!("Recarga de vale-transporte {}", rec.card_masked)),
        calendario: CalendarioCobR {
            criacao: None,
            data_de_vencimento: charge.due_on.clone(),
        },
        valor: vt_domain::pix::api::ValorOriginal {
            original: charge.amount,
        },
        ajuste_dia_util: false,
    }
}

/// The recharge a debit of `charge` pays: `rec`'s, with the payment `e2e` as its token, under the
/// payment's own key.
pub(super) fn debit_recharge(
    rec: &Recurrence,
    charge: &RecurringCharge,
    e2e: &str,
) -> Result<FlowInput, AutoError> {
    let mut input = request_of(rec)?;
    input.recarga = Some(Recarga {
        valor: Some(charge.amount),
        moeda: Some("BRL".into()),
        meio_pagamento: MeioPagamento {
            tipo: "pix".into(),
            token: Some(PaymentToken::new(e2e)),
        },
        idempotency_key: None,
    });
    input
        .with_request_key(&format!("pixauto-{e2e}"))
        .map_err(|_| AutoError::Invalid("chave da recarga inválida"))
}

/// The card's last four digits, as a template names it (`****7890` → `7890`).
pub(super) fn final_of(rec: &Recurrence) -> String {
    rec.card_masked.trim_start_matches('*').to_owned()
}

pub(super) fn date(text: &str) -> Result<NaiveDate, AutoError> {
    NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| AutoError::Invalid("data de cobrança inválida"))
}

/// The first `day` of a month on or after `from` (a month without it: its last day).
pub(super) fn next_day_of_month(from: NaiveDate, day: u32) -> NaiveDate {
    let in_month = |y: i32, m: u32| {
        (1..=day)
            .rev()
            .find_map(|d| NaiveDate::from_ymd_opt(y, m, d))
            .unwrap_or(from)
    };
    let this = in_month(from.year(), from.month());
    if this >= from {
        return this;
    }
    let (y, m) = if from.month() == 12 {
        (from.year() + 1, 1)
    } else {
        (from.year(), from.month() + 1)
    };
    in_month(y, m)
}

/// The recharge a recurrence sends, opened.
pub(super) fn request_of(rec: &Recurrence) -> Result<FlowInput, AutoError> {
    vt_contract::json::from_ref(&rec.request)
        .map_err(|_| AutoError::Invalid("recarga da recorrência ilegível"))
}
