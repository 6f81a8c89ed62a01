//! Where a Pix charge and a card checkout differ: which provider a charge is read from, withdrawn at
//! and refunded by ([`Rail`]), and what the card holder reads about it ([`Texts`]).

#[allow(clippy::wildcard_imports)] // the parent's types and imports: one module split by what it does
use super::*;

/// The provider a charge is paid through: what differs between a Pix code and a card checkout.
pub(super) enum Rail<'a> {
    Pix(&'a PixSetup),
    Card(&'a CardSetup),
}

impl Payments<'_> {
    /// The provider `charge` is paid through; an error where it is not configured any more.
    pub(super) fn rail(&self, charge: &PixCharge) -> Result<Rail<'_>, PaymentError> {
        match charge.meio {
            ChargeMeans::Pix => self.pix_setup.map(Rail::Pix),
            ChargeMeans::CartaoCredito => self.card.map(Rail::Card),
        }
        .ok_or(PaymentError::NotConfigured)
    }
}

impl Rail<'_> {
    /// The payment of `charge`'s amount the provider says it received (its id, and when), if any.
    pub(super) async fn paid(
        &self,
        charge: &PixCharge,
        now: DateTime<Utc>,
    ) -> Result<Option<(String, DateTime<Utc>)>, PaymentError> {
        Ok(match self {
            Self::Pix(setup) => {
                let cob = setup
                    .psp
                    .cob(&charge.txid)
                    .instrument(spans::step("pix: ler cobrança"))
                    .await?;
                (cob.status == CobStatus::Concluida)
                    .then(|| cob.pix.into_iter().find(|p| p.valor == charge.amount))
                    .flatten()
                    .map(|pix| {
                        let at = DateTime::parse_from_rfc3339(&pix.horario).map_or(now, Into::into);
                        (pix.end_to_end_id, at)
                    })
            }
            Self::Card(setup) => {
                let link = setup
                    .provider
                    .ler(&charge.txid)
                    .instrument(spans::step("cartão: ler pagamento"))
                    .await?;
                // Only a payment of the charge's own amount credits.
                (link.status == LinkStatus::Pago && link.valor == charge.amount)
                    .then_some(link.pagamento)
                    .flatten()
                    .map(|payment| (payment, now))
            }
        })
    }

    /// `charge` withdrawn unpaid at the provider; `false` when it was paid meanwhile.
    pub(super) async fn withdraw(&self, charge: &PixCharge) -> Result<bool, PaymentError> {
        match self {
            Self::Pix(setup) => match setup
                .psp
                .remover_cob(&charge.txid)
                .instrument(spans::step("pix: retirar cobrança"))
                .await
            {
                Ok(cob) => Ok(cob.status == CobStatus::RemovidaPeloUsuarioRecebedor),
                Err(PixError::Refused { status: 400, .. }) => Ok(false),
                Err(e) => Err(e.into()),
            },
            Self::Card(setup) => {
                let link = setup
                    .provider
                    .expirar(&charge.txid)
                    .instrument(spans::step("cartão: expirar link"))
                    .await?;
                Ok(link.status != LinkStatus::Pago)
            }
        }
    }

    /// `charge`'s amount of payment `payment` returned; the provider's word on it.
    pub(super) async fn refund(
        &self,
        charge: &PixCharge,
        payment: &str,
    ) -> Result<DevolucaoStatus, PaymentError> {
        Ok(match self {
            Self::Pix(setup) => {
                let id = vt_domain::pix::refund_id(payment);
                setup
                    .psp
                    .devolver(payment, &id, charge.amount)
                    .instrument(spans::step("pix: devolução"))
                    .await?
                    .status
            }
            Self::Card(setup) => {
                // One refund per payment, whoever asks: its key is the payment's.
                let estorno = setup
                    .provider
                    .estornar(payment, charge.amount, &format!("estorno-{payment}"))
                    .instrument(spans::step("cartão: estorno"))
                    .await?;
                as_devolucao(estorno.status)
            }
        })
    }

    /// Where the refund of payment `payment` stands at the provider, if it knows one.
    pub(super) async fn refund_status(&self, payment: &str) -> Result<Option<DevolucaoStatus>, PaymentError> {
        Ok(match self {
            Self::Pix(setup) => {
                let pix = setup
                    .psp
                    .pix(payment)
                    .instrument(spans::step("pix: ler devolução"))
                    .await?;
                let id = vt_domain::pix::refund_id(payment);
                pix.devolucoes.iter().find(|d| d.id == id).map(|d| d.status)
            }
            Self::Card(setup) => setup
                .provider
                .estorno(payment)
                .instrument(spans::step("cartão: ler estorno"))
                .await?
                .map(|e| as_devolucao(e.status)),
        })
    }
}

/// A card refund's status in the words charges keep (the API Pix's).
pub(super) fn as_devolucao(status: EstornoStatus) -> DevolucaoStatus {
    match status {
        EstornoStatus::EmProcessamento => DevolucaoStatus::EmProcessamento,
        EstornoStatus::Devolvido => DevolucaoStatus::Devolvido,
        EstornoStatus::NaoRealizado => DevolucaoStatus::NaoRealizado,
    }
}

/// A receipt's text: amount, masked card, new balance, paid at, the payment's id, the time zone.
pub(super) type Receipt = fn(
    rust_decimal::Decimal,
    &str,
    Option<rust_decimal::Decimal>,
    DateTime<Utc>,
    &str,
    &vt_domain::vt::timezone::Timezone,
) -> String;

/// What the card holder reads about a charge, by how it is paid.
pub(super) struct Texts {
    pub(super) comprovante: Receipt,
    pub(super) devolvido: fn(rust_decimal::Decimal, &str) -> String,
    pub(super) em_processamento: fn(rust_decimal::Decimal, &str) -> String,
    pub(super) expirado: fn(rust_decimal::Decimal, &str) -> String,
    pub(super) duplicado: fn(rust_decimal::Decimal, &str) -> String,
}

impl Texts {
    pub(super) fn of(meio: ChargeMeans) -> &'static Self {
        use vt_domain::cartao::textos as cartao;
        static PIX: Texts = Texts {
            comprovante: textos::comprovante,
            devolvido: textos::devolvido,
            em_processamento: textos::em_processamento,
            expirado: textos::expirado,
            duplicado: textos::duplicado,
        };
        static CARTAO: Texts = Texts {
            comprovante: cartao::comprovante,
            devolvido: cartao::devolvido,
            em_processamento: cartao::em_processamento,
            expirado: cartao::expirado,
            duplicado: cartao::duplicado,
        };
        match meio {
            ChargeMeans::Pix => &PIX,
            ChargeMeans::CartaoCredito => &CARTAO,
        }
    }
}
