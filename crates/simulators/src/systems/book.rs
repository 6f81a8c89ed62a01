//! The embedded simulator's book: what it did that the next process must know — the balances its
//! recharges credited, the cards its desk blocked or replaced, and the answers it gave under each
//! idempotency key — as lines appended to a file in the data directory. The simulator is the world a
//! newcomer meets (`chat --message` turns, `serve` restarts, `run-flow` runs are processes of their
//! own), so a recharge approved in one is still there in the next, and a request sent again under the
//! same key is answered from the book, never charged twice. The simulated Pix provider keeps its charges here too (each change, the whole
//! charge), so a code shown by one `chat --message` is paid, read or withdrawn by the next process.
//!
//! Appending is the one write: each line is written with one `write` on a file opened for appending,
//! so lines of several processes never interleave, and nothing is rewritten (a batch of thousands of
//! recharges costs one short write each). Every reader catches up with the lines written since it
//! last looked before it answers (one `stat` when there are none). Its own lines it applies as it
//! writes them when the file grew by them alone; otherwise they are read back in file order with the
//! other processes' lines. A line cut short by a kill is skipped. The book only grows, but for two
//! rewrites an operator asks for: a data subject's erasure ([`forget_card`]) and the retention window
//! ([`forget_before`]); each writes the book anew beside it and renames it into place, and a reader
//! that sees another file there reads it from its start. Delete the file to start the simulated world
//! afresh.
//!
//! **The book keeps no card in clear**: a card's credits are kept under its blind index
//! ([`vt_domain::vt::secret::card_index`], the store's own), and the answers and charges it keeps carry no
//! card (a charge names a masked one). A book written before this held cards in clear: its lines are
//! still read, and the first rewrite of either kind puts them under the index.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use vt_domain::vt::secret::card_index;

/// The book's file name in the data directory.
pub const FILE: &str = "simulador.jsonl";

/// One line of the book.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "tipo", rename_all = "snake_case")]
enum Line {
    /// A recharge credited `valor` to the card whose blind index is `cartao`, at `em` (absent in a book
    /// written before the time was kept).
    Credito {
        cartao: String,
        #[serde(with = "vt_domain::vt::input::money_serde")]
        valor: Decimal,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        em: Option<DateTime<Utc>>,
    },
    /// A Pix charge of the simulated provider, as it is after a change.
    Cobranca { cob: Box<vt_domain::pix::api::Cob> },
    /// A card checkout of the simulated provider, as it is after a change.
    Checkout { sessao: Box<crate::cartao::Sessao> },
    /// Where the card whose blind index is `cartao` stands since `em`: blocked (and why), active
    /// again, or cancelled (replaced by a second copy).
    Cartao {
        cartao: String,
        estado: CardState,
        em: DateTime<Utc>,
    },
    /// The answer given under an idempotency key.
    Resposta {
        chave: String,
        hash: String,
        status: u16,
        resposta: Value,
        em: DateTime<Utc>,
    },
}

/// Where a card stands, as the desk's requests left it (blocked, unblocked, replaced).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CardState {
    /// `bloqueado`, `ativo` or `cancelado`.
    pub situacao: String,
    /// Why it was blocked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub motivo: Option<String>,
    /// Since when, ISO 8601 in the operator's zone.
    pub desde: String,
    /// The protocol of the request that left it so.
    pub protocolo: String,
}

/// An answer kept under an idempotency key.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub hash: String,
    pub status: u16,
    pub response: Value,
    pub at: DateTime<Utc>,
}

/// What the book says, as far as this process has read it.
#[derive(Debug, Default)]
struct Seen {
    /// Bytes of the file read so far.
    offset: u64,
    /// Which file they were read from (device and inode): a rewrite puts another file in its place.
    file: Option<(u64, u64)>,
    /// What was credited to each card (by its blind index), on top of its starting balance.
    credits: HashMap<String, Decimal>,
    answers: HashMap<String, Answer>,
    /// The simulated provider's charges, as last written.
    cobs: HashMap<String, vt_domain::pix::api::Cob>,
    /// How many charge lines were read: what changed since a reader last looked.
    cob_lines: u64,
    /// Where each card (by its blind index) stands, where a desk request changed it.
    cards: HashMap<String, CardState>,
    /// The simulated card provider's checkouts, as last written.
    checkouts: HashMap<String, crate::cartao::Sessao>,
    /// How many checkout lines were read.
    checkout_lines: u64,
}

/// The book, kept in a file.
#[derive(Debug)]
pub(crate) struct Book {
    path: PathBuf,
    read: Mutex<Seen>,
}

impl Book {
    pub(crate) fn at(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
            read: Mutex::new(Seen::default()),
        }
    }

    /// What was credited to `cartao` by every process's recharges.
    pub(crate) fn credited(&self, cartao: &str) -> Decimal {
        let index = card_index(cartao);
        self.caught_up(|r| r.credits.get(&index).copied().unwrap_or_default())
    }

    /// The answer kept under `key`, if any.
    pub(crate) fn answer(&self, key: &str) -> Option<Answer> {
        self.caught_up(|r| r.answers.get(key).cloned())
    }

    /// Credits `valor` to `cartao`; the card's credits after it.
    pub(crate) fn credit(&self, cartao: &str, valor: Decimal) -> Decimal {
        self.append(Line::Credito {
            cartao: card_index(cartao),
            valor,
            em: Some(Utc::now()),
        });
        self.credited(cartao)
    }

    /// Where `cartao` stands, when a desk request of any process changed it.
    pub(crate) fn card_state(&self, cartao: &str) -> Option<CardState> {
        let index = card_index(cartao);
        self.caught_up(|r| r.cards.get(&index).cloned())
    }

    /// `cartao` stands as `estado` from now on.
    pub(crate) fn keep_card_state(&self, cartao: &str, estado: CardState) {
        self.append(Line::Cartao {
            cartao: card_index(cartao),
            estado,
            em: Utc::now(),
        });
    }

    /// Keeps `answer` under `key`.
    pub(crate) fn keep(&self, key: &str, answer: Answer) {
        self.append(Line::Resposta {
            chave: key.to_owned(),
            hash: answer.hash,
            status: answer.status,
            resposta: answer.response,
            em: answer.at,
        });
    }

    /// Keeps charge `cob` as it is now.
    pub(crate) fn keep_cob(&self, cob: &vt_domain::pix::api::Cob) {
        self.append(Line::Cobranca {
            cob: Box::new(cob.clone()),
        });
    }

    /// Keeps checkout `sessao` as it is now.
    pub(crate) fn keep_checkout(&self, sessao: &crate::cartao::Sessao) {
        self.append(Line::Checkout {
            sessao: Box::new(sessao.clone()),
        });
    }

    /// Every checkout as last written, when any was written since `seen` checkout lines; with the
    /// count read so far.
    pub(crate) fn checkouts_since(&self, seen: u64) -> (u64, Option<HashMap<String, crate::cartao::Sessao>>) {
        self.caught_up(|r| {
            (
                r.checkout_lines,
                (r.checkout_lines != seen).then(|| r.checkouts.clone()),
            )
        })
    }

    /// Every charge as last written, when any was written since `seen` charge lines; with the count
    /// read so far.
    pub(crate) fn cobs_since(&self, seen: u64) -> (u64, Option<HashMap<String, vt_domain::pix::api::Cob>>) {
        self.caught_up(|r| (r.cob_lines, (r.cob_lines != seen).then(|| r.cobs.clone())))
    }

    fn append(&self, line: Line) {
        let Ok(mut text) = vt_contract::json::to_text(&line) else {
            return;
        };
        text.push('\n');
        // Held across the write, so that no catch-up in this process reads the line before it is
        // applied here.
        let mut read = self.seen();
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| {
                f.write_all(text.as_bytes())?;
                f.metadata()
            });
        match written {
            // The file grew by this line alone since it was last read: the line is applied as it
            // is, not read back and parsed by the next catch-up (a batch's book grows by two lines a
            // recharge, and each answer caught up with them).
            Ok(meta)
                if meta.len() == read.offset + text.len() as u64
                    && read.file.is_none_or(|file| file == file_id(&meta)) =>
            {
                let len = meta.len();
                read.file = Some(file_id(&meta));
                apply(&mut read, line);
                read.offset = len;
            }
            // Another process wrote too: the next catch-up reads both, in the file's order.
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, path = %self.path.display(), "simulator book not written"),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.read
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads the lines written since the last look, then answers from what was read.
    fn caught_up<T>(&self, answer: impl FnOnce(&Seen) -> T) -> T {
        let mut read = self.seen();
        if let Err(e) = catch_up(&self.path, &mut read) {
            tracing::warn!(error = %e, path = %self.path.display(), "simulator book not read");
        }
        answer(&read)
    }
}

fn catch_up(path: &Path, read: &mut Seen) -> std::io::Result<()> {
    // Nothing new (the usual case once this process's own lines are applied as written): one `stat`
    // instead of opening and reading the file.
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let same_file = read.file.is_none_or(|file| file == file_id(&meta));
    if same_file && meta.len() == read.offset {
        return Ok(());
    }
    // Another file in its place (a rewrite), or a shorter one: what was read stands for nothing now.
    if !same_file || meta.len() < read.offset {
        *read = Seen::default();
    }
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    read.file = Some(file_id(&file.metadata()?));
    file.seek(SeekFrom::Start(read.offset))?;
    let mut new = Vec::new();
    file.read_to_end(&mut new)?;
    // Only whole lines: one still being written is read next time.
    let whole = new.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    for raw in new[..whole].split(|b| *b == b'\n') {
        let Ok(text) = std::str::from_utf8(raw) else {
            continue;
        };
        // A line cut short by a kill, or an empty one, is skipped.
        if let Ok(line) = vt_contract::json::from_text::<Line>(text) {
            apply(read, line);
        }
    }
    read.offset += whole as u64;
    Ok(())
}

/// What `line` says, added to what was read.
fn apply(read: &mut Seen, line: Line) {
    match line {
        Line::Credito { cartao, valor, .. } => {
            *read.credits.entry(indexed(cartao)).or_default() += valor;
        }
        Line::Cobranca { cob } => {
            read.cob_lines += 1;
            read.cobs.insert(cob.txid.clone(), *cob);
        }
        Line::Cartao { cartao, estado, .. } => {
            read.cards.insert(cartao, estado);
        }
        Line::Checkout { sessao } => {
            read.checkout_lines += 1;
            read.checkouts.insert(sessao.id.clone(), *sessao);
        }
        Line::Resposta {
            chave,
            hash,
            status,
            resposta,
            em,
        } => {
            let answer = Answer {
                hash,
                status,
                response: resposta,
                at: em,
            };
            read.answers.insert(chave, answer);
        }
    }
}

/// A credit's card as the book keeps it: its blind index (a book written before kept the digits).
fn indexed(cartao: String) -> String {
    if is_clear_card(&cartao) {
        card_index(&cartao)
    } else {
        cartao
    }
}

/// Whether a credit line names its card in clear (a book written before cards were indexed).
fn is_clear_card(cartao: &str) -> bool {
    (8..=19).contains(&cartao.len()) && cartao.bytes().all(|b| b.is_ascii_digit())
}

/// The file `meta` describes, told apart from one renamed into its place.
#[cfg(unix)]
fn file_id(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn file_id(_meta: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// Erases card `digits` from the book at `path`: its credits and what the desk changed go (the
/// simulated card starts over at its table balance and situation). Returns how many lines went. A missing book is an empty one.
pub fn forget_card(path: &Path, digits: &str) -> std::io::Result<usize> {
    let index = card_index(digits);
    rewrite(path, |line| match line {
        Line::Credito { cartao, .. } if indexed(cartao.clone()) == index => Vec::new(),
        Line::Cartao { cartao, .. } if cartao == index => Vec::new(),
        other => vec![other],
    })
}

/// Keeps no history older than `cutoff` in the book at `path`: the credits before it become one line
/// per card (its sum, so balances stand), and answers given before it go (a key is answered from the
/// book for a day). Returns how many lines went.
pub fn forget_before(path: &Path, cutoff: DateTime<Utc>) -> std::io::Result<usize> {
    let old = |em: &Option<DateTime<Utc>>| em.is_none_or(|at| at < cutoff);
    let mut folded: HashMap<String, Decimal> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut gone = rewrite(path, |line| match line {
        Line::Credito { cartao, valor, em } if old(&em) => {
            let cartao = indexed(cartao);
            if !folded.contains_key(&cartao) {
                order.push(cartao.clone());
            }
            *folded.entry(cartao).or_default() += valor;
            Vec::new()
        }
        Line::Resposta { em, .. } if em < cutoff => Vec::new(),
        other => vec![other],
    })?;
    if !order.is_empty() {
        let sums: Vec<Line> = order
            .into_iter()
            .map(|cartao| Line::Credito {
                valor: folded.get(&cartao).copied().unwrap_or_default(),
                cartao,
                em: Some(cutoff),
            })
            .collect();
        gone = gone.saturating_sub(sums.len());
        prepend(path, &sums)?;
    }
    Ok(gone)
}

/// Writes the book at `path` anew with what `keep` makes of each whole line (cards put under their
/// index on the way), beside it, then renames it into place. Returns how many lines went.
fn rewrite(path: &Path, mut keep: impl FnMut(Line) -> Vec<Line>) -> std::io::Result<usize> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let (mut out, mut read, mut kept) = (String::with_capacity(text.len()), 0usize, 0usize);
    for raw in text.lines() {
        let Ok(line) = vt_contract::json::from_text::<Line>(raw) else {
            continue;
        };
        read += 1;
        let line = match line {
            Line::Credito { cartao, valor, em } => Line::Credito {
                cartao: indexed(cartao),
                valor,
                em,
            },
            other => other,
        };
        for line in keep(line) {
            kept += 1;
            out.push_str(&vt_contract::json::to_text(&line).map_err(std::io::Error::other)?);
            out.push('\n');
        }
    }
    replace(path, &out)?;
    Ok(read.saturating_sub(kept))
}

/// Puts `lines` before the book's lines at `path`.
fn prepend(path: &Path, lines: &[Line]) -> std::io::Result<()> {
    let mut out = String::new();
    for line in lines {
        out.push_str(&vt_contract::json::to_text(line).map_err(std::io::Error::other)?);
        out.push('\n');
    }
    out.push_str(&std::fs::read_to_string(path)?);
    replace(path, &out)
}

/// `text` as the file at `path`: written beside it, synced, renamed into place.
fn replace(path: &Path, text: &str) -> std::io::Result<()> {
    let beside = path.with_extension(format!("reescrita-{}", uuid::Uuid::new_v4().simple()));
    let written = std::fs::File::create(&beside).and_then(|mut f| {
        f.write_all(text.as_bytes())?;
        f.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&beside, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&beside);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::dec;

    #[test]
    fn two_books_on_one_file_see_each_others_lines_and_skip_a_torn_one() {
        let dir = std::env::temp_dir().join(format!("vt-book-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("simulador.jsonl");
        let (a, b) = (Book::at(&path), Book::at(&path));
        assert_eq!(a.credit("1234567890", dec!(30)), dec!(30));
        assert_eq!(
            b.credit("1234567890", dec!(20)),
            dec!(50),
            "b read a's line first"
        );
        assert_eq!(a.credited("1234567890"), dec!(50));
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(b"{\"tipo\":\"credito\",\"cartao\":\"1234567890\",\"val"))
            .expect("torn line");
        assert_eq!(a.credited("1234567890"), dec!(50), "a torn line is not read");
        let at = Utc::now();
        a.keep(
            "k",
            Answer {
                hash: "h".into(),
                status: 201,
                response: serde_json::json!({"status": "aprovada"}),
                at,
            },
        );
        // The torn line and the new one run together: that line is skipped, the next ones are read.
        b.keep(
            "k2",
            Answer {
                hash: "h2".into(),
                status: 201,
                response: Value::Null,
                at,
            },
        );
        assert_eq!(Book::at(&path).answer("k2").map(|a| a.status), Some(201));
        assert_eq!(Book::at(&path).credited("1234567890"), dec!(50));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn book_in_temp() -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("vt-book-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("simulador.jsonl");
        (dir, path)
    }

    #[test]
    fn the_book_keeps_no_card_in_clear_and_an_erasure_reaches_it() {
        let (dir, path) = book_in_temp();
        let (a, b) = (Book::at(&path), Book::at(&path));
        a.credit("1234567890", dec!(30));
        a.credit("2345678901", dec!(5));
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(
            !text.contains("1234567890") && !text.contains("2345678901"),
            "{text}"
        );
        // A book written before cards were indexed: its clear line still counts.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| {
                f.write_all(b"{\"tipo\":\"credito\",\"cartao\":\"1234567890\",\"valor\":1.00}\n")
            })
            .expect("old line");
        assert_eq!(b.credited("1234567890"), dec!(31));
        assert_eq!(forget_card(&path, "1234567890").expect("erase"), 2);
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(!text.contains("1234567890"), "{text}");
        // Both readers see the rewritten book, not what they had read of the old one.
        assert_eq!(a.credited("1234567890"), dec!(0));
        assert_eq!(b.credited("1234567890"), dec!(0));
        assert_eq!(b.credited("2345678901"), dec!(5));
        // And go on appending to it.
        a.credit("1234567890", dec!(2));
        assert_eq!(b.credited("1234567890"), dec!(2));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn retention_folds_old_credits_into_one_line_a_card_and_drops_old_answers() {
        let (dir, path) = book_in_temp();
        let book = Book::at(&path);
        book.credit("1234567890", dec!(30));
        book.credit("1234567890", dec!(20));
        let long_ago = Utc::now() - chrono::Duration::days(100);
        let answer = |at| Answer {
            hash: "h".into(),
            status: 201,
            response: Value::Null,
            at,
        };
        book.keep("velha", answer(long_ago));
        book.keep("nova", answer(Utc::now() + chrono::Duration::hours(1)));
        let cutoff = Utc::now() + chrono::Duration::seconds(1);
        assert_eq!(
            forget_before(&path, cutoff).expect("retention"),
            2,
            "two credits became one, one answer went"
        );
        assert_eq!(book.credited("1234567890"), dec!(50), "the balance stands");
        assert!(book.answer("velha").is_none());
        assert!(book.answer("nova").is_some());
        assert_eq!(std::fs::read_to_string(&path).expect("read").lines().count(), 2);
        assert_eq!(
            forget_card(Path::new("/nonexistent/vt-book"), "1234567890").expect("none"),
            0
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
