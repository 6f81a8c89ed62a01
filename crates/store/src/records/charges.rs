//! Charges issued for chat recharges (Pix codes, card checkouts): how each is paid, where it stands,
//! what a payment claim found, a refund.

use super::*;

impl PixCharge {
    /// The payment codes this charge put in its conversation — the txid, the copia-e-cola (a card
    /// checkout's link), the payment's id and a refund's — which the person the conversation belongs
    /// to is shown whole ([`vt_domain::vt::card::mask_cards_except`]).
    pub fn codes(&self) -> Vec<String> {
        let mut codes = vec![self.txid.clone(), self.copia_e_cola.clone()];
        codes.extend(self.end_to_end_id.clone());
        codes.extend(self.refund.as_ref().map(|r| r.end_to_end_id.clone()));
        codes
    }
}

/// How a charge is paid ([`PixCharge::meio`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChargeMeans {
    /// A Pix code (the API Pix).
    Pix,
    /// A card, on the card provider's hosted checkout.
    CartaoCredito,
}

impl ChargeMeans {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pix => "pix",
            Self::CartaoCredito => "cartao_credito",
        }
    }

    pub fn from_row(s: &str) -> Result<Self, StoreError> {
        match s {
            "pix" => Ok(Self::Pix),
            "cartao_credito" => Ok(Self::CartaoCredito),
            _ => Err(StoreError::Invalid(format!("meio de cobrança desconhecido: {s}"))),
        }
    }
}

/// Where a Pix charge stands ([`PixStore`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChargeStatus {
    /// Issued, waiting to be paid.
    Ativa,
    /// Paid (its payment claimed): the recharge is on its way.
    Paga,
    /// Paid and credited: the receipt was sent.
    Creditada,
    /// Paid and sent; the recharge system has not said yet: its late outcome is followed up as any
    /// recharge's is (`[recargas]`).
    Enviada,
    /// Paid, not credited (the recharge system refused it): the money goes back.
    Devolvida,
    /// Expired unpaid and withdrawn at the provider.
    Expirada,
}

impl ChargeStatus {
    pub const ALL: [Self; 6] = [
        Self::Ativa,
        Self::Paga,
        Self::Creditada,
        Self::Enviada,
        Self::Devolvida,
        Self::Expirada,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ativa => "ativa",
            Self::Paga => "paga",
            Self::Creditada => "creditada",
            Self::Enviada => "enviada",
            Self::Devolvida => "devolvida",
            Self::Expirada => "expirada",
        }
    }

    /// A status as a row holds it.
    pub fn from_row(text: &str) -> Result<Self, StoreError> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| StoreError::Invalid(format!("status de cobrança Pix desconhecido: {text:?}")))
    }
}

/// A charge issued at the payment provider for a confirmed chat recharge: the code the card holder
/// pays, and the recharge to send once they have.
#[derive(Debug, Clone, PartialEq)]
pub struct PixCharge {
    /// The provider's charge id: a Pix charge's derived from the recharge's key and `n`
    /// ([`vt_domain::pix::txid`]); a card checkout's the provider's own (`cs_…`).
    pub txid: String,
    /// How it is paid: a Pix code, or a card on the provider's checkout page.
    pub meio: ChargeMeans,
    /// The recharge it pays (its idempotency key): every code of one recharge shares it.
    pub recharge_key: String,
    /// Which of the recharge's codes this is (0, then one more per "novo código").
    pub n: i64,
    pub conversation_id: String,
    /// The recharge to send once paid (card, amount, tenant…), sealed.
    pub request: Value,
    pub amount: rust_decimal::Decimal,
    /// The BR Code the card holder copies (checked before it was stored); a card checkout's link.
    pub copia_e_cola: String,
    pub status: ChargeStatus,
    pub expires_at: DateTime<Utc>,
    /// The payment that paid it (its Banco Central id; the card provider's payment id), once claimed.
    pub end_to_end_id: Option<String>,
    pub paid_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// The payment it returned, when one was ([`PixStore::record_refund`]).
    pub refund: Option<PixRefund>,
    /// The flow run that sent its recharge once paid ([`PixStore::note_credit_run`]).
    pub execucao_id: Option<String>,
}

/// The provider's status of a refund it has not settled yet: read back until it has.
pub const REFUND_IN_PROGRESS: &str = "EM_PROCESSAMENTO";

/// A payment a charge returned to its payer, and the provider's word on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PixRefund {
    /// The payment returned: the charge's own, or a second code's for a recharge paid already.
    pub end_to_end_id: String,
    /// `EM_PROCESSAMENTO` (read back until final), `DEVOLVIDO` or `NAO_REALIZADO`.
    pub status: String,
}

/// What claiming a payment found ([`PixStore::claim_payment`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaymentClaim {
    /// This call claimed it: its recharge is to be sent, by this caller alone.
    First,
    /// The same payment was claimed before (a second webhook, a follow-up, another process).
    Again,
    /// Another code of the same recharge was paid and claimed first: this payment goes back.
    OtherCodePaid,
    /// The charge was claimed by another payment (a provider that reports two for one charge).
    OtherPayment,
    /// No such charge on record.
    Unknown,
}
