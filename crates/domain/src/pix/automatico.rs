//! Pix Automático's bodies (API Pix 2.9.0, journeys 2–4): a recurrence the payer authorises once in
//! their bank app (`/locrec`, `/rec`), the charges of each cycle (`/cobr`, debited without a new
//! approval on their date), a retry after a failed attempt (`/cobr/{txid}/retentativa/{data}`) and
//! the webhooks' notices (`/webhookrec`, `/webhookcobr`). Only the fields the product sends or reads;
//! a field it does not know is ignored, as the API's evolution rules ask.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::api::valor;

/// `[pix.automatico]`: recharges that happen by themselves, paid by Pix Automático.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct AutomaticoConfig {
    /// Offer and run automatic recharges (the provider must take Pix Automático).
    pub ativo: bool,
    /// How often a recurrence may charge, the ones a card holder may choose (the first is the
    /// default); a threshold recharge charges at most once per period.
    pub periodicidades: Vec<Periodicidade>,
    /// The most one automatic recharge may be (within the policy's `valor_max` too).
    #[serde(with = "crate::vt::input::money_serde")]
    #[schemars(with = "f64")]
    pub valor_maximo: Decimal,
    /// How many days before its date a day-of-the-month charge is sent (the arrangement's rule: 2 to
    /// 10; default 5); the card holder is told the date then. A threshold's charge is sent for two
    /// days after the reading, the soonest the arrangement allows.
    pub antecedencia_dias: u32,
    /// The threshold the offer proposes: recharge when the balance falls below it.
    #[serde(with = "crate::vt::input::money_serde")]
    #[schemars(with = "f64")]
    pub limite_padrao: Decimal,
    /// The amount the offer proposes.
    #[serde(with = "crate::vt::input::money_serde")]
    #[schemars(with = "f64")]
    pub valor_padrao: Decimal,
}

impl Default for AutomaticoConfig {
    fn default() -> Self {
        Self {
            ativo: false,
            periodicidades: vec![Periodicidade::Mensal],
            valor_maximo: Decimal::new(200, 0),
            antecedencia_dias: 5,
            limite_padrao: Decimal::new(20, 0),
            valor_padrao: Decimal::new(50, 0),
        }
    }
}

impl AutomaticoConfig {
    /// The first field that cannot serve (its name under `[pix.automatico]`) and why.
    pub fn problem(&self) -> Option<(&'static str, &'static str)> {
        let days = i64::from(self.antecedencia_dias);
        if self.periodicidades.is_empty() {
            Some(("periodicidades", "precisa ter ao menos uma (ex.: [\"MENSAL\"])"))
        } else if self.valor_maximo <= Decimal::ZERO || self.valor_maximo.scale() > 2 {
            Some(("valor_maximo", "precisa ser um valor positivo com até 2 casas"))
        } else if !(ANTECEDENCIA.0..=ANTECEDENCIA.1).contains(&days) {
            Some((
                "antecedencia_dias",
                "precisa estar entre 2 e 10 (regra do Pix Automático)",
            ))
        } else if self.limite_padrao <= Decimal::ZERO {
            Some(("limite_padrao", "precisa ser um valor positivo"))
        } else if self.valor_padrao <= Decimal::ZERO || self.valor_padrao > self.valor_maximo {
            Some(("valor_padrao", "precisa ser positivo e no máximo valor_maximo"))
        } else {
            None
        }
    }
}

/// `POST /locrec`'s answer: where the recurrence's payload is served (it goes inside the QR code).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocRec {
    pub id: u64,
    pub location: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criacao: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_rec: Option<String>,
}

/// How often a recurrence charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Periodicidade {
    Semanal,
    Mensal,
    Trimestral,
    Semestral,
    Anual,
}

impl Periodicidade {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Semanal => "SEMANAL",
            Self::Mensal => "MENSAL",
            Self::Trimestral => "TRIMESTRAL",
            Self::Semestral => "SEMESTRAL",
            Self::Anual => "ANUAL",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Semanal,
            Self::Mensal,
            Self::Trimestral,
            Self::Semestral,
            Self::Anual,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }

    /// The cycle `date` falls in (`2026-12`, `2026-W49`, `2026-T4`…): one charge per cycle.
    pub fn cycle(self, date: chrono::NaiveDate) -> String {
        use chrono::Datelike as _;
        let (y, m) = (date.year(), date.month());
        match self {
            Self::Semanal => {
                let w = date.iso_week();
                format!("{}-W{:02}", w.year(), w.week())
            }
            Self::Mensal => format!("{y}-{m:02}"),
            Self::Trimestral => format!("{y}-T{}", (m - 1) / 3 + 1),
            Self::Semestral => format!("{y}-S{}", (m - 1) / 6 + 1),
            Self::Anual => format!("{y}"),
        }
    }
}

/// Whether a failed attempt may be tried again: `PERMITE_3R_7D` — up to three retries within seven
/// days of the due date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PoliticaRetentativa {
    NaoPermite,
    #[serde(rename = "PERMITE_3R_7D")]
    Permite3r7d,
}

/// How many days ahead of its date a recurring charge is sent: from two to ten (the arrangement's
/// rule; the payer's bank announces it meanwhile, and it can be cancelled until the day before).
pub const ANTECEDENCIA: (i64, i64) = (2, 10);

/// How many retries `PERMITE_3R_7D` allows, and within how many days of the due date.
pub const RETENTATIVAS: (u32, i64) = (3, 7);

/// `POST /rec`: the recurrence the payer will authorise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecPedido {
    pub vinculo: Vinculo,
    pub calendario: CalendarioRec,
    pub valor: ValorRec,
    pub politica_retentativa: PoliticaRetentativa,
    /// The location from `/locrec` (journey 2: the payer scans its QR code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loc: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Vinculo {
    /// What the payer reads in their bank app (≤ 35): the card, masked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objeto: Option<String>,
    /// Our id for it (≤ 35): the recurrence's on our side.
    pub contrato: String,
    pub devedor: Devedor,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Devedor {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpf: Option<String>,
    pub nome: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CalendarioRec {
    /// `YYYY-MM-DD`: the first payment, estimated.
    pub data_inicial: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_final: Option<String>,
    pub periodicidade: Periodicidade,
}

/// A fixed amount (`valorRec`), or a variable one with the receiver's floor (`valorMinimoRecebedor`;
/// the payer sets a maximum in their bank): never both.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValorRec {
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_valor")]
    pub valor_rec: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_valor")]
    pub valor_minimo_recebedor: Option<Decimal>,
}

/// A recurrence as the PSP answers, reads and notifies it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rec {
    pub id_rec: String,
    pub status: RecStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vinculo: Option<Vinculo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendario: Option<CalendarioRec>,
    #[serde(default)]
    pub valor: ValorRec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub politica_retentativa: Option<PoliticaRetentativa>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loc: Option<LocRec>,
    /// The code the payer scans or copies to authorise it (journey 2), when the PSP gives one.
    #[serde(default, rename = "dadosQR", skip_serializing_if = "Option::is_none")]
    pub dados_qr: Option<DadosQr>,
    /// Who ended it and why, when it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encerramento: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DadosQr {
    #[serde(default)]
    pub jornada: String,
    pub pix_copia_e_cola: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RecStatus {
    Criada,
    Aprovada,
    Rejeitada,
    Expirada,
    Cancelada,
}

impl RecStatus {
    /// Whether it can never charge again.
    pub fn ended(self) -> bool {
        matches!(self, Self::Rejeitada | Self::Expirada | Self::Cancelada)
    }
}

/// `PATCH /rec/{idRec}` and `PATCH /cobr/{txid}`: cancelled by the receiver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cancelamento {
    pub status: String,
}

impl Cancelamento {
    pub fn new() -> Self {
        Self {
            status: "CANCELADA".into(),
        }
    }
}

impl Default for Cancelamento {
    fn default() -> Self {
        Self::new()
    }
}

/// `PUT /cobr/{txid}`: the charge of one cycle of an authorised recurrence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CobRPedido {
    pub id_rec: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info_adicional: Option<String>,
    pub calendario: CalendarioCobR,
    pub valor: super::api::ValorOriginal,
    pub ajuste_dia_util: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CalendarioCobR {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criacao: Option<String>,
    /// `YYYY-MM-DD`: when it is debited.
    pub data_de_vencimento: String,
}

/// A recurring charge as the PSP answers, reads and notifies it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CobR {
    pub id_rec: String,
    pub txid: String,
    pub status: CobRStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendario: Option<CalendarioCobR>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valor: Option<super::api::ValorOriginal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub politica_retentativa: Option<PoliticaRetentativa>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tentativas: Vec<Tentativa>,
    /// The payment that settled it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pix: Vec<super::api::Pix>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CobRStatus {
    Criada,
    Ativa,
    Concluida,
    Expirada,
    Rejeitada,
    Cancelada,
}

/// One attempt to debit a charge on its date.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tentativa {
    /// `YYYY-MM-DD`.
    pub data_liquidacao: String,
    /// `AGND` (scheduled), `NTAG` (a new attempt), `RIFL`.
    pub tipo: String,
    pub status: TentativaStatus,
    #[serde(default)]
    pub end_to_end_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejeicao: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TentativaStatus {
    Solicitada,
    Agendada,
    Paga,
    Cancelada,
    Rejeitada,
    Expirada,
}

impl CobR {
    /// The payment that settled it: the paid attempt's id, the amount, and when.
    pub fn paga(&self) -> Option<(&str, Decimal)> {
        if self.status != CobRStatus::Concluida {
            return None;
        }
        let attempt = self
            .tentativas
            .iter()
            .find(|t| t.status == TentativaStatus::Paga)?;
        let pix = self
            .pix
            .iter()
            .find(|p| p.end_to_end_id == attempt.end_to_end_id)?;
        Some((pix.end_to_end_id.as_str(), pix.valor))
    }

    /// The attempt under way (asked or scheduled), if one is.
    pub fn pendente(&self) -> Option<&Tentativa> {
        self.tentativas
            .iter()
            .find(|t| matches!(t.status, TentativaStatus::Solicitada | TentativaStatus::Agendada))
    }

    /// How many attempts failed (rejected or expired unpaid).
    pub fn falhas(&self) -> usize {
        self.tentativas
            .iter()
            .filter(|t| matches!(t.status, TentativaStatus::Rejeitada | TentativaStatus::Expirada))
            .count()
    }
}

/// What the PSP `POST`s to `{webhookrec}/rec`: recurrences whose status changed — a hint, read back.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AvisoRec {
    #[serde(default)]
    pub recs: Vec<AvisoId>,
}

/// What the PSP `POST`s to `{webhookcobr}/cobr`: recurring charges whose status changed — a hint.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AvisoCobR {
    #[serde(default)]
    pub cobsr: Vec<AvisoId>,
}

/// What a notice names; the rest of it is not read.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AvisoId {
    #[serde(default)]
    pub id_rec: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txid: Option<String>,
}

/// The txid of recurrence `id_rec`'s charge for `cycle`: the same cycle is always the same charge, so a
/// second instance, a restart or a retry asks the provider for the charge it has already.
pub fn txid_ciclo(id_rec: &str, cycle: &str) -> String {
    let digest = Sha256::digest(format!("cobr:{id_rec}:{cycle}").as_bytes());
    format!("vr{}", &hex::encode(digest)[..32])
}

mod opt_valor {
    use rust_decimal::Decimal;
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub(super) fn serialize<S: Serializer>(v: &Option<Decimal>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_str(&super::valor::text(*v)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Decimal>, D::Error> {
        let raw = Option::<String>::deserialize(d)?;
        raw.map(|r| {
            super::valor::parse(&r).ok_or_else(|| D::Error::custom("valor fora do formato \\d{1,10}.\\d{2}"))
        })
        .transpose()
    }
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_specs_recurrence_and_charge_examples_read() {
        // recResponse3 and cobRResponse3 of the spec, trimmed of fields not read.
        let rec: Rec = vt_contract::json::from_ref(&json!({
            "idRec": "RN1234567820240115abcdefghijk", "status": "APROVADA",
            "valor": {"valorRec": "300.00"},
            "vinculo": {"contrato": "98625023", "devedor": {"cpf": "87734514122", "nome": "Fulano de Tal"}, "objeto": "Serviços de Gestão de Imóveis"},
            "calendario": {"dataFinal": "2028-09-01", "dataInicial": "2024-02-01", "periodicidade": "MENSAL"},
            "politicaRetentativa": "NAO_PERMITE",
            "loc": {"criacao": "2023-12-19T12:28:05.230Z", "id": 5100, "location": "pix.example.com/qr/v2/rec/2353c790eefb11eaadc10242ac120002", "idRec": "RN1234567820240115abcdefghijk"},
            "dadosQR": {"jornada": "JORNADA_2", "pixCopiaECola": "00020126180014br.gov.bcb.pix5204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***80800014br.gov.bcb.pix2558pix.example.com/qr/v2/rec/2353c790eefb11eaadc10242ac120002630462C9"}
        }))
        .expect("rec");
        assert_eq!(rec.status, RecStatus::Aprovada);
        assert_eq!(rec.valor.valor_rec, Some(Decimal::new(30000, 2)));
        let qr = rec.dados_qr.expect("qr");
        assert!(super::super::BrCode::parse(&qr.pix_copia_e_cola).is_ok());
        let cobr: CobR = vt_contract::json::from_ref(&json!({
            "idRec": "RR123456782024061999000566354", "txid": "7f733863543b4a16b516d839bd4bc34e",
            "calendario": {"criacao": "2024-05-20", "dataDeVencimento": "2024-06-20"},
            "valor": {"original": "50.33"}, "status": "ATIVA", "politicaRetentativa": "PERMITE_3R_7D",
            "ajusteDiaUtil": true,
            "tentativas": [
                {"dataLiquidacao": "2024-06-22", "tipo": "AGND", "endToEndId": "E12345678202406201221abcdef12345", "status": "EXPIRADA"},
                {"dataLiquidacao": "2024-06-24", "tipo": "NTAG", "endToEndId": "E12345678202406201221abcdef12345", "status": "AGENDADA"}
            ]
        }))
        .expect("cobr");
        assert_eq!(cobr.falhas(), 1);
        assert_eq!(
            cobr.pendente().map(|t| t.data_liquidacao.as_str()),
            Some("2024-06-24")
        );
        assert_eq!(cobr.paga(), None);
        let aviso: AvisoCobR = vt_contract::json::from_ref(
            &json!({"cobsr": [{"idRec": "RR1", "txid": "t1", "status": "ATIVA", "atualizacao": []}]}),
        )
        .expect("notice");
        assert_eq!(aviso.cobsr[0].txid.as_deref(), Some("t1"));
    }

    #[test]
    fn a_fixed_or_variable_amount_is_written_as_the_api_asks() {
        let fixed = ValorRec {
            valor_rec: Some(Decimal::new(50, 0)),
            valor_minimo_recebedor: None,
        };
        assert_eq!(
            vt_contract::json::to_value(&fixed).expect("json"),
            json!({"valorRec": "50.00"})
        );
    }

    #[test]
    fn one_cycle_one_txid() {
        let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("date");
        let m = Periodicidade::Mensal;
        assert_eq!(m.cycle(d("2026-12-01")), m.cycle(d("2026-12-31")));
        assert_ne!(m.cycle(d("2026-12-31")), m.cycle(d("2027-01-01")));
        assert_eq!(Periodicidade::Semanal.cycle(d("2026-12-28")), "2026-W53");
        let t = txid_ciclo("RR1", &m.cycle(d("2026-12-05")));
        assert_eq!(t, txid_ciclo("RR1", "2026-12"));
        assert_ne!(t, txid_ciclo("RR1", "2027-01"));
        assert!((26..=35).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_alphanumeric()));
    }
}
