//! The payment provider through the API Pix (step 20): the client against the simulated provider
//! behind OAuth2 on loopback, as it would talk to any bank's — charges created once per txid, codes
//! that check, payments read back, withdrawals, refunds, the webhook's notice; and a provider's error
//! that echoes a secret reaches no message.

use std::sync::{Arc, Mutex};

use rust_decimal::Decimal;
use vt_connectors::AuthConfig;
use vt_connectors::pix::{PixConfig, PixError, Psp};
use vt_domain::pix::api::{Calendario, CobPedido, CobStatus, DevolucaoStatus, ValorOriginal};
use vt_domain::pix::{BrCode, txid};
use vt_simulators::systems::{Simulator, SimulatorAuth};

use crate::support::quick_simulator;

pub(crate) const CLIENT_SECRET: &str = "segredo-do-psp-5f1c";
pub(crate) const CHAVE: &str = "recargas@operadora.example.com.br";

pub(crate) struct Provider {
    sim: Simulator,
    url: String,
    psp: Psp,
}

pub(crate) async fn provider() -> Provider {
    let running = Simulator::new(quick_simulator())
        .spawn_behind(
            0,
            SimulatorAuth::Oauth2 {
                client_id: "vt-agent".into(),
                client_secret: CLIENT_SECRET.into(),
                token_ttl: std::time::Duration::from_secs(3600),
            },
        )
        .await
        .expect("simulator");
    let config = PixConfig {
        api_url: format!("{}/pix/v2", running.url),
        chave: CHAVE.into(),
        auth: AuthConfig::Oauth2 {
            token_url: format!("{}/oauth/token", running.url),
            client_id: "vt-agent".into(),
            client_secret: CLIENT_SECRET.into(),
            scope: Some("cob.write cob.read pix.read".into()),
            auth_method: Default::default(),
        },
        ..PixConfig::default()
    };
    let psp = Psp::new(&config).expect("client");
    // The server task lives as long as the test's runtime.
    std::mem::forget(running.task);
    Provider {
        sim: running.simulator,
        url: running.url,
        psp,
    }
}

pub(crate) fn reais(s: &str) -> Decimal {
    s.parse().expect("decimal")
}

pub(crate) fn pedido(valor: &str) -> CobPedido {
    CobPedido {
        calendario: Calendario {
            criacao: None,
            expiracao: 900,
        },
        valor: ValorOriginal {
            original: reais(valor),
        },
        chave: CHAVE.into(),
        solicitacao_pagador: Some("Recarga VT cartão ****7890".into()),
    }
}

#[tokio::test]
async fn a_charge_is_created_once_per_txid_and_its_code_checks() {
    let p = provider().await;
    let id = txid("c1e19a3e-7315-5050-8582-266afc37a1dc", 0);
    let cob = p.psp.criar_cob(&id, &pedido("20.00")).await.expect("created");
    assert_eq!((cob.txid.as_str(), cob.status), (id.as_str(), CobStatus::Ativa));
    assert_eq!(cob.calendario.expiracao, 900);
    let code = cob.pix_copia_e_cola.clone().expect("copia e cola");
    BrCode::checked(&code, reais("20")).expect("a valid code for the recharge's amount");
    // A retry (or a restart) asks again: the same charge, the same code.
    let again = p.psp.criar_cob(&id, &pedido("20.00")).await.expect("again");
    assert_eq!(again, cob);
    // Another charge under the same txid is refused by the provider.
    let other = p.psp.criar_cob(&id, &pedido("30.00")).await.expect_err("refused");
    assert!(matches!(other, PixError::Refused { status: 400, .. }), "{other}");
    assert_eq!(p.psp.cob(&id).await.expect("read").status, CobStatus::Ativa);
    let missing = p.psp.cob(&txid("outra", 0)).await.expect_err("unknown");
    assert!(missing.is_not_found(), "{missing}");
}

#[tokio::test]
async fn a_paid_charge_shows_its_payment_and_can_be_refunded_once() {
    let p = provider().await;
    let id = txid("k-pago", 0);
    p.psp.criar_cob(&id, &pedido("45.50")).await.expect("created");
    let paid = p.sim.pix().pay(&id, false).expect("paid");
    let cob = p.psp.cob(&id).await.expect("read");
    assert_eq!(cob.status, CobStatus::Concluida);
    assert_eq!(cob.pix.len(), 1);
    assert_eq!(cob.pix[0].valor, reais("45.50"));
    assert_eq!(cob.pix[0].end_to_end_id, paid.end_to_end_id);
    assert_eq!(
        paid.end_to_end_id.len(),
        32,
        "32 characters, as the Banco Central's ids (E, the PSP, the minute, a sequence)"
    );
    // Paid: it can no longer be withdrawn, nor paid again.
    let withdraw = p.psp.remover_cob(&id).await.expect_err("paid");
    assert!(
        matches!(withdraw, PixError::Refused { status: 400, .. }),
        "{withdraw}"
    );
    assert!(p.sim.pix().pay(&id, false).is_none());

    let e2e = &paid.end_to_end_id;
    let refund = p
        .psp
        .devolver(e2e, "vtdev1", reais("45.50"))
        .await
        .expect("refund");
    assert_eq!(refund.status, DevolucaoStatus::Devolvido);
    let again = p
        .psp
        .devolver(e2e, "vtdev1", reais("45.50"))
        .await
        .expect("same refund");
    assert_eq!(again, refund, "the same id is the same refund");
    let more = p
        .psp
        .devolver(e2e, "vtdev2", reais("0.01"))
        .await
        .expect_err("nothing left");
    assert!(matches!(more, PixError::Refused { status: 400, .. }), "{more}");
}

#[tokio::test]
async fn an_unpaid_charge_is_withdrawn_and_then_cannot_be_paid() {
    let p = provider().await;
    let id = txid("k-expira", 0);
    p.psp.criar_cob(&id, &pedido("10.00")).await.expect("created");
    let removed = p.psp.remover_cob(&id).await.expect("withdrawn");
    assert_eq!(removed.status, CobStatus::RemovidaPeloUsuarioRecebedor);
    assert_eq!(
        p.psp.remover_cob(&id).await.expect("again").status,
        CobStatus::RemovidaPeloUsuarioRecebedor,
        "withdrawing twice is the same withdrawal"
    );
    assert!(p.sim.pix().pay(&id, false).is_none());
    // A new code for the same recharge is a new charge.
    let next = txid("k-expira", 1);
    assert_ne!(next, id);
    assert_eq!(
        p.psp
            .criar_cob(&next, &pedido("10.00"))
            .await
            .expect("new")
            .status,
        CobStatus::Ativa
    );
}

#[tokio::test]
async fn the_registered_webhook_is_told_of_a_payment() {
    let p = provider().await;
    let seen: Arc<Mutex<Vec<(String, serde_json::Value)>>> = Arc::default();
    let sink = seen.clone();
    let app = axum::Router::new().route(
        "/channels/pix/webhook/pix",
        axum::routing::post(move |body: axum::body::Bytes| {
            let sink = sink.clone();
            async move {
                let value = vt_contract::json::from_bytes(&body).expect("json");
                sink.lock().expect("lock").push(("/pix".into(), value));
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let hook = format!(
        "http://{}/channels/pix/webhook",
        listener.local_addr().expect("addr")
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    // Registered as an operator does at their provider (`PUT /webhook/{chave}`), with a token.
    let token = reqwest::Client::new()
        .post(format!("{}/oauth/token", p.url))
        .basic_auth("vt-agent", Some(CLIENT_SECRET))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("grant_type=client_credentials")
        .send()
        .await
        .expect("token")
        .bytes()
        .await
        .expect("body");
    let token: serde_json::Value = vt_contract::json::from_bytes(&token).expect("json");
    let registered = reqwest::Client::new()
        .put(format!("{}/pix/v2/webhook/{CHAVE}", p.url))
        .bearer_auth(token["access_token"].as_str().expect("token"))
        .header("content-type", "application/json")
        .body(format!(r#"{{"webhookUrl": "{hook}"}}"#))
        .send()
        .await
        .expect("register");
    assert_eq!(registered.status(), 200);

    let id = txid("k-webhook", 0);
    p.psp.criar_cob(&id, &pedido("20.00")).await.expect("created");
    let paid = p.sim.pix().pay(&id, true).expect("paid");
    for _ in 0..100 {
        if !seen.lock().expect("lock").is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 1, "one notice");
    let aviso: vt_domain::pix::api::AvisoWebhook = vt_contract::json::from_ref(&seen[0].1).expect("notice");
    assert_eq!(aviso.pix.len(), 1);
    assert_eq!(aviso.pix[0].end_to_end_id, paid.end_to_end_id);
    assert_eq!(aviso.pix[0].txid.as_deref(), Some(id.as_str()));
}

#[tokio::test]
async fn a_provider_that_echoes_the_secret_in_its_error_leaks_nothing() {
    // A provider answering every call with a problem whose title quotes the credentials it got.
    let app = axum::Router::new()
        .route(
            "/oauth/token",
            axum::routing::post(|| async {
                axum::Json(serde_json::json!({"access_token": "tok-do-psp-9a8b7c6d5e4f", "token_type": "Bearer", "expires_in": 3600}))
            }),
        )
        .route(
            "/pix/v2/cob/{txid}",
            axum::routing::get(|headers: axum::http::HeaderMap| async move {
                let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
                (
                    axum::http::StatusCode::BAD_REQUEST,
                    axum::Json(serde_json::json!({"title": format!("credencial recusada: {auth} / {CLIENT_SECRET}"), "status": 400})),
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let psp = Psp::new(&PixConfig {
        api_url: format!("{url}/pix/v2"),
        chave: CHAVE.into(),
        auth: AuthConfig::Oauth2 {
            token_url: format!("{url}/oauth/token"),
            client_id: "vt-agent".into(),
            client_secret: CLIENT_SECRET.into(),
            scope: None,
            auth_method: Default::default(),
        },
        ..PixConfig::default()
    })
    .expect("client");
    let err = psp.cob(&txid("k", 0)).await.expect_err("refused").to_string();
    assert!(err.contains("400"), "{err}");
    assert!(!err.contains(CLIENT_SECRET), "{err}");
    assert!(!err.contains("tok-do-psp-9a8b7c6d5e4f"), "{err}");
}

#[tokio::test]
async fn a_pix_configuration_names_the_field_that_cannot_serve() {
    let base = PixConfig {
        api_url: "https://pix.banco.example.com/api/v2".into(),
        chave: CHAVE.into(),
        ..PixConfig::default()
    };
    assert_eq!(base.problem(), None);
    let cases = [
        (
            PixConfig {
                api_url: "pix.banco".into(),
                ..base.clone()
            },
            "pix.api_url",
        ),
        (
            PixConfig {
                chave: " ".into(),
                ..base.clone()
            },
            "pix.chave",
        ),
        (
            PixConfig {
                expiracao_minutos: 0,
                ..base.clone()
            },
            "pix.expiracao_minutos",
        ),
        (
            PixConfig {
                novos_codigos_max: 50,
                ..base.clone()
            },
            "pix.novos_codigos_max",
        ),
    ];
    for (config, field) in cases {
        assert_eq!(config.problem().map(|(f, _)| f).as_deref(), Some(field));
        let err = Psp::new(&config).expect_err("refused").to_string();
        assert!(err.contains(field), "{err}");
    }
}
