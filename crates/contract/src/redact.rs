//! What may be shown of a value. Two rules that every error, log line, stored record and trace
//! follows:
//!
//! - **errors name a field and the type it expects, never the value** ([`serde_message`]): serde's
//!   messages quote what they refused (`invalid type: string "9876543210"`), and a person may have put a
//!   card number or a CPF in the wrong field;
//! - **no secret leaves the process** ([`secrets`]): every configured secret (API keys, tokens, app
//!   secrets) and anything shaped like one (`sk-…`, `Bearer …`, `api_key = "…"`) is replaced by
//!   `[redigido]` — including secrets a provider echoes back in an error body.
//!
//! The configured secrets are a process-wide set ([`register_secret`]) because the log writer, which
//! cannot be handed arguments, must apply them too; configuration loading registers them.

use std::borrow::Cow;
use std::sync::{LazyLock, RwLock};

use regex::Regex;

/// The shape of what stands for a secret token where its value may not go: a few of its characters,
/// an ellipsis, then a keyed hash (`tok…t-9#0123456789ab`). A fingerprint is no secret: scrubbing
/// leaves it whole.
pub mod fingerprint {
    /// Hex digits of the keyed hash kept in a fingerprint: enough to tell tokens apart, too few to be
    /// a handle on the value.
    pub const HASH_HEX: usize = 12;
    /// Separates the visible characters from the keyed hash.
    pub const HASH_MARK: char = '#';
    /// Stands for the characters not shown.
    pub const ELLIPSIS: char = '…';

    /// Whether `text` is a fingerprint, not a token's value.
    pub fn is(text: &str) -> bool {
        text.split_once(HASH_MARK).is_some_and(|(shown, hash)| {
            shown.contains(ELLIPSIS) && hash.len() == HASH_HEX && hash.chars().all(|c| c.is_ascii_hexdigit())
        })
    }
}

/// What replaces a secret.
pub(crate) const REDACTED: &str = "[redigido]";

/// Shorter "secrets" are not registered: replacing every `abc` in every log line would hide more than
/// it protects, and no real key is that short.
const MIN_SECRET_LEN: usize = 6;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Adds a configured secret to the set every text is scrubbed of.
pub fn register_secret(secret: &str) {
    let secret = secret.trim();
    if secret.chars().count() < MIN_SECRET_LEN {
        return;
    }
    let mut set = SECRETS.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !set.iter().any(|s| s == secret) {
        set.push(secret.to_owned());
        // Longest first, so a secret that contains another is replaced whole.
        set.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

static KEY_SHAPED: LazyLock<Regex> = LazyLock::new(|| {
    // ASCII word boundaries (`(?-u:\b)`): a Unicode `\b` makes the regex engine give up its fast
    // automaton on any accented text (all of pt-BR) and fall back to a slow one — measured as half the
    // cost of exporting traces. A non-ASCII letter next to a key now counts as a boundary: more is
    // redacted, never less.
    Regex::new(
        r#"(?x)
        (?-u:\b)sk-[A-Za-z0-9_\-]{12,}                        # OpenAI / Anthropic style keys
        | (?i:(?-u:\b)bearer)\s+[A-Za-z0-9._~+/=\-]{8,}       # bearer tokens
        | (?i:(?-u:\b)basic)\s+[A-Za-z0-9+/=]{8,}             # basic auth
        | (?-u:\b)EAA[A-Za-z0-9]{20,}                         # Meta access tokens
        "#,
    )
    .expect("key-shaped regex")
});

/// The words after which a value is a secret (`api_key = …`, `"token": "…"`), lower case.
const ASSIGNED_WORDS: &[&str] = &[
    "apikey", "api_key", "api-key", "token", "secret", "password", "senha",
];

/// What a secret that follows an assigning word may be made of: up to a quote, backslash, space,
/// comma, brace or ampersand.
fn value_byte(b: u8) -> bool {
    !matches!(b, b'"' | b'\'' | b'\\' | b',' | b'}' | b'&') && !b.is_ascii_whitespace()
}

/// Skips an optional quote, written as is or escaped once or more (`"`, `\"`, `\\\"`): JSON nested in
/// a JSON string, as a stage's output inside a span's attribute, escapes its quotes.
fn skip_quote(b: &[u8], mut at: usize) -> usize {
    let start = at;
    while at < b.len() && b[at] == b'\\' {
        at += 1;
    }
    if at < b.len() && matches!(b[at], b'"' | b'\'') {
        at + 1
    } else {
        start
    }
}

/// The ranges of values assigned to a secret-named key (`api_key=…`, `"token": "…"`, escaped quotes
/// too), scanned by hand: every stored message's search copy goes through here, and a compiled regex
/// cost a one-shot command more than the rest of its text handling.
fn assigned_values(text: &str) -> Vec<std::ops::Range<usize>> {
    let lower = text.to_ascii_lowercase();
    let b = lower.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some((at, word)) = ASSIGNED_WORDS
        .iter()
        .filter_map(|w| lower[from..].find(w).map(|i| (from + i, w.len())))
        .min()
    {
        from = at + 1;
        // `9token` is a word of its own, not a key named token: the name must start at a word
        // boundary (a dash inside it makes one).
        let mut head = at;
        while head > 0 && (b[head - 1].is_ascii_alphabetic() || matches!(b[head - 1], b'_' | b'-')) {
            head -= 1;
        }
        if head > 0 && b[head - 1].is_ascii_digit() && !b[head..at].contains(&b'-') {
            continue;
        }
        let mut i = skip_quote(b, at + word);
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() || !matches!(b[i], b':' | b'=') {
            continue;
        }
        i += 1;
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let start = skip_quote(b, i);
        let mut end = start;
        while end < b.len() && value_byte(b[end]) {
            end += 1;
        }
        if end > start {
            found.push(start..end);
            from = end;
        }
    }
    found
}

/// `text` without any configured secret or key-shaped token.
pub fn secrets(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    {
        let set = SECRETS.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        for s in set.iter() {
            if out.contains(s.as_str()) {
                out = Cow::Owned(out.replace(s.as_str(), REDACTED));
            }
        }
    }
    // The key shapes begin with one of these: text without them (most text) never compiles the regex.
    let lower = out.to_ascii_lowercase();
    if (["sk-", "bearer", "basic"].iter().any(|w| lower.contains(w)) || out.contains("EAA"))
        && KEY_SHAPED.is_match(&out)
    {
        out = Cow::Owned(KEY_SHAPED.replace_all(&out, REDACTED).into_owned());
    }
    let assigned = assigned_values(&out);
    if !assigned.is_empty() {
        let mut clean = String::with_capacity(out.len());
        let mut copied = 0;
        for value in assigned {
            let v = &out[value.clone()];
            // A payment token's fingerprint is what stands for it: it stays.
            if v == REDACTED || fingerprint::is(v) {
                continue;
            }
            clean.push_str(&out[copied..value.start]);
            clean.push_str(REDACTED);
            copied = value.end;
        }
        if copied > 0 {
            clean.push_str(&out[copied..]);
            out = Cow::Owned(clean);
        }
    }
    out
}

static QUOTED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"\s*("(?:[^"\\]|\\.)*"|`[^`]*`)"#).expect("quoted regex"));
static MISSING: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^missing field `([A-Za-z0-9_]+)`").expect("missing regex"));
static UNKNOWN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^unknown field `([A-Za-z_][A-Za-z0-9_.]{0,60})`, expected (.*)$").expect("unknown regex")
});

/// A serde error message without the values it quotes: `invalid type: string "9876543210", expected a
/// sequence` → `invalid type: string, expected a sequence`. A missing field keeps its name (ours, from
/// the type, never the caller's data); an unknown field keeps its name when it is a name (letters,
/// digits and `_`, starting with a letter: no card or token is one) and the names expected.
pub fn serde_message(message: &str) -> String {
    if let Some(c) = MISSING.captures(message) {
        return format!("campo obrigatório ausente: {}", &c[1]);
    }
    if let Some(c) = UNKNOWN.captures(message)
        && !c[1].chars().any(|ch| ch.is_ascii_digit())
    {
        return format!("campo desconhecido: {} (aceitos: {})", &c[1], accepted(&c[2]));
    }
    if let Some((_, expected)) = message
        .strip_prefix("unknown variant")
        .and_then(|rest| rest.rsplit_once(", expected "))
    {
        // The value sent is left out; the accepted names are the program's own.
        let expected = POSITION
            .captures(expected)
            .and_then(|c| c.get(1))
            .map_or(expected, |m| m.as_str());
        return format!("valor desconhecido (aceitos: {})", accepted(expected));
    }
    let without = QUOTED.replace_all(message, "");
    in_portuguese(without.trim())
}

static POSITION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(.*) at line (\d+) column (\d+)$").expect("position regex"));
static INVALID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^invalid (type|value|length)(?: \d+)?: ?([^,]*), expected (.*)$").expect("invalid regex")
});

/// serde's English, in the words the product speaks to people (pt-BR): what came, what was expected,
/// and where (line and column, harmless and useful). Messages already in Portuguese (the product's
/// own) pass as they are.
fn in_portuguese(message: &str) -> String {
    let (body, position) = match POSITION.captures(message) {
        Some(c) => (
            c.get(1).map_or("", |m| m.as_str()).to_owned(),
            format!(" (linha {}, coluna {})", &c[2], &c[3]),
        ),
        None => (message.to_owned(), String::new()),
    };
    let said = if let Some(c) = INVALID.captures(&body) {
        let got = kind(c[2].trim());
        let expected = kind(c[3].trim());
        match &c[1] {
            "type" => format!("tipo inválido: veio {got}, esperado {expected}"),
            "length" => format!("tamanho inválido: esperado {expected}"),
            _ => format!("valor inválido: esperado {expected}"),
        }
    } else if let Some(what) = body.strip_prefix("EOF while parsing") {
        format!("o JSON acaba antes do fim ({})", kind(what.trim()))
    } else if body.starts_with("unknown variant") {
        "valor desconhecido: não é um dos valores aceitos".to_owned()
    } else if body.starts_with("expected")
        || body.starts_with("trailing")
        || body.starts_with("key must be")
        || body.starts_with("invalid escape")
        || body.starts_with("invalid number")
        || body.starts_with("control character")
        || body.starts_with("lone leading surrogate")
        || body.starts_with("invalid unicode")
    {
        "JSON malformado".to_owned()
    } else if body.starts_with("number out of range") {
        "número fora do intervalo aceito".to_owned()
    } else if body.starts_with("recursion limit exceeded") {
        "JSON aninhado demais".to_owned()
    } else {
        body
    };
    format!("{said}{position}")
}

/// serde's list of what it accepts (`one of `a`, `b``, `` `a` or `b` ``, "there are no fields"), in
/// pt-BR words; only names of the program's own go through (a quoted name that is not a plain word is
/// dropped).
fn accepted(expected: &str) -> String {
    if expected.trim() == "there are no fields" {
        return "nenhum".to_owned();
    }
    let names: Vec<&str> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|n| {
            n.len() <= 40
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        })
        .collect();
    match names.as_slice() {
        [] => "veja a referência".to_owned(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} ou {last}", init.join(", ")),
    }
}

/// A serde kind of value ("a string", "struct User", "u32", "integer"), in words.
fn kind(k: &str) -> String {
    let k = k.trim_start_matches("a ").trim_start_matches("an ");
    let word = match k {
        "string" | "str" | "char" | "string or number" => "um texto",
        "integer" | "floating point" | "number" | "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16"
        | "i32" | "i64" | "isize" | "f32" | "f64" => "um número",
        "boolean" | "bool" => "verdadeiro ou falso",
        "null" | "unit value" | "unit" => "nulo",
        "map" | "object" | "value" => "um objeto",
        "sequence" | "list" | "tuple" => "uma lista",
        _ if k.starts_with("struct ") || k.starts_with("map") => "um objeto",
        _ if k.starts_with("sequence") || k.starts_with("tuple") => "uma lista",
        _ if k.starts_with("enum ") || k.starts_with("variant") => "um dos valores aceitos",
        other => return other.to_owned(),
    };
    word.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_messages_lose_their_values() {
        let e = crate::json::from_text::<Vec<String>>(r#""9876543210""#).expect_err("type");
        let m = serde_message(&e.to_string());
        assert!(!m.contains("9876543210"), "{m}");
        assert!(m.contains("esperado uma lista"), "{m}");
        let e = crate::json::from_value::<u32>(serde_json::json!(12345678901_u64)).expect_err("range");
        assert!(!serde_message(&e.to_string()).contains("12345678901"));
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        enum Tipo {
            Pix,
        }
        let e = crate::json::from_text::<Tipo>(r#""123.456.789-00""#).expect_err("variant");
        let m = serde_message(&e.to_string());
        assert!(
            !m.contains("123.456.789-00") && m.contains("valor desconhecido"),
            "{m}"
        );
        let e =
            crate::json::from_text::<std::collections::HashMap<String, u32>>("{\"a\": ").expect_err("eof");
        assert_eq!(
            serde_message(&e.to_string()),
            "o JSON acaba antes do fim (um objeto) (linha 1, coluna 6)"
        );
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct User {
            id: String,
        }
        let e = crate::json::from_text::<User>("5").expect_err("type");
        assert_eq!(
            serde_message(&e.to_string()),
            "tipo inválido: veio um número, esperado um objeto (linha 1, coluna 1)"
        );
        assert_eq!(
            serde_message("unknown field `retri`, expected `retry`"),
            "campo desconhecido: retri (aceitos: retry)"
        );
        assert_eq!(
            serde_message("unknown field `x`, expected one of `a`, `b`, `c`"),
            "campo desconhecido: x (aceitos: a, b ou c)"
        );
        // The value sent stays out; the names the program accepts are listed.
        assert_eq!(
            serde_message("unknown variant `openia`, expected `openai` or `anthropic`"),
            "valor desconhecido (aceitos: openai ou anthropic)"
        );
        let m = serde_message("unknown field `c1234567890`, expected one of `a`, `b`");
        assert!(!m.contains("1234567890"), "{m}");
        assert_eq!(
            serde_message("missing field `cartao`"),
            "campo obrigatório ausente: cartao"
        );
    }

    proptest::proptest! {
        /// The hand scan replaces what the regex it replaced did (fingerprints aside, which the regex
        /// never knew): the regex is kept here as the oracle.
        #[test]
        fn assigned_values_are_the_regexs(parts in proptest::collection::vec(proptest::sample::select(vec![
            "token", "Token", "api_key", "apiKey", "api-key", "senha", "secret", "password", "9token", "x",
            ":", "=", " ", "\"", "'", "\\", "\\\"", ",", "}", "&", "abc", "tok-1", "[redigido]", "é", "\n",
        ]), 0..14)) {
            let text: String = parts.concat();
            let oracle = regex::Regex::new(
                r#"(?ix)
                ((?-u:\b)[a-z_\-]*(?:api[_\-]?key|token|secret|password|senha)(?:\\*["'])?\s*[:=]\s*(?:\\*["'])?)
                ([^"'\\\s,}&]+)
                "#,
            )
            .expect("oracle");
            let expected = oracle.replace_all(&text, |c: &regex::Captures<'_>| {
                if &c[2] == REDACTED { c[0].to_owned() } else { format!("{}{REDACTED}", &c[1]) }
            });
            proptest::prop_assert_eq!(secrets(&text), expected, "{:?}", text);
        }
    }

    #[test]
    fn keys_in_accented_text_are_removed_too() {
        // ASCII word boundaries: an accented letter next to a key is a boundary, so it still goes.
        let text = "Atenção: chave=xyz, ésk-proj-ABCDEFGHIJKLMNOP e Autorização Bearer abcdefgh12345678";
        let clean = secrets(text);
        assert!(!clean.contains("sk-proj-ABCDEFGHIJKLMNOP"), "{clean}");
        assert!(!clean.contains("abcdefgh12345678"), "{clean}");
        assert!(clean.starts_with("Atenção"), "{clean}");
    }

    #[test]
    fn configured_and_key_shaped_secrets_are_removed() {
        register_secret("meu-segredo-configurado-42");
        register_secret("abc");
        let text = "401: invalid key meu-segredo-configurado-42 (sk-proj-AAAAbbbbCCCCdddd1234) \
                    Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.x api_key = \"zzz-top-secret\" abc";
        let clean = secrets(text);
        for secret in [
            "meu-segredo-configurado-42",
            "sk-proj-AAAAbbbbCCCCdddd1234",
            "eyJhbGciOiJIUzI1NiJ9",
            "zzz-top-secret",
        ] {
            assert!(!clean.contains(secret), "{clean}");
        }
        assert!(clean.contains("abc"), "too short to be a secret: {clean}");
        assert!(clean.contains("api_key = \"[redigido]"), "{clean}");
        // JSON nested in a JSON string (a stage's output inside a span): the quotes come escaped.
        let nested = r#"{"saida": "{\"meio_pagamento\":{\"tipo\":\"pix\",\"token\":\"tok-secret-9\"}}"}"#;
        let clean = secrets(nested);
        assert!(!clean.contains("tok-secret-9"), "{clean}");
        let twice = r#"\\\"token\\\":\\\"tok-secret-9\\\""#;
        assert!(!secrets(twice).contains("tok-secret-9"), "{}", secrets(twice));
        // What a payment token's fingerprint looks like (`vt_domain::vt::PaymentToken` makes them).
        let fingerprint = "tok…t-9#0123456789ab";
        assert!(fingerprint::is(fingerprint));
        let kept = format!(r#"{{"token": "{fingerprint}"}}"#);
        assert_eq!(secrets(&kept), kept, "a fingerprint is no secret");
        assert_eq!(secrets("saldo de BRL 12,50"), "saldo de BRL 12,50");
    }
}
