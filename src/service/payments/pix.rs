//! The chat tools' port to Pix ([`vt_domain::tools::PixCharges`]): a confirmed recharge's charge
//! issued in the calling turn's conversation, and a new code when the last one expired.

#[allow(clippy::wildcard_imports)] // the parent's types and imports: one module split by what it does
use super::*;

/// The chat tools' way to charge a confirmed Pix recharge ([`vt_domain::tools::PixCharges`]): issues
/// the charge in the calling turn's conversation, at the turn's time.
pub(super) struct PixPort {
    store: Arc<dyn PixStore>,
    setup: PixSetup,
    channels: super::super::ChannelBook,
}

#[async_trait::async_trait]
impl vt_domain::tools::PixCharges for PixPort {
    async fn issue(
        &self,
        ctx: &ActionContext,
        input: &FlowInput,
        recharge_key: &str,
        n: u32,
    ) -> Result<CodigoPix, ActionError> {
        let charge = Charge {
            conversation_id: &ctx.conversation_id,
            recharge: input,
            recharge_key,
            n,
        };
        let codigo = issue(self.store.as_ref(), &self.setup, charge, ctx.now)
            .await
            .map_err(|e| ActionError::failed("não foi possível gerar o código Pix", e.to_string()))?;
        Ok(self.as_shown_in(ctx, codigo))
    }

    async fn novo_codigo(&self, ctx: &ActionContext, recharge_key: &str) -> Result<NovoCodigo, ActionError> {
        let novo = renew(self.store.as_ref(), &self.setup, recharge_key, ctx.now)
            .await
            .map_err(|e| ActionError::failed("não foi possível gerar um novo código Pix", e.to_string()))?;
        Ok(match novo {
            NovoCodigo::Emitido(c) => NovoCodigo::Emitido(self.as_shown_in(ctx, c)),
            NovoCodigo::AindaValido(c) => NovoCodigo::AindaValido(self.as_shown_in(ctx, c)),
            other => other,
        })
    }
}

impl PixPort {
    /// `codigo` as the calling turn's channel shows it: as a native order where the channel has them
    /// and the account takes payments (`[pix] whatsapp_order_details`).
    fn as_shown_in(&self, ctx: &ActionContext, codigo: CodigoPix) -> CodigoPix {
        CodigoPix {
            pedido_nativo: self.channels.of(&ctx.channel).native_orders
                && self.setup.config.whatsapp_order_details,
            ..codigo
        }
    }
}

/// A new code for recharge `recharge_key`: its last one again while it holds; after it expired, the
/// next (withdrawing it first if the sweep has not), up to `[pix] novos_codigos_max`; none once paid.
pub(super) async fn renew(
    store: &dyn PixStore,
    setup: &PixSetup,
    recharge_key: &str,
    now: DateTime<Utc>,
) -> Result<NovoCodigo, PaymentError> {
    let charges = store.recharge_charges(recharge_key).await?;
    let Some(last) = charges.last() else {
        return Err(PaymentError::Invalid("a recarga não tem cobrança Pix"));
    };
    let paid = |c: &PixCharge| !matches!(c.status, ChargeStatus::Ativa | ChargeStatus::Expirada);
    if charges.iter().any(paid) {
        return Ok(NovoCodigo::JaPago);
    }
    let input = recharge_of(last)?;
    if last.status == ChargeStatus::Ativa && now < last.expires_at {
        return Ok(NovoCodigo::AindaValido(shown(last, &input)?));
    }
    let n = u32::try_from(last.n).unwrap_or(u32::MAX).saturating_add(1);
    if n > setup.config.novos_codigos_max {
        return Ok(NovoCodigo::Limite);
    }
    if last.status == ChargeStatus::Ativa {
        // Expired, and the sweep has not withdrawn it yet: withdrawn now, so that two codes of one
        // recharge are never payable at once. Refused: it was paid meanwhile, and will be credited.
        if withdraw(store, &Rail::Pix(setup), last).await? == Withdrawal::PaidMeanwhile {
            return Ok(NovoCodigo::JaPago);
        }
    }
    let charge = Charge {
        conversation_id: &last.conversation_id,
        recharge: &input,
        recharge_key,
        n,
    };
    Ok(NovoCodigo::Emitido(issue(store, setup, charge, now).await?))
}

/// The port the chat tools charge Pix recharges through, for the engine's extensions; `channels` say
/// where a code is shown as a native order.
pub fn pix_port(
    store: Arc<dyn PixStore>,
    setup: PixSetup,
    channels: super::super::ChannelBook,
) -> vt_domain::tools::SharedPixCharges {
    Arc::new(PixPort {
        store,
        setup,
        channels,
    })
}
