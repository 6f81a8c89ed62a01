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

/// Parses `text` as `T`, an empty body as `{}`.
pub(super) fn parse<T: DeserializeOwned>(text: &str) -> Result<T, ApiError> {
    let text = if text.trim().is_empty() { "{}" } else { text };
    vt_actions::json::counted_here();
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let message = vt_actions::redact::serde_message(&e.inner().to_string());
        if path == "." {
            ApiError::invalid("corpo", format!("JSON inválido: {message}"))
        } else {
            ApiError::invalid(path, message)
        }
    })
}

/// The bytes of a body as sent (for the idempotency hash).
pub(super) fn digest(text: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(Bytes::copy_from_slice(text.as_bytes())))
}
