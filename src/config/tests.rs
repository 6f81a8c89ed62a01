//! The configuration's rules, each checked when loaded.

use super::*;
use crate::channels::mattermost::MattermostConfig;
use crate::channels::whatsapp::WhatsAppConfig;
use vt_engine::RetryPolicy;

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn no_configuration_means_no_model() {
    let c = Config::from_sources(None, "", &HashMap::new()).expect("defaults");
    assert!(!c.llm.is_configured());
    assert!(c.llm.provider().expect("ok").is_none());
    assert_eq!(c.engine.max_model_calls, 10);
    assert_eq!(c.data_dir, PathBuf::from("data"));
}

#[test]
fn retries_that_moved_out_of_engine_are_still_read_there() {
    let old = "[engine]\nmax_model_calls = 4\npersist_retry = { attempts = 2, backoff_ms = 10 }\n\
               channel_retry = { attempts = 7, backoff_ms = 20 }\n";
    let c = Config::from_sources(Some(old), "f", &HashMap::new()).expect("valid");
    assert_eq!(c.service.persist_retry, RetryPolicy::new(2, 10));
    assert_eq!(c.outbox.retry, RetryPolicy::new(7, 20));
    assert_eq!(c.engine.max_model_calls, 4);
    // The new place wins when both are set; a bad key in it is still named.
    let both = "[engine]\npersist_retry = { attempts = 2, backoff_ms = 10 }\n\
                [service]\npersist_retry = { attempts = 4, backoff_ms = 1 }\n";
    let c = Config::from_sources(Some(both), "f", &HashMap::new()).expect("valid");
    assert_eq!(c.service.persist_retry, RetryPolicy::new(4, 1));
    let bad = "[engine]\npersist_retry = { attempts = 2, backoff_ms = 10 }\n[outbox]\nretri = 3\n";
    let err = Config::from_sources(Some(bad), "f", &HashMap::new()).expect_err("unknown key");
    assert!(err.to_string().contains("retri"), "{err}");
}

#[test]
fn support_teams_are_checked_when_loaded_naming_the_field() {
    let ok = "[[equipes]]\nnome = \"financeiro\"\nmembros = [\"ana\"]\natribuicao = \"rodizio\"\n\
              horario = \"seg-sex 08:00-12:00,13:00-18:00\"\nferiados = [\"2026-01-25\"]\n\
              motivos = [\"pagamento_nao_creditado\"]\n[equipes.sla]\nprimeira_resposta = 30\n";
    let c = Config::from_sources(Some(ok), "f", &HashMap::new()).expect("valid");
    assert_eq!(c.equipes[0].sla.primeira_resposta, Some(30));
    for (bad, field) in [
        (
            "[[equipes]]\nnome = \"a\"\natribuicao = \"rodizio\"\n",
            "equipes[0].membros",
        ),
        ("[[equipes]]\nnome = \"a\"\nmotivos = [\"qualquer\"]\n", "motivos"),
        ("[[equipes]]\nnome = \"a\"\nhorario = \"sempre\"\n", "horario"),
        ("[[equipes]]\nnome = \"a\"\nferiados = [\"25/01\"]\n", "feriados"),
    ] {
        let err = Config::from_sources(Some(bad), "f", &HashMap::new()).expect_err(bad);
        assert!(err.to_string().contains(field), "{field}: {err}");
    }
}

#[test]
fn handoff_hours_are_checked_when_loaded() {
    let ok = "[handoff]\nclaim_timeout_minutes = 5\nhours = \"seg-sex 08:00-18:00\"\n";
    let c = Config::from_sources(Some(ok), "f", &HashMap::new()).expect("valid");
    assert_eq!(c.handoff.claim_timeout_minutes, 5);
    assert!(c.handoff.hours.is_some());
    let bad = "[handoff]\nhours = \"sempre\"\n";
    let err = Config::from_sources(Some(bad), "f", &HashMap::new()).expect_err("bad hours");
    assert!(err.to_string().contains("handoff.hours"), "{err}");
    let zero = "[handoff]\nclaim_timeout_minutes = 0\n";
    let err = Config::from_sources(Some(zero), "f", &HashMap::new()).expect_err("zero");
    assert!(err.to_string().contains("handoff.claim_timeout_minutes"), "{err}");
}

#[test]
fn the_pix_provider_is_checked_when_loaded_and_its_secret_comes_from_the_environment() {
    let pix = "[pix]\napi_url = \"https://pix.banco.example.com/api/v2\"\nchave = \"recargas@operadora.example.com.br\"\n[pix.auth]\nkind = \"oauth2\"\ntoken_url = \"https://pix.banco.example.com/oauth/token\"\nclient_id = \"vt-agent\"\n[pix.tls]\nclient_cert = \"certs/vt.pem\"\nclient_key = \"certs/vt.key\"\n";
    let err = Config::from_sources(Some(pix), "f", &HashMap::new()).expect_err("no secret");
    assert!(err.to_string().contains("pix.auth.client_secret"), "{err}");
    assert!(err.to_string().contains("VT_PIX_CLIENT_SECRET"), "{err}");
    let env: HashMap<String, String> =
        [("VT_PIX_CLIENT_SECRET".to_owned(), "segredo-pix-456".to_owned())].into();
    let c = Config::from_sources(Some(pix), "f", &env).expect("the secret from the environment");
    let loaded = c.pix.expect("pix");
    assert_eq!(
        (loaded.expiracao_minutos, loaded.novos_codigos_max),
        (15, 3),
        "the defaults"
    );
    assert!(
        !format!("{loaded:?}").contains("segredo-pix-456"),
        "Debug hides it"
    );
    let plain = pix.replace("https://pix.banco", "http://pix.banco");
    let err = Config::from_sources(Some(&plain), "f", &env).expect_err("http provider");
    assert!(err.to_string().contains("pix.api_url"), "{err}");
    let zero = pix.replace("[pix.auth]", "expiracao_minutos = 0\n[pix.auth]");
    let err = Config::from_sources(Some(&zero), "f", &env).expect_err("zero minutes");
    assert!(err.to_string().contains("pix.expiracao_minutos"), "{err}");
    let unknown = pix.replace("[pix.auth]", "chave_pix = \"x\"\n[pix.auth]");
    let err = Config::from_sources(Some(&unknown), "f", &env).expect_err("unknown field");
    assert!(err.to_string().contains("chave_pix"), "{err}");
}

#[test]
fn the_systems_auth_is_checked_when_loaded_and_its_secrets_come_from_the_environment() {
    use vt_connectors::AuthConfig;
    let oauth2 = "[systems]\nsaldo_url = \"https://vt.example.com\"\nrecarga_url = \"https://pag.example.com\"\nnotificacao_url = \"https://msg.example.com\"\n[systems.auth]\nkind = \"oauth2\"\ntoken_url = \"https://auth.example.com/oauth/token\"\nclient_id = \"vt-agent\"\n";
    let err = Config::from_sources(Some(oauth2), "f", &HashMap::new()).expect_err("no secret");
    assert!(err.to_string().contains("systems.auth.client_secret"), "{err}");
    let env: HashMap<String, String> = [(
        "VT_SYSTEMS_CLIENT_SECRET".to_owned(),
        "segredo-do-cliente-123".to_owned(),
    )]
    .into();
    let c = Config::from_sources(Some(oauth2), "f", &env).expect("the secret from the environment");
    let systems = c.systems.expect("systems");
    assert!(
        matches!(&systems.auth, AuthConfig::Oauth2 { client_secret, .. } if client_secret == "segredo-do-cliente-123")
    );
    assert!(
        !format!("{systems:?}").contains("segredo-do-cliente-123"),
        "Debug hides it"
    );
    let plain = oauth2.replace("https://auth.example.com", "http://auth.example.com");
    let err = Config::from_sources(Some(&plain), "f", &env).expect_err("http token endpoint");
    assert!(err.to_string().contains("systems.auth.token_url"), "{err}");
    let loopback = oauth2.replace("https://auth.example.com", "http://127.0.0.1:9");
    assert!(
        Config::from_sources(Some(&loopback), "f", &env).is_ok(),
        "loopback may be http"
    );
    let own = "[systems]\nsaldo_url = \"https://vt.example.com\"\n[systems.recarga.auth]\nkind = \"header\"\nheader = \"x-api-key\"\n";
    let err = Config::from_sources(Some(own), "f", &HashMap::new()).expect_err("no token");
    assert!(err.to_string().contains("systems.recarga.auth.token"), "{err}");
    let unknown = "[systems.auth]\nkind = \"kerberos\"\n";
    let err = Config::from_sources(Some(unknown), "f", &HashMap::new()).expect_err("unknown kind");
    assert!(!err.to_string().contains("kerberos"), "{err}");
}

#[test]
fn the_examples_commented_price_table_loads_when_uncommented() {
    let text = include_str!("../../examples/vt-agent.toml");
    let block: String = text
        .lines()
        .skip_while(|l| !l.starts_with("# [custos]"))
        .take_while(|l| !l.is_empty())
        .filter(|l| !l.starts_with("# Public") && !l.starts_with("# their"))
        .map(|l| format!("{}\n", l.trim_start_matches("# ")))
        .collect();
    let c = Config::from_sources(Some(&block), "f", &HashMap::new()).expect("it loads");
    assert_eq!(c.custos.moeda, "USD");
    assert!(c.custos.modelos.contains_key("gpt-5-mini") && c.custos.modelos.contains_key("whisper-1"));
    assert!(c.custos.message_brl("UTILITY").is_some());
    let bad = "[custos]\ncambio_brl = 0\n";
    let err = Config::from_sources(Some(bad), "f", &HashMap::new()).expect_err("a zero rate");
    assert!(err.to_string().contains("custos.cambio_brl"), "{err}");
}

#[test]
fn the_example_file_loads_and_says_the_defaults() {
    let text = include_str!("../../examples/vt-agent.toml");
    let c = Config::from_sources(Some(text), "examples/vt-agent.toml", &HashMap::new()).expect("it loads");
    let d = Config::default();
    assert_eq!(c.data_dir, d.data_dir);
    assert_eq!(c.llm.max_tokens, d.llm.max_tokens);
    assert_eq!(c.engine.max_model_calls, d.engine.max_model_calls);
    assert_eq!(c.engine.turn_timeout_ms, d.engine.turn_timeout_ms);
    assert_eq!(c.outbox, d.outbox);
    assert_eq!(c.handoff, d.handoff);
    assert_eq!(c.notificacoes, d.notificacoes);
    assert_eq!(c.http.addr, d.http.addr);
    assert_eq!(c.http.rate_per_minute, d.http.rate_per_minute);
    assert_eq!(
        c.channels.get::<WhatsAppConfig>(),
        d.channels.get::<WhatsAppConfig>()
    );
    assert_eq!(c.vt.politicas, d.vt.politicas);
    assert_eq!(c.retencao.dias, d.retencao.dias);
    // The commented [pix] and [cartao] sections, uncommented, load; [pix] says its defaults.
    let pix: String = text[text.find("# [pix]").expect("[pix]")..text.find("[simulator]").expect("after")]
        .lines()
        .map(|l| l.trim_start_matches('#').trim_start())
        .filter(|l| !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let env: HashMap<String, String> = ["VT_PIX_CLIENT_SECRET", "VT_CARTAO_WEBHOOK_SECRET"]
        .iter()
        .map(|k| ((*k).to_owned(), "s".to_owned()))
        .collect();
    let pix = Config::from_sources(Some(&pix), "pix", &env)
        .expect("[pix] loads")
        .pix
        .expect("pix");
    let defaults = vt_connectors::pix::PixConfig::default();
    assert_eq!(
        (
            pix.expiracao_minutos,
            pix.novos_codigos_max,
            pix.whatsapp_order_details,
            pix.timeout_ms,
            pix.varredura_segundos,
            pix.retomar_credito_segundos
        ),
        (
            defaults.expiracao_minutos,
            defaults.novos_codigos_max,
            defaults.whatsapp_order_details,
            defaults.timeout_ms,
            defaults.varredura_segundos,
            defaults.retomar_credito_segundos
        )
    );
}

#[test]
fn automatic_recharges_are_checked_when_loaded_and_alone_serve_the_simulator() {
    let alone = "[pix.automatico]\nativo = true\n";
    let c = Config::from_sources(Some(alone), "f", &HashMap::new()).expect("valid");
    let pix = c.pix.expect("the section");
    assert!(
        pix.automatico.ativo && pix.simulated(),
        "no provider: the embedded simulator's"
    );
    for (bad, field) in [
        ("antecedencia_dias = 1", "pix.automatico.antecedencia_dias"),
        ("antecedencia_dias = 11", "pix.automatico.antecedencia_dias"),
        ("periodicidades = []", "pix.automatico.periodicidades"),
        ("valor_padrao = 500.00", "pix.automatico.valor_padrao"),
        ("valor_maximo = -1", "pix.automatico.valor_maximo"),
    ] {
        let text = format!("{alone}{bad}\n");
        let err = Config::from_sources(Some(&text), "f", &HashMap::new()).expect_err(bad);
        assert!(err.to_string().contains(field), "{bad}: {err}");
    }
    let unknown = format!("{alone}periodicidade = \"MENSAL\"\n");
    let err = Config::from_sources(Some(&unknown), "f", &HashMap::new()).expect_err("unknown key");
    assert!(err.to_string().contains("periodicidade"), "{err}");
}

#[test]
fn notices_restraint_is_checked_when_loaded() {
    let ok = "[notificacoes]\nintervalo_minimo_horas = 12\nsilencio = \"22:00-07:00\"\n";
    let c = Config::from_sources(Some(ok), "f", &HashMap::new()).expect("valid");
    assert_eq!(c.notificacoes.intervalo_minimo_horas, 12);
    let bad = "[notificacoes]\nsilencio = \"de noite\"\n";
    let err = Config::from_sources(Some(bad), "f", &HashMap::new()).expect_err("bad quiet hours");
    assert!(err.to_string().contains("notificacoes.silencio"), "{err}");
    assert!(!err.to_string().contains("de noite"), "never the value: {err}");
}

#[test]
fn environment_overrides_the_file() {
    let toml = "[llm]\nprovider = \"openai\"\nmodel = \"from-file\"\nmax_tokens = 200\n[engine]\nmax_model_calls = 4\n";
    let c = Config::from_sources(
        Some(toml),
        "f",
        &env(&[("VT_LLM_MODEL", "from-env"), ("VT_LLM_PROVIDER", "anthropic")]),
    )
    .expect("valid");
    assert_eq!(c.llm.model.as_deref(), Some("from-env"));
    assert_eq!(c.llm.provider, Some(ProviderKind::Anthropic));
    assert_eq!(c.llm.max_tokens, 200);
    assert_eq!(c.engine.max_model_calls, 4);
    assert!(c.llm.provider().expect("ok").is_some());
}

#[test]
fn a_channels_section_takes_its_own_variables_and_an_empty_one_changes_nothing() {
    let toml = "[whatsapp]\nphone_number_id = \"do-arquivo\"\n[mattermost]\nurl = \"https://mm.example\"\n";
    let c = Config::from_sources(
        Some(toml),
        "f",
        &env(&[
            ("VT_WHATSAPP_ACCESS_TOKEN", "EAAtoken"),
            ("VT_WHATSAPP_APP_SECRET", "segredo"),
            ("VT_WHATSAPP_VERIFY_TOKEN", "verifica"),
            ("VT_WHATSAPP_PHONE_NUMBER_ID", ""),
            ("VT_WHATSAPP_API_VERSION", "v99.0"),
            ("VT_MATTERMOST_URL", "https://mm.example.com.br"),
        ]),
    )
    .expect("valid");
    let whatsapp = c.channels.get::<WhatsAppConfig>().expect("plugged");
    assert_eq!(whatsapp.access_token.as_deref(), Some("EAAtoken"));
    assert_eq!(whatsapp.phone_number_id.as_deref(), Some("do-arquivo"));
    assert_eq!(whatsapp.api_version, "v99.0");
    let mattermost = c.channels.get::<MattermostConfig>().expect("plugged");
    assert_eq!(mattermost.url.as_deref(), Some("https://mm.example.com.br"));
}

#[test]
fn bad_values_are_named_never_echoed() {
    let err = Config::from_sources(None, "", &env(&[("VT_LLM_MAX_TOKENS", "muitos")])).expect_err("invalid");
    assert!(
        err.to_string().contains("VT_LLM_MAX_TOKENS") && !err.to_string().contains("muitos"),
        "{err}"
    );
    let err =
        Config::from_sources(Some("[llm]\nmodelo = 1\n"), "x.toml", &HashMap::new()).expect_err("unknown");
    assert!(err.to_string().contains("x.toml"), "{err}");
}

#[test]
fn the_console_secret_comes_from_the_environment_and_is_checked() {
    let c = Config::from_sources(None, "", &env(&[("VT_CONSOLE_SECRET", &"s".repeat(40))])).expect("valid");
    assert_eq!(c.console.secret.as_deref().map(str::len), Some(40));
    let err = Config::from_sources(None, "", &env(&[("VT_CONSOLE_SECRET", "curtinho")])).expect_err("short");
    let shown = err.to_string();
    assert!(
        shown.contains("console.secret") && !shown.contains("curtinho"),
        "{shown}"
    );
    let err = Config::from_sources(Some("[console]\nsession_minutes = 0\n"), "", &HashMap::new())
        .expect_err("zero");
    assert!(err.to_string().contains("console.session_minutes"), "{err}");
}

#[test]
fn a_toml_error_never_prints_the_line_it_is_on() {
    let text = "[llm]\napi_key = \"sk-live-abcdefghijklmnop\"\nmax_tokens = \"sk-live-abcdefghijklmnop\"\n";
    let err = Config::from_sources(Some(text), "vt.toml", &HashMap::new()).expect_err("type");
    let shown = err.to_string();
    assert!(shown.contains("vt.toml") && shown.contains("linha 3"), "{shown}");
    assert!(!shown.contains("sk-live"), "{shown}");
    let text = "[llm]\napi_key = \"sk-live-abcdefghijklmnop\nmodel = 1\n";
    let err = Config::from_sources(Some(text), "vt.toml", &HashMap::new()).expect_err("syntax");
    assert!(!err.to_string().contains("sk-live"), "{err}");
}

#[test]
fn values_are_checked_when_loaded() {
    for (toml, field) in [
        ("[vt]\nconfirmation_ttl_secs = -1\n", "vt.confirmation_ttl_secs"),
        ("[vt]\nconfirmation_ttl_secs = 0\n", "vt.confirmation_ttl_secs"),
        ("[vt.politicas]\nvalor_min = -10.0\n", "vt.politicas.valor_min"),
        (
            "[vt.politicas]\nvalor_min = 10.0\nvalor_max = -10.0\n",
            "vt.politicas.valor_max",
        ),
        (
            "[vt.politicas]\nmoeda_padrao = \"XXZ\"\n",
            "vt.politicas.moeda_padrao",
        ),
        ("[llm]\ntemperature = 9.0\n", "llm.temperature"),
        ("[engine]\nmax_model_calls = 0\n", "engine.max_model_calls"),
        ("[engine]\nturn_timeout_ms = 0\n", "engine.turn_timeout_ms"),
        ("[retencao]\ndias = 0\n", "retencao.dias"),
        ("[outbox]\nenvios_simultaneos = 0\n", "outbox.envios_simultaneos"),
        (
            "[whatsapp]\nphone_number_id = \"1\"\naccess_token = \"t\"\napp_secret = \"s\"\nverify_token = \"v\"\n\
             mensagens_por_segundo = 0\n",
            "whatsapp.mensagens_por_segundo",
        ),
        (
            "[whatsapp]\nphone_number_id = \"1\"\naccess_token = \"t\"\napp_secret = \"s\"\nverify_token = \"v\"\n\
             pessoa_rajada = 46\n",
            "whatsapp.pessoa_rajada",
        ),
        (
            "[storage]\nencryption_key = \"curta-demais\"\n",
            "storage.encryption_key",
        ),
    ] {
        let err = Config::from_sources(Some(toml), "f", &HashMap::new()).expect_err(toml);
        assert!(err.to_string().contains(field), "{toml} → {err}");
    }
    let ok = Config::from_sources(Some("[vt]\nconfirmation_ttl_secs = 90\n"), "f", &HashMap::new());
    assert!(ok.is_ok());
}

/// Every section refuses a key it does not know, `[vt.politicas]` too (a flow input drops them), and
/// an error is one language: pt-BR, the accepted names listed, never the value sent.
#[test]
fn an_unknown_key_or_value_is_refused_in_one_language_with_what_is_accepted() {
    for (toml, want) in [
        ("[vt.politicas]\nvalor_minimo = 5.0\n", "valor_minimo"),
        (
            "[vt.politicas.validacoes_cartao]\ntamanho = 5\n",
            "validacoes_cartao.tamanho",
        ),
        ("[vt]\ntenant = \"acme\"\n", "tenant"),
    ] {
        let err = Config::from_sources(Some(toml), "f", &HashMap::new())
            .expect_err(toml)
            .to_string();
        assert!(
            err.contains(&format!("campo desconhecido: {want}")),
            "{toml} → {err}"
        );
        assert!(err.contains("aceitos: "), "{toml} → {err}");
    }
    let err = Config::from_sources(Some("[llm]\nprovider = \"openia\"\n"), "f", &HashMap::new())
        .expect_err("unknown provider")
        .to_string();
    assert!(err.contains("openai ou anthropic"), "{err}");
    assert!(!err.contains("openia"), "{err}");
    for english in [" at line ", "expected", "one of", "unknown"] {
        assert!(!err.contains(english), "{err}");
    }
    // An unclosed table header ends on words, not a bare "expected".
    let err = Config::from_sources(Some("[vt\nx = 1\n"), "f", &HashMap::new())
        .expect_err("unclosed")
        .to_string();
    assert!(err.contains("linha 1"), "{err}");
    assert!(!err.contains("expected"), "{err}");
}

#[test]
fn a_bad_data_key_from_the_environment_is_named_never_echoed() {
    let err = Config::from_sources(None, "", &env(&[("VT_ENCRYPTION_KEY", "nao-e-base64-de-32")]))
        .expect_err("bad key");
    assert!(err.to_string().contains("storage.encryption_key"), "{err}");
    assert!(!err.to_string().contains("nao-e-base64-de-32"), "{err}");
    let c = Config::from_sources(
        None,
        "",
        &env(&[(
            "VT_ENCRYPTION_KEY",
            "dGVzdGVzLWRvLXZ0LWFnZW50LWNoYXZlLWRhZG9zISE=",
        )]),
    )
    .expect("valid");
    assert!(
        !format!("{c:?}").contains("dGVzdGVz"),
        "the key stays out of Debug"
    );
}

#[test]
fn api_key_never_shows_in_debug() {
    let c = Config::from_sources(None, "", &env(&[("VT_LLM_API_KEY", "sk-secret-123")])).expect("valid");
    assert!(!format!("{c:?}").contains("sk-secret-123"));
}

#[test]
fn the_support_boards_channel_is_mattermosts_and_the_old_key_still_reads() {
    let old =
        "[handoff]\nmattermost_channel_id = \"canal-suporte\"\n[mattermost]\nurl = \"https://mm.example\"\n";
    let env = env(&[
        ("VT_MATTERMOST_BOT_TOKEN", "token-do-bot"),
        ("VT_MATTERMOST_ACTIONS_SECRET", "segredo-dos-botoes-0123456789"),
        ("VT_MATTERMOST_PUBLIC_URL", "https://vt.example.com"),
    ]);
    let c = Config::from_sources(Some(old), "f", &env).expect("moved");
    let mattermost = c.channels.get::<MattermostConfig>().expect("plugged");
    assert_eq!(mattermost.canal_suporte.as_deref(), Some("canal-suporte"));
    // A board needs the bot that posts on it; the error names the new key.
    let err = Config::from_sources(
        Some("[mattermost]\ncanal_suporte = \"x\"\n"),
        "f",
        &HashMap::new(),
    )
    .expect_err("no bot")
    .to_string();
    assert!(err.contains("mattermost.canal_suporte"), "{err}");
}
