//! The channels of the next ways in: each is a port that turns its platform's wire format into an
//! [`crate::service::Inbound`] and sends outbox items through a [`crate::outbox::ChannelSender`].
//! Platform JSON stops in its channel's module.
//!
//! A channel is one [`Plug`] (its name, its rules, its configuration section, how it is built) and
//! what it builds is one value, [`Channel`]: its routes, its outbox senders, its background jobs, its
//! media, its templates and what it says at start. [`PLUGS`] lists them; the configuration, the
//! service's channel book, the engine's notices and `serve` iterate that list, so adding a channel is
//! its folder and one line there. (A payment provider's webhook is a [`Channel`] too, built by
//! `serve` beside the embedded simulator.)

pub(crate) mod cartao;
pub(crate) mod mattermost;
pub(crate) mod pix;
pub(crate) mod plug;
pub(crate) mod webchat;
pub(crate) mod whatsapp;

pub use plug::{Plug, Section, SectionType, Sections, Settings};
pub(crate) use plug::{Raw, SectionError};

/// The channels this product plugs in, in the order the console lists them.
pub static PLUGS: &[&dyn Plug] = &[&mattermost::Mattermost, &whatsapp::WhatsApp, &webchat::Webchat];

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::routing::MethodRouter;

use crate::outbox::ChannelSender;
use crate::service::Services;

/// Each `(variable, field)` whose variable is set (`get` reads one; empty is unset) replaces the
/// field: how a channel's section takes its own `VT_*` ids and secrets.
pub(crate) fn set_from_env<const N: usize>(
    get: &impl Fn(&str) -> Option<String>,
    fields: [(&str, &mut Option<String>); N],
) {
    for (name, field) in fields {
        if let Some(v) = get(name) {
            *field = Some(v);
        }
    }
}

/// A background job of a channel: run until the future it is given resolves (the server's stop).
pub(crate) type Job = Box<
    dyn FnOnce(Pin<Box<dyn Future<Output = ()> + Send>>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send,
>;

/// What a channel brings to `serve`.
#[derive(Default)]
pub struct Channel {
    /// Its name on conversations and outbox items (`whatsapp`, `mattermost`).
    pub name: &'static str,
    /// Its routes, each a path with its handlers (state applied): webhooks with their own auth and
    /// body limits.
    pub routes: Vec<(&'static str, MethodRouter)>,
    /// Its outbox senders.
    pub senders: Vec<Arc<dyn ChannelSender>>,
    /// Its background jobs (a websocket bot).
    pub jobs: Vec<Job>,
    /// What is on, for the operator: one line each.
    pub notices: Vec<String>,
    /// Where the service fetches the media its people send (voice notes, photos).
    pub(crate) media: Option<Arc<dyn crate::service::MediaSource>>,
    /// The approved templates it sends outside its window, shown in the console.
    pub(crate) templates: Option<Arc<whatsapp::Templates>>,
    /// The most messages a second it sends (every instance together): the console says how long its
    /// queue takes to leave.
    pub(crate) pace: Option<u32>,
}

impl Channel {
    /// Whether the configuration turned any part of it on.
    pub fn is_on(&self) -> bool {
        !(self.routes.is_empty() && self.senders.is_empty() && self.jobs.is_empty())
    }
}

/// What every channel is built with: the service it hands messages to, the agent its people talk to,
/// the tenant its conversations belong to (the deployment's).
#[derive(Clone)]
pub struct Wiring {
    pub service: Arc<Services>,
    pub agent: String,
    pub tenant: String,
}

/// A reply's file to upload: its name, its type and its bytes.
pub(crate) struct Upload {
    pub name: String,
    pub mime: String,
    pub bytes: Vec<u8>,
}

/// The bytes of a reply's `file`. The files replies carry are Pix QR codes, drawn from the charge on
/// record when they are sent (no image is kept); any other file, or a charge no longer on record, is
/// refused for good.
pub(crate) async fn upload_of(
    pix: &dyn vt_store::PixStore,
    file: &vt_contract::FileContent,
) -> Result<Upload, crate::outbox::SendError> {
    use crate::outbox::SendError;
    let Some(txid) = vt_domain::tools::qr_of(file) else {
        return Err(SendError::Permanent(
            "a reply's file this product does not make".into(),
        ));
    };
    let charge = charge_of(pix, txid).await?;
    let bytes = vt_domain::pix::qr::png(&charge.copia_e_cola)
        .map_err(|_| SendError::Permanent("a Pix code too long for a QR code".into()))?;
    Ok(Upload {
        name: file.file_name.clone(),
        mime: file.file_type.clone(),
        bytes,
    })
}

/// Charge `txid` on record, for a reply's file drawn from it; a charge no longer there is refused for
/// good.
pub(crate) async fn charge_of(
    pix: &dyn vt_store::PixStore,
    txid: &str,
) -> Result<vt_store::PixCharge, crate::outbox::SendError> {
    use crate::outbox::SendError;
    pix.pix_charge(txid)
        .await
        .map_err(|e| SendError::Retry {
            reason: format!("store: {e}"),
            after: None,
        })?
        .ok_or_else(|| SendError::Permanent("a Pix file of a charge not on record".into()))
}

/// The value of cookie `name` in a request's headers.
pub(crate) fn cookie<'a>(headers: &'a axum::http::HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Whether `given` is the configured secret `expected`, in constant time: the digests are compared, so
/// neither where the two differ nor their lengths show in the time taken. An empty `expected` (not
/// configured) matches nothing.
pub(crate) fn same_secret(given: &str, expected: &str) -> bool {
    use sha2::{Digest, Sha256};
    let (a, b) = (
        Sha256::digest(given.as_bytes()),
        Sha256::digest(expected.as_bytes()),
    );
    !expected.is_empty() && a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
