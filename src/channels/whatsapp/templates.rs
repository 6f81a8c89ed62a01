//! The WhatsApp templates the product may send outside the 24-hour window, as data: one TOML file per
//! template in `templates/` (`VT_TEMPLATES_DIR`), each for one purpose. A template is approved in the
//! WhatsApp Business Account; a file says how we fill it. Checked when loaded (a bad file names its
//! field) and again at every send (a parameter we could see is wrong never reaches Meta).
//!
//! ```toml
//! name = "saldo_baixo_v1"
//! language = "pt_BR"
//! category = "UTILITY"
//! purpose = "saldo_baixo"
//! parameters = ["cartao_final", "saldo"]        # named; ["1", "2"] for positional
//! preview = "O cartão final {{cartao_final}} está com saldo de {{saldo}}."
//! buttons = [{ text = "Recarregar", payload = "recarregar" }]
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

/// What a template is for: the product picks the template by it.
pub(super) const PURPOSES: [&str; 8] = [
    "saldo_baixo",
    "resultado_recarga",
    "retomar_atendimento",
    "comprovante_recarga",
    "comprovante_cartao",
    "pesquisa_satisfacao",
    "recarga_automatica_agendada",
    "recarga_automatica_sem_saldo",
];

const CATEGORIES: [&str; 3] = ["UTILITY", "MARKETING", "AUTHENTICATION"];

/// Meta's limits: a body of at most 1,024 characters, at most 10 buttons.
const MAX_BODY: usize = 1024;
const MAX_BUTTONS: usize = 10;
const MAX_BUTTON_TEXT: usize = 25;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    language: String,
    category: String,
    purpose: String,
    parameters: Vec<String>,
    preview: String,
    #[serde(default)]
    buttons: Vec<Button>,
}

/// Lowercase letters, digits and `_`.
fn name_ok(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

type Refusal = (&'static str, String);

impl File {
    fn check_names(&self) -> Result<(), Refusal> {
        if !name_ok(&self.name) {
            return Err(("name", "letras minúsculas, dígitos e _".into()));
        }
        let lang_ok =
            self.language.len() >= 2 && self.language.chars().all(|c| c.is_ascii_alphabetic() || c == '_');
        if !lang_ok {
            return Err(("language", "um código de idioma, como pt_BR".into()));
        }
        if !CATEGORIES.contains(&self.category.as_str()) {
            return Err(("category", format!("um de {}", CATEGORIES.join(", "))));
        }
        if !PURPOSES.contains(&self.purpose.as_str()) {
            return Err(("purpose", format!("um de {}", PURPOSES.join(", "))));
        }
        Ok(())
    }

    fn check_parameters(&self) -> Result<(), Refusal> {
        let p = &self.parameters;
        let positional = p.iter().all(|p| p.chars().all(|c| c.is_ascii_digit()));
        let named = p
            .iter()
            .all(|p| name_ok(p) && p.starts_with(|c: char| c.is_ascii_lowercase()));
        let unique: BTreeSet<&String> = p.iter().collect();
        if !(positional || named) || unique.len() != p.len() {
            return Err((
                "parameters",
                "todos nomeados (minúsculas, dígitos e _) ou todos posicionais (1, 2, …), sem repetição"
                    .into(),
            ));
        }
        let in_order: Vec<String> = (1..=p.len()).map(|n| n.to_string()).collect();
        if positional && *p != in_order {
            return Err(("parameters", "posicionais em ordem: 1, 2, 3…".into()));
        }
        Ok(())
    }

    fn check_preview(&self) -> Result<(), Refusal> {
        let used: BTreeSet<String> = placeholders(&self.preview).into_iter().collect();
        let declared: BTreeSet<String> = self.parameters.iter().cloned().collect();
        if used != declared {
            return Err((
                "preview",
                format!(
                    "os marcadores ({}) devem ser os parâmetros ({})",
                    used.into_iter().collect::<Vec<_>>().join(", "),
                    self.parameters.join(", ")
                ),
            ));
        }
        if self.preview.chars().count() > MAX_BODY {
            return Err(("preview", format!("no máximo {MAX_BODY} caracteres")));
        }
        Ok(())
    }

    fn check_buttons(&self) -> Result<(), Refusal> {
        let bad = |b: &Button| {
            b.text.is_empty() || b.text.chars().count() > MAX_BUTTON_TEXT || b.payload.is_empty()
        };
        if self.buttons.len() > MAX_BUTTONS || self.buttons.iter().any(bad) {
            return Err((
                "buttons",
                format!(
                    "até {MAX_BUTTONS} botões, cada um com texto (até {MAX_BUTTON_TEXT} caracteres) e payload"
                ),
            ));
        }
        Ok(())
    }
}

/// A quick-reply button: its text, and the payload that comes back to us when tapped.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Button {
    pub text: String,
    pub payload: String,
}

/// One template, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub name: String,
    pub language: String,
    pub category: String,
    pub purpose: String,
    /// In order; digits for positional parameters.
    pub parameters: Vec<String>,
    pub preview: String,
    pub buttons: Vec<Button>,
}

/// A template file that cannot be used: which file, which field, why.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("modelo {file}: campo {field}: {why}")]
pub struct TemplateError {
    pub file: String,
    pub field: &'static str,
    pub why: String,
}

/// The loaded templates, one per purpose.
#[derive(Debug, Clone, Default)]
pub struct Templates {
    by_purpose: BTreeMap<String, Template>,
}

impl Templates {
    /// Every `*.toml` of `dir` (none when it does not exist).
    pub fn load(dir: &Path) -> Result<Self, TemplateError> {
        let mut by_purpose = BTreeMap::new();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(Self::default());
        };
        let mut paths: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        paths.sort();
        for path in paths {
            let file = path.display().to_string();
            let text = std::fs::read_to_string(&path).map_err(|e| TemplateError {
                file: file.clone(),
                field: "-",
                why: format!("não foi possível ler: {e}"),
            })?;
            let template = Template::parse(&text).map_err(|(field, why)| TemplateError {
                file: file.clone(),
                field,
                why,
            })?;
            if by_purpose.contains_key(&template.purpose) {
                return Err(TemplateError {
                    file,
                    field: "purpose",
                    why: format!("outro modelo já serve a '{}'", template.purpose),
                });
            }
            by_purpose.insert(template.purpose.clone(), template);
        }
        Ok(Self { by_purpose })
    }

    pub(crate) fn for_purpose(&self, purpose: &str) -> Option<&Template> {
        self.by_purpose.get(purpose)
    }

    pub fn all(&self) -> impl Iterator<Item = &Template> {
        self.by_purpose.values()
    }
}

/// The placeholders of a preview, in the order they appear.
fn placeholders(preview: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = preview;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        found.push(after[..end].trim().to_owned());
        rest = &after[end + 2..];
    }
    found
}

impl Template {
    /// A template file's text, checked; the error names the field.
    pub fn parse(text: &str) -> Result<Self, (&'static str, String)> {
        let f: File = toml::from_str(text).map_err(|e| {
            let field = [
                "name",
                "language",
                "category",
                "purpose",
                "parameters",
                "preview",
                "buttons",
            ]
            .into_iter()
            // "missing field `language`" names the field; an unknown one is named in the message.
            .find(|f| e.message().starts_with("missing field") && e.message().split('`').nth(1) == Some(*f))
            .unwrap_or("-");
            (field, e.message().to_owned())
        })?;
        f.check_names()?;
        f.check_parameters()?;
        f.check_preview()?;
        f.check_buttons()?;
        Ok(Self {
            name: f.name,
            language: f.language,
            category: f.category,
            purpose: f.purpose,
            parameters: f.parameters,
            preview: f.preview,
            buttons: f.buttons,
        })
    }

    fn positional(&self) -> bool {
        self.parameters
            .first()
            .is_some_and(|p| p.chars().all(|c| c.is_ascii_digit()))
    }

    /// The preview with `values` in place (what the user will read).
    pub(crate) fn preview_with(&self, values: &BTreeMap<String, String>) -> String {
        let mut text = self.preview.clone();
        for (k, v) in values {
            text = text.replace(&format!("{{{{{k}}}}}"), v);
        }
        text
    }

    /// The `template` object of a send, every parameter checked and cleaned; the error names the
    /// parameter and why.
    pub fn message(&self, values: &BTreeMap<String, String>) -> Result<Value, (String, &'static str)> {
        let mut parameters = Vec::new();
        for name in &self.parameters {
            let raw = values.get(name).ok_or_else(|| (name.clone(), "falta o valor"))?;
            let text = clean(raw).map_err(|why| (name.clone(), why))?;
            let mut p = json!({"type": "text", "text": text});
            if !self.positional() {
                p["parameter_name"] = json!(name);
            }
            parameters.push(p);
        }
        if self.preview_with(values).chars().count() > MAX_BODY {
            return Err(("-".into(), "o texto passaria de 1.024 caracteres"));
        }
        let mut components = vec![json!({"type": "body", "parameters": parameters})];
        for (i, b) in self.buttons.iter().enumerate() {
            components.push(
                json!({"type": "button", "sub_type": "quick_reply", "index": i.to_string(),
                "parameters": [{"type": "payload", "payload": b.payload}]}),
            );
        }
        Ok(json!({"name": self.name, "language": {"code": self.language}, "components": components}))
    }
}

/// A parameter as Meta takes it: newlines and tabs become spaces and long runs of spaces shrink (safe:
/// the words stay); empty or too long is refused.
pub(super) fn clean(raw: &str) -> Result<String, &'static str> {
    let flat: String = raw
        .chars()
        .map(|c| {
            if c == '\n' || c == '\r' || c == '\t' {
                ' '
            } else {
                c
            }
        })
        .collect();
    let words: Vec<&str> = flat.split(' ').filter(|w| !w.is_empty()).collect();
    let text = words.join(" ");
    if text.is_empty() {
        return Err("vazio");
    }
    if text.chars().count() > MAX_BODY {
        return Err("longo demais");
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "saldo_baixo_v1"
language = "pt_BR"
category = "UTILITY"
purpose = "saldo_baixo"
parameters = ["cartao_final", "saldo"]
preview = "O cartão final {{cartao_final}} está com saldo de {{saldo}}."
buttons = [{ text = "Recarregar", payload = "recarregar" }]
"#;

    #[test]
    fn a_good_file_loads_and_fills_its_named_parameters() {
        let t = Template::parse(GOOD).expect("good");
        let values = BTreeMap::from([
            ("cartao_final".to_owned(), "7890".to_owned()),
            ("saldo".to_owned(), "R$ 12,50".to_owned()),
        ]);
        let m = t.message(&values).expect("message");
        assert_eq!(m["name"], "saldo_baixo_v1");
        assert_eq!(m["language"]["code"], "pt_BR");
        assert_eq!(
            m["components"][0]["parameters"][0],
            json!({"type": "text", "parameter_name": "cartao_final", "text": "7890"})
        );
        assert_eq!(m["components"][1]["parameters"][0]["payload"], "recarregar");
        assert_eq!(
            t.preview_with(&values),
            "O cartão final 7890 está com saldo de R$ 12,50."
        );
    }

    #[test]
    fn a_bad_file_names_its_field() {
        let bad = |from: &str, to: &str| Template::parse(&GOOD.replace(from, to)).expect_err("bad").0;
        assert_eq!(bad("\"UTILITY\"", "\"PROMO\""), "category");
        assert_eq!(bad("\"saldo_baixo\"\n", "\"outro\"\n"), "purpose");
        assert_eq!(bad("{{saldo}}.", "{{valor}}."), "preview");
        assert_eq!(
            bad("[\"cartao_final\", \"saldo\"]", "[\"cartao_final\", \"2\"]"),
            "parameters"
        );
        assert_eq!(bad("name = \"saldo_baixo_v1\"", "name = \"Saldo Baixo\""), "name");
        let unknown =
            Template::parse(&GOOD.replace("language = \"pt_BR\"", "lingua = \"pt_BR\"")).expect_err("bad");
        assert!(unknown.1.contains("lingua"), "{unknown:?}");
        assert_eq!(bad("category = \"UTILITY\"\n", ""), "category");
    }

    #[test]
    fn parameters_are_cleaned_where_safe_and_refused_where_not() {
        assert_eq!(
            clean("linha 1\nlinha\t2     fim").as_deref(),
            Ok("linha 1 linha 2 fim")
        );
        assert_eq!(clean("  \n "), Err("vazio"));
        let t = Template::parse(GOOD).expect("good");
        let missing = BTreeMap::from([("saldo".to_owned(), "R$ 1,00".to_owned())]);
        assert_eq!(
            t.message(&missing).expect_err("missing"),
            ("cartao_final".to_owned(), "falta o valor")
        );
    }

    #[test]
    fn positional_parameters_omit_their_names() {
        let t = Template::parse(
            &GOOD
                .replace("[\"cartao_final\", \"saldo\"]", "[\"1\", \"2\"]")
                .replace("{{cartao_final}}", "{{1}}")
                .replace("{{saldo}}", "{{2}}"),
        )
        .expect("positional");
        let m = t
            .message(&BTreeMap::from([
                ("1".into(), "7890".into()),
                ("2".into(), "R$ 1".into()),
            ]))
            .expect("message");
        assert!(
            m["components"][0]["parameters"][0]
                .get("parameter_name")
                .is_none()
        );
    }
}
