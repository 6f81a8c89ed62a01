//! The API Pix's bodies the product sends and reads (Banco Central, release 2.9.0): an immediate
//! charge (`cob`), its status, the payments it received, a refund (`devolucao`) and the webhook's
//! notice. Amounts travel as strings `"\d{1,10}\.\d{2}"`: read and written through [`valor`].

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// `PUT /cob/{txid}`: what the charge asks of the payer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CobPedido {
    pub calendario: Calendario,
    pub valor: ValorOriginal,
    /// The operator's Pix key.
    pub chave: String,
    /// What the payer reads in their bank app (≤ 140).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solicitacao_pagador: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calendario {
    /// When the PSP created it (answers only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criacao: Option<String>,
    /// Seconds the charge can be paid for, from its creation.
    pub expiracao: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValorOriginal {
    #[serde(with = "valor")]
    pub original: Decimal,
}

/// A charge as the PSP answers and reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cob {
    pub txid: String,
    #[serde(default)]
    pub revisao: u32,
    pub status: CobStatus,
    pub calendario: Calendario,
    pub valor: ValorOriginal,
    #[serde(default)]
    pub chave: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The BR Code the payer copies; checked before it is shown ([`super::BrCode::checked`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pix_copia_e_cola: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solicitacao_pagador: Option<String>,
    /// The payments it received (a paid charge has one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pix: Vec<Pix>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CobStatus {
    Ativa,
    Concluida,
    RemovidaPeloUsuarioRecebedor,
    RemovidaPeloPsp,
}

/// A payment received. `end_to_end_id` identifies it at the Banco Central: the receipt shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pix {
    pub end_to_end_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txid: Option<String>,
    #[serde(with = "valor")]
    pub valor: Decimal,
    pub horario: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devolucoes: Vec<Devolucao>,
}

/// `PUT /pix/{e2eid}/devolucao/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DevolucaoPedido {
    #[serde(with = "valor")]
    pub valor: Decimal,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descricao: Option<String>,
}

/// A refund as the PSP answers and notifies it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Devolucao {
    pub id: String,
    #[serde(default)]
    pub rtr_id: String,
    #[serde(with = "valor")]
    pub valor: Decimal,
    pub status: DevolucaoStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub motivo: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DevolucaoStatus {
    EmProcessamento,
    Devolvido,
    NaoRealizado,
}

/// What the PSP `POST`s to `{webhook}/pix`: a hint that payments arrived, never proof of one (the
/// charge is read back from the PSP before anything is done).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AvisoWebhook {
    #[serde(default)]
    pub pix: Vec<Pix>,
}

/// Amounts as the API Pix writes them: a string with two decimals, `"20.00"`.
pub mod valor {
    use rust_decimal::Decimal;
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub fn serialize<S: Serializer>(v: &Decimal, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&text(*v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Decimal, D::Error> {
        let raw = String::deserialize(d)?;
        parse(&raw).ok_or_else(|| D::Error::custom("valor fora do formato \\d{1,10}.\\d{2}"))
    }

    /// `v` to two decimals, as the API writes it.
    pub fn text(v: Decimal) -> String {
        format!("{:.2}", v.round_dp(2))
    }

    /// `"\d{1,10}\.\d{2}"` and nothing else.
    pub fn parse(raw: &str) -> Option<Decimal> {
        let (int, cents) = raw.split_once('.')?;
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if !(1..=10).contains(&int.len()) || cents.len() != 2 || !digits(int) || !digits(cents) {
            return None;
        }
        raw.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_charge_answer_reads_as_the_spec_writes_it() {
        let cob: Cob = vt_contract::json::from_ref(&json!({
            "calendario": {"criacao": "2020-09-09T20:15:00.358Z", "expiracao": 3600},
            "txid": "7978c0c97ea847e78e8849634473c1f1",
            "revisao": 0,
            "loc": {"id": 789, "location": "pix.example.com/qr/v2/9d36b84fc70b478fb95c12729b90ca25", "tipoCob": "cob"},
            "location": "pix.example.com/qr/v2/9d36b84fc70b478fb95c12729b90ca25",
            "status": "ATIVA",
            "devedor": {"cnpj": "12345678000195", "nome": "Empresa de Serviços SA"},
            "valor": {"original": "37.00", "modalidadeAlteracao": 1},
            "chave": "7d9f0335-8dcc-4054-9bf9-0dbd61d36906",
            "solicitacaoPagador": "Serviço realizado.",
            "pixCopiaECola": "00020101021226760014br.gov.bcb.pix2554pix.example.com/qr/v2/8b3da2f39a4140d1a91abd93113bd4415204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***80800014br.gov.bcb.pix2558pix.example.com/qr/v2/rec/94ed2badcbc04c15b0bb7fa35319489063047741"
        }))
        .expect("cob");
        assert_eq!(cob.status, CobStatus::Ativa);
        assert_eq!(cob.valor.original, Decimal::new(3700, 2));
        assert_eq!(cob.calendario.expiracao, 3600);
        assert!(cob.pix.is_empty());
        let code = cob.pix_copia_e_cola.as_deref().expect("code");
        assert!(
            super::super::BrCode::parse(code).is_ok(),
            "the spec's own code checks"
        );
    }

    #[test]
    fn amounts_are_strings_with_two_decimals() {
        assert_eq!(valor::text(Decimal::new(20, 0)), "20.00");
        assert_eq!(valor::text(Decimal::new(45, 1)), "4.50");
        assert_eq!(valor::parse("20.00"), Some(Decimal::new(2000, 2)));
        for bad in ["20", "20.0", "20.000", "-1.00", "1,00", ".50", "12345678901.00"] {
            assert_eq!(valor::parse(bad), None, "{bad}");
        }
    }
}
