//! The operator's FAQ: short answers to the questions card holders really ask ("não passou na
//! catraca", "mudei de emprego"), written by the operator in a folder of Markdown files and indexed
//! in memory at start (BM25 over Portuguese stems, `tantivy`).
//!
//! One file is one entry:
//!
//! ```markdown
//! # Meu VT não passou na catraca
//! palavras-chave: catraca, validador, não passou, bloqueado
//!
//! The answer, as the card holder reads it.
//! ```
//!
//! The router answers a question with an entry at level 1, with zero tokens, only when that entry
//! **clearly** matches ([`Faq::clear_match`]: most of the question's words are in its title or
//! keywords, and it stands well ahead of the next one); otherwise the model may look it up
//! (`buscar_faq`) and must ground its answer in the passages it gets.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, STORED, Schema, TantivyDocument, TextFieldIndexing, TextOptions, Value,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexReader, Term};

use crate::vt::parse::normalize;

/// The analyzer's name in the index.
const ANALYZER: &str = "pt_vt";

/// Words that carry no question's subject, written as people type them (no accents), and the
/// domain's own words. "não" is not one of them: "não passou" is a question.
const STOP_WORDS: &[&str] = &[
    "a",
    "o",
    "as",
    "os",
    "um",
    "uma",
    "uns",
    "umas",
    "de",
    "da",
    "do",
    "das",
    "dos",
    "em",
    "na",
    "no",
    "nas",
    "nos",
    "e",
    "ou",
    "que",
    "se",
    "com",
    "por",
    "pra",
    "pro",
    "para",
    "meu",
    "minha",
    "meus",
    "minhas",
    "eu",
    "me",
    "mim",
    "voce",
    "vc",
    "ele",
    "ela",
    "isso",
    "esse",
    "essa",
    "este",
    "esta",
    "ta",
    "to",
    "tem",
    "ter",
    "ser",
    "sou",
    "foi",
    "era",
    "eh",
    "ja",
    "ai",
    "la",
    "oi",
    "ola",
    "bom",
    "boa",
    "dia",
    "tarde",
    "noite",
    "pfv",
    "pf",
    "favor",
    "qual",
    "quais",
    "como",
    "porque",
    "pq",
    "quando",
    "onde",
    "quanto",
    "qto",
    "mais",
    "muito",
    "tambem",
    "vou",
    "vai",
    "posso",
    "pode",
    "consigo",
    "sei",
    "saber",
    "queria",
    "quero",
    "gostaria",
    "preciso",
    "hoje",
    "agora",
    "entao",
    "mas",
    "so",
    "sim",
    "ne",
    "tipo",
    "aqui",
    "acontece",
    "fazer",
    "faco",
    // Every question here is about the card and the pass: these name no subject of one.
    "vt",
    "vale",
    "transporte",
    "cartao",
    "cartoes",
    "bilhete",
];

/// One entry of the FAQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaqEntry {
    /// The file's name without `.md`: how the entry is named in traces and the console.
    pub id: String,
    pub titulo: String,
    pub palavras: Vec<String>,
    pub resposta: String,
}

/// An entry found for a question.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Index into [`Faq::entries`].
    pub entry: usize,
    /// BM25 over title, keywords and answer.
    pub score: f32,
    /// The share of the question's words found in the entry's title or keywords.
    pub coverage: f32,
    /// How many of the question's words those are.
    pub matched: usize,
}

/// A FAQ that could not be read: the file and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum FaqError {
    #[error("{file}: {problem}")]
    Entry { file: String, problem: String },
    #[error("{dir}: {cause}")]
    Folder { dir: String, cause: String },
    #[error("o índice da FAQ não pôde ser montado: {0}")]
    Index(String),
}

/// The FAQ, indexed. Shared by the router (level 1) and the `buscar_faq` tool.
pub struct Faq {
    entries: Vec<FaqEntry>,
    /// Each entry's title and keywords as the analyzer reads them: what coverage is counted on.
    heads: Vec<HashSet<String>>,
    reader: IndexReader,
    fields: Fields,
}

/// The FAQ the tools reach through the context's extensions.
#[derive(Clone)]
pub struct SharedFaq(pub Arc<Faq>);

#[derive(Clone, Copy)]
struct Fields {
    n: Field,
    titulo: Field,
    palavras: Field,
    resposta: Field,
}

impl std::fmt::Debug for Faq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faq")
            .field("entries", &self.entries.len())
            .finish()
    }
}

fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(STOP_WORDS.iter().map(|w| (*w).to_owned())))
        .filter(Stemmer::new(Language::Portuguese))
        .build()
}

/// The stems of `text` (normalised first: people write without accents), each once, in order.
pub(crate) fn stems(text: &str) -> Vec<String> {
    // One analyzer per thread: building one (its stop words, its stemmer) costs more than reading a
    // question with it.
    thread_local! {
        static ANALYZER: std::cell::RefCell<TextAnalyzer> = std::cell::RefCell::new(analyzer());
    }
    let normalized = normalize(text);
    ANALYZER.with_borrow_mut(|analyzer| {
        let mut stream = analyzer.token_stream(&normalized);
        let mut out: Vec<String> = Vec::new();
        while let Some(token) = stream.next() {
            // Numbers are cards, amounts and dates: no subject of a question.
            if token.text.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            if !out.contains(&token.text) {
                out.push(token.text.clone());
            }
        }
        out
    })
}

impl FaqEntry {
    /// Reads one entry: `# title`, a `palavras-chave:` line, then the answer.
    pub fn parse(id: &str, text: &str) -> Result<Self, String> {
        let mut lines = text
            .lines()
            .map(str::trim_end)
            .skip_while(|l| l.trim().is_empty());
        let titulo = lines
            .next()
            .and_then(|l| l.strip_prefix("# "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or("a primeira linha deve ser o título: \"# …\"")?
            .to_owned();
        let mut palavras = Vec::new();
        let mut resposta = Vec::new();
        for line in lines {
            let lower = line.trim().to_lowercase();
            if resposta.is_empty()
                && let Some(list) = lower
                    .strip_prefix("palavras-chave:")
                    .or_else(|| lower.strip_prefix("palavras chave:"))
            {
                palavras.extend(
                    list.split(',')
                        .map(str::trim)
                        .filter(|w| !w.is_empty())
                        .map(str::to_owned),
                );
                continue;
            }
            if resposta.is_empty() && line.trim().is_empty() {
                continue;
            }
            resposta.push(line);
        }
        let resposta = resposta.join("\n").trim().to_owned();
        if resposta.is_empty() {
            return Err("a resposta está vazia".into());
        }
        Ok(Self {
            id: id.to_owned(),
            titulo,
            palavras,
            resposta,
        })
    }

    /// The entry as its file holds it (what [`FaqEntry::parse`] reads back).
    pub fn to_file(&self) -> String {
        format!(
            "# {}\npalavras-chave: {}\n\n{}\n",
            self.titulo.trim(),
            self.palavras.join(", "),
            self.resposta.trim()
        )
    }

    /// The entry as a card holder reads it.
    pub fn answer(&self) -> String {
        format!("*{}*\n{}", self.titulo, self.resposta)
    }
}

impl Faq {
    /// Reads every `*.md` of `dir` (sorted by name). A missing folder is an empty FAQ.
    pub fn load(dir: &Path) -> Result<Self, FaqError> {
        let folder = |e: std::io::Error| FaqError::Folder {
            dir: dir.display().to_string(),
            cause: e.to_string(),
        };
        if !dir.is_dir() {
            return Self::new(Vec::new());
        }
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(folder)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        files.sort();
        let mut entries = Vec::new();
        for path in files {
            let text = std::fs::read_to_string(&path).map_err(folder)?;
            let id = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let entry = FaqEntry::parse(&id, &text).map_err(|problem| FaqError::Entry {
                file: path.display().to_string(),
                problem,
            })?;
            entries.push(entry);
        }
        Self::new(entries)
    }

    /// Indexes `entries`.
    pub fn new(entries: Vec<FaqEntry>) -> Result<Self, FaqError> {
        let index_error = |e: tantivy::TantivyError| FaqError::Index(e.to_string());
        let text = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        );
        let mut schema = Schema::builder();
        let fields = Fields {
            n: schema.add_u64_field("n", STORED),
            titulo: schema.add_text_field("titulo", text.clone()),
            palavras: schema.add_text_field("palavras", text.clone()),
            resposta: schema.add_text_field("resposta", text),
        };
        let index = Index::create_in_ram(schema.build());
        index.tokenizers().register(ANALYZER, analyzer());
        let mut writer = index
            .writer_with_num_threads(1, 15_000_000)
            .map_err(index_error)?;
        for (n, e) in entries.iter().enumerate() {
            let mut doc = TantivyDocument::default();
            doc.add_u64(fields.n, n as u64);
            doc.add_text(fields.titulo, normalize(&e.titulo));
            doc.add_text(fields.palavras, normalize(&e.palavras.join(", ")));
            doc.add_text(fields.resposta, normalize(&e.resposta));
            writer.add_document(doc).map_err(index_error)?;
        }
        writer.commit().map_err(index_error)?;
        let reader = index.reader().map_err(index_error)?;
        let heads = entries
            .iter()
            .map(|e| {
                stems(&format!("{} {}", e.titulo, e.palavras.join(" ")))
                    .into_iter()
                    .collect()
            })
            .collect();
        Ok(Self {
            entries,
            heads,
            reader,
            fields,
        })
    }

    pub fn entries(&self) -> &[FaqEntry] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries that match `question`, best first, at most `limit`.
    pub fn search(&self, question: &str, limit: usize) -> Vec<Hit> {
        let words = stems(question);
        if words.is_empty() || self.entries.is_empty() {
            return Vec::new();
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for word in &words {
            for (field, boost) in [
                (self.fields.titulo, 2.0),
                (self.fields.palavras, 3.0),
                (self.fields.resposta, 1.0),
            ] {
                let term = TermQuery::new(Term::from_field_text(field, word), IndexRecordOption::WithFreqs);
                clauses.push((Occur::Should, Box::new(BoostQuery::new(Box::new(term), boost))));
            }
        }
        let query = BooleanQuery::new(clauses);
        let searcher = self.reader.searcher();
        let Ok(found) = searcher.search(&query, &TopDocs::with_limit(limit.max(1)).order_by_score()) else {
            return Vec::new();
        };
        found
            .into_iter()
            .filter_map(|(score, address)| {
                let doc: TantivyDocument = searcher.doc(address).ok()?;
                let entry = usize::try_from(doc.get_first(self.fields.n)?.as_u64()?).ok()?;
                let matched = words.iter().filter(|w| self.heads[entry].contains(*w)).count();
                Some(Hit {
                    entry,
                    score,
                    coverage: matched as f32 / words.len() as f32,
                    matched,
                })
            })
            .collect()
    }

    /// The one entry that clearly answers `question`, if any: most of its words are in that entry's
    /// title or keywords (two at least), and no other entry
    /// comes close (in score, or in words matched). The thresholds are measured on `tests/fixtures/faq/perguntas.yaml`.
    pub fn clear_match(&self, question: &str) -> Option<&FaqEntry> {
        self.clear_match_of(question, 2)
    }

    /// [`Self::clear_match`] needing only `words` of the question in the entry's title or keywords
    /// (one for an open question with a single subject: "como faço pra recarregar?").
    pub fn clear_match_of(&self, question: &str, words: usize) -> Option<&FaqEntry> {
        let hits = self.search(question, 2);
        let best = hits.first()?;
        let enough = best.matched >= words.max(1);
        let ahead = hits
            .get(1)
            .is_none_or(|second| best.score >= second.score * 1.25 || best.coverage > second.coverage);
        (enough && best.coverage >= 0.5 && ahead).then(|| &self.entries[best.entry])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn faq() -> Faq {
        let entries = [
            (
                "catraca",
                "# Meu VT não passou na catraca\npalavras-chave: catraca, validador, não passou, bloqueado\n\nVerifique o saldo.",
            ),
            (
                "emprego",
                "# Mudei de emprego: o que acontece com os créditos?\npalavras-chave: mudar de emprego, demissão, novo emprego, créditos\n\nOs créditos continuam no cartão.",
            ),
        ];
        Faq::new(
            entries
                .iter()
                .map(|(id, t)| FaqEntry::parse(id, t).expect("entry"))
                .collect(),
        )
        .expect("index")
    }

    #[test]
    fn an_entry_is_read_with_its_keywords() {
        let e =
            FaqEntry::parse("x", "\n# Título\npalavras-chave: a, b c\n\nResposta\n\nlinha 2\n").expect("ok");
        assert_eq!(e.titulo, "Título");
        assert_eq!(e.palavras, ["a", "b c"]);
        assert_eq!(e.resposta, "Resposta\n\nlinha 2");
        assert!(FaqEntry::parse("x", "sem título").is_err());
        assert!(FaqEntry::parse("x", "# Título\npalavras-chave: a\n").is_err());
    }

    #[test]
    fn a_question_written_without_accents_finds_its_entry() {
        let f = faq();
        let m = f
            .clear_match("oi, meu vt nao passou na catraca hoje de manha")
            .expect("match");
        assert_eq!(m.id, "catraca");
        let m = f
            .clear_match("e se eu mudar de emprego, o que acontece com os créditos do vale?")
            .expect("match");
        assert_eq!(m.id, "emprego");
    }

    #[test]
    fn a_request_is_no_question_of_the_faq() {
        let f = faq();
        assert!(f.clear_match("saldo do cartão 1234567890").is_none());
        assert!(
            f.clear_match("recarregar 50 reais no 1234567890 via pix")
                .is_none()
        );
        assert!(f.clear_match("oi").is_none());
    }
}
