//! A paid second copy's fee: the payment is not a recharge — it orders the second copy at the card
//! system, under the desk request's key (`segunda_via:<id>`), which also tells its charges apart.

#[allow(clippy::wildcard_imports)] // the parent's types and imports: one module split by what it does
use super::*;

impl Payments<'_> {
    /// A second copy whose fee `charge` was paid by `e2e`: ordered at the card system under the
    /// request's own key (the charge's), the payment as its token — a notice read twice, a sweep that
    /// resumes it after a stop, each gets the same order back, so the balance moves once. Refused, the
    /// fee goes back and a person looks; no answer, it stays paid and the sweep asks again.
    pub(super) async fn order_second_copy(
        &self,
        charge: &PixCharge,
        e2e: &str,
    ) -> Result<Settled, PaymentError> {
        use vt_domain::systems::{ORDEM_TIMEOUT_MS, OrdemCartao, SystemsPort};
        use vt_domain::tools::SegundaViaPaga;
        let input = recharge_of(charge)?;
        let systems = self
            .engine
            .extensions()
            .get::<SystemsPort>()
            .ok_or(PaymentError::Invalid(
                "nenhum sistema de cartões está configurado",
            ))?
            .get();
        let headers = std::collections::BTreeMap::from([
            ("x-tenant-id".to_owned(), input.tenant_id.clone()),
            ("x-origin".to_owned(), input.origem.clone()),
            ("x-idempotency-key".to_owned(), charge.recharge_key.clone()),
        ]);
        let meio = charge.meio.as_str();
        let body = serde_json::json!({"cartao": input.cartao, "pagamento": {"tipo": meio, "token": e2e}});
        let sent = systems
            .ordem_cartao(OrdemCartao::SegundaVia, &body, &headers, ORDEM_TIMEOUT_MS)
            .await;
        match vt_domain::tools::segunda_via_paga(&input.cartao, (charge.amount, meio), &sent) {
            SegundaViaPaga::Incerta => Ok(Settled::Nothing),
            SegundaViaPaga::Pedida(text) => {
                if !self.moved(charge, ChargeStatus::Creditada).await? {
                    return Ok(Settled::Nothing);
                }
                self.tell(charge, text, None, true).await?;
                Ok(Settled::Credited)
            }
            SegundaViaPaga::Recusada(why) => {
                self.refund(charge, e2e).await?;
                if !self.moved(charge, ChargeStatus::Devolvida).await? {
                    return Ok(Settled::Nothing);
                }
                let cartao = vt_domain::vt::mask_card(&input.cartao);
                let case = self
                    .hand_to_a_person(charge, e2e, Handover::SecondCopyRefused(&why))
                    .await?;
                let valor =
                    vt_domain::vt::money_for_people("BRL", charge.amount, vt_domain::vt::Idioma::PtBr);
                let mut text = format!(
                    "A segunda via do cartão {cartao} não pôde ser pedida ({why}), e o pagamento de {valor} da taxa foi devolvido. Uma pessoa da nossa equipe vai cuidar disso."
                );
                if let Some(line) = case {
                    text = format!("{text}\n{line}");
                }
                self.tell(charge, text, None, true).await?;
                Ok(Settled::Refunded)
            }
        }
    }
}

/// Whether `charge` pays a second copy's fee (its key is the desk request's), not a recharge.
pub(super) fn is_second_copy(charge: &PixCharge) -> bool {
    pays_a_second_copy(&charge.recharge_key)
}

/// Whether the charges under `recharge_key` pay a second copy's fee (the desk request's key).
fn pays_a_second_copy(recharge_key: &str) -> bool {
    recharge_key.starts_with("segunda_via:")
}

/// What a charge under `recharge_key` pays for, as the provider shows the payer (`cartao` masked).
pub(super) fn what_is_paid(recharge_key: &str, cartao: &str) -> String {
    if pays_a_second_copy(recharge_key) {
        format!("Taxa da segunda via do cartão de vale-transporte {cartao}")
    } else {
        format!("Recarga de vale-transporte, cartão {cartao}")
    }
}
