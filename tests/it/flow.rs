//! `run-flow` end to end through the engine's deterministic chain, for every magic card, against the
//! in-process simulator over real loopback HTTP; the simulator's ledger shows what was really sent.

use serde_json::{Value, json};
use vt_agent::{FlowOutput, FlowStatus, run_flow};

use crate::support::{FlowHarness, flow_harness, flow_harness_with, quick_simulator, two_low_cards};

fn input(card: &str, recarga: Option<Value>) -> String {
    let mut v = json!({
        "cartao": card, "tenant_id": "TENANT", "origem": "PORTAL",
        "politicas": {"validacoes_cartao": {"tamanho_min": 10, "tamanho_max": 16},
                      "limite_saldo_baixo": 20.00, "valor_min": 10.00, "valor_max": 500.00},
        "preferencias": {"canais": ["whatsapp", "app"], "idioma": "pt-BR"},
        "destinatario": {"tipo": "usuario", "id": "u-123"},
        "cpf": "123.456.789-00", "nome": "Fulana de Tal", "email": "fulana@example.com"
    });
    if let Some(r) = recarga {
        v["recarga"] = r;
    }
    v.to_string()
}

fn pix(valor: f64) -> Option<Value> {
    Some(json!({"valor": valor, "moeda": "BRL", "meio_pagamento": {"tipo": "PIX", "token": "tok_x"}}))
}

async fn run(h: &FlowHarness, card: &str, recarga: Option<Value>) -> FlowOutput {
    run_flow(&h.engine, &input(card, recarga))
        .await
        .expect("flow runs")
        .output
}

fn stage<'a>(out: &'a FlowOutput, id: &str) -> &'a Value {
    &out.etapas
        .iter()
        .find(|e| e.etapa == id)
        .unwrap_or_else(|| panic!("stage {id} did not run"))
        .saida
}

fn ids(out: &FlowOutput) -> Vec<&str> {
    out.etapas.iter().map(|e| e.etapa.as_str()).collect()
}

fn requests(h: &FlowHarness, sistema: &str) -> usize {
    h.sim.ledger().iter().filter(|e| e.sistema == sistema).count()
}

#[tokio::test]
async fn the_run_status_tells_the_outcome() {
    let h = flow_harness(quick_simulator()).await;
    for (card, recarga, want) in [
        ("1234567890", None, FlowStatus::Concluido),
        ("1234567890", pix(50.0), FlowStatus::Concluido),
        ("12ab", None, FlowStatus::Falhou),
        ("3333333333", None, FlowStatus::Falhou),
        ("5555555555", None, FlowStatus::Falhou),
        ("6666666666", pix(50.0), FlowStatus::Pendente),
        ("7777777777", pix(50.0), FlowStatus::Falhou),
        ("8888888888", pix(50.0), FlowStatus::Falhou),
        ("9999999999", pix(50.0), FlowStatus::Pendente),
        ("1234567890", pix(5000.0), FlowStatus::Falhou),
    ] {
        let out = run(&h, card, recarga).await;
        assert_eq!(out.status, want, "{card}");
    }
}

#[tokio::test]
async fn a_normal_card_with_a_recharge_runs_all_ten_stages() {
    let h = flow_harness(quick_simulator()).await;
    let out = run(&h, "1234 5678-90", pix(100.0)).await;
    assert_eq!(ids(&out), vt_domain::stages::STAGES.to_vec());
    assert_eq!(out.status, FlowStatus::Concluido);
    assert_eq!(stage(&out, "rf03_normalizar_saldo")["saldo"], json!(50.0));
    assert_eq!(
        stage(&out, "rf04_decidir_notificacao")["enviar_notificacao"],
        false
    );
    assert_eq!(
        stage(&out, "rf05_enviar_notificacao"),
        &json!({"enviado": false, "motivo": "saldo_acima_do_limite"})
    );
    assert_eq!(
        stage(&out, "rf06_preparar_recarga")["body"]["meio_pagamento"]["tipo"],
        "pix"
    );
    let rf08 = stage(&out, "rf08_conciliar_recarga");
    assert_eq!(rf08["status_recarga"], "aprovada");
    assert_eq!(rf08["novo_saldo"], json!(150.0));
    assert_eq!(rf08["reconsulta_necessaria"], false);
    assert_eq!(out.resultado["enviado"], true);
    assert_eq!(h.sim.charges("1234567890"), 1);
    assert_eq!(
        h.sim.deliveries(),
        1,
        "only the recharge notice: the balance was not low"
    );
}

#[tokio::test]
async fn without_a_recharge_the_run_stops_after_rf05() {
    let h = flow_harness(quick_simulator()).await;
    let out = run(&h, "1111111111", None).await;
    assert_eq!(ids(&out), vt_domain::stages::STAGES[..5].to_vec());
    let rf03 = stage(&out, "rf03_normalizar_saldo");
    assert_eq!(
        (rf03["saldo"].clone(), rf03["saldo_baixo"].clone()),
        (json!(12.5), json!(true))
    );
    let rf04 = stage(&out, "rf04_decidir_notificacao");
    assert_eq!(rf04["payload"]["canal"], "whatsapp");
    assert!(
        rf04["payload"]["mensagem"]
            .as_str()
            .is_some_and(|m| m.contains("BRL 12,50") && m.contains("****1111"))
    );
    assert_eq!(out.resultado["enviado"], true);
    assert_eq!(out.resultado["status"], 202);
    assert_eq!(requests(&h, "recarga"), 0);
}

#[tokio::test]
async fn null_balance_is_an_error_with_an_observation() {
    let h = flow_harness(quick_simulator()).await;
    let out = run(&h, "2222222222", None).await;
    let rf03 = stage(&out, "rf03_normalizar_saldo");
    assert_eq!(rf03["status_consulta"], "erro");
    assert_eq!(rf03["saldo"], json!(0.0));
    assert_eq!(rf03["observacoes"], json!(["saldo_informado_nulo"]));
    assert_eq!(
        stage(&out, "rf04_decidir_notificacao")["motivo"],
        "consulta_com_erro"
    );
    assert_eq!(h.sim.deliveries(), 0);
}

#[tokio::test]
async fn a_500_from_the_balance_api_is_retried_within_the_policy() {
    let h = flow_harness(quick_simulator()).await;
    let out = run(&h, "3333333333", None).await;
    assert_eq!(stage(&out, "rf02_executar_consulta")["status"], 500);
    assert_eq!(
        stage(&out, "rf03_normalizar_saldo")["observacoes"],
        json!(["http_500"])
    );
    assert_eq!(requests(&h, "saldo"), 2, "max_attempts 2");
    assert_eq!(
        out.status,
        FlowStatus::Falhou,
        "the stages report the failure, and the run did not reach its outcome"
    );
}

#[tokio::test]
async fn a_balance_timeout_is_recorded_and_not_resent() {
    let h = flow_harness(quick_simulator()).await;
    let out = run(&h, "4444444444", None).await;
    let rf02 = stage(&out, "rf02_executar_consulta");
    assert_eq!(rf02["status"], Value::Null);
    assert_eq!(rf02["erro"]["tipo"], "timeout");
    assert_eq!(
        stage(&out, "rf03_normalizar_saldo")["observacoes"],
        json!(["timeout"])
    );
    assert_eq!(requests(&h, "saldo"), 1);
}

#[tokio::test]
async fn a_divergent_card_and_a_missing_currency_are_observed() {
    let h = flow_harness(quick_simulator()).await;
    let out = run(&h, "5555555555", None).await;
    let rf03 = stage(&out, "rf03_normalizar_saldo");
    assert_eq!(rf03["cartao"], "5555555555");
    assert_eq!(rf03["observacoes"], json!(["cartao_divergente_na_fonte"]));
    let out = run(&h, "1414141414", None).await;
    let rf03 = stage(&out, "rf03_normalizar_saldo");
    assert_eq!(rf03["moeda"], "BRL");
    assert_eq!(rf03["observacoes"], json!(["moeda_ausente"]));
    assert!(
        rf03["data_verificacao"]
            .as_str()
            .is_some_and(|d| d.ends_with("-03:00"))
    );
}

#[tokio::test]
async fn recharge_outcomes_pending_denied_and_error() {
    let h = flow_harness(quick_simulator()).await;
    let pending = run(&h, "6666666666", pix(50.0)).await;
    let rf08 = stage(&pending, "rf08_conciliar_recarga");
    assert_eq!(
        (
            rf08["status_recarga"].clone(),
            rf08["reconsulta_necessaria"].clone()
        ),
        (json!("pendente"), json!(true))
    );
    assert_eq!(
        stage(&pending, "rf09_preparar_notificacao_recarga")["payload"]["assunto"],
        "Recarga de VT em processamento"
    );

    let denied = run(&h, "7777777777", pix(50.0)).await;
    assert_eq!(stage(&denied, "rf07_executar_recarga")["status"], 402);
    assert_eq!(
        stage(&denied, "rf08_conciliar_recarga")["status_recarga"],
        "negada"
    );
    assert_eq!(h.sim.charges("7777777777"), 0);

    let error = run(&h, "8888888888", pix(50.0)).await;
    let rf08 = stage(&error, "rf08_conciliar_recarga");
    assert_eq!(rf08["status_recarga"], "erro");
    assert_eq!(rf08["observacoes"], json!(["http_500"]));
    let posts = h
        .sim
        .ledger()
        .iter()
        .filter(|e| e.sistema == "recarga" && e.cartao.as_deref() == Some("8888888888"))
        .count();
    assert_eq!(posts, 1, "a recharge is never retried");
    assert_eq!(denied.resultado["enviado"], true, "the failure is notified too");
}

#[tokio::test]
async fn timeout_after_charge_is_pending_and_charges_exactly_once() {
    let h = flow_harness(quick_simulator()).await;
    let out = run(&h, "9999999999", pix(80.0)).await;
    assert_eq!(stage(&out, "rf07_executar_recarga")["erro"]["tipo"], "timeout");
    let rf08 = stage(&out, "rf08_conciliar_recarga");
    assert_eq!(rf08["status_recarga"], "pendente");
    assert_eq!(rf08["reconsulta_necessaria"], true);
    assert_eq!(rf08["observacoes"], json!(["resultado_indeterminado"]));
    assert_eq!(h.sim.charges("9999999999"), 1);
    let posts = |h: &FlowHarness| h.sim.ledger().iter().filter(|e| e.sistema == "recarga").count();
    assert_eq!(posts(&h), 1);
    // Running the same request again reuses the key: the simulator replays, nothing is charged twice.
    let again = run(&h, "9999999999", pix(80.0)).await;
    assert_eq!(
        stage(&again, "rf08_conciliar_recarga")["status_recarga"],
        "aprovada"
    );
    assert_eq!(h.sim.charges("9999999999"), 1);
    assert!(
        h.sim
            .ledger()
            .iter()
            .any(|e| e.efeito == Some(vt_simulators::systems::Efeito::Replay))
    );
}

#[tokio::test]
async fn approved_without_balance_or_ids() {
    let h = flow_harness(quick_simulator()).await;
    let out = run(&h, "1212121212", pix(100.0)).await;
    let rf08 = stage(&out, "rf08_conciliar_recarga");
    assert_eq!(rf08["status_recarga"], "aprovada");
    assert_eq!(
        rf08["novo_saldo"],
        json!(150.0),
        "previous balance plus the value"
    );
    assert_eq!(rf08["reconsulta_necessaria"], true);
    let out = run(&h, "1313131313", pix(100.0)).await;
    let rf08 = stage(&out, "rf08_conciliar_recarga");
    assert_eq!(
        rf08["transacao"],
        json!({"id": null, "nsu": null, "autorizacao": null})
    );
    assert!(
        rf08["observacoes"]
            .as_array()
            .is_some_and(|o| o.contains(&json!("identificadores_transacao_ausentes")))
    );
}

#[tokio::test]
async fn invalid_payloads_are_never_sent() {
    let h = flow_harness(quick_simulator()).await;
    let out = run(&h, "12ab567890", pix(50.0)).await;
    assert_eq!(
        stage(&out, "rf01_preparar_consulta")["query"]["cartao"],
        Value::Null
    );
    assert_eq!(
        stage(&out, "rf01_preparar_consulta")["headers"]["x-validation-error"],
        "cartao_invalido"
    );
    assert_eq!(stage(&out, "rf03_normalizar_saldo")["status_consulta"], "erro");
    assert_eq!(stage(&out, "rf08_conciliar_recarga")["status_recarga"], "erro");
    let out = run(&h, "1234567890", pix(5000.0)).await;
    assert_eq!(stage(&out, "rf06_preparar_recarga")["body"], json!({}));
    assert_eq!(
        stage(&out, "rf07_executar_recarga")["erro"]["codigo"],
        "valor_recarga_invalido"
    );
    assert_eq!(
        stage(&out, "rf08_conciliar_recarga")["observacoes"],
        json!(["valor_recarga_invalido", "recarga_nao_enviada"])
    );
    let out = run(
        &h,
        "1234567890",
        Some(json!({"valor": 50, "meio_pagamento": {"tipo": "cheque"}})),
    )
    .await;
    assert_eq!(
        stage(&out, "rf07_executar_recarga")["erro"]["codigo"],
        "meio_pagamento_invalido"
    );
    assert_eq!(
        requests(&h, "recarga"),
        0,
        "no invalid payload reached the recharge API"
    );
    assert_eq!(
        h.sim
            .ledger()
            .iter()
            .filter(|e| e.sistema == "saldo" && e.cartao.as_deref() == Some("12ab567890"))
            .count(),
        0
    );
}

#[tokio::test]
async fn unknown_input_fields_never_appear_in_any_stage() {
    let h = flow_harness(quick_simulator()).await;
    let out = run(&h, "1111111111", pix(100.0)).await;
    let text = serde_json::to_string(&out).expect("json");
    for secret in ["123.456.789-00", "Fulana", "fulana@example.com"] {
        assert!(!text.contains(secret), "{secret} leaked");
    }
    let sent = serde_json::to_string(&h.sim.ledger()).expect("json");
    assert!(!sent.contains("123.456.789-00") && !sent.contains("Fulana"));
}

#[tokio::test]
async fn same_input_same_hour_same_key_and_no_second_notice() {
    let h = flow_harness_with(two_low_cards(quick_simulator())).await;
    let a = run(&h, "1111111111", None).await;
    let b = run(&h, "1111111111", None).await;
    let key = |o: &FlowOutput| stage(o, "rf01_preparar_consulta")["headers"]["x-idempotency-key"].clone();
    assert_eq!(key(&a), key(&b));
    let c = run(&h, "1111111112", None).await;
    assert_ne!(key(&a), key(&c));
    assert_eq!(h.sim.deliveries(), 2, "1111111111 notified once, 1111111112 once");
}

#[tokio::test]
async fn a_rate_limited_notice_is_retried_then_reported() {
    let config = vt_simulators::systems::SimulatorConfig {
        notifications_per_second: 1,
        ..quick_simulator()
    };
    let h = flow_harness_with(two_low_cards(config)).await;
    let first = run(&h, "1111111111", None).await;
    assert_eq!(first.resultado["enviado"], true);
    let second = run(&h, "1111111112", None).await;
    let retried = h
        .sim
        .ledger()
        .iter()
        .filter(|e| e.sistema == "notificacao" && e.status == 429)
        .count();
    if second.resultado["enviado"] == false {
        assert_eq!(second.resultado["motivo"], "http_429");
        assert_eq!(retried, 3, "three attempts, all limited");
    } else {
        // The second fell into the next one-second window during a retry.
        assert!(retried >= 1);
    }
}

#[tokio::test]
async fn input_errors_are_refused_before_anything_runs() {
    let h = flow_harness(quick_simulator()).await;
    for bad in ["{", "[]", "\"texto\"", r#"{"politicas": {}}"#] {
        assert!(run_flow(&h.engine, bad).await.is_err(), "{bad}");
    }
    let long = format!(r#"{{"cartao": "1234567890", "x": "{}"}}"#, "a".repeat(6_000));
    let err = run_flow(&h.engine, &long).await.err().expect("too long");
    assert!(err.to_string().contains("5000"), "{err}");
    assert!(h.sim.ledger().is_empty());
}

#[tokio::test]
async fn the_client_waits_as_long_as_retry_after_asks_and_never_retries_a_4xx() {
    use std::collections::BTreeMap;
    use vt_connectors::systems::{SystemsConfig, VtSystems};
    use vt_domain::systems::Systems as _;
    let fake = crate::support::FakeServer::start(vec![
        (429, vec![("retry-after", "1")], json!({"erro": "limite"})),
        (
            200,
            vec![],
            json!({"cartao": "1234567890", "saldo": 50.0, "moeda": "BRL"}),
        ),
        (400, vec![], json!({"erro": "cartao_invalido"})),
    ])
    .await;
    let client = VtSystems::new(SystemsConfig {
        max_retry_wait_ms: 5_000,
        ..SystemsConfig::single(&fake.url)
    })
    .expect("client");
    let started = std::time::Instant::now();
    let ok = client
        .consultar_saldo("1234567890", &BTreeMap::new(), 2_000, 2, 10)
        .await;
    assert_eq!(ok.status, Some(200));
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(950),
        "Retry-After: 1 was honoured"
    );
    let refused = client
        .consultar_saldo("1234567890", &BTreeMap::new(), 2_000, 2, 10)
        .await;
    assert_eq!(refused.status, Some(400));
    assert_eq!(fake.received().len(), 3, "the 400 was not retried");
}

/// A value outside the policy (`-5`) is RF6's `valor_recarga_invalido`: the run fails, and nobody is
/// told of a "recarga de BRL -5,00" that never existed — no notice prepared, none sent.
#[tokio::test]
async fn a_value_outside_the_policy_notifies_nobody_of_a_recharge_that_never_existed() {
    let h = flow_harness(quick_simulator()).await;
    let out = run(&h, "1234567890", pix(-5.0)).await;
    assert_eq!(out.status, FlowStatus::Falhou);
    assert_eq!(
        stage(&out, "rf07_executar_recarga")["erro"]["codigo"],
        "valor_recarga_invalido"
    );
    let rf09 = stage(&out, "rf09_preparar_notificacao_recarga");
    assert_eq!(rf09["enviar_notificacao"], false, "{rf09}");
    assert_eq!(rf09["motivo"], "recarga_nao_enviada");
    assert!(!out.resultado.to_string().contains("-5,00"), "{}", out.resultado);
    assert_eq!(requests(&h, "recarga"), 0);
    assert_eq!(requests(&h, "notificacao"), 0, "nobody was notified");
}

/// What leaves the process masks cards, never ids: an idempotency key whose groups hold a run of
/// digits long enough to look like a card stays whole (it is what `vt-agent flows` shows), while
/// every card is masked.
#[test]
fn a_callers_output_masks_cards_and_leaves_keys_whole() {
    let key = "c6cc2358-960e-599c-8d12-345678902841";
    assert_ne!(
        vt_domain::vt::card::mask_cards_in(key),
        key,
        "a key free text masking would mangle"
    );
    let out = FlowOutput {
        execucao_id: "exec-1".into(),
        status: FlowStatus::Concluido,
        etapas: vec![vt_agent::Etapa {
            etapa: "rf06_preparar_recarga".into(),
            saida: json!({"headers": {"x-idempotency-key": key}, "body": {"cartao": "1234567890"}}),
        }],
        resultado: json!({"cartao": "1234567890", "idempotency_key": key, "mensagem": "cartão 1234567890"}),
    }
    .for_caller();
    assert_eq!(
        stage(&out, "rf06_preparar_recarga")["headers"]["x-idempotency-key"],
        key
    );
    assert_eq!(out.resultado["idempotency_key"], key);
    let text = serde_json::to_string(&out).expect("json");
    assert!(!text.contains("1234567890"), "cards are masked: {text}");
    assert!(text.contains("****7890"));
}
