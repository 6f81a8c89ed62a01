//! Card photos on WhatsApp: the Graph fake serves a PNG drawn at test time (a card's face, its number
//! in a bitmap font) behind Meta's two media calls, and the machine's Tesseract reads it. The card is
//! proposed masked and used only after "sim"; several are offered as a WhatsApp list whose pick is the
//! card; a photo with none is asked to be typed; without Tesseract, the text-only answer. The photo is
//! never kept. The remembered cards' list (two known, none named) goes out as a list too.
//!
//! Tesseract is Debian's `tesseract-ocr`, which `.ci/run` installs: where it is missing the OCR tests
//! say so and pass, unless `VT_TEST_OCR=1` (which `.ci/run` sets) requires it.

use std::sync::Arc;

use embedded_graphics::mono_font::MonoTextStyle;
use embedded_graphics::mono_font::ascii::FONT_9X18_BOLD;
use embedded_graphics::pixelcolor::BinaryColor;
use embedded_graphics::prelude::*;
use embedded_graphics::text::Text;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::voice::assert_nowhere;
use crate::whatsapp::{Wa, media_notification, sent, tap_notification, text_notification, whatsapp_on};

const CONVERSATION: &str = "wa:106540352242922:16505551234";
const MEDIA_ID: &str = "2093756132487612";
const PROPOSAL: &str = "Encontrei o cartão final 7890 na foto. É esse? (sim/não)";

/// A white canvas the bitmap font draws on, one byte a pixel.
struct Canvas {
    width: u32,
    height: u32,
    pixels: Vec<u8>,
}

impl OriginDimensions for Canvas {
    fn size(&self) -> Size {
        Size::new(self.width, self.height)
    }
}

impl DrawTarget for Canvas {
    type Color = BinaryColor;
    type Error = std::convert::Infallible;

    fn draw_iter<I: IntoIterator<Item = Pixel<BinaryColor>>>(
        &mut self,
        pixels: I,
    ) -> Result<(), Self::Error> {
        for Pixel(p, color) in pixels {
            if let (Ok(x), Ok(y)) = (u32::try_from(p.x), u32::try_from(p.y))
                && x < self.width
                && y < self.height
            {
                self.pixels[(y * self.width + x) as usize] = if color.is_on() { 0 } else { 255 };
            }
        }
        Ok(())
    }
}

/// A card's face as a PNG: `lines` in black on white, drawn three times the font's size (the size
/// a phone's photo of a card gives Tesseract).
fn card_photo(lines: &[&str]) -> Vec<u8> {
    const SCALE: u32 = 3;
    let (width, height) = (360, 30 * lines.len() as u32 + 20);
    let mut canvas = Canvas {
        width,
        height,
        pixels: vec![255; (width * height) as usize],
    };
    let style = MonoTextStyle::new(&FONT_9X18_BOLD, BinaryColor::On);
    for (i, line) in lines.iter().enumerate() {
        Text::new(line, Point::new(10, 25 + 30 * i as i32), style)
            .draw(&mut canvas)
            .expect("drawn");
    }
    let (w, h) = (width * SCALE, height * SCALE);
    let scaled: Vec<u8> = (0..h)
        .flat_map(|y| (0..w).map(move |x| (x, y)))
        .map(|(x, y)| canvas.pixels[((y / SCALE) * width + x / SCALE) as usize])
        .collect();
    let mut png = Vec::new();
    let mut encoder = png::Encoder::new(&mut png, w, h);
    encoder.set_color(png::ColorType::Grayscale);
    encoder.set_depth(png::BitDepth::Eight);
    encoder
        .write_header()
        .expect("header")
        .write_image_data(&scaled)
        .expect("pixels");
    png
}

/// An `image` notification as Meta sends a photo.
fn photo_notification(wamid: &str, photo: &[u8]) -> Vec<u8> {
    let sha256 = hex::encode(Sha256::digest(photo));
    media_notification(
        wamid,
        "image",
        json!({"mime_type": "image/png", "sha256": sha256, "id": MEDIA_ID}),
    )
}

/// A pick from one of our lists, as Meta reports it.
fn pick_notification(row_id: &str, wamid: &str) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(&tap_notification("x", wamid)).expect("json");
    let m = &mut v["entry"][0]["changes"][0]["value"]["messages"][0];
    m["interactive"] =
        json!({"type": "list_reply", "list_reply": {"id": row_id, "title": "Cartão", "description": ""}});
    serde_json::to_vec(&v).expect("bytes")
}

/// Whether Tesseract is here; `false` (and a note) when the tests may pass without it.
fn tesseract_here() -> bool {
    let here = std::process::Command::new("tesseract")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !here {
        let required = std::env::var("VT_TEST_OCR").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "VT_TEST_OCR=1 but tesseract is not installed (Debian: tesseract-ocr)"
        );
        eprintln!("tesseract is not installed (Debian: tesseract-ocr): the photo test is skipped");
    }
    here
}

/// A WhatsApp channel over a SQLite file in `dir`, reading photos as `fotos` says, with the Graph fake
/// serving `photo` as media [`MEDIA_ID`].
async fn reading(
    dir: &std::path::Path,
    fotos: vt_agent::testkit::FotosConfig,
    replies: usize,
) -> (Wa, Arc<dyn vt_store::Store>) {
    let store: Arc<dyn vt_store::Store> = Arc::new(
        vt_store::sqlite::SqliteStore::connect(&format!("sqlite://{}/vt.db?mode=rwc", dir.display()))
            .await
            .expect("store"),
    );
    let chat = crate::support::chat_harness_reading(store.clone(), fotos).await;
    let wa = whatsapp_on(chat, (0..replies).map(|_| sent()).collect()).await;
    (wa, store)
}

impl Wa {
    /// The Graph fake serves `photo` behind Meta's two media calls.
    fn serves_photo(&self, photo: &[u8]) {
        self.graph.serve_file(
            &format!("/v23.0/{MEDIA_ID}"),
            "application/json",
            json!({"messaging_product": "whatsapp", "url": format!("{}/whatsapp_business/attachments/?mid={MEDIA_ID}", self.graph.url),
                   "mime_type": "image/png", "sha256": hex::encode(Sha256::digest(photo)),
                   "file_size": photo.len(), "id": MEDIA_ID})
            .to_string()
            .into_bytes(),
        );
        self.graph
            .serve_file("/whatsapp_business/attachments/", "image/png", photo.to_vec());
    }

    /// Sends `body` and waits for the `n`th message to go out; the last one sent.
    async fn then(&self, body: &[u8], n: usize) -> Value {
        assert_eq!(self.deliver(body).await, 200);
        self.sent_at_least(n).await;
        self.sends().last().cloned().expect("sent")
    }

    fn media_calls(&self) -> usize {
        self.graph
            .received()
            .into_iter()
            .filter(|r| r.path.contains(MEDIA_ID) || r.path.contains("attachments"))
            .count()
    }
}

fn text_of(sent: &Value) -> &str {
    sent["text"]["body"]
        .as_str()
        .or(sent["interactive"]["body"]["text"].as_str())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_photo_is_proposed_masked_and_the_card_used_only_after_sim() {
    if !tesseract_here() {
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let (wa, store) = reading(dir.path(), Default::default(), 8).await;
    assert!(
        wa.notices
            .iter()
            .any(|n| n.contains("fotos de cartão lidas localmente")),
        "serve says photos are read: {:?}",
        wa.notices
    );
    let photo = card_photo(&["VALE TRANSPORTE", "1234 5678 90", "ANA SOUZA"]);
    wa.serves_photo(&photo);

    // Proposed, masked: a "não" drops it, and the card is nobody's.
    assert_eq!(
        text_of(&wa.then(&photo_notification("wamid.foto1", &photo), 1).await),
        PROPOSAL
    );
    let declined = wa.then(&text_notification("não", "wamid.nao"), 2).await;
    assert!(text_of(&declined).contains("Pode digitar"), "{declined}");
    let asked = wa
        .then(&text_notification("qual o saldo?", "wamid.saldo1"), 3)
        .await;
    assert!(
        !text_of(&asked).contains("7890") && text_of(&asked).contains("cartão"),
        "no card yet: {asked}"
    );

    // Proposed again: "sim" makes it the conversation's card, and nothing else happens.
    assert_eq!(
        text_of(&wa.then(&photo_notification("wamid.foto2", &photo), 4).await),
        PROPOSAL
    );
    let taken = wa.then(&text_notification("sim", "wamid.sim"), 5).await;
    assert_eq!(
        text_of(&taken),
        "Pronto: vou usar o cartão ****7890 nesta conversa. Quer consultar o saldo ou fazer uma recarga?"
    );
    let balance = wa
        .then(&text_notification("qual o saldo?", "wamid.saldo2"), 6)
        .await;
    assert!(
        text_of(&balance).contains("****7890") && text_of(&balance).contains("50,00"),
        "{balance}"
    );
    assert_eq!(wa.media_calls(), 4, "two photos, two calls each");
    assert!(
        wa.graph
            .received()
            .iter()
            .filter(|r| r.path.contains(MEDIA_ID) || r.path.contains("attachments"))
            .all(|r| r.headers["authorization"] == "Bearer EAAtesttokenvalue0123456789")
    );

    // The photo is kept as a photo was sent, never its bytes; the card never in clear.
    let messages = store.messages(CONVERSATION).await.expect("messages");
    assert_eq!(messages[0].message.text(), Some("[foto]"));
    assert!(
        wa.sends().iter().all(|s| !s.to_string().contains("1234567890")),
        "no full card goes to the person"
    );
    drop(wa);
    assert_nowhere(
        dir.path(),
        &photo[photo.len() / 2..photo.len() / 2 + 32],
        "photo bytes kept",
    );
    assert_nowhere(dir.path(), b"\x89PNG", "a PNG kept");
    assert_nowhere(dir.path(), b"1234567890", "a card kept in clear");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_cards_in_a_photo_are_offered_as_a_list_whose_pick_is_the_card() {
    if !tesseract_here() {
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let (wa, _store) = reading(dir.path(), Default::default(), 4).await;
    let photo = card_photo(&["BILHETE UNICO", "1234 5678 90", "CARTAO 2", "9876 5432 10"]);
    wa.serves_photo(&photo);

    let offered = wa.then(&photo_notification("wamid.foto", &photo), 1).await;
    assert_eq!(offered["type"], "interactive", "{offered}");
    assert_eq!(offered["interactive"]["type"], "list");
    assert!(
        offered["interactive"]["action"]["button"]
            .as_str()
            .is_some_and(|b| b.chars().count() <= 20)
    );
    let rows = offered["interactive"]["action"]["sections"][0]["rows"]
        .as_array()
        .expect("rows");
    let titles: Vec<&str> = rows.iter().filter_map(|r| r["title"].as_str()).collect();
    assert_eq!(titles, vec!["Cartão ****7890", "Cartão ****3210"]);
    assert!(titles.iter().all(|t| t.chars().count() <= 24));
    assert!(!offered.to_string().contains("1234567890") && !offered.to_string().contains("9876543210"));

    let row = rows[1]["id"].as_str().expect("id");
    let taken = wa.then(&pick_notification(row, "wamid.pick"), 2).await;
    assert_eq!(
        text_of(&taken),
        "Pronto: vou usar o cartão ****3210 nesta conversa. Quer consultar o saldo ou fazer uma recarga?"
    );
    let balance = wa.then(&text_notification("saldo", "wamid.saldo"), 3).await;
    assert!(text_of(&balance).contains("****3210"), "{balance}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_known_cards_and_none_named_get_a_list_whose_reply_picks_the_card() {
    // No photo here: the remembered cards' question goes out as a list wherever Tesseract is.
    let wa = whatsapp_on(
        crate::support::chat_harness(None, vt_domain::tools::VtSettings::default()).await,
        (0..6).map(|_| sent()).collect(),
    )
    .await;
    let first = wa
        .then(&text_notification("saldo do cartão 1234567890", "wamid.1"), 1)
        .await;
    assert!(text_of(&first).contains("50,00"), "{first}");
    let second = wa
        .then(&text_notification("saldo do cartão 1111111111", "wamid.2"), 2)
        .await;
    assert!(text_of(&second).contains("12,50"), "{second}");

    let which = wa.then(&text_notification("qual o saldo?", "wamid.3"), 3).await;
    assert_eq!(which["interactive"]["type"], "list", "{which}");
    let rows = which["interactive"]["action"]["sections"][0]["rows"]
        .as_array()
        .expect("rows")
        .clone();
    let titles: Vec<&str> = rows.iter().filter_map(|r| r["title"].as_str()).collect();
    assert_eq!(titles, vec!["Cartão ****7890", "Cartão ****1111"]);
    assert!(
        text_of(&which).contains("De qual cartão"),
        "the text asks too: {which}"
    );

    let picked = wa
        .then(
            &pick_notification(rows[1]["id"].as_str().expect("id"), "wamid.4"),
            4,
        )
        .await;
    assert!(
        text_of(&picked).contains("****1111") && text_of(&picked).contains("12,50"),
        "the pick is the card: {picked}"
    );
    // The list is gone once answered: a later pick from it names no card.
    let stale = wa
        .then(
            &pick_notification(rows[0]["id"].as_str().expect("id"), "wamid.5"),
            5,
        )
        .await;
    assert!(!text_of(&stale).contains("50,00"), "{stale}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_with_no_card_is_asked_to_be_typed_and_stays_on_record() {
    if !tesseract_here() {
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let (wa, store) = reading(dir.path(), Default::default(), 1).await;
    let photo = card_photo(&["VALE TRANSPORTE", "ANA SOUZA"]);
    wa.serves_photo(&photo);
    let asked = wa.then(&photo_notification("wamid.foto", &photo), 1).await;
    assert_eq!(
        text_of(&asked),
        "Não consegui ler o número do cartão na foto; pode digitar?"
    );
    let messages = store.messages(CONVERSATION).await.expect("messages");
    assert_eq!(messages[0].message.text(), Some("[foto]"));
    assert!(
        crate::support::all_processed(store.as_ref()).await,
        "answered, not left hanging"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tesseract_a_photo_gets_the_text_only_answer_and_nothing_is_fetched() {
    let dir = tempfile::tempdir().expect("dir");
    let fotos = vt_agent::testkit::FotosConfig {
        tesseract: "/nonexistent/tesseract".into(),
        ..Default::default()
    };
    let (wa, _store) = reading(dir.path(), fotos, 1).await;
    assert!(
        wa.notices.iter().any(|n| n.contains("fotos desligadas")),
        "serve says photos are off: {:?}",
        wa.notices
    );
    let photo = card_photo(&["1234 5678 90"]);
    wa.serves_photo(&photo);
    let answer = wa.then(&photo_notification("wamid.foto", &photo), 1).await;
    assert!(
        text_of(&answer).starts_with("Por enquanto eu só leio mensagens de texto"),
        "{answer}"
    );
    assert_eq!(wa.media_calls(), 0, "nothing fetched");
}
