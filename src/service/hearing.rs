//! Media messages before their turn, under the conversation's turn lock: a voice note is fetched from
//! its channel, transcribed, and its transcript stored in place of the message's text — then the turn
//! runs on the words. Order holds because this runs where the turn runs: a later message of the same
//! conversation waits for the lock, or (its task holding the lock first) processes this one first.
//! The bytes live only in memory for the call; nothing of them is logged.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use async_trait::async_trait;

use super::{Inbound, Services};
use crate::llm::{ChatMessage, Transcriber};
use crate::store::{Media, MediaKind};

/// The prefix a transcribed voice note is stored and shown with (console, case file, the HTTP
/// conversation).
pub const VOICE_MARK: &str = "🎤";

/// What a voice note gets when it cannot be heard (the message stays on record).
const NOT_HEARD: &str = "Não consegui ouvir o áudio — pode escrever?";

/// Where a channel's media is fetched from (WhatsApp's Graph API).
#[async_trait]
pub trait MediaSource: Send + Sync {
    /// The bytes of `media`, refused beyond `max_bytes`.
    async fn fetch(&self, media: &Media, max_bytes: u64) -> Result<Vec<u8>, MediaError>;
}

/// Why a channel's media could not be fetched. No text quotes what the channel answered.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("a mídia tem {size} bytes e o limite é {max}")]
    TooLarge { size: u64, max: u64 },
    #[error("a mídia não pôde ser buscada: {0}")]
    Unreachable(String),
    #[error("o canal respondeu {0} ao pedido da mídia")]
    Status(u16),
    #[error("a mídia baixada não confere com o sha256 que o canal informou")]
    Mismatch,
    #[error("a resposta do canal sobre a mídia não é legível")]
    Unreadable,
}

/// What the service hears with: a transcriber (`[transcricao]`) and each channel's media source.
#[derive(Default)]
pub(super) struct Hearing {
    transcriber: Option<Transcriber>,
    sources: RwLock<HashMap<String, Arc<dyn MediaSource>>>,
}

impl Hearing {
    fn source(&self, channel: &str) -> Option<Arc<dyn MediaSource>> {
        self.sources
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(channel)
            .cloned()
    }
}

/// What hearing a message gave its turn.
pub(super) struct Heard<'m> {
    /// The message the turn runs on: as it came, or a voice note's words.
    pub msg: Cow<'m, Inbound>,
    /// What hearing it cost.
    pub listened: Listened,
    /// It could not be heard: this is the answer.
    pub unheard: Option<String>,
}

impl<'m> Heard<'m> {
    fn as_it_came(msg: &'m Inbound) -> Self {
        Self {
            msg: Cow::Borrowed(msg),
            listened: Listened::default(),
            unheard: None,
        }
    }

    fn unheard(msg: &'m Inbound) -> Self {
        Self {
            unheard: Some(NOT_HEARD.to_owned()),
            ..Self::as_it_came(msg)
        }
    }
}

/// What a turn's transcription cost, for its usage record.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Listened {
    pub audio_ms: i64,
    pub tokens: (u64, u64),
}

impl Services {
    /// With voice notes transcribed by `transcriber` (`[transcricao]`).
    pub fn with_transcriber(mut self, transcriber: Option<Transcriber>) -> Self {
        self.hearing.transcriber = transcriber;
        self
    }

    /// Media of `channel`'s messages is fetched from `source` (a channel registers itself when built).
    pub fn hear_from(&self, channel: &str, source: Arc<dyn MediaSource>) {
        self.hearing
            .sources
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(channel.to_owned(), source);
    }

    /// Whether voice notes are heard here (`[transcricao]` is set).
    pub fn hears_voice(&self) -> bool {
        self.hearing.transcriber.is_some()
    }

    /// Message `msg` (stored as `id`) heard, when it is a voice note and this service can hear it: its
    /// transcript is stored in place of its text before anything acts on it.
    pub(super) async fn hear<'m>(&self, msg: &'m Inbound, id: i64) -> Heard<'m> {
        let Some(media) = msg.media.as_ref().filter(|m| m.kind == MediaKind::Audio) else {
            return Heard::as_it_came(msg);
        };
        let (Some(transcriber), Some(source)) =
            (&self.hearing.transcriber, self.hearing.source(&msg.user.channel))
        else {
            return Heard::as_it_came(msg);
        };
        let transcript = match source.fetch(media, transcriber.max_bytes()).await {
            Ok(bytes) => transcriber
                .transcribe(bytes, &media.mime)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let transcript = match transcript {
            Ok(t) => t,
            Err(why) => {
                tracing::warn!(error = %why, "a voice note could not be heard");
                return Heard::unheard(msg);
            }
        };
        let stored = ChatMessage::user(format!("{VOICE_MARK} {}", transcript.text));
        if let Err(e) = self.store.heard(id, &stored).await {
            // The turn would answer words the record does not hold: unheard, the message is kept as it
            // came and can be heard again.
            tracing::error!(error = %e, "a voice note's transcript could not be stored");
            return Heard::unheard(msg);
        }
        Heard {
            msg: Cow::Owned(Inbound {
                text: transcript.text,
                media: None,
                ..msg.clone()
            }),
            listened: Listened {
                audio_ms: transcript.audio_ms,
                tokens: transcript.tokens,
            },
            unheard: None,
        }
    }
}
