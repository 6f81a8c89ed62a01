//! Media messages before their turn, under the conversation's turn lock: a voice note is fetched from
//! its channel, transcribed, and its transcript stored in place of the message's text — then the turn
//! runs on the words. A photo is fetched and read locally (Tesseract): the cards it shows are
//! proposed, never used ([`super::offers`]); the photo's text is not stored. Order holds because this
//! runs where the turn runs: a later message of the same conversation waits for the lock, or (its
//! task holding the lock first) processes this one first. The bytes live only in memory for the call;
//! nothing of them is logged.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use async_trait::async_trait;

use super::offers::{self, Offer};
use super::{Inbound, Messages};
use crate::ocr::PhotoReader;
use vt_engine::llm::{ChatMessage, Transcriber};
use vt_store::{Media, MediaKind};

/// The prefix a transcribed voice note is stored and shown with (console, case file, the HTTP
/// conversation).
pub(crate) const VOICE_MARK: &str = "🎤";

/// What a voice note gets when it cannot be heard (the message stays on record).
const NOT_HEARD: &str = "Não consegui ouvir o áudio — pode escrever?";

/// Where a channel's media is fetched from (WhatsApp's Graph API).
#[async_trait]
pub(crate) trait MediaSource: Send + Sync {
    /// The bytes of `media`, refused beyond `max_bytes`.
    async fn fetch(&self, media: &Media, max_bytes: u64) -> Result<Vec<u8>, MediaError>;
}

/// Why a channel's media could not be fetched. No text quotes what the channel answered.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MediaError {
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

/// What the service hears with: a transcriber (`[transcricao]`), a photo reader (Tesseract, `[fotos]`)
/// and each channel's media source.
#[derive(Default)]
pub struct Hearing {
    transcriber: Option<Transcriber>,
    reader: Option<Reader>,
    sources: RwLock<HashMap<String, Arc<dyn MediaSource>>>,
}

/// How photos are read: the reader, and the most bytes of one photo.
struct Reader {
    read: Arc<dyn PhotoReader>,
    max_bytes: u64,
}

impl Hearing {
    pub(super) fn new(transcriber: Option<Transcriber>, photos: Option<(Arc<dyn PhotoReader>, u64)>) -> Self {
        Self {
            transcriber,
            reader: photos.map(|(read, max_bytes)| Reader { read, max_bytes }),
            sources: RwLock::default(),
        }
    }

    fn source(&self, channel: &str) -> Option<Arc<dyn MediaSource>> {
        self.sources
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(channel)
            .cloned()
    }

    /// Media of `channel`'s messages is fetched from `source` (a channel registers itself when built).
    pub(crate) fn hear_from(&self, channel: &str, source: Arc<dyn MediaSource>) {
        self.sources
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(channel.to_owned(), source);
    }

    /// The transcription model, when voice notes are heard here (what their minutes are priced at).
    pub(super) fn hearing_model(&self) -> Option<&str> {
        self.transcriber.as_ref().map(Transcriber::model)
    }

    /// Whether voice notes are heard here (`[transcricao]` is set).
    pub(crate) fn hears_voice(&self) -> bool {
        self.transcriber.is_some()
    }

    /// Whether card photos are read here (Tesseract is installed and `[fotos] ler` is on).
    pub(crate) fn reads_photos(&self) -> bool {
        self.reader.is_some()
    }
}

/// What hearing a message gave its turn.
pub(super) struct Heard<'m> {
    /// The message the turn runs on: as it came, or a voice note's words.
    pub msg: Cow<'m, Inbound>,
    /// What hearing it cost.
    pub listened: Listened,
    /// The answer, when the message is answered without a turn of its own: a voice note that could
    /// not be heard, a photo, a message that is not processed at all.
    pub answer: Option<Answer>,
}

/// A message's answer given before routing, with no model.
pub(super) struct Answer {
    pub text: String,
    /// What the usage metrics call it.
    pub intent: &'static str,
    /// Cards the answer offers to choose from.
    pub offer: Option<Offer>,
}

impl Answer {
    /// A message that is not processed at all ([`super::refusal`]).
    fn refusal(text: String) -> Self {
        Self {
            text,
            intent: "recusa",
            offer: None,
        }
    }
}

impl<'m> Heard<'m> {
    fn as_it_came(msg: &'m Inbound) -> Self {
        Self {
            msg: Cow::Borrowed(msg),
            listened: Listened::default(),
            answer: None,
        }
    }

    fn unheard(msg: &'m Inbound) -> Self {
        Self {
            answer: Some(Answer::refusal(NOT_HEARD.to_owned())),
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

impl Messages<'_> {
    /// Message `msg` (stored as `id`) heard, when it is a voice note or a photo and this service can
    /// hear it: a voice note's transcript is stored in place of its text before anything acts on it; a
    /// photo's cards are proposed.
    /// What is not processed at all (an empty or oversized message, media that cannot be heard) is
    /// answered here too.
    pub(super) async fn hear<'m>(&self, msg: &'m Inbound, id: i64) -> Heard<'m> {
        let mut heard = match msg.media.as_ref() {
            Some(media) if media.kind == MediaKind::Audio => self.listen(msg, media, id).await,
            Some(media) if media.kind == MediaKind::Image => self.look(msg, media).await,
            _ => Heard::as_it_came(msg),
        };
        if heard.answer.is_none() {
            heard.answer = super::refusal(&heard.msg).map(Answer::refusal);
        }
        heard
    }

    /// A photo read: the cards of the policy's lengths in it, proposed. The photo and its text are
    /// never stored; a photo that cannot be fetched or read is asked to be typed.
    async fn look<'m>(&self, msg: &'m Inbound, media: &Media) -> Heard<'m> {
        let (Some(reader), Some(source)) = (&self.hearing.reader, self.hearing.source(&msg.user.channel))
        else {
            return Heard::as_it_came(msg);
        };
        let text = match source.fetch(media, reader.max_bytes).await {
            Ok(bytes) => reader.read.read(bytes).await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let found = match text {
            Ok(text) => {
                let (min, max) = self.card_lengths();
                offers::read_off_photo(&text, min, max)
            }
            Err(why) => {
                tracing::warn!(error = %why, "a photo could not be read");
                Vec::new()
            }
        };
        let (text, offer) = offers::photo_proposal(found);
        Heard {
            answer: Some(Answer {
                text,
                intent: "foto_cartao",
                offer,
            }),
            ..Heard::as_it_came(msg)
        }
    }

    /// The lengths a card may have (`[vt.politicas] validacoes_cartao`).
    fn card_lengths(&self) -> (usize, usize) {
        let lengths = |v: &vt_domain::vt::ValidacoesCartao| (v.tamanho_min, v.tamanho_max);
        self.engine
            .extensions()
            .get::<vt_domain::tools::VtSettings>()
            .map_or_else(
                || lengths(&vt_domain::vt::ValidacoesCartao::default()),
                |s| lengths(&s.politicas.validacoes_cartao),
            )
    }

    /// A voice note heard: its transcript stored in place of its text.
    async fn listen<'m>(&self, msg: &'m Inbound, media: &Media, id: i64) -> Heard<'m> {
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
        if let Err(e) = self.conversations.heard(id, &stored).await {
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
            answer: None,
        }
    }
}
