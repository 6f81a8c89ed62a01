//! Request bodies: the bytes are read up to the configured limit (more → 413), must be UTF-8 and JSON of
//! the route's type; an error names the field at fault and the type it expects, never the value.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::state::AppState;

/// A JSON body of type `T`.
pub(super) struct ApiJson<T>(pub T);

/// The raw body, read within the limit and checked to be UTF-8.
pub(super) struct Body(pub String);

impl FromRequest<AppState> for Body {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let limit = state.config.body_limit_bytes;
        let bytes = axum::body::to_bytes(req.into_body(), limit)
            .await
            .map_err(|_| ApiError::too_large(limit))?;
        let text = String::from_utf8(bytes.to_vec())
            .map_err(|_| ApiError::invalid("corpo", "o corpo não é texto UTF-8 válido"))?;
        Ok(Self(text))
    }
}

impl<T: DeserializeOwned> FromRequest<AppState> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let Body(text) = Body::from_request(req, state).await?;
        parse(&text).map(Self)
    }
}

/// Parses `text` as `T`, an empty body as `{}`. An error names the field as the client sent it
/// (`user.id` for a missing `id` inside `user`), or `corpo` when the body itself is at fault (not
/// JSON, not an object), in pt-BR.
pub(super) fn parse<T: DeserializeOwned>(text: &str) -> Result<T, ApiError> {
    let text = if text.trim().is_empty() { "{}" } else { text };
    if !text.trim_start().starts_with('{') {
        return Err(ApiError::invalid("corpo", "o corpo deve ser um objeto JSON"));
    }
    vt_actions::json::counted_here();
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let message = vt_actions::redact::serde_message(&e.inner().to_string());
        // Segments serde could not name ("?": inside a broken key, say) are left out.
        let known: Vec<String> = e
            .path()
            .iter()
            .map(ToString::to_string)
            .filter(|s| s != "?" && !s.is_empty())
            .collect();
        // A body that is not JSON at all (cut short, malformed) is the body's fault, not a field's.
        let syntax = !matches!(e.inner().classify(), serde_json::error::Category::Data);
        let parent = if syntax { String::new() } else { known.join(".") };
        let missing = message.strip_prefix("campo obrigatório ausente: ");
        let field = match (missing, parent.is_empty()) {
            (Some(name), true) => name.to_owned(),
            (Some(name), false) => format!("{parent}.{name}"),
            (None, false) => parent,
            (None, true) => "corpo".to_owned(),
        };
        if field == "corpo" {
            ApiError::invalid(field, format!("JSON inválido: {message}"))
        } else {
            ApiError::invalid(field, message)
        }
    })
}

/// The bytes of a body as sent (for the idempotency hash).
pub(super) fn digest(text: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(Bytes::copy_from_slice(text.as_bytes())))
}
