//! A WhatsApp message's media, fetched from the Graph API for its turn: `GET /{media-id}` with the
//! access token names a short-lived URL, its size and sha256; the bytes come from that URL with the
//! same token, refused beyond the cap before and while they are read, and checked against the sha256.
//! They are handed over in memory and never written anywhere.

use std::time::Duration;

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use super::{WhatsAppConfig, wire};
use crate::service::{MediaError, MediaSource};
use vt_store::Media;

pub(super) struct GraphMedia {
    client: reqwest::Client,
    /// `{graph_url}/{version}`.
    base: String,
    token: String,
}

impl GraphMedia {
    /// `None` when the channel is off.
    pub(super) fn new(config: &WhatsAppConfig) -> Option<Self> {
        let token = config.access_token.clone().filter(|_| config.is_on())?;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .ok()?;
        Some(Self {
            client,
            base: format!(
                "{}/{}",
                config.graph_url.trim_end_matches('/'),
                config.api_version
            ),
            token,
        })
    }

    async fn get(&self, url: &str) -> Result<reqwest::Response, MediaError> {
        let response = self
            .client
            .get(url)
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| {
                MediaError::Unreachable(vt_contract::redact::secrets(&e.to_string()).into_owned())
            })?;
        match response.status() {
            s if s.is_success() => Ok(response),
            s => Err(MediaError::Status(s.as_u16())),
        }
    }
}

#[async_trait]
impl MediaSource for GraphMedia {
    async fn fetch(&self, media: &Media, max_bytes: u64) -> Result<Vec<u8>, MediaError> {
        // A media id is Meta's digits; anything else is not looked up (it would be a path).
        if media.id.is_empty() || !media.id.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(MediaError::Unreadable);
        }
        let about = self.get(&format!("{}/{}", self.base, media.id)).await?;
        let about: wire::MediaUrl = about.json().await.map_err(|_| MediaError::Unreadable)?;
        let too_large = |size: u64| MediaError::TooLarge { size, max: max_bytes };
        if let Some(size) = about.file_size.filter(|s| *s > max_bytes) {
            return Err(too_large(size));
        }
        let mut response = self.get(&about.url).await?;
        if let Some(size) = response.content_length().filter(|s| *s > max_bytes) {
            return Err(too_large(size));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| MediaError::Unreachable(vt_contract::redact::secrets(&e.to_string()).into_owned()))?
        {
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > max_bytes {
                return Err(too_large(bytes.len() as u64));
            }
        }
        if let Some(expected) = about.sha256.as_deref().filter(|s| !s.is_empty()) {
            let actual = Sha256::digest(&bytes);
            // Meta documents a hex digest; a base64 one is taken too.
            let matches = hex::encode(actual).eq_ignore_ascii_case(expected)
                || base64::Engine::encode(&base64::engine::general_purpose::STANDARD, actual) == expected;
            if !matches {
                return Err(MediaError::Mismatch);
            }
        }
        Ok(bytes)
    }
}
