//! The payment provider's side of a Pix recharge, as a channel value: its webhook and the sweep of
//! open charges. The provider `POST`s `{registered URL}/pix`: registered as `…/channels/pix/webhook`,
//! it arrives at `/channels/pix/webhook/pix`. Its body only names charges; each is read back from the
//! provider before anything happens ([`crate::service::jobs::Payments::settle`]), so a forged notice costs at
//! most that read. A notice is not stored: the charge is, and the sweep reads every open one, so a
//! notice lost (or never sent) delays a credit by one sweep, never loses it.
//!
//! With the embedded simulator as the provider, its notices come in process (there is no URL to
//! register), and `POST /_simulador/pix/{txid}/pagar` pays a code as a payer's bank would.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::post;
use vt_actions::pix::PspSimulado;
use vt_actions::pix::api::AvisoWebhook;

use super::{Channel, Wiring};
use crate::service::Services;

/// Where the provider's notices arrive.
pub(crate) const WEBHOOK_PATH: &str = "/channels/pix/webhook/pix";
/// A notice names a few payments; anything bigger is not one.
const BODY_LIMIT: usize = 256 * 1024;
/// At most this many charges read back per notice.
const MAX_TXIDS: usize = 100;

/// The Pix channel, on when the service takes Pix (`[pix]`, or the embedded simulator `simulated`),
/// reading open charges back every `sweep_every`.
pub fn channel(wiring: &Wiring, simulated: Option<&PspSimulado>, sweep_every: Duration) -> Channel {
    if !wiring.service.payments().takes_pix() {
        return Channel::default();
    }
    let service = wiring.service.clone();
    let sweeper = wiring.service.clone();
    let mut channel = Channel {
        name: "pix",
        routes: vec![(
            WEBHOOK_PATH,
            post(webhook)
                .with_state(service)
                .layer(DefaultBodyLimit::max(BODY_LIMIT)),
        )],
        notices: vec![format!(
            "Pix: avisos do provedor em {} (registre a URL sem o /pix final); cobranças abertas conferidas a cada {} s",
            WEBHOOK_PATH,
            sweep_every.as_secs()
        )],
        ..Channel::default()
    };
    channel
        .jobs
        .push(Box::new(move |stop| Box::pin(sweep(sweeper, sweep_every, stop))));
    if let Some(psp) = simulated {
        let (listener, notices) = (wiring.service.clone(), psp.notices());
        channel
            .jobs
            .push(Box::new(move |stop| Box::pin(listen(listener, notices, stop))));
        channel
            .routes
            .push((vt_actions::pix::PAY_PATH, psp.payer_route()));
        channel.notices.push(format!(
            "Pix: o simulador embutido é o provedor; POST {} paga um código",
            vt_actions::pix::PAY_PATH
        ));
    }
    channel
}

/// Reads back every charge the notice names (each once), in tasks the service tracks; answers at
/// once. A body that is not a notice is refused, naming nothing of it.
async fn webhook(State(service): State<Arc<Services>>, body: axum::body::Bytes) -> StatusCode {
    let Ok(aviso) = vt_actions::json::from_bytes::<AvisoWebhook>(&body) else {
        tracing::warn!("a Pix notice that is not the API Pix's was refused");
        return StatusCode::BAD_REQUEST;
    };
    settle_all(&service, aviso);
    StatusCode::OK
}

/// Reads back every charge `aviso` names (each once, at most [`MAX_TXIDS`]), in tasks the service
/// tracks.
fn settle_all(service: &Arc<Services>, aviso: AvisoWebhook) {
    let txids: BTreeSet<String> = aviso.pix.into_iter().filter_map(|p| p.txid).collect();
    for txid in txids.into_iter().take(MAX_TXIDS) {
        let task = service.clone();
        service.messages().spawn(async move {
            if let Err(e) = task.payments().settle(&txid).await {
                tracing::error!(error = %e, "a Pix notice's charge could not be settled; the sweep will read it again");
            }
        });
    }
}

/// The embedded simulator's notices, taken as the webhook's until `stop`.
async fn listen(
    service: Arc<Services>,
    mut notices: tokio::sync::mpsc::UnboundedReceiver<AvisoWebhook>,
    stop: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
) {
    let mut stop = stop;
    loop {
        tokio::select! {
            () = &mut stop => return,
            aviso = notices.recv() => match aviso {
                Some(aviso) => settle_all(&service, aviso),
                None => return,
            },
        }
    }
}

/// Every `every`, the open charges (Pix codes and card checkouts) read back, until `stop`.
pub(super) async fn sweep(
    service: Arc<Services>,
    every: Duration,
    stop: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
) {
    // A stop waits for the pass under way, never cuts a credit short.
    crate::periodic::every(every, stop, async move || {
        service.payments().sweep().await;
    })
    .await;
}
