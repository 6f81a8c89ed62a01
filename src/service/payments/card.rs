//! A recharge paid by card: the checkout link issued at the card provider and kept on record, and the
//! chat tools' port to it ([`vt_domain::tools::CardCheckouts`]).

#[allow(clippy::wildcard_imports)] // the parent's types and imports: one module split by what it does
use super::*;

/// The checkout at the card provider, then on record; what the card holder is shown. The same key and
/// `n` ask the provider under the same idempotency key: a retry or a restart shows the same link.
pub(super) async fn issue_link(
    store: &dyn PixStore,
    setup: &CardSetup,
    checkout: Charge<'_>,
    now: DateTime<Utc>,
) -> Result<LinkCartao, PaymentError> {
    let (recharge, recharge_key, n) = (checkout.recharge, checkout.recharge_key, checkout.n);
    let valor = checkout.amount()?;
    let cartao = vt_domain::vt::mask_card(&recharge.cartao);
    let pedido = PedidoLink {
        valor,
        referencia: vt_domain::pix::txid(recharge_key, n),
        descricao: what_is_paid(recharge_key, &cartao),
        expira_em: now + Duration::minutes(i64::from(setup.config.expiracao_minutos)),
        chave: format!("checkout-{recharge_key}-{n}"),
    };
    let link = setup
        .provider
        .criar(&pedido)
        .instrument(spans::step("cartão: criar link"))
        .await?;
    if link.valor != valor || link.url.is_empty() {
        return Err(PaymentError::Invalid(
            "o link do provedor de cartão não confere com a recarga",
        ));
    }
    let stored = checkout
        .open(
            store,
            (ChargeMeans::CartaoCredito, link.id, link.url),
            link.expira_em,
            now,
        )
        .await?;
    Ok(link_shown(&stored, recharge))
}

/// A checkout on record as the card holder is shown it: the line with its link.
pub(super) fn link_shown(charge: &PixCharge, recharge: &FlowInput) -> LinkCartao {
    let cartao = vt_domain::vt::mask_card(&recharge.cartao);
    LinkCartao {
        id: charge.txid.clone(),
        texto: (if is_second_copy(charge) {
            vt_domain::cartao::textos::link_taxa
        } else {
            vt_domain::cartao::textos::link
        })(
            charge.amount,
            &cartao,
            &charge.copia_e_cola,
            charge.expires_at,
            &recharge.politicas.timezone,
        ),
        url: charge.copia_e_cola.clone(),
        expira_em: charge.expires_at,
    }
}

/// A new link for recharge `recharge_key`: its last one again while it holds; after it expired, the
/// next (withdrawing it first if the sweep has not), up to `[cartao] novos_links_max`; none once paid.
pub(super) async fn renew_link(
    store: &dyn PixStore,
    setup: &CardSetup,
    recharge_key: &str,
    now: DateTime<Utc>,
) -> Result<NovoLink, PaymentError> {
    let charges = store.recharge_charges(recharge_key).await?;
    let Some(last) = charges.last() else {
        return Err(PaymentError::Invalid("a recarga não tem link de pagamento"));
    };
    let paid = |c: &PixCharge| !matches!(c.status, ChargeStatus::Ativa | ChargeStatus::Expirada);
    if charges.iter().any(paid) {
        return Ok(NovoLink::JaPago);
    }
    let input = recharge_of(last)?;
    if last.status == ChargeStatus::Ativa && now < last.expires_at {
        return Ok(NovoLink::AindaValido(link_shown(last, &input)));
    }
    let n = u32::try_from(last.n).unwrap_or(u32::MAX).saturating_add(1);
    if n > setup.config.novos_links_max {
        return Ok(NovoLink::Limite);
    }
    if last.status == ChargeStatus::Ativa
        && withdraw(store, &Rail::Card(setup), last).await? == Withdrawal::PaidMeanwhile
    {
        return Ok(NovoLink::JaPago);
    }
    let checkout = Charge {
        conversation_id: &last.conversation_id,
        recharge: &input,
        recharge_key,
        n,
    };
    Ok(NovoLink::Emitido(issue_link(store, setup, checkout, now).await?))
}

/// The chat tools' way to send a confirmed card recharge to the provider's checkout
/// ([`vt_domain::tools::CardCheckouts`]): the link in the calling turn's conversation, at its time.
pub(super) struct CardPort {
    store: Arc<dyn PixStore>,
    setup: CardSetup,
}

#[async_trait::async_trait]
impl vt_domain::tools::CardCheckouts for CardPort {
    async fn link(
        &self,
        ctx: &ActionContext,
        input: &FlowInput,
        recharge_key: &str,
        n: u32,
    ) -> Result<LinkCartao, ActionError> {
        let checkout = Charge {
            conversation_id: &ctx.conversation_id,
            recharge: input,
            recharge_key,
            n,
        };
        issue_link(self.store.as_ref(), &self.setup, checkout, ctx.now)
            .await
            .map_err(|e| ActionError::failed("não foi possível gerar o link de pagamento", e.to_string()))
    }

    async fn novo_link(&self, ctx: &ActionContext, recharge_key: &str) -> Result<NovoLink, ActionError> {
        renew_link(self.store.as_ref(), &self.setup, recharge_key, ctx.now)
            .await
            .map_err(|e| {
                ActionError::failed("não foi possível gerar um novo link de pagamento", e.to_string())
            })
    }
}

/// The port the chat tools send card recharges to the checkout through, for the engine's extensions.
pub fn card_port(store: Arc<dyn PixStore>, setup: CardSetup) -> vt_domain::tools::SharedCardCheckouts {
    Arc::new(CardPort { store, setup })
}
