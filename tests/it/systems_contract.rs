//! `vt-agent systems contract`: an OpenAPI 3.1 document that holds together (every operation answers,
//! every reference resolves), and that the product and the simulator keep to: the recharge body RF6
//! builds, and every answer the simulator gives to every operation, parse into the contract's types
//! (which refuse unknown fields).

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use vt_connectors::systems::{SystemsConfig, VtSystems};
use vt_domain::systems::Systems as _;
use vt_domain::systems::contract::{
    ErroSistema, NotificacaoResposta, RecargaPedido, RecargaResposta, Recusa, SaldoResposta,
};
use vt_simulators::systems::{Simulator, SimulatorConfig};

fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                out.push(r.clone());
            }
            map.values().for_each(|x| refs(x, out));
        }
        Value::Array(items) => items.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

#[test]
fn the_contract_is_an_openapi_3_1_document_whose_references_resolve() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vt-agent"))
        .args(["systems", "contract"])
        .output()
        .expect("run");
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["info"]["title"].is_string() && doc["info"]["version"].is_string());
    let ops = [
        ("/api/v1/saldos/consultar", "get"),
        ("/api/v1/recargas", "post"),
        ("/api/v1/notificacoes", "post"),
        ("/api/v1/cartoes/situacao", "get"),
        ("/api/v1/cartoes/extrato", "get"),
    ];
    for (path, method) in ops {
        let op = &doc["paths"][path][method];
        assert!(op["operationId"].is_string(), "{path}");
        let responses = op["responses"].as_object().expect("responses");
        assert!(!responses.is_empty(), "{path}");
        for (status, r) in responses {
            assert!(status.parse::<u16>().is_ok(), "{path} {status}");
            assert!(r["description"].is_string(), "{path} {status}");
        }
    }
    let recharge = &doc["paths"]["/api/v1/recargas"]["post"];
    for status in ["201", "202", "402", "409", "500"] {
        assert!(
            recharge["responses"][status].is_object(),
            "recarga answers {status}"
        );
    }
    let key = recharge["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .any(|p| p["name"] == "x-idempotency-key" && p["required"] == true);
    assert!(key, "the recharge's idempotency key is required");
    let mut found = Vec::new();
    refs(&doc, &mut found);
    assert!(!found.is_empty());
    for r in found {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("{r}"));
        assert!(doc["components"]["schemas"][name].is_object(), "{r} resolves");
    }
}

fn parses<T: DeserializeOwned>(what: &str, body: &Option<Value>) {
    let body = body.clone().unwrap_or(Value::Null);
    if let Err(e) = serde_json::from_value::<T>(body.clone()) {
        panic!("{what}: {body} breaks the contract: {e}");
    }
}

/// Every operation, every answer the product understands, against the simulator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_and_the_client_keep_to_the_contract() {
    let sim = Simulator::new(SimulatorConfig {
        notifications_per_second: 2,
        ..crate::support::quick_simulator()
    })
    .spawn(0)
    .await
    .expect("simulator");
    let client = VtSystems::new(SystemsConfig {
        timeout_cap_ms: Some(500),
        ..SystemsConfig::single(&sim.url)
    })
    .expect("client");
    let none = BTreeMap::new();
    for card in [
        "1234567890",
        "1111111111",
        "2222222222",
        "1414141414",
        "5555555555",
    ] {
        let r = client.consultar_saldo(card, &none, 500, 1, 0).await;
        assert_eq!(r.status, Some(200), "{card}");
        parses::<SaldoResposta>(&format!("saldo {card}"), &r.body);
    }
    let r = client.consultar_saldo("3333333333", &none, 500, 1, 0).await;
    assert_eq!(r.status, Some(500));
    parses::<ErroSistema>("saldo 500", &r.body);
    let r = client.consultar_saldo("12ab", &none, 500, 1, 0).await;
    assert_eq!(r.status, Some(400));
    parses::<ErroSistema>("saldo 400", &r.body);

    // The recharge body as RF6 builds it is the contract's.
    let input = vt_domain::vt::FlowInput::parse(
        r#"{"cartao": "1234567890", "recarga": {"valor": 50, "meio_pagamento": {"tipo": "pix", "token": "tok_x"}}}"#,
    )
    .expect("input");
    let rf06 = vt_domain::stages::rf06_preparar_recarga::preparar_recarga(&input);
    parses::<RecargaPedido>("RF6's body", &Some(rf06.body.clone()));
    let body = |card: &str| json!({"cartao": card, "valor": 50.0, "moeda": "BRL", "meio_pagamento": {"tipo": "pix"}});
    let key = |k: &str| BTreeMap::from([("x-idempotency-key".to_owned(), k.to_owned())]);
    for (card, status) in [
        ("1234567890", 201),
        ("6666666666", 202),
        ("1212121212", 201),
        ("1313131313", 201),
    ] {
        let r = client.recarregar(&body(card), &key(card), 500).await;
        assert_eq!(r.status, Some(status), "{card}");
        parses::<RecargaResposta>(&format!("recarga {card}"), &r.body);
    }
    let r = client.recarregar(&body("7777777777"), &key("negada"), 500).await;
    assert_eq!(r.status, Some(402));
    parses::<Recusa>("recarga 402", &r.body);
    let r = client
        .recarregar(&body("2345678901"), &key("1234567890"), 500)
        .await;
    assert_eq!(r.status, Some(409), "the key reused with another body");
    parses::<Recusa>("recarga 409", &r.body);
    let r = client
        .recarregar(&json!({"cartao": "1234567890"}), &key("invalido"), 500)
        .await;
    assert_eq!(r.status, Some(400));
    parses::<Recusa>("recarga 400", &r.body);
    let r = client.recarregar(&body("8888888888"), &key("erro"), 500).await;
    assert_eq!(r.status, Some(500));
    parses::<ErroSistema>("recarga 500", &r.body);

    // Notifications: the body is the stages' own type; taken, refused, and past the rate.
    let aviso = json!({"canal": "app", "assunto": "Saldo baixo", "mensagem": "O saldo do cartão ****7890 está baixo.",
        "destinatario": {"tipo": "usuario", "id": "u-1"}, "metadados": {"cartao": "1234567890"}});
    parses::<vt_domain::stages::NotificacaoPayload>("the notice", &Some(aviso.clone()));
    let r = client.notificar(&json!({"x": 1}), &key("ruim"), 500, 1, 0).await;
    assert_eq!(r.status, Some(400));
    parses::<Recusa>("notificacao 400", &r.body);
    let mut statuses = Vec::new();
    for i in 0..4 {
        let r = client
            .notificar(&aviso, &key(&format!("aviso-{i}")), 500, 1, 0)
            .await;
        match r.status {
            Some(200 | 202) => parses::<NotificacaoResposta>("notificacao", &r.body),
            Some(429) => parses::<ErroSistema>("notificacao 429", &r.body),
            other => panic!("notificacao answered {other:?}"),
        }
        statuses.extend(r.status);
    }
    assert!(statuses.contains(&429), "past the rate: {statuses:?}");
}
