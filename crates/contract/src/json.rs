//! Every JSON conversion the product makes in its own code goes through here, so that a caller can
//! count them: values are parsed once where they enter and travel typed, and [`counted`] is how a test
//! holds a path to that (`clippy.toml` refuses the `serde_json` functions themselves outside tests).
//!
//! A conversion is one walk of a value between two of its forms: text or bytes ⇄ [`Value`] ⇄ a typed
//! value. Printing a `Value` is one ([`text`]). `json!` converts the values it interpolates without
//! being counted (clippy cannot refuse it), so a counted path builds whole values with [`to_value`].

use std::cell::Cell;
use std::future::Future;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use serde_json::Error;

tokio::task_local! {
    static CONVERSIONS: Cell<u64>;
}

/// Runs `work` and says how many conversions it made on its own task (spawned tasks are not counted).
pub async fn counted<F: Future>(work: F) -> (F::Output, u64) {
    CONVERSIONS
        .scope(Cell::new(0), async move {
            let out = work.await;
            (out, CONVERSIONS.with(Cell::get))
        })
        .await
}

fn tick() {
    // Outside `counted` there is nothing to count: the lookup fails and costs a thread-local read.
    let _ = CONVERSIONS.try_with(|n| n.set(n.get() + 1));
}

/// A typed value as a [`Value`].
pub fn to_value<T: Serialize>(value: T) -> Result<Value, Error> {
    tick();
    #[allow(clippy::disallowed_methods)] // the one place that calls it
    serde_json::to_value(value)
}

/// A [`Value`] as a typed value.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, Error> {
    tick();
    #[allow(clippy::disallowed_methods)]
    serde_json::from_value(value)
}

/// A typed value read from a borrowed [`Value`] (no copy of the value first).
pub fn from_ref<T: DeserializeOwned>(value: &Value) -> Result<T, Error> {
    tick();
    T::deserialize(value)
}

/// A typed value as compact JSON text.
pub fn to_text<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    tick();
    #[allow(clippy::disallowed_methods)]
    serde_json::to_string(value)
}

/// A typed value as indented JSON text, for people.
pub fn to_pretty<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    tick();
    #[allow(clippy::disallowed_methods)]
    serde_json::to_string_pretty(value)
}

/// A typed value as compact JSON bytes (a request body).
pub fn to_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    tick();
    #[allow(clippy::disallowed_methods)]
    serde_json::to_vec(value)
}

/// JSON text as a typed value (or a [`Value`]).
pub fn from_text<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    tick();
    #[allow(clippy::disallowed_methods)]
    serde_json::from_str(text)
}

/// JSON bytes as a typed value (or a [`Value`]).
pub fn from_bytes<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    tick();
    #[allow(clippy::disallowed_methods)]
    serde_json::from_slice(bytes)
}

/// Why JSON text is not of the type asked: the field at fault as the sender wrote it (`user.id` for a
/// missing `id` inside `user`; `corpo` when the text itself is at fault — not JSON, cut short), and
/// what is wrong with it, in pt-BR, never the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

/// JSON text as a typed value, or the [`FieldError`] that names what a sender must fix: how every
/// request body is read.
pub fn from_text_naming<T: DeserializeOwned>(text: &str) -> Result<T, FieldError> {
    tick();
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let message = crate::redact::serde_message(&e.inner().to_string());
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
        let message = if field == "corpo" {
            format!("JSON inválido: {message}")
        } else {
            message
        };
        FieldError { field, message }
    })
}

/// A [`Value`] printed as compact JSON text (what `value.to_string()` does, counted).
pub fn text(value: &Value) -> String {
    tick();
    value.to_string()
}

/// Counts a conversion made by a deserializer the caller drives itself (one that reports the path of
/// a bad field, say).
pub fn counted_here() {
    tick();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counts_the_conversions_of_its_own_task_only() {
        let ((), n) = counted(async {
            let v = to_value([1, 2]).expect("value");
            let _: Vec<u8> = from_value(v).expect("typed");
            let _ = text(&Value::Null);
            // Another task's conversions are its own.
            tokio::spawn(async { to_text(&1).expect("text") })
                .await
                .expect("join");
        })
        .await;
        assert_eq!(n, 3);
        // Outside a count nothing is counted, and nothing fails.
        assert_eq!(to_text(&1).expect("text"), "1");
    }
}
