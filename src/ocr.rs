//! Reading a photo's text locally with Tesseract (Debian's `tesseract-ocr`), the program run with the
//! image on its stdin and the text read off its stdout: the bytes never touch the disk and leave the
//! machine never. Used for card photos: the service finds the card numbers in the text.

use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `[fotos]` in the configuration file: how card photos are read.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct FotosConfig {
    /// `false`: photos get the text-only answer even where Tesseract is installed.
    pub ler: bool,
    /// The Tesseract program: a name looked up on `PATH`, or a path.
    pub tesseract: String,
    /// The largest photo fetched and read, in MB (WhatsApp carries images up to 5 MB).
    pub max_mb: u64,
    /// How long reading one photo may take.
    pub timeout_secs: u64,
}

impl Default for FotosConfig {
    fn default() -> Self {
        Self {
            ler: true,
            tesseract: "tesseract".into(),
            max_mb: 5,
            timeout_secs: 20,
        }
    }
}

impl FotosConfig {
    /// A value that parses but cannot work, as `(field, why)`.
    pub(crate) fn problem(&self) -> Option<(&'static str, &'static str)> {
        if self.tesseract.trim().is_empty() {
            return Some(("fotos.tesseract", "não pode ser vazio"));
        }
        if !(1..=16).contains(&self.max_mb) {
            return Some(("fotos.max_mb", "deve ser de 1 a 16"));
        }
        if !(1..=120).contains(&self.timeout_secs) {
            return Some(("fotos.timeout_secs", "deve ser de 1 a 120"));
        }
        None
    }

    /// The most bytes of one photo.
    pub(crate) fn max_bytes(&self) -> u64 {
        self.max_mb * 1024 * 1024
    }
}

/// Why a photo could not be read. No text quotes the photo or what the program printed of it.
#[derive(Debug, thiserror::Error)]
pub enum OcrError {
    #[error("o programa de leitura não pôde ser executado: {0}")]
    Spawn(std::io::ErrorKind),
    #[error("a leitura da foto passou de {0} s")]
    Timeout(u64),
    #[error("o programa de leitura terminou com {0}")]
    Failed(std::process::ExitStatus),
    #[error("o programa de leitura falhou ao trocar dados: {0}")]
    Io(std::io::ErrorKind),
    #[error("a foto não é um PNG ou JPEG legível")]
    NotAnImage,
    #[error("a foto tem {0} pixels e o limite é {MAX_PIXELS}")]
    TooManyPixels(u64),
}

/// The most pixels a photo handed to the program may have: a phone's photo has about 12 million; a few
/// megabytes that claim far more would be decoded into gigabytes.
const MAX_PIXELS: u64 = 40_000_000;

/// How many pixels a PNG or a JPEG says it has, read off its header (the `imagesize` crate); `None`
/// for anything else (the program is handed only the two types WhatsApp carries).
fn pixels(image: &[u8]) -> Option<u64> {
    use imagesize::ImageType;
    if !matches!(imagesize::image_type(image), Ok(ImageType::Png | ImageType::Jpeg)) {
        return None;
    }
    let size = imagesize::blob_size(image).ok()?;
    Some((size.width as u64).saturating_mul(size.height as u64))
}

/// What reads the text in a photo.
#[async_trait]
pub trait PhotoReader: Send + Sync {
    /// The text `image` (PNG or JPEG bytes) shows, line by line.
    async fn read(&self, image: Vec<u8>) -> Result<String, OcrError>;
}

/// The Tesseract program.
#[derive(Debug, Clone)]
pub(crate) struct Tesseract {
    program: String,
    timeout: Duration,
}

/// The most text read off one photo: a card's face holds a few lines.
const MAX_TEXT: usize = 64 * 1024;

impl Tesseract {
    /// The program `config` names when it runs here (`--version` answers); `None` when photos are off
    /// or it is not installed.
    pub(crate) async fn find(config: &FotosConfig) -> Option<Self> {
        if !config.ler {
            return None;
        }
        let mut version = tokio::process::Command::new(&config.tesseract);
        version
            .arg("--version")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let output = tokio::time::timeout(Duration::from_secs(10), version.output())
            .await
            .ok()?
            .ok()
            .filter(|o| o.status.success())?;
        // A program that says nothing to `--version` is not Tesseract.
        String::from_utf8_lossy(&output.stdout).lines().next()?;
        Some(Self {
            program: config.tesseract.clone(),
            timeout: Duration::from_secs(config.timeout_secs),
        })
    }

    async fn run(&self, image: Vec<u8>) -> Result<String, OcrError> {
        // `stdin stdout`: the image in, the text out, no file. Page segmentation 11 (sparse text)
        // finds a card number wherever it is printed on the card's face. One thread: a turn's reading
        // never takes every core.
        let mut child = tokio::process::Command::new(&self.program)
            .args(["stdin", "stdout", "--psm", "11", "-l", "eng"])
            .env("OMP_THREAD_LIMIT", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| OcrError::Spawn(e.kind()))?;
        let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(OcrError::Io(std::io::ErrorKind::BrokenPipe));
        };
        // Written while the output is read: a large image never blocks on a full pipe.
        let write = async move {
            let written = stdin.write_all(&image).await;
            drop(stdin);
            written
        };
        let mut text = Vec::new();
        let mut stdout = stdout.take(MAX_TEXT as u64);
        let (written, read) = tokio::join!(write, stdout.read_to_end(&mut text));
        read.map_err(|e| OcrError::Io(e.kind()))?;
        // The program may stop reading an image it cannot decode: its exit status says so.
        let status = child.wait().await.map_err(|e| OcrError::Io(e.kind()))?;
        if !status.success() {
            return Err(OcrError::Failed(status));
        }
        written.map_err(|e| OcrError::Io(e.kind()))?;
        Ok(String::from_utf8_lossy(&text).into_owned())
    }
}

#[async_trait]
impl PhotoReader for Tesseract {
    async fn read(&self, image: Vec<u8>) -> Result<String, OcrError> {
        match pixels(&image) {
            None => return Err(OcrError::NotAnImage),
            Some(n) if n > MAX_PIXELS => return Err(OcrError::TooManyPixels(n)),
            Some(_) => {}
        }
        let secs = self.timeout.as_secs();
        // On a timeout the child is dropped, and killed with it.
        tokio::time::timeout(self.timeout, self.run(image))
            .await
            .map_err(|_| OcrError::Timeout(secs))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_problems_name_their_field() {
        assert_eq!(FotosConfig::default().problem(), None);
        let bad = |c: FotosConfig| c.problem().map(|(f, _)| f);
        assert_eq!(
            bad(FotosConfig {
                tesseract: " ".into(),
                ..FotosConfig::default()
            }),
            Some("fotos.tesseract")
        );
        assert_eq!(
            bad(FotosConfig {
                max_mb: 0,
                ..FotosConfig::default()
            }),
            Some("fotos.max_mb")
        );
        assert_eq!(
            bad(FotosConfig {
                timeout_secs: 0,
                ..FotosConfig::default()
            }),
            Some("fotos.timeout_secs")
        );
    }

    #[test]
    fn only_a_png_or_a_jpeg_of_sane_size_is_read() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend(1080u32.to_be_bytes());
        png.extend(720u32.to_be_bytes());
        assert_eq!(pixels(&png), Some(1080 * 720));
        // SOI, an APP0 segment of 16 bytes, then SOF0: precision, height, width.
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 0, 16];
        jpeg.extend([0; 14]);
        jpeg.extend([0xFF, 0xC0, 0, 17, 8]);
        jpeg.extend(3000u16.to_be_bytes());
        jpeg.extend(4000u16.to_be_bytes());
        assert_eq!(pixels(&jpeg), Some(12_000_000));
        let mut bomb = png[..16].to_vec();
        bomb.extend(60_000u32.to_be_bytes());
        bomb.extend(60_000u32.to_be_bytes());
        assert_eq!(pixels(&bomb), Some(3_600_000_000));
        assert_eq!(pixels(b"GIF89a"), None);
        assert_eq!(
            pixels(&[0xFF, 0xD8, 0xFF, 0xDA]),
            None,
            "scan before any frame header"
        );
        assert_eq!(pixels(&[0xFF, 0xD8, 0xFF, 0xE0, 0xFF]), None, "cut short");
        assert_eq!(pixels(&png[..14]), None);
    }

    #[tokio::test]
    async fn a_photo_that_is_no_png_or_jpeg_or_too_large_is_never_handed_to_the_program() {
        // A program that would fail loudly if run: only the checks answer.
        let reader = Tesseract {
            program: "/nonexistent/tesseract".into(),
            timeout: Duration::from_secs(1),
        };
        assert!(matches!(
            reader.read(b"GIF89a....".to_vec()).await,
            Err(OcrError::NotAnImage)
        ));
        let mut bomb = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        bomb.extend(60_000u32.to_be_bytes());
        bomb.extend(60_000u32.to_be_bytes());
        assert!(matches!(reader.read(bomb).await, Err(OcrError::TooManyPixels(_))));
    }

    #[tokio::test]
    async fn a_program_that_is_not_there_turns_photos_off() {
        let config = FotosConfig {
            tesseract: "/nonexistent/tesseract".into(),
            ..FotosConfig::default()
        };
        assert!(Tesseract::find(&config).await.is_none());
        let off = FotosConfig {
            ler: false,
            ..FotosConfig::default()
        };
        assert!(Tesseract::find(&off).await.is_none());
    }
}
