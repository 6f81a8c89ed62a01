//! Speech to text through the OpenAI-compatible `POST {base_url}/audio/transcriptions` (OpenAI, Groq
//! and local Whisper servers speak it): a voice note's bytes in, its text out, with what the provider
//! says it cost. The bytes are sent and forgotten; nothing of them is logged.

use std::time::Duration;

use serde::Deserialize;

/// `[transcricao]` in the configuration file. Absent: voice notes get the text-only answer.
#[derive(Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TranscricaoConfig {
    /// The provider's API root, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// `VT_TRANSCRICAO_API_KEY`; a local server may need none.
    pub api_key: Option<String>,
    /// The transcription model.
    pub model: String,
    /// The language spoken, as the provider's `language` (ISO-639-1).
    pub language: String,
    /// How long one transcription may take, download apart.
    pub timeout_secs: u64,
    /// The largest recording fetched and sent, in MB (WhatsApp carries audio up to 16 MB).
    pub max_mb: u64,
}

impl Default for TranscricaoConfig {
    fn default() -> Self {
        Self {
            base_url: String::new(),
            api_key: None,
            model: "whisper-1".into(),
            language: "pt".into(),
            timeout_secs: 30,
            max_mb: 16,
        }
    }
}

impl std::fmt::Debug for TranscricaoConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscricaoConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("language", &self.language)
            .field("timeout_secs", &self.timeout_secs)
            .field("max_mb", &self.max_mb)
            .finish()
    }
}

impl TranscricaoConfig {
    /// A value that parses but cannot work, as `(field, why)`.
    pub fn problem(&self) -> Option<(&'static str, &'static str)> {
        if reqwest::Url::parse(&self.base_url).is_err() {
            return Some((
                "transcricao.base_url",
                "deve ser uma URL (ex.: https://api.openai.com/v1)",
            ));
        }
        if self.model.trim().is_empty() {
            return Some(("transcricao.model", "não pode ser vazio"));
        }
        if self.timeout_secs == 0 {
            return Some(("transcricao.timeout_secs", "deve ser pelo menos 1"));
        }
        if !(1..=100).contains(&self.max_mb) {
            return Some(("transcricao.max_mb", "deve ser de 1 a 100"));
        }
        None
    }

    /// The most bytes of one recording.
    pub fn max_bytes(&self) -> u64 {
        self.max_mb * 1024 * 1024
    }
}

/// What was heard of a recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    pub text: String,
    /// How long the recording is, as the provider says (else read off an Ogg/Opus stream), in ms.
    pub audio_ms: i64,
    /// Tokens, for providers that bill transcription by token (input, output).
    pub tokens: (u64, u64),
}

/// Why nothing was heard. The texts name the cause, never the provider's body (it may echo a key).
#[derive(Debug, thiserror::Error)]
pub enum TranscriptionError {
    #[error("o serviço de transcrição não respondeu a tempo")]
    Timeout,
    #[error("o serviço de transcrição não pôde ser chamado: {0}")]
    Unreachable(String),
    #[error("o serviço de transcrição respondeu {0}")]
    Status(u16),
    #[error("a resposta do serviço de transcrição não é legível")]
    Unreadable,
    #[error("a transcrição veio vazia")]
    Empty,
}

/// The client of one transcription provider.
#[derive(Clone)]
pub struct Transcriber {
    client: reqwest::Client,
    url: String,
    config: TranscricaoConfig,
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    text: String,
    /// `verbose_json` servers say the length in seconds here.
    #[serde(default)]
    duration: Option<f64>,
    #[serde(default)]
    usage: Option<Usage>,
}

/// OpenAI's `usage`: `{"type": "duration", "seconds"}` (whisper-1) or `{"type": "tokens",
/// "input_tokens", "output_tokens"}` (the gpt-4o transcription models).
#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    seconds: Option<f64>,
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

impl Transcriber {
    pub fn new(config: &TranscricaoConfig) -> Result<Self, TranscriptionError> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(config.timeout_secs))
            .build()
            .map_err(|e| {
                TranscriptionError::Unreachable(vt_contract::redact::secrets(&e.to_string()).into_owned())
            })?;
        Ok(Self {
            client,
            url: format!("{}/audio/transcriptions", config.base_url.trim_end_matches('/')),
            config: config.clone(),
        })
    }

    /// The most bytes of one recording this provider is sent.
    pub fn max_bytes(&self) -> u64 {
        self.config.max_bytes()
    }

    /// The transcription model (`[transcricao] model`).
    pub fn model(&self) -> &str {
        &self.config.model
    }

    /// The text spoken in `audio` (of type `mime`).
    pub async fn transcribe(&self, audio: Vec<u8>, mime: &str) -> Result<Transcript, TranscriptionError> {
        let estimated = ogg_opus_ms(&audio);
        let essence = mime.split(';').next().unwrap_or(mime).trim().to_owned();
        let file = reqwest::multipart::Part::bytes(audio)
            .file_name(format!("nota.{}", extension(&essence)))
            .mime_str(&essence)
            .map_err(|_| TranscriptionError::Unreachable("tipo de mídia inválido".into()))?;
        let form = reqwest::multipart::Form::new()
            .part("file", file)
            .text("model", self.config.model.clone())
            .text("language", self.config.language.clone())
            .text("response_format", "json");
        let mut request = self.client.post(&self.url).multipart(form);
        if let Some(key) = self.config.api_key.as_deref().filter(|k| !k.is_empty()) {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| {
            if e.is_timeout() {
                TranscriptionError::Timeout
            } else {
                TranscriptionError::Unreachable(vt_contract::redact::secrets(&e.to_string()).into_owned())
            }
        })?;
        let status = response.status();
        if !status.is_success() {
            return Err(TranscriptionError::Status(status.as_u16()));
        }
        let body = response.bytes().await.map_err(|e| {
            if e.is_timeout() {
                TranscriptionError::Timeout
            } else {
                TranscriptionError::Unreadable
            }
        })?;
        let answer: Answer =
            vt_contract::json::from_bytes(&body).map_err(|_| TranscriptionError::Unreadable)?;
        let text = answer.text.trim().to_owned();
        if text.is_empty() {
            return Err(TranscriptionError::Empty);
        }
        let usage = answer.usage.as_ref();
        let seconds = usage.and_then(|u| u.seconds).or(answer.duration);
        Ok(Transcript {
            text,
            audio_ms: seconds.map_or(estimated, |s| (s * 1000.0).round() as i64),
            tokens: (
                usage.and_then(|u| u.input_tokens).unwrap_or(0),
                usage.and_then(|u| u.output_tokens).unwrap_or(0),
            ),
        })
    }
}

/// The file extension a provider reads the type from.
fn extension(mime: &str) -> &'static str {
    match mime {
        "audio/ogg" | "audio/opus" => "ogg",
        "audio/mpeg" => "mp3",
        "audio/mp4" | "audio/aac" => "m4a",
        "audio/amr" => "amr",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/webm" => "webm",
        _ => "ogg",
    }
}

/// The length of an Ogg/Opus stream in ms, from its last page's granule position (48 kHz samples) less
/// the header's pre-skip; 0 for anything else. WhatsApp's voice notes are Ogg/Opus.
pub fn ogg_opus_ms(bytes: &[u8]) -> i64 {
    if !bytes.starts_with(b"OggS") {
        return 0;
    }
    let pre_skip = bytes
        .windows(8)
        .position(|w| w == b"OpusHead")
        .and_then(|at| bytes.get(at + 10..at + 12))
        .map_or(0, |b| i64::from(u16::from_le_bytes([b[0], b[1]])));
    let last_page = bytes.windows(4).rposition(|w| w == b"OggS");
    let granule = last_page
        .and_then(|at| bytes.get(at + 6..at + 14))
        .map_or(0, |b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    // A granule of -1 (no packet ends on the page) or bytes that only look like Ogg give nothing
    // sensible: no length rather than an overflow.
    let ms = i128::from(granule.saturating_sub(pre_skip).max(0)) * 1000 / 48_000;
    i64::try_from(ms)
        .ok()
        .filter(|ms| *ms <= MAX_PLAUSIBLE_MS)
        .unwrap_or(0)
}

/// Longer than this is no voice note: the bytes were read wrong.
const MAX_PLAUSIBLE_MS: i64 = 24 * 3600 * 1000;

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ogg page: capture pattern, version, flags, granule, serial, sequence, CRC (left 0: this
    /// reader does not check it), one segment.
    fn page(granule: i64, packet: &[u8]) -> Vec<u8> {
        let mut p = b"OggS".to_vec();
        p.extend([0, 0]);
        p.extend(granule.to_le_bytes());
        p.extend([1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        p.push(1);
        p.push(packet.len() as u8);
        p.extend(packet);
        p
    }

    #[test]
    fn an_ogg_opus_streams_length_comes_from_its_last_granule_less_the_pre_skip() {
        let mut head = b"OpusHead".to_vec();
        head.extend([1, 1]);
        head.extend(312u16.to_le_bytes());
        head.extend(48_000u32.to_le_bytes());
        head.extend([0, 0, 0]);
        let mut stream = page(0, &head);
        stream.extend(page(0, b"OpusTags"));
        stream.extend(page(48_000 * 3 + 312, &[0xfc; 3]));
        assert_eq!(ogg_opus_ms(&stream), 3_000);
        assert_eq!(ogg_opus_ms(b"RIFF...."), 0);
        assert_eq!(
            ogg_opus_ms(b"OggS only looks like a page, its granule is text"),
            0
        );
        assert_eq!(ogg_opus_ms(&page(-1, b"x")), 0);
    }

    #[test]
    fn a_config_that_cannot_work_names_its_field() {
        let ok = TranscricaoConfig {
            base_url: "http://127.0.0.1:9/v1".into(),
            ..TranscricaoConfig::default()
        };
        assert_eq!(ok.problem(), None);
        assert_eq!(
            TranscricaoConfig::default().problem().map(|p| p.0),
            Some("transcricao.base_url")
        );
        let zero = TranscricaoConfig {
            max_mb: 0,
            ..ok.clone()
        };
        assert_eq!(zero.problem().map(|p| p.0), Some("transcricao.max_mb"));
        let debug = format!(
            "{:?}",
            TranscricaoConfig {
                api_key: Some("sk-abc".into()),
                ..ok
            }
        );
        assert!(!debug.contains("sk-abc"));
    }
}
