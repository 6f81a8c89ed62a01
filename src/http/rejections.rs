//! Every rejection in the API's shape: a response that leaves with an error status and a body that is
//! neither JSON nor a page (the framework's own extractor failures — a body over a route's limit, a
//! query string that does not parse, a missing `Content-Type` — answer `text/plain` in English) is
//! rewritten as [`ApiError`], pt-BR, naming the field when the framework named one, never its value.
//! One layer over every route, the channels' and the console's too, so that no route can forget it.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// The most of a rejection's text that is read to name its field.
const TEXT_LIMIT: usize = 16 * 1024;

pub(super) async fn as_api_errors(req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || designed(&response) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, TEXT_LIMIT).await.unwrap_or_default();
    let mut error = rejection(status, &String::from_utf8_lossy(&text)).into_response();
    // What the framework set besides its body stays (`Allow`, `Retry-After`).
    for name in [header::ALLOW, header::RETRY_AFTER] {
        if let Some(v) = parts.headers.get(&name) {
            error.headers_mut().insert(name, v.clone());
        }
    }
    error
}

/// A body someone wrote for the caller: JSON (the API's errors), a page (the console's), an event
/// stream. Anything else with an error status is a rejection to rewrite.
fn designed(response: &Response<Body>) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| {
            t.contains("json") || t.starts_with("text/html") || t.starts_with("text/event-stream")
        })
}

/// The API's error for a rejection with `status` whose framework text is `text`.
fn rejection(status: StatusCode, text: &str) -> ApiError {
    let field = named_field(text);
    let with_field = |code, default_field: &str, message: String| ApiError {
        field: Some(field.clone().unwrap_or_else(|| default_field.to_owned())),
        ..ApiError::new(status, code, message)
    };
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError {
            field: Some("corpo".into()),
            ..ApiError::new(
                status,
                "payload_too_large",
                "o corpo da requisição passa do limite desta rota",
            )
        },
        StatusCode::UNSUPPORTED_MEDIA_TYPE => with_field(
            "unsupported_media_type",
            "content-type",
            "o cabeçalho Content-Type não é o que esta rota aceita".into(),
        ),
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => {
            let (default_field, message) = if text.starts_with("Failed to deserialize query string") {
                let f = field.as_deref().unwrap_or("consulta");
                (
                    "consulta",
                    format!("o parâmetro {f} da consulta está ausente ou tem o tipo errado"),
                )
            } else if text.starts_with("Failed to parse the request body as JSON") {
                ("corpo", "o corpo não é JSON válido".to_owned())
            } else if text.starts_with("Invalid URL") || text.starts_with("Wrong number of path arguments") {
                ("caminho", "um parâmetro do caminho tem o tipo errado".to_owned())
            } else {
                let f = field.as_deref().unwrap_or("corpo");
                ("corpo", format!("o campo {f} está ausente ou tem o tipo errado"))
            };
            with_field("invalid_request", default_field, message)
        }
        StatusCode::UNAUTHORIZED => ApiError::new(status, "unauthorized", "autenticação ausente ou inválida"),
        StatusCode::FORBIDDEN => ApiError::new(status, "forbidden", "acesso negado"),
        StatusCode::NOT_FOUND => ApiError::not_found("esta rota"),
        StatusCode::METHOD_NOT_ALLOWED => ApiError::new(
            status,
            "method_not_allowed",
            "o método não é aceito nesta rota; veja o cabeçalho Allow",
        ),
        StatusCode::CONFLICT => ApiError::conflict("o pedido conflita com o estado atual"),
        StatusCode::TOO_MANY_REQUESTS => ApiError::new(
            status,
            "rate_limited",
            "muitas requisições: tente de novo em instantes",
        ),
        s if s.is_server_error() => ApiError::new(
            s,
            "internal",
            "erro interno; nada foi perdido do que já foi confirmado. Tente de novo em instantes",
        ),
        s => ApiError::new(
            s,
            "invalid_request",
            "o pedido não pôde ser atendido como foi enviado",
        ),
    }
}

/// The field a framework rejection names: `serde_path_to_error`'s `path: error` after the
/// rejection's own prefix (`.` is the whole value), or serde's "missing field `x`". Only a name made
/// of a path's characters is taken: a value is never echoed.
fn named_field(text: &str) -> Option<String> {
    let detail = text.split_once(": ").map(|(_, d)| d)?;
    if let Some(rest) = detail.split("missing field `").nth(1) {
        return rest.split('`').next().filter(|f| is_path(f)).map(str::to_owned);
    }
    let (path, _) = detail.split_once(": ")?;
    (path != "." && is_path(path)).then(|| path.to_owned())
}

fn is_path(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejection_names_the_field_the_framework_named_and_never_a_value() {
        let e = rejection(
            StatusCode::BAD_REQUEST,
            "Failed to deserialize query string: ultimo: invalid digit found in string",
        );
        assert_eq!(e.field.as_deref(), Some("ultimo"));
        assert!(e.message.contains("ultimo"), "{}", e.message);
        let e = rejection(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Failed to deserialize the JSON body into the target type: missing field `text` at line 1 column 2",
        );
        assert_eq!(e.field.as_deref(), Some("text"));
        let e = rejection(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Failed to deserialize the JSON body into the target type: user.id: invalid type: string \"SEGREDO\", expected u64",
        );
        assert_eq!(e.field.as_deref(), Some("user.id"));
        assert!(!e.message.contains("SEGREDO"));
        let e = rejection(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Failed to buffer the request body: length limit exceeded",
        );
        assert_eq!((e.code, e.field.as_deref()), ("payload_too_large", Some("corpo")));
        // A value where a field would be is not taken for one.
        assert_eq!(named_field("Invalid URL: Cannot parse `a b c` to a `u64`"), None);
    }
}
