//! Voice notes on WhatsApp: the Graph fake serves a real Ogg/Opus recording behind Meta's two media
//! calls, and a transcription fake reads the real multipart request (OpenAI's
//! `/audio/transcriptions`). A voice note is answered from its transcript, in its place in the order,
//! its failure answered and kept, and its bytes never kept.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Multipart, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::whatsapp::{Wa, media_notification, sent, text_notification, whatsapp_on};

const CONVERSATION: &str = "wa:106540352242922:16505551234";
const MEDIA_ID: &str = "1037543291543636";
const API_KEY: &str = "sk-transcricao-abcdefghijklmnopqrstuvwx";
/// Bytes no store, file or record may ever hold: the recording's own packet.
const MARKER: &[u8; 24] = b"OPUS-AUDIO-BYTES-MARKER!";

/// An Ogg page (CRC left 0: nothing here checks it) carrying one packet.
fn page(granule: i64, sequence: u8, packet: &[u8]) -> Vec<u8> {
    let mut p = b"OggS".to_vec();
    p.extend([0, if sequence == 0 { 2 } else { 0 }]);
    p.extend(granule.to_le_bytes());
    p.extend([7, 0, 0, 0, sequence, 0, 0, 0, 0, 0, 0, 0]);
    p.push(1);
    p.push(packet.len() as u8);
    p.extend(packet);
    p
}

/// A 3-second Ogg/Opus voice note as WhatsApp records it: `OpusHead` (mono, pre-skip 312, 48 kHz),
/// `OpusTags`, then an audio page whose packet is [`MARKER`].
fn voice_note() -> Vec<u8> {
    let mut head = b"OpusHead".to_vec();
    head.extend([1, 1]);
    head.extend(312u16.to_le_bytes());
    head.extend(48_000u32.to_le_bytes());
    head.extend([0, 0, 0]);
    let mut tags = b"OpusTags".to_vec();
    tags.extend(4u32.to_le_bytes());
    tags.extend(b"test");
    tags.extend(0u32.to_le_bytes());
    let mut note = page(0, 0, &head);
    note.extend(page(0, 1, &tags));
    note.extend(page(48_000 * 3 + 312, 2, MARKER));
    note
}

/// An `audio` notification as Meta sends a voice note.
fn voice_notification(wamid: &str, sha256: &str) -> Vec<u8> {
    media_notification(
        wamid,
        "audio",
        json!({"mime_type": "audio/ogg; codecs=opus", "sha256": sha256, "id": MEDIA_ID, "voice": true}),
    )
}

/// One request the transcription fake read.
#[derive(Debug, Clone)]
struct Heard {
    authorization: String,
    model: String,
    language: String,
    file_name: String,
    content_type: String,
    file: Vec<u8>,
}

/// How the transcription fake answers each request, in order.
#[derive(Clone)]
enum Says {
    Text(&'static str, Duration),
    /// A 500 whose body echoes the key, as some providers' errors do.
    Fails,
}

#[derive(Clone, Default)]
struct Transcription {
    heard: Arc<Mutex<Vec<Heard>>>,
    says: Arc<Mutex<std::collections::VecDeque<Says>>>,
}

async fn transcribe(
    State(t): State<Transcription>,
    headers: HeaderMap,
    mut form: Multipart,
) -> axum::response::Response {
    let mut heard = Heard {
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
        model: String::new(),
        language: String::new(),
        file_name: String::new(),
        content_type: String::new(),
        file: Vec::new(),
    };
    while let Some(field) = form.next_field().await.expect("multipart") {
        match field.name().unwrap_or_default() {
            "file" => {
                heard.file_name = field.file_name().unwrap_or_default().to_owned();
                heard.content_type = field.content_type().unwrap_or_default().to_owned();
                heard.file = field.bytes().await.expect("file").to_vec();
            }
            "model" => heard.model = field.text().await.expect("model"),
            "language" => heard.language = field.text().await.expect("language"),
            _ => {}
        }
    }
    t.heard.lock().expect("lock").push(heard);
    let says = t.says.lock().expect("lock").pop_front().unwrap_or(Says::Fails);
    match says {
        Says::Text(text, delay) => {
            tokio::time::sleep(delay).await;
            axum::Json(json!({"text": text, "usage": {"type": "duration", "seconds": 3}})).into_response()
        }
        Says::Fails => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(r#"{{"error": {{"message": "upstream failed for key {API_KEY}"}}}}"#),
        )
            .into_response(),
    }
}

impl Transcription {
    /// Serves `POST /v1/audio/transcriptions` on loopback; returns its `base_url`.
    async fn start(&self) -> String {
        let app = axum::Router::new()
            .route("/v1/audio/transcriptions", axum::routing::post(transcribe))
            .with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    fn heard(&self) -> Vec<Heard> {
        self.heard.lock().expect("lock").clone()
    }
}

/// A WhatsApp channel over a SQLite file in `dir`, hearing through a transcription fake that says
/// `says` in order, with the Graph fake serving [`voice_note`] as media [`MEDIA_ID`].
async fn hearing(
    dir: &std::path::Path,
    says: Vec<Says>,
    replies: usize,
) -> (Wa, Transcription, Arc<dyn vt_store::Store>) {
    let transcription = Transcription::default();
    transcription.says.lock().expect("lock").extend(says);
    let config = vt_engine::llm::transcription::TranscricaoConfig {
        base_url: transcription.start().await,
        api_key: Some(API_KEY.into()),
        timeout_secs: 5,
        ..Default::default()
    };
    let store: Arc<dyn vt_store::Store> = Arc::new(
        vt_store::sqlite::SqliteStore::connect(&format!("sqlite://{}/vt.db?mode=rwc", dir.display()))
            .await
            .expect("store"),
    );
    let chat = crate::support::chat_harness_hearing(store.clone(), config).await;
    let wa = whatsapp_on(chat, (0..replies).map(|_| sent()).collect()).await;
    let note = voice_note();
    wa.graph.serve_file(
        &format!("/v23.0/{MEDIA_ID}"),
        "application/json",
        json!({"messaging_product": "whatsapp", "url": format!("{}/whatsapp_business/attachments/?mid={MEDIA_ID}", wa.graph.url),
               "mime_type": "audio/ogg; codecs=opus", "sha256": hex::encode(Sha256::digest(&note)),
               "file_size": note.len(), "id": MEDIA_ID})
        .to_string()
        .into_bytes(),
    );
    wa.graph
        .serve_file("/whatsapp_business/attachments/", "audio/ogg", note);
    (wa, transcription, store)
}

/// No file in `dir` holds `needle`.
pub(crate) fn assert_nowhere(dir: &std::path::Path, needle: &[u8], what: &str) {
    for entry in std::fs::read_dir(dir).expect("dir") {
        let path = entry.expect("entry").path();
        let bytes = std::fs::read(&path).unwrap_or_default();
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "{what}: {}",
            path.display()
        );
    }
}

fn note_sha() -> String {
    hex::encode(Sha256::digest(voice_note()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_is_answered_from_its_transcript_and_kept_as_words_never_as_sound() {
    let dir = tempfile::tempdir().expect("dir");
    let (wa, transcription, store) = hearing(
        dir.path(),
        vec![Says::Text("Qual o saldo do cartão 1234567890?", Duration::ZERO)],
        1,
    )
    .await;
    assert_eq!(
        wa.deliver(&voice_notification("wamid.voz1", &note_sha())).await,
        200
    );
    wa.sent_at_least(1).await;
    let said = wa.texts();
    assert!(
        said[0].contains("****7890") && said[0].contains("50,00"),
        "{said:?}"
    );

    // Meta's two calls, both with the token; the provider's request as OpenAI documents it.
    let media_calls: Vec<_> = wa
        .graph
        .received()
        .into_iter()
        .filter(|r| r.path.contains(MEDIA_ID) || r.path.contains("attachments"))
        .collect();
    assert_eq!(media_calls.len(), 2, "{media_calls:?}");
    assert!(
        media_calls
            .iter()
            .all(|r| r.headers["authorization"] == "Bearer EAAtesttokenvalue0123456789")
    );
    let heard = transcription.heard();
    assert_eq!(heard.len(), 1);
    assert_eq!(heard[0].authorization, format!("Bearer {API_KEY}"));
    assert_eq!(
        (heard[0].model.as_str(), heard[0].language.as_str()),
        ("whisper-1", "pt")
    );
    assert_eq!(
        (heard[0].file_name.as_str(), heard[0].content_type.as_str()),
        ("nota.ogg", "audio/ogg")
    );
    assert_eq!(heard[0].file, voice_note(), "the recording is sent as it came");

    // Stored as words marked as heard, the seconds counted with the turn's usage.
    let messages = store.messages(CONVERSATION).await.expect("messages");
    let first = messages[0].message.text().unwrap_or_default().to_owned();
    assert_eq!(first, "🎤 Qual o saldo do cartão 1234567890?");
    let usage = store
        .usage_since(chrono::DateTime::UNIX_EPOCH)
        .await
        .expect("usage");
    assert_eq!(usage.iter().map(|u| u.audio_ms).sum::<i64>(), 3_000);

    // Nothing of the sound in the data directory (the database and its journal included).
    drop(wa);
    assert_nowhere(dir.path(), MARKER, "audio bytes kept");
    assert_nowhere(dir.path(), b"OggS", "an Ogg page kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_sent_right_after_a_slow_voice_note_is_answered_after_it() {
    let dir = tempfile::tempdir().expect("dir");
    let (wa, _transcription, _chat) = hearing(
        dir.path(),
        vec![Says::Text(
            "saldo do cartão 1234567890",
            Duration::from_millis(700),
        )],
        2,
    )
    .await;
    assert_eq!(
        wa.deliver(&voice_notification("wamid.voz2", &note_sha())).await,
        200
    );
    assert_eq!(wa.deliver(&text_notification("oi", "wamid.texto2")).await, 200);
    wa.sent_at_least(2).await;
    let said = wa.texts();
    assert!(
        said[0].contains("****7890"),
        "the voice note's answer comes first: {said:?}"
    );
    assert!(!said[1].contains("****7890"), "{said:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_that_cannot_be_heard_gets_asked_to_write_and_stays_on_record() {
    let dir = tempfile::tempdir().expect("dir");
    let (wa, transcription, store) = hearing(dir.path(), vec![Says::Fails], 1).await;
    assert_eq!(
        wa.deliver(&voice_notification("wamid.voz3", &note_sha())).await,
        200
    );
    wa.sent_at_least(1).await;
    assert_eq!(wa.texts(), vec!["Não consegui ouvir o áudio — pode escrever?"]);
    assert_eq!(transcription.heard().len(), 1, "never retried on its own");
    let messages = store.messages(CONVERSATION).await.expect("messages");
    assert_eq!(
        messages[0].message.text(),
        Some("🎤 [áudio]"),
        "the message is kept"
    );
    assert!(
        crate::support::all_processed(store.as_ref()).await,
        "answered, not left hanging"
    );
    // The provider's body echoed the key: it is nowhere on record.
    assert_nowhere(dir.path(), API_KEY.as_bytes(), "the transcription key kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_whose_bytes_do_not_match_metas_sha256_is_never_transcribed() {
    let dir = tempfile::tempdir().expect("dir");
    let (wa, transcription, _chat) = hearing(
        dir.path(),
        vec![Says::Text("recarregar 50 no cartão 1234567890", Duration::ZERO)],
        1,
    )
    .await;
    // The Graph answers the recording; the webhook and `GET /{media-id}` named another digest.
    wa.graph.serve_file(
        &format!("/v23.0/{MEDIA_ID}"),
        "application/json",
        json!({"url": format!("{}/whatsapp_business/attachments/?mid={MEDIA_ID}", wa.graph.url),
               "sha256": hex::encode(Sha256::digest(b"another recording")), "id": MEDIA_ID})
        .to_string()
        .into_bytes(),
    );
    assert_eq!(
        wa.deliver(&voice_notification("wamid.voz4", &note_sha())).await,
        200
    );
    wa.sent_at_least(1).await;
    assert_eq!(wa.texts(), vec!["Não consegui ouvir o áudio — pode escrever?"]);
    assert!(transcription.heard().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_transcricao_a_voice_note_gets_the_text_only_answer() {
    let wa = whatsapp_on(
        crate::support::chat_harness(None, vt_domain::tools::VtSettings::default()).await,
        vec![sent()],
    )
    .await;
    assert_eq!(
        wa.deliver(&voice_notification("wamid.voz5", &note_sha())).await,
        200
    );
    wa.sent_at_least(1).await;
    assert!(wa.texts()[0].starts_with("Por enquanto eu só leio mensagens de texto"));
    assert!(
        wa.graph.received().iter().all(|r| !r.path.contains(MEDIA_ID)),
        "nothing fetched"
    );
}
