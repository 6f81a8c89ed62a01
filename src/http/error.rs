//! The one error type of the HTTP API: every error is `{"error": {"code", "message", "field"?}}`. A 5xx
//! hides what went wrong inside (logged once, here) and says only that it did.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::service::ServiceError;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
    /// Seconds, for 429 and 503.
    pub retry_after: Option<u64>,
}

/// The body of every error.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ErrorDetail {
    /// Stable, for programs: `invalid_request`, `unauthorized`, `forbidden`, `not_found`, `method_not_allowed`, `conflict`,
    /// `payload_too_large`, `rate_limited`, `busy`, `timeout`, `internal`.
    pub code: String,
    /// For people, in pt-BR; never echoes a value that was sent.
    pub message: String,
    /// The request field at fault, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
            retry_after: None,
        }
    }

    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: Some(field.into()),
            ..Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
        }
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "chave de API ausente ou inválida: envie Authorization: Bearer <chave>",
        )
    }

    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub(crate) fn not_found(what: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", format!("{what} não existe"))
    }

    /// The route exists, the method does not (axum adds the `Allow` header).
    pub(crate) fn method_not_allowed(method: &axum::http::Method) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("o método {method} não é aceito nesta rota; veja o cabeçalho Allow"),
        )
    }

    pub(crate) fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    pub(crate) fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("o corpo da requisição passa do limite de {limit} bytes"),
        )
    }

    pub(crate) fn rate_limited(after_secs: u64) -> Self {
        Self {
            retry_after: Some(after_secs.max(1)),
            ..Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                "muitas requisições com esta chave: tente de novo em instantes",
            )
        }
    }

    pub(crate) fn busy() -> Self {
        Self {
            retry_after: Some(1),
            ..Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "busy",
                "o serviço está no limite de conversas em andamento: tente de novo em instantes",
            )
        }
    }

    pub(crate) fn timeout() -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            "a resposta não ficou pronta a tempo; o pedido continua e o resultado fica registrado na conversa",
        )
    }

    /// A failure inside: logged here, once, and not described to the caller.
    pub(crate) fn internal(what: &str, error: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %error, "{what}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "erro interno; nada foi perdido do que já foi confirmado. Tente de novo em instantes",
        )
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::NotFound(_) | ServiceError::AgentMismatch { .. } => Self::not_found("a conversa"),
            ServiceError::NotRecorded(source) => Self {
                retry_after: Some(1),
                ..Self::internal("message could not be stored", &source)
            },
            ServiceError::Flow(crate::flow::FlowError::Input(input)) => input.into(),
            other => Self::internal("request failed", &other),
        }
    }
}

/// An invalid flow input: 400 naming the field (the whole body when it is not JSON at all).
impl From<vt_domain::vt::input::InputError> for ApiError {
    fn from(e: vt_domain::vt::input::InputError) -> Self {
        match e {
            vt_domain::vt::input::InputError::Field { path, message } => Self::invalid(path, message),
            other => Self::invalid("corpo", other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
                field: self.field,
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after
            && let Ok(v) = HeaderValue::from_str(&secs.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        response
    }
}
