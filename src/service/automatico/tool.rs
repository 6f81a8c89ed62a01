//! The port the chat's `recarga_automatica` tool works through: authorise, list, cancel.

use super::*;

/// The port the chat's `recarga_automatica` tool works through, for the engine's extensions (on when
/// `[pix.automatico] ativo`).
pub fn port(store: Arc<dyn RecurrenceStore>, setup: PixSetup) -> vt_domain::tools::SharedRecargasAutomaticas {
    Arc::new(AutoPort { store, setup })
}

pub(super) struct AutoPort {
    store: Arc<dyn RecurrenceStore>,
    setup: PixSetup,
}

#[async_trait::async_trait]
impl RecargasAutomaticas for AutoPort {
    fn config(&self) -> &vt_domain::pix::automatico::AutomaticoConfig {
        &self.setup.config.automatico
    }

    async fn autorizar(
        &self,
        ctx: &ActionContext,
        input: &FlowInput,
        termos: Termos,
    ) -> Result<Autorizacao, ActionError> {
        self.authorise(ctx, input, termos).await.map_err(|e| {
            ActionError::failed(
                "não foi possível criar a recarga automática no banco agora",
                e.to_string(),
            )
        })
    }

    async fn listar(&self, ctx: &ActionContext) -> Result<Vec<Resumo>, ActionError> {
        let tenant = tenant_of(ctx);
        let mine = self
            .store
            .user_recurrences(&tenant, &ctx.user_id)
            .await
            .map_err(|e| {
                ActionError::failed("não foi possível ler suas recargas automáticas", e.to_string())
            })?;
        let mut listed = Vec::new();
        for rec in mine.iter().filter(|r| r.status.live()) {
            let charges = self
                .store
                .charges_of_recurrence(&rec.id)
                .await
                .unwrap_or_default();
            listed.push(resumo(rec, &charges));
        }
        Ok(listed)
    }

    async fn cancelar(&self, ctx: &ActionContext, cartao: Option<&str>) -> Result<Vec<Resumo>, ActionError> {
        self.cancel(ctx, cartao).await.map_err(|e| {
            ActionError::failed(
                "não foi possível cancelar a recarga automática agora",
                e.to_string(),
            )
        })
    }
}

/// The tenant of the calling turn's recharges (`[vt] tenant_id`, as the tools' settings say).
pub(super) fn tenant_of(ctx: &ActionContext) -> String {
    vt_domain::tools::VtSettings::of(ctx).tenant_id
}

impl AutoPort {
    async fn authorise(
        &self,
        ctx: &ActionContext,
        input: &FlowInput,
        termos: Termos,
    ) -> Result<Autorizacao, AutoError> {
        let config = &self.setup.config.automatico;
        let psp = &self.setup.psp;
        let masked = mask_card(&input.cartao);
        let id = format!("va{}", &uuid::Uuid::new_v4().simple().to_string()[..30]);
        let today = input.politicas.timezone.local(ctx.now).date_naive();
        let periodicidade = config
            .periodicidades
            .first()
            .copied()
            .unwrap_or(Periodicidade::Mensal);
        let first = match termos.gatilho {
            Gatilho::Dia(day) => next_day_of_month(today + Duration::days(ANTECEDENCIA.0), day),
            Gatilho::Limite(_) => today + Duration::days(ANTECEDENCIA.0),
        };
        let loc = psp.criar_locrec().await?;
        let pedido = rec_pedido(&id, &masked, (first, periodicidade), termos.valor, loc.id);
        let created = psp.criar_rec(&pedido).await?;
        let code = match created.dados_qr {
            Some(q) => q.pix_copia_e_cola,
            None => psp
                .rec(&created.id_rec)
                .await?
                .dados_qr
                .map(|q| q.pix_copia_e_cola)
                .ok_or(AutoError::Invalid("o provedor não deu o código de autorização"))?,
        };
        let code = BrCode::checked_rec(&code, &loc.location)?.as_str().to_owned();
        let kind = match termos.gatilho {
            Gatilho::Limite(l) => RecurrenceKind::Limite(l),
            Gatilho::Dia(d) => RecurrenceKind::Dia(d),
        };
        let rec = Recurrence {
            id: id.clone(),
            id_rec: Some(created.id_rec),
            tenant_id: input.tenant_id.clone(),
            conversation_id: ctx.conversation_id.clone(),
            user_id: ctx.user_id.clone(),
            card_index: vt_store::seal::card_index(&input.cartao),
            card_masked: masked.clone(),
            request: vt_contract::json::to_value(input)
                .map_err(|_| AutoError::Invalid("recarga ilegível"))?,
            kind,
            amount: termos.valor,
            periodicidade: periodicidade.as_str().to_owned(),
            status: RecurrenceStatus::Criada,
            copia_e_cola: Some(code.clone()),
            checked_on: None,
            last_outcome: Some("aguardando autorização no banco".into()),
            created_at: ctx.now,
            approved_at: None,
            ended_at: None,
        };
        self.store.put_recurrence(&rec).await?;
        Ok(Autorizacao {
            id,
            texto: textos::autorizar(&masked, &termos),
            copia_e_cola: code,
        })
    }

    async fn cancel(&self, ctx: &ActionContext, cartao: Option<&str>) -> Result<Vec<Resumo>, AutoError> {
        let tenant = tenant_of(ctx);
        let index = cartao.map(|c| vt_store::seal::card_index(&vt_domain::vt::card::clean(c)));
        let mine = self.store.user_recurrences(&tenant, &ctx.user_id).await?;
        let mut cancelled = Vec::new();
        for rec in mine
            .iter()
            .filter(|r| r.status.live() && index.as_ref().is_none_or(|i| *i == r.card_index))
        {
            if let Some(id_rec) = rec.id_rec.as_deref() {
                self.setup.psp.cancelar_rec(id_rec).await?;
            }
            let from = [RecurrenceStatus::Criada, RecurrenceStatus::Aprovada];
            if self
                .store
                .move_recurrence(&rec.id, &from, RecurrenceStatus::Cancelada, ctx.now)
                .await?
            {
                self.store
                    .note_recurrence(&rec.id, "cancelada na conversa")
                    .await?;
                let kept = cancel_open_charges(self.store.as_ref(), &self.setup.psp, rec).await?;
                let mut line = resumo(rec, &[]);
                for day in kept.iter().filter_map(|d| date(d).ok()) {
                    line.linha.push_str(&textos::debito_mantido(day));
                }
                cancelled.push(line);
            }
        }
        Ok(cancelled)
    }
}

pub(super) fn resumo(rec: &Recurrence, charges: &[RecurringCharge]) -> Resumo {
    let estado = match rec.status {
        RecurrenceStatus::Criada => "aguardando sua autorização no banco".to_owned(),
        _ => match charges
            .iter()
            .rev()
            .find(|c| {
                matches!(
                    c.status,
                    RecurringChargeStatus::Nova | RecurringChargeStatus::Agendada
                )
            })
            .and_then(|c| date(&c.due_on).ok())
        {
            Some(d) => format!("ativa; próximo débito em {}", d.format("%d/%m/%Y")),
            None => "ativa".to_owned(),
        },
    };
    Resumo {
        cartao: rec.card_masked.clone(),
        linha: format!("Cartão {}: {} — {estado}", rec.card_masked, textos::termos(rec)),
    }
}
