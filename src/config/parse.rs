//! The TOML file read into a [`Config`]: keys that moved sections, and errors that name where and
//! which key, in pt-BR, never the file's text.

use std::collections::HashMap;

use super::{Config, ConfigError};
use crate::channels::{Plug, Raw, SectionError, Sections};

/// A TOML error as the line and column plus what was wrong, without the file's text (which toml's own
/// message quotes, and which can be a secret) and without the values serde quotes.
/// Keys that moved to another section, read where they were as well: (old section, old key, new
/// section, new key).
const MOVED: [(&str, &str, &str, &str); 3] = [
    ("engine", "channel_retry", "outbox", "retry"),
    ("engine", "persist_retry", "service", "persist_retry"),
    ("handoff", "mattermost_channel_id", "mattermost", "canal_suporte"),
];

/// The TOML text as a configuration, with [`MOVED`] keys taken to their sections (said once on
/// stderr; the new place wins when both are set).
pub(super) fn parse_toml(
    text: &str,
    label: &str,
    plugs: &[&'static dyn Plug],
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let mut table: toml::Table = text.parse().map_err(|e| syntax_error(label, text, &e))?;
    let mut moved = false;
    for (section, key, to_section, to_key) in MOVED {
        let Some(value) = table
            .get_mut(section)
            .and_then(toml::Value::as_table_mut)
            .and_then(|s| s.remove(key))
        else {
            continue;
        };
        moved = true;
        eprintln!("aviso: {label}: [{section}] {key} mudou para [{to_section}] {to_key}");
        let target = table
            .entry(to_section)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let Some(target) = target.as_table_mut() {
            target.entry(to_key).or_insert(value);
        }
    }
    // The error names the key whose value is wrong (`llm.max_tokens`), as well as where it is.
    let keyed = |e: serde_path_to_error::Error<toml::de::Error>| {
        let key = e.path().to_string();
        parse_error(label, text, e.inner(), &key)
    };
    let sectioned = |e: SectionError| parse_error(label, text, &e.error, &e.key);
    if !moved {
        // Parsed from the text, errors keep their line and column; each plugged channel's table is
        // taken out whole and read by the channel.
        let mut root = toml::de::DeTable::parse(text).map_err(|e| syntax_error(label, text, &e))?;
        let mut sections: HashMap<_, _> = plugs
            .iter()
            .filter_map(|plug| Some((plug.name(), root.get_mut().remove(plug.name())?)))
            .collect();
        let mut config: Config =
            serde_path_to_error::deserialize(toml::de::Deserializer::from(root)).map_err(keyed)?;
        let raw = |name: &str| {
            sections
                .remove(name)
                .map(|v| Raw::Text(toml::de::ValueDeserializer::from(v)))
        };
        config.channels = Sections::read(plugs, raw, get).map_err(sectioned)?;
        return Ok(config);
    }
    let mut sections: HashMap<_, _> = plugs
        .iter()
        .filter_map(|plug| Some((plug.name(), table.remove(plug.name())?)))
        .collect();
    let mut config: Config = serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(keyed)?;
    config.channels =
        Sections::read(plugs, |name| sections.remove(name).map(Raw::Value), get).map_err(sectioned)?;
    Ok(config)
}

/// A file that is not TOML, where (line and column) and what, in pt-BR words: the parser's English
/// ("unclosed table, expected `]`") never reaches the operator, nor the text there.
fn syntax_error(path: &str, text: &str, e: &toml::de::Error) -> ConfigError {
    let raw = e.message();
    let what = [
        ("unclosed table", "tabela sem o ] que a fecha"),
        ("unclosed array", "lista sem o ] que a fecha"),
        ("invalid table header", "cabeçalho de tabela inválido"),
        ("duplicate key", "chave repetida"),
        ("invalid key", "chave inválida"),
        ("invalid string", "texto inválido (aspas sem fechamento?)"),
        ("invalid basic string", "texto inválido (aspas sem fechamento?)"),
        ("invalid literal string", "texto inválido (aspas sem fechamento?)"),
        ("invalid inline table", "tabela em linha inválida"),
        ("invalid array", "lista inválida"),
        ("invalid number", "número inválido"),
        ("invalid date", "data inválida"),
        ("missing value", "falta o valor depois do ="),
        ("expected newline", "esperada uma nova linha"),
    ]
    .iter()
    .find(|(english, _)| raw.trim_start().starts_with(english))
    .map_or("sintaxe TOML inválida", |(_, pt)| pt);
    match parse_error(path, text, e, "") {
        ConfigError::Parse { path, at, .. } => ConfigError::Parse {
            path,
            at,
            message: what.to_owned(),
        },
        other => other,
    }
}

/// The file's error at `path`, where it is (line and column) and on which `key` when known, never the
/// text there (it could be a secret).
fn parse_error(path: &str, text: &str, e: &toml::de::Error, key: &str) -> ConfigError {
    let mut at = e
        .span()
        .map(|span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!(" na linha {line}, coluna {column}")
        })
        .unwrap_or_default();
    if !key.is_empty() && key != "." {
        at.push_str(&format!(" (chave {key})"));
    }
    let message = vt_contract::redact::serde_message(e.message());
    ConfigError::Parse {
        path: path.to_owned(),
        at,
        message: vt_contract::redact::secrets(&message).into_owned(),
    }
}
