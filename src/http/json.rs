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
    vt_contract::json::from_text_naming(text).map_err(|e| ApiError::invalid(e.field, e.message))
}

/// The bytes of a body as sent (for the idempotency hash).
pub(super) fn digest(text: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(Bytes::copy_from_slice(text.as_bytes())))
}
