//! The contract of the three external systems, exactly as the product calls them: an OpenAPI 3.1
//! document (`vt-agent systems contract`) built from the types below with schemars — the
//! notification's body is the stages' own `NotificacaoPayload`. Tests hold the client to it: the
//! recharge body RF6 sends and every answer the simulator gives parse into these types, which refuse
//! unknown fields, so neither side can drift without a test failing.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::stages::NotificacaoPayload;

/// `GET /api/v1/saldos/consultar?cartao=` — 200.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SaldoResposta {
    /// The card the balance is of (must be the one asked about).
    pub cartao: String,
    /// The balance; `null` when the system has none to give.
    pub saldo: Option<f64>,
    /// ISO 4217 (`BRL`); absent → the policy's currency.
    #[serde(default)]
    pub moeda: Option<String>,
    /// The system's time, ISO 8601.
    #[serde(default)]
    pub data_servidor: Option<String>,
    #[serde(default)]
    pub fonte: Option<String>,
}

/// `POST /api/v1/recargas` — the body.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecargaPedido {
    pub cartao: String,
    /// Two decimals.
    pub valor: f64,
    pub moeda: String,
    pub meio_pagamento: MeioPagamentoPedido,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MeioPagamentoPedido {
    pub tipo: TipoPagamento,
    /// The payment token, when the request carries one.
    #[serde(default)]
    pub token: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TipoPagamento {
    Pix,
    Boleto,
    CartaoCredito,
}

/// `POST /api/v1/recargas` — 200/201 (approved) or 202 (still being processed).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecargaResposta {
    /// `aprovada` or `confirmed` (approved); `pendente` or `in_process` (not yet).
    pub status: String,
    #[serde(default)]
    pub valor: Option<f64>,
    #[serde(default)]
    pub moeda: Option<String>,
    #[serde(default)]
    pub data_processamento: Option<String>,
    #[serde(default)]
    pub transacao_id: Option<String>,
    #[serde(default)]
    pub autorizacao: Option<String>,
    #[serde(default)]
    pub nsu: Option<String>,
    /// The card's balance after the recharge; absent → the product asks again later.
    #[serde(default)]
    pub saldo_atualizado: Option<f64>,
    /// A recharge paid by boleto (`meio_pagamento.tipo = boleto`): `pendente` (202) with the boleto the
    /// card holder pays; it is credited once the bank clears the payment. The same request again (same
    /// key) answers the same boleto while it waits, `aprovada` once it was paid, and 402
    /// `{"motivo": "boleto_vencido"}` when it fell due unpaid.
    #[serde(default)]
    pub boleto: Option<BoletoResposta>,
}

/// The boleto of a recharge paid by boleto.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BoletoResposta {
    /// The 47-digit digitable line (dots and spaces allowed); its check digits, amount and due date are
    /// checked before it is shown.
    pub linha_digitavel: String,
    /// The due date, `YYYY-MM-DD`.
    pub vencimento: String,
}

/// 4xx of the recharge and notification systems: `pagamento_negado` (402), a boleto that fell due
/// unpaid (402 `boleto_vencido`), a key reused with another body (409), an invalid payload (400).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Recusa {
    pub motivo: String,
    /// The field at fault, for a 400.
    #[serde(default)]
    pub campo: Option<String>,
    /// What the system says of it in words (a second copy that needs a person: what they must see).
    #[serde(default)]
    pub mensagem: Option<String>,
}

/// 5xx and 429: the request may be tried again (not a recharge: its outcome is then unknown).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErroSistema {
    pub erro: String,
    #[serde(default)]
    pub mensagem: Option<String>,
}

/// `POST /api/v1/notificacoes` — 200/202.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotificacaoResposta {
    pub message_id: String,
    #[serde(default)]
    pub canal: Option<String>,
    /// `false` says the notice was not taken.
    #[serde(default)]
    pub aceito: Option<bool>,
}

/// `GET /api/v1/cartoes/situacao?cartao=` — 200. 404 with [`Recusa`] `cartao_desconhecido` when the
/// system does not know the card.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SituacaoResposta {
    /// The card the situation is of (must be the one asked about).
    pub cartao: String,
    pub situacao: Situacao,
    /// Why and since when the card is blocked (with `situacao: bloqueado`).
    #[serde(default)]
    pub bloqueio: Option<Bloqueio>,
    /// Credits bought but not yet on the card: they land when the card touches a validator on board
    /// (a bus's, a station's) before `validar_ate`.
    #[serde(default)]
    pub creditos_pendentes: Vec<CreditoPendente>,
    /// A daily or monthly use limit of the benefit, reached.
    #[serde(default)]
    pub limite: Option<LimiteAtingido>,
    /// The system's time, ISO 8601.
    #[serde(default)]
    pub data_servidor: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Situacao {
    Ativo,
    Bloqueado,
    /// Replaced by a second copy, or closed: never passes again.
    Cancelado,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bloqueio {
    /// `perda`, `roubo`, `dano` or the system's own word.
    pub motivo: String,
    /// ISO 8601.
    pub desde: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreditoPendente {
    pub valor: f64,
    /// When it was bought, ISO 8601.
    pub desde: String,
    /// The last moment it can be validated on board, ISO 8601; after it the credit goes back.
    pub validar_ate: String,
    /// Where it is validated, in the operator's words.
    #[serde(default)]
    pub onde: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimiteAtingido {
    /// `diario` or `mensal`.
    pub tipo: String,
    /// When uses are allowed again, ISO 8601.
    pub libera_em: String,
}

/// `GET /api/v1/cartoes/extrato?cartao=&de=&ate=&pagina=` — 200, newest first. 400 with [`Recusa`]
/// `periodo_invalido` (and `campo`) for a period the system does not give; 404 `cartao_desconhecido`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtratoResposta {
    pub cartao: String,
    /// `YYYY-MM-DD`.
    pub de: String,
    /// `YYYY-MM-DD`.
    pub ate: String,
    pub itens: Vec<ItemExtrato>,
    /// The next page, when there is one.
    #[serde(default)]
    pub proxima_pagina: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ItemExtrato {
    /// ISO 8601.
    pub data: String,
    pub tipo: TipoMovimento,
    /// Positive: what was credited or what the use took.
    pub valor: f64,
    /// Where, when the system says (a station, a validator).
    #[serde(default)]
    pub local: Option<String>,
    /// The line, when the system says.
    #[serde(default)]
    pub linha: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TipoMovimento {
    Credito,
    Uso,
}

/// Why a card is blocked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MotivoBloqueio {
    Perda,
    Roubo,
    Dano,
}

impl MotivoBloqueio {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Perda => "perda",
            Self::Roubo => "roubo",
            Self::Dano => "dano",
        }
    }

    /// How the card holder reads it: "perda", "roubo ou furto", "dano".
    pub fn said(self) -> &'static str {
        match self {
            Self::Perda => "perda",
            Self::Roubo => "roubo ou furto",
            Self::Dano => "dano",
        }
    }
}

/// `POST /api/v1/cartoes/bloqueio` — the card blocked: it no longer passes a turnstile. Idempotent by
/// `x-idempotency-key`; a card blocked already answers its block (200), never a second one.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BloqueioPedido {
    pub cartao: String,
    pub motivo: MotivoBloqueio,
}

/// `POST /api/v1/cartoes/desbloqueio` — a block undone, where the operator allows it (403
/// `desbloqueio_nao_permitido` where it does not: a theft, or too late).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DesbloqueioPedido {
    pub cartao: String,
}

/// The answer to a block or an unblock — 200/201 (no card in it: the request named it). 404
/// `cartao_desconhecido`; 409 `cartao_cancelado`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BloqueioResposta {
    /// The system's protocol of the request, for the card holder.
    pub protocolo: String,
    /// Where the card stands now.
    pub situacao: Situacao,
    /// When it was blocked (or unblocked), ISO 8601.
    pub em: String,
    #[serde(default)]
    pub motivo: Option<MotivoBloqueio>,
}

/// `GET /api/v1/cartoes/segunda-via?cartao=` — 200: what a second copy of a blocked card costs and how
/// it is delivered. 409 `cartao_nao_bloqueado` (block it first); 422 `precisa_atendimento` (with
/// `mensagem`: what a person must see — documents, a police report).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SegundaViaCotacao {
    pub cartao: String,
    /// The fee; 0 where the operator charges none.
    pub taxa: f64,
    /// The balance that goes to the new card.
    pub saldo: f64,
    /// Credits bought and not yet validated on board, which go too.
    #[serde(default)]
    pub creditos_pendentes: f64,
    pub entrega: Entrega,
}

/// How a new card reaches its holder.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Entrega {
    /// `retirada` (picked up) or `correio` (sent).
    pub modo: String,
    /// Working days until it can be picked up or arrives.
    pub prazo_dias: u32,
    /// Where it is picked up, in the operator's words.
    #[serde(default)]
    pub local: Option<String>,
}

/// `POST /api/v1/cartoes/segunda-via` — a new card ordered for a blocked one. Idempotent by
/// `x-idempotency-key`: the balance (and pending credits) move to the new card exactly once per key.
/// 402 `taxa_nao_paga` when the fee is due and no payment came.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SegundaViaPedido {
    pub cartao: String,
    /// The fee's payment, where one is due: the means and, when a provider took it, its id.
    #[serde(default)]
    pub pagamento: Option<MeioPagamentoPedido>,
}

/// `POST /api/v1/cartoes/segunda-via` — 201.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SegundaViaResposta {
    pub protocolo: String,
    /// The new card's last four digits (its number comes printed on it; the blocked card is cancelled
    /// now).
    pub novo_cartao_final: String,
    pub saldo_transferido: f64,
    #[serde(default)]
    pub creditos_transferidos: f64,
    pub entrega: Entrega,
    /// ISO 8601.
    #[serde(default)]
    pub data_servidor: Option<String>,
}

/// `POST /api/v1/cartoes/titular/verificacao` — whether the CPF's last three digits are the card
/// holder's (before a card not on record is blocked or replaced). Nothing changes; nothing is kept.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerificacaoTitularPedido {
    pub cartao: String,
    /// Three digits.
    pub cpf_final: String,
}

/// The check's answer — 200. 404 `cartao_desconhecido`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerificacaoTitularResposta {
    pub confere: bool,
}

/// The OpenAPI 3.1 document.
pub fn openapi() -> Value {
    let (refs, schemas) = schemas();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "vt-agent — what it calls on the balance (card), recharge and notification systems",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Every request carries the system's credentials (Authorization: Bearer, a configured header, or an OAuth2 client-credentials token). A recharge is sent once per idempotency key and never retried automatically; 5xx and 429 of the balance and notification systems are retried with backoff."
        },
        "paths": paths(&refs),
        "components": {"schemas": schemas}
    })
}

/// The references to each type's schema, and the schemas themselves (`components.schemas`).
struct Refs {
    saldo: Value,
    pedido: Value,
    recarga: Value,
    recusa: Value,
    erro: Value,
    aviso: Value,
    aviso_resposta: Value,
    situacao: Value,
    extrato: Value,
    bloqueio: Value,
    desbloqueio: Value,
    bloqueio_resposta: Value,
    cotacao: Value,
    segunda_via: Value,
    segunda_via_resposta: Value,
    titular: Value,
    titular_resposta: Value,
}

fn schemas() -> (Refs, Map<String, Value>) {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas".into())
        .into_generator();
    let of = |schema: schemars::Schema| vt_contract::json::to_value(schema).unwrap_or(Value::Null);
    let refs = Refs {
        saldo: of(generator.subschema_for::<SaldoResposta>()),
        pedido: of(generator.subschema_for::<RecargaPedido>()),
        recarga: of(generator.subschema_for::<RecargaResposta>()),
        recusa: of(generator.subschema_for::<Recusa>()),
        erro: of(generator.subschema_for::<ErroSistema>()),
        aviso: of(generator.subschema_for::<NotificacaoPayload>()),
        aviso_resposta: of(generator.subschema_for::<NotificacaoResposta>()),
        situacao: of(generator.subschema_for::<SituacaoResposta>()),
        extrato: of(generator.subschema_for::<ExtratoResposta>()),
        bloqueio: of(generator.subschema_for::<BloqueioPedido>()),
        desbloqueio: of(generator.subschema_for::<DesbloqueioPedido>()),
        bloqueio_resposta: of(generator.subschema_for::<BloqueioResposta>()),
        cotacao: of(generator.subschema_for::<SegundaViaCotacao>()),
        segunda_via: of(generator.subschema_for::<SegundaViaPedido>()),
        segunda_via_resposta: of(generator.subschema_for::<SegundaViaResposta>()),
        titular: of(generator.subschema_for::<VerificacaoTitularPedido>()),
        titular_resposta: of(generator.subschema_for::<VerificacaoTitularResposta>()),
    };
    (refs, generator.take_definitions(true).into_iter().collect())
}

fn paths(r: &Refs) -> Value {
    let body = |s: &Value| json!({"content": {"application/json": {"schema": s}}});
    let answer =
        |what: &str, s: &Value| json!({"description": what, "content": {"application/json": {"schema": s}}});
    let key = json!({"name": "x-idempotency-key", "in": "header", "required": true, "schema": {"type": "string"},
        "description": "The same key and body → the stored answer (header Idempotent-Replayed: true), never a second effect; the same key with another body → 409."});
    let tenant =
        json!({"name": "x-tenant-id", "in": "header", "required": true, "schema": {"type": "string"}});
    let origin = json!({"name": "x-origin", "in": "header", "required": false, "schema": {"type": "string"}});
    let card = json!({"name": "cartao", "in": "query", "required": true, "schema": {"type": "string"}});
    let date = |name: &str, what: &str| {
        json!({"name": name, "in": "query", "required": true,
        "schema": {"type": "string", "format": "date"}, "description": what})
    };
    let retry = json!({"description": "Too many requests: honoured Retry-After (seconds), then tried again",
        "headers": {"Retry-After": {"schema": {"type": "integer"}}}, "content": {"application/json": {"schema": r.erro}}});
    json!({
        "/api/v1/saldos/consultar": {"get": {
            "operationId": "consultarSaldo",
            "parameters": [card, tenant, origin],
            "responses": {
                "200": answer("The card's balance", &r.saldo),
                "400": answer("The card is not valid", &r.erro),
                "429": retry,
                "500": answer("The system failed: tried again, then reported", &r.erro)
            }
        }},
        "/api/v1/cartoes/situacao": {"get": {
            "operationId": "consultarSituacao",
            "parameters": [card, tenant, origin],
            "responses": {
                "200": answer("The card's situation: active, blocked, cancelled; credits waiting to be validated on board; a limit reached", &r.situacao),
                "400": answer("The card is not valid", &r.erro),
                "404": answer("The system does not know the card (motivo: cartao_desconhecido)", &r.recusa),
                "429": retry,
                "500": answer("The system failed: tried again, then reported", &r.erro)
            }
        }},
        "/api/v1/cartoes/extrato": {"get": {
            "operationId": "extrato",
            "parameters": [card, date("de", "First day, YYYY-MM-DD"), date("ate", "Last day, YYYY-MM-DD"),
                {"name": "pagina", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 1}}, tenant, origin],
            "responses": {
                "200": answer("Credits and uses in the period, newest first, a page at a time", &r.extrato),
                "400": answer("The card or the period is not valid (motivo: periodo_invalido, campo)", &r.recusa),
                "404": answer("The system does not know the card (motivo: cartao_desconhecido)", &r.recusa),
                "429": retry,
                "500": answer("The system failed: tried again, then reported", &r.erro)
            }
        }},
        "/api/v1/cartoes/bloqueio": {"post": {
            "operationId": "bloquearCartao",
            "parameters": [key, tenant, origin],
            "requestBody": body(&r.bloqueio),
            "responses": {
                "200": answer("Blocked already: the block on record (a replay under the same key, or an earlier block)", &r.bloqueio_resposta),
                "201": answer("Blocked: the card no longer passes a turnstile", &r.bloqueio_resposta),
                "400": answer("Invalid payload", &r.recusa),
                "404": answer("The system does not know the card (motivo: cartao_desconhecido)", &r.recusa),
                "409": answer("Cancelled card (motivo: cartao_cancelado), or the key was used with another body", &r.recusa),
                "500": answer("Failed: never retried automatically (the same key asked again is answered once)", &r.erro)
            }
        }},
        "/api/v1/cartoes/desbloqueio": {"post": {
            "operationId": "desbloquearCartao",
            "parameters": [key, tenant, origin],
            "requestBody": body(&r.desbloqueio),
            "responses": {
                "200": answer("Unblocked", &r.bloqueio_resposta),
                "403": answer("The operator does not undo this block (motivo: desbloqueio_nao_permitido)", &r.recusa),
                "404": answer("The system does not know the card (motivo: cartao_desconhecido)", &r.recusa),
                "409": answer("The card is not blocked (motivo: cartao_nao_bloqueado)", &r.recusa),
                "500": answer("Failed: never retried automatically", &r.erro)
            }
        }},
        "/api/v1/cartoes/titular/verificacao": {"post": {
            "operationId": "verificarTitular",
            "parameters": [tenant, origin],
            "requestBody": body(&r.titular),
            "responses": {
                "200": answer("Whether the digits are the holder's", &r.titular_resposta),
                "400": answer("Invalid payload", &r.recusa),
                "404": answer("The system does not know the card (motivo: cartao_desconhecido)", &r.recusa),
                "500": answer("Failed: the check is refused", &r.erro)
            }
        }},
        "/api/v1/cartoes/segunda-via": {
            "get": {
                "operationId": "cotarSegundaVia",
                "parameters": [card, tenant, origin],
                "responses": {
                    "200": answer("The fee, the balance that moves, the delivery", &r.cotacao),
                    "404": answer("The system does not know the card (motivo: cartao_desconhecido)", &r.recusa),
                    "409": answer("The card must be blocked first (motivo: cartao_nao_bloqueado), or it was replaced (cartao_cancelado)", &r.recusa),
                    "422": answer("A person must see it (motivo: precisa_atendimento, mensagem)", &r.recusa),
                    "429": retry,
                    "500": answer("The system failed: tried again, then reported", &r.erro)
                }
            },
            "post": {
                "operationId": "pedirSegundaVia",
                "parameters": [key, tenant, origin],
                "requestBody": body(&r.segunda_via),
                "responses": {
                    "201": answer("Ordered: the balance and pending credits moved to the new card, once per key", &r.segunda_via_resposta),
                    "402": answer("The fee is due and was not paid (motivo: taxa_nao_paga)", &r.recusa),
                    "409": answer("Not blocked, replaced already, or the key was used with another body", &r.recusa),
                    "422": answer("A person must see it (motivo: precisa_atendimento, mensagem)", &r.recusa),
                    "500": answer("Failed: never retried automatically (the same key asked again is answered once)", &r.erro)
                }
            }
        },
        "/api/v1/recargas": {"post": {
            "operationId": "recarregar",
            "parameters": [key, tenant, origin],
            "requestBody": body(&r.pedido),
            "responses": {
                "200": answer("Approved", &r.recarga),
                "201": answer("Approved", &r.recarga),
                "202": answer("Being processed: the product asks again under the same key", &r.recarga),
                "400": answer("Invalid payload", &r.recusa),
                "402": answer("Payment denied (motivo: pagamento_negado)", &r.recusa),
                "409": answer("The key was used with another body", &r.recusa),
                "500": answer("Failed: never retried automatically", &r.erro)
            }
        }},
        "/api/v1/notificacoes": {"post": {
            "operationId": "notificar",
            "parameters": [key, tenant],
            "requestBody": body(&r.aviso),
            "responses": {
                "200": answer("Taken", &r.aviso_resposta),
                "202": answer("Taken", &r.aviso_resposta),
                "400": answer("Invalid payload", &r.recusa),
                "429": retry,
                "500": answer("Failed: tried again with the same key", &r.erro)
            }
        }}
    })
}
