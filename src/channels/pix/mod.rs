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
use vt_domain::pix::api::AvisoWebhook;
use vt_domain::pix::automatico::{AvisoCobR, AvisoRec};
use vt_simulators::pix::{AvisoAutomatico, PspSimulado};

use super::{Channel, Wiring};
use crate::service::Services;

/// Where the provider's notices arrive.
pub(crate) const WEBHOOK_PATH: &str = "/channels/pix/webhook/pix";
/// Where Pix Automático's notices of recurrences arrive (`/webhookrec` registered as
/// `…/channels/pix/webhook`).
pub(crate) const REC_PATH: &str = "/channels/pix/webhook/rec";
/// Where Pix Automático's notices of recurring charges arrive (`/webhookcobr`, the same URL).
pub(crate) const COBR_PATH: &str = "/channels/pix/webhook/cobr";
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
    if wiring.service.automatic().active() {
        let (rec, cobr) = (wiring.service.clone(), wiring.service.clone());
        let limit = DefaultBodyLimit::max(BODY_LIMIT);
        channel
            .routes
            .push((REC_PATH, post(rec_webhook).with_state(rec).layer(limit)));
        channel
            .routes
            .push((COBR_PATH, post(cobr_webhook).with_state(cobr).layer(limit)));
        channel.notices.push(format!(
            "Pix Automático: avisos de recorrências em {REC_PATH} e de cobranças em {COBR_PATH} (registre /webhookrec e /webhookcobr sem o final)"
        ));
    }
    if let Some(psp) = simulated {
        let (listener, notices) = (wiring.service.clone(), psp.notices());
        channel.jobs.push(Box::new(move |stop| {
            Box::pin(listen(listener, notices, stop, settle_all))
        }));
        channel
            .routes
            .push((vt_simulators::pix::PAY_PATH, psp.payer_route()));
        if wiring.service.automatic().active() {
            let (listener, notices) = (wiring.service.clone(), psp.notices_automatico());
            channel.jobs.push(Box::new(move |stop| {
                Box::pin(listen(listener, notices, stop, read_back_all))
            }));
            for (path, route) in psp.bank_routes() {
                channel.routes.push((path, route));
            }
        }
        channel.notices.push(format!(
            "Pix: o simulador embutido é o provedor; POST {} paga um código",
            vt_simulators::pix::PAY_PATH
        ));
    }
    channel
}

/// Reads back every charge the notice names (each once), in tasks the service tracks; answers at
/// once. A body that is not a notice is refused, naming nothing of it.
async fn webhook(State(service): State<Arc<Services>>, body: axum::body::Bytes) -> StatusCode {
    let Ok(aviso) = vt_contract::json::from_bytes::<AvisoWebhook>(&body) else {
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

/// The embedded simulator's notices (of payments, or Pix Automático's), each `taken` as the
/// webhook's would be, until `stop`.
async fn listen<T>(
    service: Arc<Services>,
    mut notices: tokio::sync::mpsc::UnboundedReceiver<T>,
    stop: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    taken: fn(&Arc<Services>, T),
) {
    let mut stop = stop;
    loop {
        tokio::select! {
            () = &mut stop => return,
            aviso = notices.recv() => match aviso {
                Some(aviso) => taken(&service, aviso),
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
    vt_engine::periodic::every(every, stop, async move || {
        service.payments().sweep().await;
        let figures = service.automatic().pass().await;
        if figures != crate::service::automatico::PassFigures::default() {
            tracing::info!(?figures, "automatic recharges moved");
        }
    })
    .await;
}

/// Recurrences a notice names, each read back from the provider in a task the service tracks;
/// answers at once. A body that is not a notice is refused.
async fn rec_webhook(State(service): State<Arc<Services>>, body: axum::body::Bytes) -> StatusCode {
    let Ok(aviso) = vt_contract::json::from_bytes::<AvisoRec>(&body) else {
        tracing::warn!("a Pix Automático notice that is not the API Pix's was refused");
        return StatusCode::BAD_REQUEST;
    };
    read_back_all(&service, AvisoAutomatico::Rec(aviso));
    StatusCode::OK
}

/// Recurring charges a notice names, each read back in a task the service tracks.
async fn cobr_webhook(State(service): State<Arc<Services>>, body: axum::body::Bytes) -> StatusCode {
    let Ok(aviso) = vt_contract::json::from_bytes::<AvisoCobR>(&body) else {
        tracing::warn!("a Pix Automático notice that is not the API Pix's was refused");
        return StatusCode::BAD_REQUEST;
    };
    read_back_all(&service, AvisoAutomatico::CobR(aviso));
    StatusCode::OK
}

/// What `aviso` names (each once, at most [`MAX_TXIDS`]), read back in tasks the service tracks.
fn read_back_all(service: &Arc<Services>, aviso: AvisoAutomatico) {
    let (recs, cobrs): (BTreeSet<String>, BTreeSet<String>) = match aviso {
        AvisoAutomatico::Rec(a) => (a.recs.into_iter().map(|r| r.id_rec).collect(), BTreeSet::new()),
        AvisoAutomatico::CobR(a) => (
            BTreeSet::new(),
            a.cobsr.into_iter().filter_map(|c| c.txid).collect(),
        ),
    };
    for id_rec in recs.into_iter().take(MAX_TXIDS) {
        let task = service.clone();
        service.messages().spawn(async move {
            if let Err(e) = task.automatic().rec_notice(&id_rec).await {
                tracing::error!(error = %e, "a recurrence notice could not be read back; the next pass reads it again");
            }
        });
    }
    for txid in cobrs.into_iter().take(MAX_TXIDS) {
        let task = service.clone();
        service.messages().spawn(async move {
            if let Err(e) = task.automatic().cobr_notice(&txid).await {
                tracing::error!(error = %e, "a recurring charge notice could not be read back; the next pass reads it again");
            }
        });
    }
}
