//! What a batch reads: JSON Lines (one flow input per line) or CSV with a header, each line turned into
//! a flow input text — with the job's policies when the line has none, and a recharge key of its own —
//! or the reason it is not one. A bad line is that line's result; it never stops the batch.

use std::path::Path;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use vt_domain::vt::FlowInput;
use vt_domain::vt::input::{InputDefaults, MAX_INPUT_CHARS, Politicas};
use vt_domain::vt::money::money_json;
use vt_domain::vt::parse::parse_money;

/// How the input is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One JSON flow input per line (blank lines are skipped).
    Jsonl,
    /// A header row, then one card per row (`,` or `;` between fields).
    Csv,
}

impl Format {
    /// From the file name (`.csv`; `.jsonl`, `.ndjson`, `.json`), else from the first character that
    /// is not blank: `{` is JSON Lines.
    pub(crate) fn detect(path: Option<&Path>, bytes: &[u8]) -> Self {
        let ext = path
            .and_then(Path::extension)
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("csv") => Self::Csv,
            Some("jsonl" | "ndjson" | "json") => Self::Jsonl,
            _ => match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
                Some(b'{') => Self::Jsonl,
                _ => Self::Csv,
            },
        }
    }
}

/// One input line: its number (1-based: the line of the file for JSON Lines, the row after the header
/// for CSV) and the flow input text it became, or why it did not.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceLine {
    pub line: i64,
    pub input: Result<String, String>,
}

/// Why a whole input cannot be read (as opposed to one bad line).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("a entrada está vazia: nenhuma linha para rodar")]
    Empty,
    #[error("CSV sem a coluna obrigatória `cartao` no cabeçalho")]
    NoCardColumn,
    #[error("o cabeçalho do CSV não pôde ser lido: {0}")]
    Header(String),
}

/// The columns a CSV may have, and where each goes in the flow input.
const CSV_COLUMNS: &[&str] = &[
    "cartao",
    "valor",
    "moeda",
    "meio_pagamento",
    "token",
    "idempotency_key",
    "tenant_id",
    "origem",
    "canais",
    "idioma",
    "destinatario_tipo",
    "destinatario_id",
];

/// What every line gets unless it says otherwise.
#[derive(Debug, Clone)]
pub struct LineDefaults {
    /// The job: a line's recharge key is `lote:{job}:{line}` unless the line brings its own.
    pub job_id: String,
    /// For lines with no `politicas` (CSV rows never have them): from the command's flags or the config.
    pub politicas: Politicas,
    /// The tenant of the key that sent the job (`POST /v1/batches`): every line is that tenant's, and a
    /// line naming another is invalid. `None` for the operator's `vt-agent batch`.
    pub tenant: Option<String>,
}

/// The SHA-256 of the input, hex.
pub(crate) fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Column names of the header that are not mapped (they are ignored; the caller warns).
pub(crate) fn unknown_columns(bytes: &[u8]) -> Vec<String> {
    let Ok(headers) = csv_reader(bytes).byte_headers().cloned() else {
        return Vec::new();
    };
    headers
        .iter()
        .map(|h| String::from_utf8_lossy(h).trim().to_ascii_lowercase())
        .filter(|h| !CSV_COLUMNS.contains(&h.as_str()))
        .collect()
}

/// Reads every line of the input.
pub fn read(bytes: &[u8], format: Format, defaults: &LineDefaults) -> Result<Vec<SourceLine>, SourceError> {
    let lines = match format {
        Format::Jsonl => jsonl(bytes, defaults),
        Format::Csv => csv(bytes, defaults)?,
    };
    if lines.is_empty() {
        return Err(SourceError::Empty);
    }
    Ok(lines)
}

fn jsonl(bytes: &[u8], defaults: &LineDefaults) -> Vec<SourceLine> {
    bytes
        .split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, raw)| !raw.trim_ascii().is_empty())
        .map(|(i, raw)| {
            let line = i as i64 + 1;
            let input = std::str::from_utf8(raw)
                .map_err(|_| "a linha não é texto UTF-8 válido".to_owned())
                .and_then(|text| {
                    let chars = text.chars().count();
                    if chars > MAX_INPUT_CHARS {
                        return Err(format!(
                            "linha com {chars} caracteres: o limite é {MAX_INPUT_CHARS}"
                        ));
                    }
                    vt_contract::json::from_text::<Value>(text)
                        .map_err(|e| format!("a linha não é JSON válido: {e}"))
                })
                .and_then(|value| finish(value, line, defaults));
            SourceLine { line, input }
        })
        .collect()
}

fn csv_reader(bytes: &[u8]) -> ::csv::Reader<&[u8]> {
    // Brazilian spreadsheets write `;` between fields (the comma is the decimal separator).
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    let semicolons = first.iter().filter(|b| **b == b';').count();
    let commas = first.iter().filter(|b| **b == b',').count();
    ::csv::ReaderBuilder::new()
        .delimiter(if semicolons > commas { b';' } else { b',' })
        .trim(::csv::Trim::All)
        .from_reader(bytes)
}

fn csv(bytes: &[u8], defaults: &LineDefaults) -> Result<Vec<SourceLine>, SourceError> {
    let mut reader = csv_reader(bytes);
    let headers: Vec<String> = reader
        .byte_headers()
        .map_err(|e| SourceError::Header(e.to_string()))?
        .iter()
        .map(|h| String::from_utf8_lossy(h).trim().to_ascii_lowercase())
        .collect();
    if !headers.iter().any(|h| h == "cartao") {
        return Err(SourceError::NoCardColumn);
    }
    let mut lines = Vec::new();
    for (i, record) in reader.byte_records().enumerate() {
        let line = i as i64 + 1;
        let input = match record {
            Err(e) => Err(format!("linha CSV ilegível: {}", csv_error(&e))),
            Ok(record) => row(&headers, &record).and_then(|v| finish(v, line, defaults)),
        };
        lines.push(SourceLine { line, input });
    }
    Ok(lines)
}

/// The csv crate's error without the field it quotes.
fn csv_error(e: &::csv::Error) -> String {
    match e.kind() {
        ::csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("{len} campos, o cabeçalho tem {expected_len}"),
        ::csv::ErrorKind::Utf8 { .. } => "texto que não é UTF-8".into(),
        _ => "formato inválido".into(),
    }
}

/// One CSV row as a flow input object.
fn row(headers: &[String], record: &::csv::ByteRecord) -> Result<Value, String> {
    let mut get = std::collections::HashMap::new();
    for (name, raw) in headers.iter().zip(record.iter()) {
        let text =
            std::str::from_utf8(raw).map_err(|_| format!("o campo {name} não é texto UTF-8 válido"))?;
        if !text.is_empty() {
            get.insert(name.as_str(), text);
        }
    }
    let mut input = Map::new();
    input.insert(
        "cartao".into(),
        json!(get.get("cartao").copied().unwrap_or_default()),
    );
    for field in ["tenant_id", "origem"] {
        if let Some(v) = get.get(field) {
            input.insert(field.into(), json!(v));
        }
    }
    if let Some(raw) = get.get("valor") {
        let valor =
            parse_money(raw).ok_or_else(|| "campo inválido valor: não é um valor em dinheiro".to_owned())?;
        let mut recarga = json!({"valor": money_json(valor)});
        // An empty column is no payment type at all: the flow input's own check then refuses the row
        // as it refuses a JSON line without one.
        if let Some(tipo) = get.get("meio_pagamento") {
            let mut meio = json!({"tipo": tipo});
            if let Some(token) = get.get("token") {
                meio["token"] = json!(token);
            }
            recarga["meio_pagamento"] = meio;
        }
        for field in ["moeda", "idempotency_key"] {
            if let Some(v) = get.get(field) {
                recarga[field] = json!(v);
            }
        }
        input.insert("recarga".into(), recarga);
    }
    let canais: Vec<&str> = get
        .get("canais")
        .map(|c| c.split(['|', ' ']).filter(|c| !c.is_empty()).collect())
        .unwrap_or_default();
    input.insert(
        "preferencias".into(),
        json!({"canais": canais, "idioma": get.get("idioma")}),
    );
    let mut destinatario = json!({});
    for (column, field) in [("destinatario_tipo", "tipo"), ("destinatario_id", "id")] {
        if let Some(v) = get.get(column) {
            destinatario[field] = json!(v);
        }
    }
    input.insert("destinatario".into(), destinatario);
    Ok(Value::Object(input))
}

/// The job's policies where the line has none, the line's recharge key where it has none, then the
/// flow input's own checks (the error names the field, never its value).
fn finish(mut value: Value, line: i64, defaults: &LineDefaults) -> Result<String, String> {
    let Some(object) = value.as_object_mut() else {
        return Err("a linha deve ser um objeto JSON".into());
    };
    if !object.contains_key("politicas") {
        let politicas = vt_contract::json::to_value(&defaults.politicas).map_err(|e| e.to_string())?;
        object.insert("politicas".into(), politicas);
    }
    // The line runs as the key's tenant: written into the line, which may name it but no other
    // (the flow input's own rule, checked below).
    if let Some(tenant) = &defaults.tenant
        && !object.contains_key("tenant_id")
    {
        object.insert("tenant_id".into(), json!(tenant));
    }
    if let Some(recarga) = object.get_mut("recarga").and_then(Value::as_object_mut)
        && !recarga.contains_key("idempotency_key")
    {
        recarga.insert(
            "idempotency_key".into(),
            json!(format!("lote:{}:{line}", defaults.job_id)),
        );
    }
    let text = value.to_string();
    let defaults = InputDefaults {
        politicas: &defaults.politicas,
        tenant: defaults.tenant.as_deref(),
    };
    FlowInput::parse_with(&text, defaults).map_err(|e| e.to_string())?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> LineDefaults {
        LineDefaults {
            job_id: "j1".into(),
            politicas: Politicas::default(),
            tenant: None,
        }
    }

    #[test]
    fn format_from_name_then_content() {
        assert_eq!(Format::detect(Some(Path::new("a.CSV")), b"{"), Format::Csv);
        assert_eq!(
            Format::detect(Some(Path::new("a.jsonl")), b"cartao"),
            Format::Jsonl
        );
        assert_eq!(Format::detect(None, b"\n  {\"cartao\": 1}"), Format::Jsonl);
        assert_eq!(Format::detect(None, b"cartao,valor\n"), Format::Csv);
    }

    #[test]
    fn jsonl_lines_keep_their_file_line_numbers_and_get_a_key_each() {
        let text = "{\"cartao\": \"1111111111\", \"recarga\": {\"valor\": 10, \"meio_pagamento\": {\"tipo\": \"pix\"}}}\n\n[1]\n{\"cartao\": \"12\"\n";
        let lines = read(text.as_bytes(), Format::Jsonl, &defaults()).expect("read");
        assert_eq!(lines.iter().map(|l| l.line).collect::<Vec<_>>(), [1, 3, 4]);
        let first: Value = vt_contract::json::from_text(lines[0].input.as_ref().expect("ok")).expect("json");
        assert_eq!(first["recarga"]["idempotency_key"], "lote:j1:1");
        assert_eq!(first["politicas"]["valor_max"], 1000.0);
        assert!(lines[1].input.as_ref().expect_err("array").contains("objeto"));
        assert!(lines[2].input.as_ref().expect_err("cut").contains("JSON"));
    }

    #[test]
    fn a_line_keeps_its_own_key_and_policies() {
        let text = r#"{"cartao": "1111111111", "politicas": {"valor_max": 50}, "recarga": {"valor": 10, "meio_pagamento": {"tipo": "pix"}, "idempotency_key": "meu"}}"#;
        let lines = read(text.as_bytes(), Format::Jsonl, &defaults()).expect("read");
        let v: Value = vt_contract::json::from_text(lines[0].input.as_ref().expect("ok")).expect("json");
        assert_eq!(v["recarga"]["idempotency_key"], "meu");
        assert_eq!(v["politicas"]["valor_max"], 50.0);
    }

    #[test]
    fn csv_rows_map_to_flow_inputs() {
        let text = "cartao;valor;meio_pagamento;token;canais;idioma;destinatario_id;cpf\n\
                    1111 1111-11;50,00;pix;tok_1;whatsapp|app;en;u-1;123\n\
                    2222222222;;;;;;;\n\
                    3333333333;cinquenta;pix;;;;;\n\
                    4444444444;10\n";
        assert_eq!(unknown_columns(text.as_bytes()), ["cpf"]);
        let lines = read(text.as_bytes(), Format::Csv, &defaults()).expect("read");
        assert_eq!(lines.len(), 4);
        let v: Value = vt_contract::json::from_text(lines[0].input.as_ref().expect("ok")).expect("json");
        assert_eq!(v["cartao"], "1111 1111-11");
        assert_eq!(v["recarga"]["valor"], 50.0);
        assert_eq!(
            v["recarga"]["meio_pagamento"],
            json!({"tipo": "pix", "token": "tok_1"})
        );
        assert_eq!(v["recarga"]["idempotency_key"], "lote:j1:1");
        assert_eq!(
            v["preferencias"],
            json!({"canais": ["whatsapp", "app"], "idioma": "en"})
        );
        assert_eq!(v["destinatario"]["id"], "u-1");
        assert!(v.get("cpf").is_none());
        let balance_only: Value =
            vt_contract::json::from_text(lines[1].input.as_ref().expect("ok")).expect("json");
        assert!(balance_only.get("recarga").is_none());
        let bad = lines[2].input.as_ref().expect_err("valor");
        assert!(bad.contains("valor") && !bad.contains("cinquenta"), "{bad}");
        assert!(lines[3].input.as_ref().expect_err("short").contains("campos"));
    }

    #[test]
    fn a_recharge_without_a_payment_type_is_invalid_in_both_formats() {
        let csv = read(
            b"cartao;valor;meio_pagamento\n1234567890;50,00;\n",
            Format::Csv,
            &defaults(),
        )
        .expect("read");
        let jsonl = read(
            br#"{"cartao": "1234567890", "recarga": {"valor": 50}}"#,
            Format::Jsonl,
            &defaults(),
        )
        .expect("read");
        for lines in [csv, jsonl] {
            let why = lines[0].input.as_ref().expect_err("no payment type");
            assert!(why.contains("recarga") && why.contains("meio_pagamento"), "{why}");
        }
    }

    #[test]
    fn a_job_sent_with_a_key_keeps_every_line_in_its_tenant() {
        let of_a = LineDefaults {
            tenant: Some("empresa-a".into()),
            ..defaults()
        };
        let text = "{\"cartao\": \"1234567890\"}\n{\"cartao\": \"1234567890\", \"tenant_id\": \"empresa-a\"}\n{\"cartao\": \"1234567890\", \"tenant_id\": \"empresa-b\"}\n";
        let lines = read(text.as_bytes(), Format::Jsonl, &of_a).expect("read");
        for line in &lines[..2] {
            let v: Value = vt_contract::json::from_text(line.input.as_ref().expect("ok")).expect("json");
            assert_eq!(v["tenant_id"], "empresa-a");
        }
        let why = lines[2].input.as_ref().expect_err("another tenant");
        assert!(why.contains("tenant_id") && !why.contains("empresa-b"), "{why}");
    }

    #[test]
    fn a_csv_without_the_card_column_or_an_empty_input_is_refused() {
        let none = read(b"valor\n10\n", Format::Csv, &defaults()).expect_err("no cartao");
        assert!(matches!(none, SourceError::NoCardColumn));
        let empty = read(b"\n\n", Format::Jsonl, &defaults()).expect_err("empty");
        assert!(matches!(empty, SourceError::Empty));
    }
}
