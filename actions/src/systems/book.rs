//! The embedded simulator's book: what it did that the next process must know — the balances its
//! recharges credited and the answers it gave under each idempotency key — as lines appended to a
//! file in the data directory. The simulator is the world a newcomer meets (`chat --message` turns,
//! `serve` restarts, `run-flow` runs are processes of their own), so a recharge approved in one is
//! still there in the next, and a request sent again under the same key is answered from the book,
//! never charged twice. The simulated Pix provider keeps its charges here too (each change, the whole
//! charge), so a code shown by one `chat --message` is paid, read or withdrawn by the next process.
//!
//! Appending is the one write: each line is written with one `write` on a file opened for appending,
//! so lines of several processes never interleave, and nothing is rewritten (a batch of thousands of
//! recharges costs one short write each). Every reader catches up with the lines written since it
//! last looked before it answers (one `stat` when there are none). Its own lines it applies as it
//! writes them when the file grew by them alone; otherwise they are read back in file order with the
//! other processes' lines. A line cut short by a kill is skipped. The book only grows; delete the file
//! to start the simulated world afresh.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One line of the book.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "tipo", rename_all = "snake_case")]
enum Line {
    /// A recharge credited `valor` to `cartao`.
    Credito {
        cartao: String,
        #[serde(with = "crate::vt::input::money_serde")]
        valor: Decimal,
    },
    /// A Pix charge of the simulated provider, as it is after a change.
    Cobranca { cob: Box<crate::pix::api::Cob> },
    /// The answer given under an idempotency key.
    Resposta {
        chave: String,
        hash: String,
        status: u16,
        resposta: Value,
        em: DateTime<Utc>,
    },
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
    /// What was credited to each card, on top of its starting balance.
    credits: HashMap<String, Decimal>,
    answers: HashMap<String, Answer>,
    /// The simulated provider's charges, as last written.
    cobs: HashMap<String, crate::pix::api::Cob>,
    /// How many charge lines were read: what changed since a reader last looked.
    cob_lines: u64,
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
        self.caught_up(|r| r.credits.get(cartao).copied().unwrap_or_default())
    }

    /// The answer kept under `key`, if any.
    pub(crate) fn answer(&self, key: &str) -> Option<Answer> {
        self.caught_up(|r| r.answers.get(key).cloned())
    }

    /// Credits `valor` to `cartao`; the card's credits after it.
    pub(crate) fn credit(&self, cartao: &str, valor: Decimal) -> Decimal {
        self.append(Line::Credito {
            cartao: cartao.to_owned(),
            valor,
        });
        self.credited(cartao)
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
    pub(crate) fn keep_cob(&self, cob: &crate::pix::api::Cob) {
        self.append(Line::Cobranca {
            cob: Box::new(cob.clone()),
        });
    }

    /// Every charge as last written, when any was written since `seen` charge lines; with the count
    /// read so far.
    pub(crate) fn cobs_since(&self, seen: u64) -> (u64, Option<HashMap<String, crate::pix::api::Cob>>) {
        self.caught_up(|r| (r.cob_lines, (r.cob_lines != seen).then(|| r.cobs.clone())))
    }

    fn append(&self, line: Line) {
        let Ok(mut text) = crate::json::to_text(&line) else {
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
                Ok(f.metadata()?.len())
            });
        match written {
            // The file grew by this line alone since it was last read: the line is applied as it
            // is, not read back and parsed by the next catch-up (a batch's book grows by two lines a
            // recharge, and each answer caught up with them).
            Ok(len) if len == read.offset + text.len() as u64 => {
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
    match std::fs::metadata(path) {
        Ok(m) if m.len() == read.offset => return Ok(()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
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
        if let Ok(line) = crate::json::from_text::<Line>(text) {
            apply(read, line);
        }
    }
    read.offset += whole as u64;
    Ok(())
}

/// What `line` says, added to what was read.
fn apply(read: &mut Seen, line: Line) {
    match line {
        Line::Credito { cartao, valor } => *read.credits.entry(cartao).or_default() += valor,
        Line::Cobranca { cob } => {
            read.cob_lines += 1;
            read.cobs.insert(cob.txid.clone(), *cob);
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
}
