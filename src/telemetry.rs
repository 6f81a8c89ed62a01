//! Logging: `tracing` to stderr, filtered by `VT_LOG`, and **every line scrubbed of secrets** before
//! it is written ([`vt_actions::redact::secrets`]: the configured keys and anything key-shaped). The
//! scrubbing sits in the writer, under every log call, so no call site can leak a key by forgetting.

use std::io::Write;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Installs the logger; `default_filter` applies when `VT_LOG` is not set.
pub fn init(default_filter: &str) {
    tracing_subscriber::fmt()
        .with_writer(Scrubbed)
        .with_ansi(false)
        .with_env_filter(EnvFilter::try_from_env("VT_LOG").unwrap_or_else(|_| EnvFilter::new(default_filter)))
        .init();
}

/// Hands each log event a buffer that reaches stderr scrubbed.
struct Scrubbed;

impl<'a> MakeWriter<'a> for Scrubbed {
    type Writer = ScrubbedEvent;

    fn make_writer(&'a self) -> Self::Writer {
        ScrubbedEvent(Vec::new())
    }
}

/// One event's text, written when the formatter is done with it.
struct ScrubbedEvent(Vec<u8>);

impl Write for ScrubbedEvent {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for ScrubbedEvent {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        let clean = vt_actions::redact::secrets(&text);
        let _ = std::io::stderr().lock().write_all(clean.as_bytes());
    }
}
