//! The card provider's side of a recharge paid by card, as a channel value: its webhook, and — with
//! the embedded simulator as the provider — its notices in process and its hosted checkout pages. The
//! provider `POST`s signed events to `/channels/cartao/webhook`; a notice whose signature does not
//! check (or is older than the provider's tolerance) is refused with 400 and reads nothing. One that
//! checks only names checkouts: each is read back from the provider before anything happens
//! ([`crate::service::jobs::Payments::settle`]), so even a notice signed by mistake costs at most that read.
//! A notice is not stored: the checkout is, and the sweep of open charges (the Pix channel's, or this
//! one's where Pix is off) reads every open one back.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use vt_simulators::cartao::CheckoutSimulado;

use super::{Channel, Wiring};
use crate::service::Services;

/// Where the provider's notices arrive.
pub const WEBHOOK_PATH: &str = "/channels/cartao/webhook";
/// An event is a few kilobytes; anything bigger is not one.
const BODY_LIMIT: usize = 256 * 1024;

/// The card channel, on when the service takes card payments on a hosted checkout (`[cartao]
/// provedor = "stripe"`, or the embedded simulator `simulated`); reading open charges back every
/// `sweep_every` where the Pix channel does not.
pub(crate) fn channel(
    wiring: &Wiring,
    simulated: Option<&CheckoutSimulado>,
    sweep_every: Duration,
) -> Channel {
    if !wiring.service.payments().takes_cards() {
        return Channel::default();
    }
    let mut channel = Channel {
        name: "cartao",
        routes: vec![(
            WEBHOOK_PATH,
            post(webhook)
                .with_state(wiring.service.clone())
                .layer(DefaultBodyLimit::max(BODY_LIMIT)),
        )],
        notices: vec![format!(
            "Cartão: avisos assinados do provedor em {WEBHOOK_PATH} (eventos checkout.session.*)"
        )],
        ..Channel::default()
    };
    if !wiring.service.payments().takes_pix() {
        let sweeper = wiring.service.clone();
        channel.jobs.push(Box::new(move |stop| {
            Box::pin(super::pix::sweep(sweeper, sweep_every, stop))
        }));
    }
    if let Some(provider) = simulated {
        let (listener, notices) = (wiring.service.clone(), provider.notices());
        channel
            .jobs
            .push(Box::new(move |stop| Box::pin(listen(listener, notices, stop))));
        channel
            .routes
            .push((vt_simulators::cartao::PAGE_PATH, provider.page_route()));
        channel
            .routes
            .push((vt_simulators::cartao::PAY_PATH, provider.pay_route()));
        channel.notices.push(format!(
            "Cartão: o simulador embutido é o provedor; GET {} é a página de pagamento",
            vt_simulators::cartao::PAGE_PATH
        ));
    }
    channel
}

/// Checks the notice's signature, then reads back every checkout it names (each once), in tasks the
/// service tracks; answers at once.
async fn webhook(
    State(service): State<Arc<Services>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let signature = headers
        .get(vt_connectors::cartao::stripe::ASSINATURA)
        .and_then(|v| v.to_str().ok());
    match service.payments().card_notice(signature, &body) {
        Ok(ids) => {
            settle_all(&service, ids);
            StatusCode::OK
        }
        Err(why) => {
            tracing::warn!(%why, "a card provider notice was refused");
            StatusCode::BAD_REQUEST
        }
    }
}

fn settle_all(service: &Arc<Services>, ids: Vec<String>) {
    let ids: BTreeSet<String> = ids.into_iter().collect();
    for id in ids {
        let task = service.clone();
        service.messages().spawn(async move {
            if let Err(e) = task.payments().settle(&id).await {
                tracing::error!(error = %e, "a card notice's checkout could not be settled; the sweep will read it again");
            }
        });
    }
}

/// The embedded simulator's notices, taken as the webhook's (signature checked) until `stop`.
async fn listen(
    service: Arc<Services>,
    mut notices: tokio::sync::mpsc::UnboundedReceiver<(String, Vec<u8>)>,
    stop: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
) {
    let mut stop = stop;
    loop {
        tokio::select! {
            () = &mut stop => return,
            notice = notices.recv() => match notice {
                Some((signature, body)) => match service.payments().card_notice(Some(&signature), &body) {
                    Ok(ids) => settle_all(&service, ids),
                    Err(why) => tracing::warn!(%why, "a simulated card notice was refused"),
                },
                None => return,
            },
        }
    }
}
