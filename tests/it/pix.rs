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

use crate::support::{quick_simulator, said};

const CLIENT_SECRET: &str = "segredo-do-psp-5f1c";
const CHAVE: &str = "recargas@operadora.example.com.br";

struct Provider {
    sim: Simulator,
    url: String,
    psp: Psp,
}

async fn provider() -> Provider {
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

fn reais(s: &str) -> Decimal {
    s.parse().expect("decimal")
}

fn pedido(valor: &str) -> CobPedido {
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

// The service's payments job against the simulated provider, on a chat harness whose `[pix]` points at
// it: a charge issued once, a payment read back and credited once, a refund when it cannot be credited.

fn recharge(card: &str, valor: u32) -> vt_domain::vt::FlowInput {
    vt_domain::vt::FlowInput::parse(&format!(
        r#"{{"cartao": "{card}", "recarga": {{"valor": {valor}, "meio_pagamento": {{"tipo": "pix"}}}}}}"#
    ))
    .expect("input")
}

/// The first code of recharge `key` (`valor` reais on `card`) in conversation `conv`.
async fn issued(
    h: &crate::support::ChatHarness,
    conv: &str,
    card: &str,
    valor: u32,
    key: &str,
) -> vt_domain::tools::CodigoPix {
    h.service
        .payments()
        .issue(conv, &recharge(card, valor), key, 0)
        .await
        .expect("issued")
}

/// Charge `txid` as it is on record.
async fn on_record(h: &crate::support::ChatHarness, txid: &str) -> vt_store::records::PixCharge {
    h.store.pix_charge(txid).await.expect("read").expect("on record")
}

#[tokio::test]
async fn a_paid_charge_is_credited_once_however_many_times_it_is_reported() {
    use vt_agent::testkit::Settled;
    use vt_store::records::ChargeStatus;
    let h = crate::support::chat_harness_paying().await;
    h.say("c-pix", "oi").await;
    let card = "1234567890";
    let cobranca = h
        .service
        .payments()
        .issue("c-pix", &recharge(card, 20), "k-recarga-1", 0)
        .await
        .expect("issued");
    BrCode::checked(&cobranca.copia_e_cola, reais("20")).expect("the code shown checks");
    assert!(
        cobranca.texto.contains("****7890") && !cobranca.texto.contains(card),
        "{}",
        cobranca.texto
    );
    let again = h
        .service
        .payments()
        .issue("c-pix", &recharge(card, 20), "k-recarga-1", 0)
        .await
        .expect("again");
    assert_eq!(
        (again.txid.as_str(), again.copia_e_cola.as_str()),
        (cobranca.txid.as_str(), cobranca.copia_e_cola.as_str())
    );

    // Not paid yet: a notice (forged, or early) changes nothing and sends nothing.
    assert_eq!(
        h.service.payments().settle(&cobranca.txid).await.expect("read"),
        Settled::Nothing
    );
    assert_eq!(h.sim.charges(card), 0, "no recharge before the payment");

    let paid = h.sim.pix().pay(&cobranca.txid, false).expect("paid");
    // Five reports at once (webhooks) and two sweeps (the follow-up that reads open charges): one
    // credit.
    let reports = (0..5).map(|_| {
        let service = h.service.clone();
        let txid = cobranca.txid.clone();
        tokio::spawn(async move { service.payments().settle(&txid).await.expect("settle") })
    });
    let sweeps = (0..2).map(|_| {
        let service = h.service.clone();
        tokio::spawn(async move { service.payments().sweep().await })
    });
    let (outcomes, swept) = tokio::join!(
        futures::future::join_all(reports),
        futures::future::join_all(sweeps)
    );
    let outcomes: Vec<Settled> = outcomes.into_iter().map(|r| r.expect("task")).collect();
    let swept: usize = swept.into_iter().map(|r| r.expect("task")).sum();
    let credited = outcomes.iter().filter(|o| **o == Settled::Credited).count();
    assert_eq!(credited + swept, 1, "{outcomes:?}, {swept} by the sweeps");
    assert_eq!(h.sim.charges(card), 1, "one payment, one recharge");
    assert_eq!(
        h.service.payments().settle(&cobranca.txid).await.expect("later"),
        Settled::Nothing
    );
    let charge = on_record(&h, &cobranca.txid).await;
    assert_eq!(charge.status, ChargeStatus::Creditada);
    assert_eq!(charge.end_to_end_id.as_deref(), Some(paid.end_to_end_id.as_str()));
    let receipt = said(&h, "c-pix").await.pop().expect("a receipt");
    assert!(receipt.contains(&paid.end_to_end_id), "{receipt}");
    assert!(
        receipt.contains("R$ 20,00") && receipt.contains("****7890"),
        "{receipt}"
    );
    assert!(receipt.contains("Novo saldo"), "{receipt}");
    // The recharge went with the payment as its token, under a key of its own.
    let sent = h
        .sim
        .ledger()
        .into_iter()
        .find(|e| e.sistema == "recarga")
        .expect("the recharge request");
    assert_eq!(
        sent.body
            .as_ref()
            .and_then(|b| b.pointer("/meio_pagamento/tipo"))
            .and_then(|v| v.as_str()),
        Some("pix")
    );
    assert_eq!(
        sent.body
            .as_ref()
            .and_then(|b| b.pointer("/meio_pagamento/token"))
            .and_then(|v| v.as_str()),
        Some(paid.end_to_end_id.as_str())
    );
}

#[tokio::test]
async fn a_charge_nobody_issued_is_not_acted_on() {
    let h = crate::support::chat_harness_paying().await;
    let settled = h
        .service
        .payments()
        .settle(&txid("forjado", 0))
        .await
        .expect("read");
    assert_eq!(settled, vt_agent::testkit::Settled::Nothing);
    assert!(h.sim.ledger().iter().all(|e| e.sistema != "recarga"));
}

#[tokio::test]
async fn a_payment_that_cannot_be_credited_goes_back_and_the_holder_is_told() {
    use vt_agent::testkit::Settled;
    let h = crate::support::chat_harness_paying().await;
    h.say("c-negada", "oi").await;
    // The recharge system denies recharges of this magic card.
    let cobranca = issued(&h, "c-negada", "7777777777", 30, "k-negada").await;
    let paid = h.sim.pix().pay(&cobranca.txid, false).expect("paid");
    assert_eq!(
        h.service.payments().settle(&cobranca.txid).await.expect("settle"),
        Settled::Refunded
    );
    let cob = h.sim.pix().charge(&cobranca.txid).expect("at the provider");
    assert_eq!(cob.pix[0].end_to_end_id, paid.end_to_end_id);
    assert_eq!(cob.pix[0].devolucoes.len(), 1, "one refund");
    assert_eq!(cob.pix[0].devolucoes[0].valor, reais("30"));
    let told = said(&h, "c-negada").await.pop().expect("told");
    assert!(told.contains("devolvido"), "{told}");
    // The case's protocol comes with the explanation, after it (a bare line before it on 80722d3).
    let (explained, protocol) = (
        told.find("devolvido").expect("explained"),
        told.find("Protocolo do seu atendimento").expect("the protocol"),
    );
    assert!(explained < protocol, "{told}");
    // A person gets the case, with the payment in its file.
    let case = h
        .store
        .open_case_of("c-negada")
        .await
        .expect("read")
        .expect("a case");
    assert_eq!(case.case_file["motivo"], "pix_pago_nao_creditado");
    assert_eq!(
        case.case_file["cobranca"]["end_to_end_id"],
        paid.end_to_end_id.as_str()
    );
    assert!(
        !case.case_file.to_string().contains("7777777777"),
        "the card masked in the case file"
    );
    assert_eq!(
        on_record(&h, &cobranca.txid).await.status,
        vt_store::records::ChargeStatus::Devolvida
    );
}

/// A paid charge's recharge runs as the paying conversation's: counted under its tenant (on 80722d3 a
/// `default` tenant the deployment does not have), and told only there — no notice of the flow's own
/// ("não foi aprovada pelo meio de pagamento") beside the chat's "o valor foi devolvido".
#[tokio::test]
async fn a_paid_charges_recharge_is_the_paying_conversations_and_told_only_there() {
    use vt_agent::testkit::Settled;
    let h = crate::support::chat_harness_paying().await;
    let msg = vt_agent::Inbound {
        agent_id: "vt".into(),
        conversation_id: Some("c-acme".into()),
        tenant_id: Some("acme".into()),
        user: crate::support::user(),
        text: "oi".into(),
        ..Default::default()
    };
    h.service.messages().handle(msg).await.expect("handled");
    let since = chrono::Utc::now() - chrono::Duration::days(400);
    for (card, settled) in [
        ("7777777777", Settled::Refunded),
        ("1234567890", Settled::Credited),
    ] {
        let cobranca = issued(&h, "c-acme", card, 30, &format!("k-acme-{card}")).await;
        h.sim.pix().pay(&cobranca.txid, false).expect("paid");
        assert_eq!(
            h.service.payments().settle(&cobranca.txid).await.expect("settle"),
            settled
        );
    }
    let notices: Vec<_> = h
        .sim
        .ledger()
        .into_iter()
        .filter(|e| e.sistema == "notificacao")
        .collect();
    assert!(notices.is_empty(), "told in the chat alone: {notices:?}");
    let told = said(&h, "c-acme").await;
    assert!(told.iter().any(|t| t.contains("devolvido")), "{told:?}");
    assert!(
        told.iter()
            .any(|t| t.contains("Pagamento recebido") || t.contains("Recebemos seu Pix")),
        "{told:?}"
    );
    let usage = h.store.usage_since(since).await.expect("usage");
    let tenants: std::collections::BTreeSet<_> = usage.iter().map(|u| u.tenant_id.as_str()).collect();
    assert!(!tenants.contains("default"), "every cost is acme's: {usage:?}");
    let runs = h.store.flow_runs_since(since).await.expect("runs");
    assert!(!runs.is_empty());
    for run in runs {
        assert_eq!(run.tenant_id.as_deref(), Some("acme"));
    }
}

/// Two codes of one recharge (R$ 20 on card 1234567890) in conversation `conv`, both paid: the first
/// credited, the second's payment returned. Both codes.
async fn two_codes_paid(
    h: &crate::support::ChatHarness,
    conv: &str,
) -> (vt_domain::tools::CodigoPix, vt_domain::tools::CodigoPix) {
    use vt_agent::testkit::Settled;
    h.say(conv, "oi").await;
    let key = format!("k-{conv}");
    let payments = h.service.payments();
    let input = recharge("1234567890", 20);
    let code = |n| payments.issue(conv, &input, &key, n);
    let (first, second) = (code(0).await.expect("first"), code(1).await.expect("second"));
    assert_ne!(first.txid, second.txid);
    h.sim.pix().pay(&first.txid, false).expect("paid");
    h.sim.pix().pay(&second.txid, false).expect("paid too");
    assert_eq!(
        payments.settle(&first.txid).await.expect("first"),
        Settled::Credited
    );
    assert_eq!(
        payments.settle(&second.txid).await.expect("second"),
        Settled::RefundedDuplicate
    );
    (first, second)
}

#[tokio::test]
async fn a_second_code_of_a_recharge_paid_too_is_refunded_not_credited() {
    use vt_agent::testkit::Settled;
    let h = crate::support::chat_harness_paying().await;
    let (_, second) = two_codes_paid(&h, "c-dois").await;
    let payments = h.service.payments();
    assert_eq!(h.sim.charges("1234567890"), 1, "one recharge");
    let cob = h.sim.pix().charge(&second.txid).expect("at the provider");
    assert_eq!(cob.pix[0].devolucoes.len(), 1);
    let told = said(&h, "c-dois").await;
    let last = told.last().expect("told");
    assert!(
        last.contains("segundo Pix") && last.contains("devolvido"),
        "{last}"
    );
    // Read again (a notice repeated, the sweeps that follow): returned once, told once.
    assert_eq!(
        payments.settle(&second.txid).await.expect("again"),
        Settled::Nothing
    );
    payments.sweep().await;
    payments.sweep().await;
    assert_eq!(said(&h, "c-dois").await.len(), told.len(), "nothing more said");
    let returned = on_record(&h, &second.txid).await;
    assert_eq!(returned.status, vt_store::records::ChargeStatus::Devolvida);
    let refund = returned.refund.expect("the refund on record");
    assert_eq!(
        (refund.end_to_end_id.as_str(), refund.status.as_str()),
        (cob.pix[0].end_to_end_id.as_str(), "DEVOLVIDO")
    );
}

/// A provider whose refunds take time: the refund of a second code paid for one recharge is on record
/// as in progress and read back by the sweep until the provider settles it; one it could not make goes
/// to a person.
#[tokio::test]
async fn a_refund_in_progress_is_read_back_until_final_and_one_not_made_goes_to_a_person() {
    let h = crate::support::chat_harness_paying().await;
    h.sim.pix().refunding_later();
    let (_, second) = two_codes_paid(&h, "c-devolve").await;
    let payments = h.service.payments();
    let twice = h.sim.pix().charge(&second.txid).expect("at the provider").pix[0].clone();
    let status = || async {
        let charge = on_record(&h, &second.txid).await;
        charge.refund.map(|r| r.status).unwrap_or_default()
    };
    assert_eq!(status().await, "EM_PROCESSAMENTO");
    // Still in progress: read back, nothing changes.
    assert_eq!(payments.sweep().await, 0);
    assert_eq!(status().await, "EM_PROCESSAMENTO");
    assert!(h.store.open_case_of("c-devolve").await.expect("read").is_none());
    // The provider could not return it: on record, and a person gets it.
    h.sim.pix().finish_refund(&twice.end_to_end_id, false);
    assert_eq!(payments.sweep().await, 1);
    assert_eq!(status().await, "NAO_REALIZADO");
    assert_eq!(payments.sweep().await, 0, "final: not read again");
    let case = h
        .store
        .open_case_of("c-devolve")
        .await
        .expect("read")
        .expect("a case");
    assert_eq!(case.case_file["motivo"], "pix_devolucao_nao_realizada");
    assert_eq!(
        case.case_file["cobranca"]["end_to_end_id"],
        twice.end_to_end_id.as_str()
    );
}

/// A refund the provider could not make, in a conversation whose case (the recharge not credited) is
/// open already: a conversation holds one case, so the person who has it hears of it in its thread.
#[tokio::test]
async fn a_refund_not_made_under_a_case_already_open_is_a_line_in_its_thread() {
    use vt_agent::testkit::Settled;
    let handoff = vt_agent::testkit::HandoffConfig {
        board: true,
        ..Default::default()
    };
    let h = crate::support::chat_harness_pix_handing_off(crate::support::Pix::Provider, handoff).await;
    h.sim.pix().refunding_later();
    h.say("c-linha", "oi").await;
    // The recharge system denies this magic card: refunded (in progress), and a case.
    let cobranca = issued(&h, "c-linha", "7777777777", 30, "k-linha").await;
    let paid = h.sim.pix().pay(&cobranca.txid, false).expect("paid");
    let payments = h.service.payments();
    assert_eq!(
        payments.settle(&cobranca.txid).await.expect("settle"),
        Settled::Refunded
    );
    let case = h
        .store
        .open_case_of("c-linha")
        .await
        .expect("read")
        .expect("a case");
    h.sim.pix().finish_refund(&paid.end_to_end_id, false);
    assert_eq!(payments.sweep().await, 1);

    let still = h
        .store
        .open_case_of("c-linha")
        .await
        .expect("read")
        .expect("a case");
    assert_eq!(still.id, case.id, "one case per conversation");
    let board: Vec<_> = h
        .store
        .outbox_items(vt_store::records::OutboxStatus::Pending, 100)
        .await
        .expect("outbox")
        .into_iter()
        .filter(|i| i.destination == vt_agent::testkit::BOARD)
        .collect();
    let kinds: Vec<&str> = board.iter().map(|i| i.kind.as_str()).collect();
    assert_eq!(kinds, ["caso_aberto", "caso_linha"], "{board:?}");
    let line = board[1].payload["text"].as_str().unwrap_or_default();
    assert!(
        line.contains("Novo motivo") && line.contains("não realizada") && line.contains("****7777"),
        "{line}"
    );
    assert!(!line.contains("7777777777"), "the card masked: {line}");
}

/// `serve`'s Pix channel over loopback: the provider's notice (its real body) starts the read-back.
#[tokio::test]
async fn a_notice_on_the_webhook_credits_the_payment_it_names_and_a_bad_body_is_refused() {
    let h = Arc::new(crate::support::chat_harness_paying().await);
    h.say("c-hook", "oi").await;
    let wiring = vt_agent::Wiring {
        service: h.service.clone(),
        agent: "vt".into(),
        tenant: vt_engine::conversation::DEFAULT_TENANT.into(),
    };
    let channel = vt_agent::testkit::pix_channel(&wiring, None, std::time::Duration::from_secs(30));
    assert_eq!(channel.name, "pix");
    assert_eq!(channel.routes.len(), 1);
    let state = vt_agent::AppState::new(h.service.clone(), "vt", Default::default()).with_channel(&channel);
    let served = crate::support::serve_state(h.clone(), state).await;
    let cobranca = issued(&h, "c-hook", "1234567890", 20, "k-hook").await;
    // Paid 95 s after it was shown.
    h.clock.set(h.clock.now() + chrono::Duration::seconds(95));
    let paid = h.sim.pix().pay(&cobranca.txid, false).expect("paid");
    // As the provider writes it (the spec's webhook body), twice in one notice.
    let notice = format!(
        r#"{{"pix": [{{"endToEndId": "{e2e}", "txid": "{txid}", "valor": "20.00", "horario": "2026-11-22T12:01:00.000Z"}}, {{"endToEndId": "{e2e}", "txid": "{txid}", "valor": "20.00", "horario": "2026-11-22T12:01:00.000Z"}}]}}"#,
        e2e = paid.end_to_end_id,
        txid = cobranca.txid
    );
    let post = |body: String| {
        served
            .client
            .post(format!("{}/channels/pix/webhook/pix", served.url))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    assert_eq!(post(notice.clone()).await.expect("post").status(), 200);
    assert_eq!(post(notice).await.expect("again").status(), 200);
    for _ in 0..100 {
        let charge = on_record(&h, &cobranca.txid).await;
        if charge.status == vt_store::records::ChargeStatus::Creditada {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    h.service.stopped().await;
    assert_eq!(
        on_record(&h, &cobranca.txid).await.status,
        vt_store::records::ChargeStatus::Creditada
    );
    assert_eq!(h.sim.charges("1234567890"), 1, "two notices, one recharge");
    let metrics = served
        .client
        .get(format!("{}/metrics", served.url))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains(r#"vt_pix_charges{status="creditada"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"vt_pix_charges{status="ativa"} 0"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"vt_pix_payment_seconds{quantile="0.5"} 95"#),
        "code to payment: {metrics}"
    );
    assert_eq!(post("{\"pix\": 3}".into()).await.expect("bad").status(), 400);
    assert_eq!(post("não é json".into()).await.expect("bad").status(), 400);
}

#[tokio::test]
async fn the_sweep_credits_a_payment_whose_notice_never_came_and_withdraws_an_expired_code() {
    use vt_agent::testkit::Settled;
    use vt_store::records::ChargeStatus;
    let h = crate::support::chat_harness_paying().await;
    h.say("c-sweep", "oi").await;
    let payments = h.service.payments();
    let paid = payments
        .issue("c-sweep", &recharge("1234567890", 20), "k-sweep-pago", 0)
        .await
        .expect("issued");
    let unpaid = payments
        .issue("c-sweep", &recharge("1111111111", 15), "k-sweep-expira", 0)
        .await
        .expect("issued");
    h.sim.pix().pay(&paid.txid, false).expect("paid, no notice");
    assert_eq!(
        payments.sweep().await,
        1,
        "the paid one, found by reading it back"
    );
    assert_eq!(h.sim.charges("1234567890"), 1);
    assert_eq!(
        on_record(&h, &unpaid.txid).await.status,
        ChargeStatus::Ativa,
        "not expired yet"
    );

    // Fifteen minutes later the unpaid one has expired: withdrawn, and the holder told.
    h.clock.set(h.clock.now() + chrono::Duration::minutes(16));
    assert_eq!(payments.sweep().await, 1);
    assert_eq!(on_record(&h, &unpaid.txid).await.status, ChargeStatus::Expirada);
    assert_eq!(
        h.sim.pix().charge(&unpaid.txid).expect("at the provider").status,
        CobStatus::RemovidaPeloUsuarioRecebedor
    );
    assert!(
        h.sim.pix().pay(&unpaid.txid, false).is_none(),
        "a withdrawn code cannot be paid"
    );
    let last = said(&h, "c-sweep").await.pop().expect("told");
    assert!(
        last.contains("novo código") && last.contains("****1111"),
        "{last}"
    );
    assert_eq!(payments.sweep().await, 0, "nothing left to do");
    assert_eq!(
        payments.settle(&unpaid.txid).await.expect("read"),
        Settled::Nothing
    );
}

#[tokio::test]
async fn a_code_paid_just_before_it_expires_is_credited_not_withdrawn() {
    use vt_store::records::ChargeStatus;
    let h = crate::support::chat_harness_paying().await;
    h.say("c-corrida", "oi").await;
    let cobranca = issued(&h, "c-corrida", "1234567890", 20, "k-corrida").await;
    h.sim
        .pix()
        .pay(&cobranca.txid, false)
        .expect("paid at the last second");
    h.clock.set(h.clock.now() + chrono::Duration::minutes(16));
    assert_eq!(h.service.payments().sweep().await, 1);
    assert_eq!(
        on_record(&h, &cobranca.txid).await.status,
        ChargeStatus::Creditada
    );
    assert_eq!(h.sim.charges("1234567890"), 1);
}

#[tokio::test]
async fn a_credit_a_stop_interrupted_is_resumed_once_by_the_sweep() {
    use vt_store::records::ChargeStatus;
    use vt_store::records::PaymentClaim;
    let h = crate::support::chat_harness_paying().await;
    h.say("c-retoma", "oi").await;
    let cobranca = issued(&h, "c-retoma", "1234567890", 20, "k-retoma").await;
    let paid = h.sim.pix().pay(&cobranca.txid, false).expect("paid");
    // A process claimed the payment and stopped before it sent the recharge.
    let claim = h
        .store
        .claim_payment(&cobranca.txid, &paid.end_to_end_id, h.clock.now())
        .await
        .expect("claim");
    assert_eq!(claim, PaymentClaim::First);
    assert_eq!(
        h.service.payments().sweep().await,
        0,
        "too soon: it may still be on its way"
    );
    h.clock.set(h.clock.now() + chrono::Duration::minutes(3));
    assert_eq!(h.service.payments().sweep().await, 1);
    assert_eq!(h.service.payments().sweep().await, 0);
    assert_eq!(h.sim.charges("1234567890"), 1);
    assert_eq!(
        on_record(&h, &cobranca.txid).await.status,
        ChargeStatus::Creditada
    );
}

/// The card holder's journey with a provider configured: ask, confirm, get the code on its own; nothing
/// is recharged until the provider says it was paid; then one recharge and the receipt.
#[tokio::test]
async fn a_pix_recharge_in_the_chat_is_charged_first_and_credited_when_paid() {
    let h = crate::support::chat_harness_paying().await;
    let card = "1234567890";
    let ask = h
        .say("c-jornada", "recarregar 20 no cartão 1234567890 via pix")
        .await;
    assert!(
        ask.replies.iter().any(|r| r.text.contains("Confirma")),
        "{:?}",
        ask.replies
    );
    let yes = h.say("c-jornada", "sim").await;
    // The line, then the code alone, then (this user is in a terminal) the QR drawn in text, then the
    // QR as a file for the channels that show images (a reply with no text).
    assert_eq!(yes.replies.len(), 4, "{:?}", yes.replies);
    assert!(yes.replies[2].text.lines().count() > 20 && yes.replies[2].text.contains('▀'));
    assert!(yes.replies[3].text.is_empty());
    let qr = vt_domain::tools::qr_of(&yes.replies[3].files[0]).expect("the QR names its charge");
    assert!(yes.replies[0].text.contains("R$ 20,00") && yes.replies[0].text.contains("****7890"));
    assert!(!yes.replies[0].text.contains(card));
    let code = &yes.replies[1].text;
    BrCode::checked(code, reais("20")).expect("the code sent checks");
    assert_eq!(h.sim.charges(card), 0, "confirmed, not paid: nothing recharged");

    let charges = h
        .store
        .charges_in(vt_store::records::ChargeStatus::Ativa, 10)
        .await
        .expect("open");
    assert_eq!(charges.len(), 1);
    assert_eq!(&charges[0].copia_e_cola, code);
    assert_eq!(charges[0].txid, qr);
    // "sim" again charges nothing more.
    h.say("c-jornada", "sim").await;
    assert_eq!(
        h.store
            .charges_in(vt_store::records::ChargeStatus::Ativa, 10)
            .await
            .expect("open")
            .len(),
        1
    );

    h.sim.pix().pay(&charges[0].txid, false).expect("paid");
    assert_eq!(
        h.service
            .payments()
            .settle(&charges[0].txid)
            .await
            .expect("settle"),
        vt_agent::testkit::Settled::Credited
    );
    assert_eq!(h.sim.charges(card), 1, "one payment, one recharge");
    let receipt = said(&h, "c-jornada").await.pop().expect("receipt");
    assert!(
        receipt.contains("Pagamento recebido") && receipt.contains("R$ 20,00"),
        "{receipt}"
    );
}

/// A provider whose code does not check (a wrong CRC): the code is never shown, nothing is charged
/// or recorded, the card holder is told so, and the conversation goes to a person.
#[tokio::test]
async fn a_code_whose_crc_does_not_check_is_never_shown_and_a_person_gets_the_case() {
    let h = crate::support::chat_harness_pix(crate::support::Pix::Tampering).await;
    h.say("c-crc", "recarregar 20 no cartão 1234567890 via pix").await;
    let yes = h.say("c-crc", "sim").await;
    let said = vt_engine::conversation::Reply::join(&yes.replies);
    assert!(!said.contains("000201"), "no code shown: {said}");
    assert!(
        said.contains("nada foi cobrado") && said.contains("pessoa"),
        "{said}"
    );
    assert!(yes.replies.iter().all(|r| r.files.is_empty()), "no QR either");
    assert!(
        h.store
            .charges_in(vt_store::records::ChargeStatus::Ativa, 10)
            .await
            .expect("read")
            .is_empty(),
        "no charge on record"
    );
    assert!(
        h.store.open_case_of("c-crc").await.expect("read").is_some(),
        "a person gets the case"
    );
    assert_eq!(h.recharges(), 0);
}

/// Real systems and no provider: a Pix recharge in the chat is refused before anything is prepared —
/// it would be credited unpaid — and the other ways are offered; a boleto goes on, with its boleto.
#[tokio::test]
async fn without_a_provider_a_pix_recharge_is_refused_politely() {
    let h = crate::support::chat_harness_pix(crate::support::Pix::Refused).await;
    let ask = h
        .say("c-sem-pix", "recarregar 20 no cartão 1234567890 via pix")
        .await;
    let text = ask
        .replies
        .iter()
        .map(|r| r.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(text.contains("Pix ainda não está disponível"), "{text}");
    let yes = h.say("c-sem-pix", "sim").await;
    assert!(
        !yes.replies.iter().any(|r| r.text.contains("aprovada")),
        "{:?}",
        yes.replies
    );
    assert_eq!(h.sim.charges("1234567890"), 0, "nothing credited unpaid");
    // No card provider either: a card recharge is refused the same way, and only the boleto is offered.
    let card = h
        .say("c-sem-pix", "recarregar 20 no cartão 1234567890 no crédito")
        .await
        .reply_text();
    assert!(
        card.contains("cartão de crédito ainda não está disponível")
            && card.contains("Posso fazer a recarga no boleto"),
        "{card}"
    );
    let yes = h.say("c-sem-pix", "sim").await;
    assert!(
        !yes.replies.iter().any(|r| r.text.contains("aprovada")),
        "{:?}",
        yes.replies
    );
    assert_eq!(h.sim.charges("1234567890"), 0, "nothing credited unpaid");
    h.say("c-sem-pix", "recarregar 20 no cartão 1234567890 no boleto")
        .await;
    let boleto = h.say("c-sem-pix", "sim").await.reply_text();
    assert!(boleto.contains("Boleto da recarga de R$ 20,00"), "{boleto}");
    assert_eq!(
        h.sim.charges("1234567890"),
        0,
        "a boleto recharge waits for its boleto"
    );
}

/// The code expired: "novo código" issues the recharge's next charge (the old one withdrawn), which is
/// paid and credited once; while a code holds the same one is shown again; the limit is kept.
#[tokio::test]
async fn novo_codigo_issues_the_next_charge_of_the_same_recharge_up_to_the_limit() {
    use vt_store::records::ChargeStatus;
    let h = crate::support::chat_harness_paying().await;
    let conv = "c-novo";
    let card = "1234567890";
    let none = h.say(conv, "novo código").await;
    assert!(
        none.replies[0].text.contains("Não há nenhum código Pix"),
        "{:?}",
        none.replies
    );
    h.say(conv, "recarregar 20 no cartão 1234567890 via pix").await;
    let first = h.say(conv, "sim").await.replies[1].text.clone();
    // Still valid: the same code again, no new charge.
    let again = h.say(conv, "manda outro código pix").await;
    assert_eq!(again.replies[1].text, first);
    assert_eq!(
        h.store
            .charges_in(ChargeStatus::Ativa, 10)
            .await
            .expect("open")
            .len(),
        1
    );

    // Sixteen minutes later (no sweep yet): a new code, the old one withdrawn first.
    h.clock.set(h.clock.now() + chrono::Duration::minutes(16));
    let renewed = h.say(conv, "o código expirou").await;
    let second = renewed.replies[1].text.clone();
    assert_ne!(second, first);
    BrCode::checked(&second, reais("20")).expect("the new code checks");
    let open = h.store.charges_in(ChargeStatus::Ativa, 10).await.expect("open");
    assert_eq!(open.len(), 1, "one payable code at a time");
    assert_eq!(open[0].n, 1);
    assert_eq!(
        h.store
            .charges_in(ChargeStatus::Expirada, 10)
            .await
            .expect("expired")
            .len(),
        1
    );

    // Three new codes at most (the default): the fourth is refused.
    for n in 2..=3 {
        h.clock.set(h.clock.now() + chrono::Duration::minutes(16));
        let next = h.say(conv, "novo código").await;
        assert!(
            BrCode::checked(&next.replies[1].text, reais("20")).is_ok(),
            "code {n}"
        );
    }
    h.clock.set(h.clock.now() + chrono::Duration::minutes(16));
    let limit = h.say(conv, "novo código").await;
    assert!(
        limit.replies[0].text.contains("todos os códigos"),
        "{:?}",
        limit.replies
    );

    assert_eq!(h.sim.charges(card), 0, "no code was paid: nothing recharged");
}

#[tokio::test]
async fn a_paid_recharge_gets_no_new_code() {
    let h = crate::support::chat_harness_paying().await;
    let conv = "c-pago";
    h.say(conv, "recarregar 20 no cartão 1234567890 via pix").await;
    h.say(conv, "sim").await;
    let open = h
        .store
        .charges_in(vt_store::records::ChargeStatus::Ativa, 10)
        .await
        .expect("open");
    h.sim.pix().pay(&open[0].txid, false).expect("paid");
    h.service.payments().settle(&open[0].txid).await.expect("settle");
    let paid = h.say(conv, "novo código").await;
    assert!(paid.replies[0].text.contains("já foi pago"), "{:?}", paid.replies);
    assert_eq!(h.sim.charges("1234567890"), 1);
}

/// `vt-agent flows --pendentes` lists the charges waiting for payment beside the late recharges: the
/// txid, the amount, which code, when it expires — no card.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_pendentes_lists_the_charges_waiting_for_payment() {
    let data = tempfile::tempdir().expect("tmp");
    crate::support::test_keys();
    let store = vt_store::open(None, data.path(), vt_store::Usage::Service)
        .await
        .expect("store");
    let now = chrono::Utc::now();
    let charge = vt_store::records::PixCharge {
        meio: vt_store::records::ChargeMeans::Pix,
        txid: txid("k-lista", 1),
        recharge_key: "k-lista".into(),
        n: 1,
        conversation_id: "c-lista".into(),
        request: serde_json::json!({"cartao": "1234567890", "recarga": {"valor": 20}}),
        amount: reais("20"),
        copia_e_cola: "000201…".into(),
        status: vt_store::records::ChargeStatus::Ativa,
        expires_at: now + chrono::Duration::minutes(15),
        end_to_end_id: None,
        paid_at: None,
        created_at: now,
        refund: None,
        execucao_id: None,
    };
    store.open_charge(&charge).await.expect("charge");
    drop(store);
    let out = crate::cli::vt_agent_in(&data)
        .args(["flows", "--pendentes"])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("Cobranças Pix esperando pagamento"), "{text}");
    assert!(
        text.contains(&charge.txid) && text.contains("BRL 20,00"),
        "{text}"
    );
    assert!(!text.contains("1234567890"), "no card: {text}");
}

/// Paid, and the recharge system answers "pendente": the charge is handed to the recharge's follow-up
/// (step 15) and the sweep leaves it — no second request, no message every sweep.
#[tokio::test]
async fn a_paid_recharge_still_pending_is_left_to_its_follow_up() {
    use vt_agent::testkit::Settled;
    use vt_store::records::ChargeStatus;
    let h = crate::support::chat_harness_paying().await;
    h.say("c-pendente", "oi").await;
    // The recharge system answers this magic card's recharges "pendente".
    let cobranca = issued(&h, "c-pendente", "6666666666", 20, "k-pendente").await;
    h.sim.pix().pay(&cobranca.txid, false).expect("paid");
    assert_eq!(
        h.service.payments().settle(&cobranca.txid).await.expect("settle"),
        Settled::Processing
    );
    let told = said(&h, "c-pendente").await.len();
    let requests =
        |h: &crate::support::ChatHarness| h.sim.ledger().iter().filter(|e| e.sistema == "recarga").count();
    let sent = requests(&h);
    h.clock.set(h.clock.now() + chrono::Duration::minutes(5));
    assert_eq!(h.service.payments().sweep().await, 0);
    assert_eq!(requests(&h), sent, "not sent again by the sweep");
    assert_eq!(said(&h, "c-pendente").await.len(), told, "nothing said again");
    assert_eq!(on_record(&h, &cobranca.txid).await.status, ChargeStatus::Enviada);
}

/// The names of the spans opened while it is the thread's subscriber.
#[derive(Clone, Default)]
struct SpanNames(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for SpanNames {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _id: &tracing::span::Id,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Name(Option<String>);
        impl tracing::field::Visit for Name {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if field.name() == "otel.name" {
                    self.0 = Some(value.to_owned());
                }
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "otel.name" {
                    self.0 = Some(format!("{value:?}").trim_matches('"').to_owned());
                }
            }
        }
        let mut name = Name(None);
        attrs.record(&mut name);
        if let Some(n) = name.0 {
            self.0.lock().expect("lock").push(n);
        }
    }
}

/// Each call to the provider is a span of its own in the trace of what made it.
#[tokio::test]
async fn each_call_to_the_provider_is_a_span() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let h = crate::support::chat_harness_paying().await;
    h.say("c-spans", "oi").await;
    let names = SpanNames::default();
    let _traced = tracing::subscriber::set_default(tracing_subscriber::registry().with(names.clone()));
    let cobranca = issued(&h, "c-spans", "7777777777", 20, "k-spans").await;
    h.sim.pix().pay(&cobranca.txid, false).expect("paid");
    h.service.payments().settle(&cobranca.txid).await.expect("settle");
    let seen = names.0.lock().expect("lock").clone();
    for call in ["pix: criar cobrança", "pix: ler cobrança", "pix: devolução"] {
        assert!(seen.iter().any(|n| n == call), "{call} in {seen:?}");
    }
}

/// The embedded simulator as the provider, called in this process (no network, no credentials): the
/// same API Pix as over HTTP.
#[tokio::test]
async fn the_embedded_simulator_is_a_provider_in_process() {
    let sim = Simulator::new(quick_simulator());
    let psp = Psp::in_process(sim.local());
    let id = txid("k-no-processo", 0);
    let cob = psp.criar_cob(&id, &pedido("12.50")).await.expect("created");
    BrCode::checked(cob.pix_copia_e_cola.as_deref().expect("code"), reais("12.50")).expect("checks");
    assert_eq!(psp.cob(&id).await.expect("read").status, CobStatus::Ativa);
    sim.pix().pay(&id, false).expect("paid");
    let paid = psp.cob(&id).await.expect("read");
    assert_eq!(paid.status, CobStatus::Concluida);
    let missing = psp.cob(&txid("outra", 0)).await.expect_err("unknown");
    assert!(missing.is_not_found(), "{missing}");
}

/// Conversation `conv` read from `url` once its Pix receipt is there (or after 10 s), as JSON text.
async fn receipt_in(http: &reqwest::Client, url: &str, conv: &str) -> String {
    let mut conversation = String::new();
    for _ in 0..100 {
        conversation = http
            .get(format!("{url}/v1/conversations/{conv}"))
            .send()
            .await
            .expect("get")
            .text()
            .await
            .expect("text");
        if conversation.contains("Pagamento recebido") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    conversation
}

/// `vt-agent serve` on `data` with no configuration: the embedded simulator, paying only when told.
fn serve_unconfigured(data: &tempfile::TempDir) -> (std::process::Child, String) {
    let mut cmd = crate::cli::vt_agent_in(data);
    cmd.env("VT_SIMULATOR_PIX_PAGAR_APOS_SEGUNDOS", "0")
        .args(["serve", "--addr", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let url = crate::support::listening_on(&mut stderr);
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, url)
}

/// `vt-agent serve` with no configuration, over HTTP: the embedded simulator is the provider. "sim"
/// answers the code with its QR (`pix` fields), nothing is recharged until it is paid; paying it at
/// `POST /_simulador/pix/{txid}/pagar` (as a payer's bank would) is noticed in process and the receipt
/// lands in the conversation. The charge survives in the simulator's book: a code shown by a
/// `chat --message` process before is paid through this server too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_configuration_serve_takes_pix_from_the_embedded_simulator_over_http() {
    use base64::Engine as _;
    let data = tempfile::tempdir().expect("tmp");
    let (mut child, url) = serve_unconfigured(&data);
    let http = reqwest::Client::new();
    let say = |text: &str| {
        http.post(format!("{url}/v1/conversations/c-http/messages"))
            .json(&serde_json::json!({"text": text, "user": {"id": "u-http"}}))
            .send()
    };
    let ask: serde_json::Value = say("recarregar 20 no cartão 1234567890 via pix")
        .await
        .expect("ask")
        .json()
        .await
        .expect("json");
    assert!(ask.to_string().contains("Confirma"), "{ask}");
    let yes: serde_json::Value = say("sim").await.expect("yes").json().await.expect("json");
    let replies = yes["replies"].as_array().expect("replies");
    let pix = replies
        .iter()
        .find_map(|r| r.get("pix"))
        .unwrap_or_else(|| panic!("a reply with the code: {yes}"));
    let code = pix["copia_e_cola"].as_str().expect("code");
    BrCode::checked(code, reais("20")).expect("checks");
    assert!(
        replies.iter().any(|r| r["text"] == code),
        "the code is a message of its own too: {yes}"
    );
    let png = base64::engine::general_purpose::STANDARD
        .decode(pix["qr_png_base64"].as_str().expect("qr"))
        .expect("base64");
    assert_eq!(png, vt_domain::pix::qr::png(code).expect("png"));
    assert!(pix["expira_em"].as_str().is_some_and(|t| t.ends_with('Z')));
    let txid = code
        .split("/qr/v2/")
        .nth(1)
        .map(|rest| &rest[..34])
        .expect("the charge's location names its txid")
        .to_owned();

    let read = || async {
        http.get(format!("{url}/v1/conversations/c-http"))
            .send()
            .await
            .expect("get")
            .json::<serde_json::Value>()
            .await
            .expect("json")
            .to_string()
    };
    assert!(
        !read().await.contains("Pagamento recebido"),
        "not paid: no receipt"
    );
    let paid = http
        .post(format!("{url}/_simulador/pix/{txid}/pagar"))
        .send()
        .await
        .expect("pay");
    assert_eq!(paid.status(), 200);
    let conversation = receipt_in(&http, &url, "c-http").await;
    assert!(
        conversation.contains("Pagamento recebido e recarga feita: R$ 20,00 no cartão ****7890"),
        "{conversation}"
    );
    assert!(!conversation.contains("1234567890"), "masked: {conversation}");
    let again = http
        .post(format!("{url}/_simulador/pix/{txid}/pagar"))
        .send()
        .await
        .expect("pay again");
    assert_eq!(again.status(), 400, "a paid code cannot be paid again");
    let _ = child.kill();
    let _ = child.wait();

    // A code shown by another process (a one-shot chat) is in the book: this server pays it.
    let mut chat = crate::cli::vt_agent_in(&data);
    chat.env("VT_SIMULATOR_PIX_PAGAR_APOS_SEGUNDOS", "0").args([
        "chat",
        "--conversation",
        "c-cli",
        "-m",
        "recarregar 30 no cartão 1111111111 via pix",
    ]);
    assert!(chat.output().expect("chat").status.success());
    let mut chat = crate::cli::vt_agent_in(&data);
    chat.env("VT_SIMULATOR_PIX_PAGAR_APOS_SEGUNDOS", "0").args([
        "chat",
        "--conversation",
        "c-cli",
        "-m",
        "sim",
    ]);
    let shown = String::from_utf8_lossy(&chat.output().expect("chat").stdout).into_owned();
    let code = shown
        .lines()
        .find(|l| l.starts_with("000201"))
        .unwrap_or_else(|| panic!("{shown}"))
        .to_owned();
    let txid = code
        .split("/qr/v2/")
        .nth(1)
        .map(|rest| rest[..34].to_owned())
        .expect("txid");
    let (mut child, url) = serve_unconfigured(&data);
    let paid = http
        .post(format!("{url}/_simulador/pix/{txid}/pagar"))
        .send()
        .await
        .expect("pay");
    assert_eq!(paid.status(), 200, "the other process's charge is known here");
    let conversation = receipt_in(&http, &url, "c-cli").await;
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        conversation.contains("Pagamento recebido e recarga feita: R$ 30,00 no cartão ****1111"),
        "{conversation}"
    );
}

/// On Mattermost a code's QR is a file of its post: drawn from the charge on record, uploaded to the
/// conversation's channel (`POST /api/v4/files`), then posted with its id.
#[tokio::test]
async fn on_mattermost_a_codes_qr_is_uploaded_and_attached_to_its_post() {
    use vt_agent::ChannelSender as _;
    let h = crate::support::chat_harness_paying().await;
    let conv = "mm:canal1:user1";
    h.say(conv, "oi").await;
    let cobranca = issued(&h, conv, "1234567890", 20, "k-mm").await;
    let mm = crate::support::FakeServer::start(vec![(201, vec![], serde_json::json!({"id": "post-1"}))])
        .await
        .answering_uploads();
    let config = vt_agent::testkit::MattermostConfig {
        url: Some(mm.url.clone()),
        bot_token: Some("token-do-bot".into()),
        ..Default::default()
    };
    let sender = vt_agent::testkit::PostSender::new(Arc::new(config))
        .expect("on")
        .with_files(h.store.clone());
    let mut payload = crate::support::reply_payload(conv, "user1", "");
    payload["files"] = serde_json::to_value([vt_domain::tools::qr_file(&cobranca.txid)]).expect("json");
    let item = vt_store::records::OutboxItem {
        id: 1,
        kind: "reply".into(),
        destination: "mattermost".into(),
        payload,
        conversation_id: Some(conv.into()),
        status: vt_store::records::OutboxStatus::InFlight,
        attempts: 1,
        max_attempts: 5,
        next_attempt_at: chrono::Utc::now(),
        last_error: None,
        message_id: None,
    };
    let reply = vt_agent::ReplyPayload::of(&item).expect("a reply");
    let sent = sender.send(&item, &reply).await.expect("sent");
    assert_eq!(sent.as_deref(), Some("post-1"));
    let received = mm.received();
    assert_eq!(received.len(), 2, "the upload, then the post");
    assert!(received[0].path.ends_with("/api/v4/files"));
    let png = vt_domain::pix::qr::png(&cobranca.copia_e_cola).expect("png");
    assert!(received[0].raw.windows(png.len()).any(|w| w == png.as_slice()));
    assert!(String::from_utf8_lossy(&received[0].raw).contains("canal1"));
    assert!(received[1].path.ends_with("/api/v4/posts"));
    assert_eq!(received[1].body["channel_id"], "canal1");
    assert_eq!(received[1].body["file_ids"], serde_json::json!(["arquivo-1"]));
}

/// A complaint about a payment, without a model: the conversation's charge is looked up and what
/// happened to it is said — waiting for the bank, then credited — and nothing new is charged or sent;
/// with nothing on record, a case `pagamento_nao_creditado` is opened. Never a new recharge: on main
/// (80722d3) "paguei o pix … e a recarga não caiu no cartão …" asked for the amount to recharge.
#[tokio::test]
async fn a_complaint_about_a_payment_is_looked_up_never_a_new_recharge() {
    let h = crate::support::chat_harness_paying().await;
    let card = "1234567890";
    h.say("c-queixa", "recarregar 20 no cartão 1234567890 via pix")
        .await;
    h.say("c-queixa", "sim").await;
    let open = h
        .store
        .charges_in(vt_store::records::ChargeStatus::Ativa, 10)
        .await
        .expect("open");
    assert_eq!(open.len(), 1);
    // Said before the bank confirmed: no new code, no recharge, told not to pay again.
    let early = h
        .say(
            "c-queixa",
            "paguei o pix agora e a recarga não caiu no cartão 1234567890",
        )
        .await;
    assert_eq!(early.intent.as_deref(), Some("verificar_pagamento"));
    let text: String = early.replies.iter().map(|r| r.text.as_str()).collect();
    assert!(text.contains("Não pague de novo"), "{text}");
    assert!(
        !text.contains(card) && !text.contains("me diga o valor"),
        "{text}"
    );
    assert_eq!(h.sim.charges(card), 0);

    h.sim.pix().pay(&open[0].txid, false).expect("paid");
    h.service.payments().settle(&open[0].txid).await.expect("settle");
    let later = h.say("c-queixa", "fiz o pagamento e não creditou").await;
    let text: String = later.replies.iter().map(|r| r.text.as_str()).collect();
    assert!(text.contains("creditada no cartão ****7890"), "{text}");
    assert_eq!(
        h.sim.charges(card),
        1,
        "one payment, one recharge: the complaint sent none"
    );
    let charges = h.store.conversation_charges("c-queixa").await.expect("charges");
    assert_eq!(charges.len(), 1, "no new charge");
    assert!(h.store.open_case_of("c-queixa").await.expect("case").is_none());

    // Nothing paid in this conversation: a person looks into it, with the payment's reason.
    let none = h.say("c-sem-registro", "cobraram duas vezes").await;
    assert_eq!(none.intent.as_deref(), Some("verificar_pagamento"));
    let case = h
        .store
        .open_case_of("c-sem-registro")
        .await
        .expect("case")
        .expect("a case opened");
    assert_eq!(case.motivo, vt_contract::HandoffReason::PagamentoNaoCreditado);
    assert_eq!(h.sim.charges(card), 1);
}
