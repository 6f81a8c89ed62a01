//! The chat harness: the real VT agent (router, tools, stages, store) against an in-process simulator,
//! built as the composition root builds it.

use super::*;

/// The real VT agent (router, tools, stages, store) against an in-process simulator.
pub(crate) struct ChatHarness {
    /// The engine's and the simulator's clock: tests move it instead of sleeping.
    pub clock: vt_engine::ManualClock,
    pub service: Arc<vt_agent::Services>,
    pub sim: vt_simulators::systems::Simulator,
    pub store: Arc<dyn vt_store::Store>,
    _running: vt_simulators::systems::RunningSimulator,
}

pub(crate) async fn chat_harness(
    llm: Option<Arc<ScriptedProvider>>,
    vt: vt_domain::tools::VtSettings,
) -> ChatHarness {
    let store: Arc<dyn vt_store::Store> = Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    );
    chat_harness_on(store, llm, vt).await
}

/// [`chat_harness`] on a given store (PostgreSQL tests).
pub(crate) async fn chat_harness_on(
    store: Arc<dyn vt_store::Store>,
    llm: Option<Arc<ScriptedProvider>>,
    vt: vt_domain::tools::VtSettings,
) -> ChatHarness {
    chat_harness_with(store, llm, vt, None).await
}

/// [`chat_harness_on`] with a simulator shared with another harness (two instances, one set of
/// external systems).
pub(crate) async fn chat_harness_with(
    store: Arc<dyn vt_store::Store>,
    llm: Option<Arc<ScriptedProvider>>,
    vt: vt_domain::tools::VtSettings,
    shared: Option<vt_simulators::systems::Simulator>,
) -> ChatHarness {
    chat_harness_handing_off(store, llm, vt, shared, Default::default()).await
}

/// [`chat_harness_with`] with `[handoff]` rules of its own.
pub(crate) async fn chat_harness_handing_off(
    store: Arc<dyn vt_store::Store>,
    llm: Option<Arc<ScriptedProvider>>,
    vt: vt_domain::tools::VtSettings,
    shared: Option<vt_simulators::systems::Simulator>,
    handoff: vt_agent::testkit::HandoffConfig,
) -> ChatHarness {
    chat_harness_built(store, llm, vt, shared, handoff, None).await
}

/// [`chat_harness`] whose flows tell WhatsApp recipients themselves (WhatsApp number `phone`), under
/// `notices`, on the harness's clock.
pub(crate) async fn chat_harness_notifying(
    store: Arc<dyn vt_store::Store>,
    phone: &str,
    notices: vt_agent::testkit::NoticesConfig,
) -> ChatHarness {
    chat_harness_built(
        store,
        None,
        vt_domain::tools::VtSettings::default(),
        None,
        Default::default(),
        Some((phone.to_owned(), notices)),
    )
    .await
}

async fn chat_harness_built(
    store: Arc<dyn vt_store::Store>,
    llm: Option<Arc<ScriptedProvider>>,
    vt: vt_domain::tools::VtSettings,
    shared: Option<vt_simulators::systems::Simulator>,
    handoff: vt_agent::testkit::HandoffConfig,
    notices: Option<(String, vt_agent::testkit::NoticesConfig)>,
) -> ChatHarness {
    let parts = Parts {
        store,
        llm,
        vt,
        shared,
        handoff,
        notices,
        recarga_url: None,
        transcricao: None,
        fotos: Default::default(),
        orcamentos: Vec::new(),
        conversations: None,
        autoatendimento: Default::default(),
        review: None,
    };
    chat_harness_paying_or_not(parts, Pix::Off).await
}

/// [`chat_harness`] whose FAQ is read from `faq_dir` and whose review queue writes its tests (and
/// approved suggestions their proofs) in `review_dir`; approved entries go to `faq_dir`.
pub(crate) async fn chat_harness_reviewing(
    faq_dir: &std::path::Path,
    review_dir: &std::path::Path,
) -> ChatHarness {
    let parts = Parts {
        review: Some((faq_dir.to_path_buf(), review_dir.to_path_buf())),
        ..Parts::in_memory().await
    };
    chat_harness_paying_or_not(parts, Pix::Off).await
}

/// [`chat_harness`] checking the holder of a card not on record as `autoatendimento` says.
pub(crate) async fn chat_harness_checking_holders(
    autoatendimento: vt_domain::tools::Autoatendimento,
) -> ChatHarness {
    let parts = Parts {
        autoatendimento,
        ..Parts::in_memory().await
    };
    chat_harness_paying_or_not(parts, Pix::Off).await
}

/// [`chat_harness`] on `store`, its conversations kept through `conversations` (one that fails as
/// told).
pub(crate) async fn chat_harness_conversing(
    store: Arc<dyn vt_store::Store>,
    conversations: Arc<dyn vt_store::ConversationStore>,
) -> ChatHarness {
    let parts = Parts {
        store,
        conversations: Some(conversations),
        ..Parts::in_memory().await
    };
    chat_harness_paying_or_not(parts, Pix::Off).await
}

/// [`chat_harness_on`] hearing voice notes through `transcricao`.
pub(crate) async fn chat_harness_hearing(
    store: Arc<dyn vt_store::Store>,
    transcricao: vt_engine::llm::transcription::TranscricaoConfig,
) -> ChatHarness {
    let parts = Parts {
        store,
        transcricao: Some(transcricao),
        ..Parts::in_memory().await
    };
    chat_harness_paying_or_not(parts, Pix::Off).await
}

/// [`chat_harness`] on `store`, reading card photos as `fotos` says.
pub(crate) async fn chat_harness_reading(
    store: Arc<dyn vt_store::Store>,
    fotos: vt_agent::testkit::FotosConfig,
) -> ChatHarness {
    let parts = Parts {
        store,
        fotos,
        ..Parts::in_memory().await
    };
    chat_harness_paying_or_not(parts, Pix::Off).await
}

/// [`chat_harness`] with monthly budgets per tenant.
pub(crate) async fn chat_harness_budgeted(orcamentos: Vec<vt_agent::testkit::Orcamento>) -> ChatHarness {
    let parts = Parts {
        orcamentos,
        ..Parts::in_memory().await
    };
    chat_harness_paying_or_not(parts, Pix::Off).await
}

/// [`chat_harness`] whose recharges go to the recharge system at `recarga_url` (balances and notices
/// still to the simulator).
pub(crate) async fn chat_harness_against(recarga_url: &str, vt: vt_domain::tools::VtSettings) -> ChatHarness {
    let parts = Parts {
        vt,
        recarga_url: Some(recarga_url.to_owned()),
        ..Parts::in_memory().await
    };
    chat_harness_paying_or_not(parts, Pix::Off).await
}

/// How a harness takes Pix.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Pix {
    /// As before step 20: no provider, a Pix recharge goes to the recharge system.
    Off,
    /// `[pix]` pointed at the simulator.
    Provider,
    /// As `Provider`, on a WhatsApp account Meta enabled for payments (`whatsapp_order_details`).
    NativeOrders,
    /// Real systems, no provider: Pix refused.
    Refused,
    /// `[pix]` pointed at a provider whose codes carry a wrong CRC ([`tampering_provider`]).
    Tampering,
    /// As `Provider`, and `[cartao]` a hosted checkout at the simulator's Stripe API.
    ProviderAndCard,
    /// As `Provider`, with Pix Automático on (`[pix.automatico] ativo`).
    Automatic,
}

/// What a chat harness is built of.
struct Parts {
    store: Arc<dyn vt_store::Store>,
    llm: Option<Arc<ScriptedProvider>>,
    vt: vt_domain::tools::VtSettings,
    shared: Option<vt_simulators::systems::Simulator>,
    handoff: vt_agent::testkit::HandoffConfig,
    notices: Option<(String, vt_agent::testkit::NoticesConfig)>,
    /// A recharge system of the test's own instead of the simulator's.
    recarga_url: Option<String>,
    /// `[transcricao]`: voice notes heard.
    transcricao: Option<vt_engine::llm::transcription::TranscricaoConfig>,
    /// `[fotos]`: card photos read (by the machine's Tesseract, by default).
    fotos: vt_agent::testkit::FotosConfig,
    /// `[[orcamentos]]`: monthly budgets per tenant.
    orcamentos: Vec<vt_agent::testkit::Orcamento>,
    /// The service's conversations kept through a store of the test's own, the rest in `store`.
    conversations: Option<Arc<dyn vt_store::ConversationStore>>,
    /// `[autoatendimento]`: how a card not on record is checked before a block or a second copy.
    autoatendimento: vt_domain::tools::Autoatendimento,
    /// The FAQ's folder and the review queue's tests folder (`faq_dir`, `[revisao] pasta`).
    review: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

impl Parts {
    /// A harness on an in-memory store, with no model, the default tools' settings, a simulator of its
    /// own and no handoff rules.
    async fn in_memory() -> Self {
        Self {
            store: Arc::new(
                vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
                    .await
                    .expect("store"),
            ),
            llm: None,
            vt: vt_domain::tools::VtSettings::default(),
            shared: None,
            handoff: Default::default(),
            notices: None,
            recarga_url: None,
            transcricao: None,
            fotos: Default::default(),
            orcamentos: Vec::new(),
            conversations: None,
            autoatendimento: Default::default(),
            review: None,
        }
    }
}

/// What the agent said in conversation `conv`, in order (its replies and what it said later).
pub(crate) async fn said(h: &ChatHarness, conv: &str) -> Vec<String> {
    h.store
        .messages(conv)
        .await
        .expect("messages")
        .into_iter()
        .filter_map(|m| match m.message {
            vt_engine::llm::ChatMessage::Assistant {
                content: Some(text), ..
            } => Some(text),
            _ => None,
        })
        .collect()
}

/// A chat harness whose simulator is also the payment provider (`[pix]` pointed at it).
pub(crate) async fn chat_harness_paying() -> ChatHarness {
    chat_harness_pix(Pix::Provider).await
}

/// A provider on loopback that creates every charge with a BR Code whose CRC (field 63) is wrong: the
/// code a card holder must never see. Returns its base URL.
async fn tampering_provider() -> String {
    use axum::extract::Path;
    let create = |Path(txid): Path<String>, axum::Json(pedido): axum::Json<Value>| async move {
        let valor = pedido["valor"]["original"].as_str().unwrap_or("0.00").to_owned();
        let amount: rust_decimal::Decimal = valor.parse().expect("amount");
        let good = vt_domain::pix::dynamic(&format!("psp.example/qr/{txid}"), amount, "LOJA", "CIDADE");
        // The same code with its last CRC digit changed.
        let (body, crc) = good.split_at(good.len() - 1);
        let bad = format!("{body}{}", if crc == "0" { "1" } else { "0" });
        let cob = serde_json::json!({
            "txid": txid, "revisao": 0, "status": "ATIVA",
            "calendario": {"expiracao": 900}, "valor": {"original": valor},
            "chave": pedido["chave"], "pixCopiaECola": bad,
        });
        (StatusCode::CREATED, axum::Json(cob))
    };
    let app = Router::new().route("/pix/v2/cob/{txid}", axum::routing::put(create));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// `[cartao]` as an operator writes it for Stripe, pointed at the simulator at `url` (its Stripe API
/// under `/stripe/v1`), the secret key and the webhook's secret as the environment gives them.
pub(crate) fn card_config(url: &str) -> vt_connectors::cartao::CartaoConfig {
    vt_connectors::cartao::CartaoConfig {
        provedor: Some(vt_connectors::cartao::ProvedorCartao::Stripe),
        api_url: format!("{url}/stripe/v1"),
        retorno_url: "https://operadora.example.com.br/pago".into(),
        auth: vt_connectors::AuthConfig::Bearer {
            token: "sk_test_cartao_51H8".into(),
        },
        ..Default::default()
    }
    .with_secrets(None, None, Some(vt_simulators::systems::CARTAO_WEBHOOK_SECRET))
}

/// A chat harness whose simulator is the Pix provider and the card provider too.
pub(crate) async fn chat_harness_cards() -> ChatHarness {
    chat_harness_pix(Pix::ProviderAndCard).await
}

/// A chat harness whose simulator is the Pix provider with Pix Automático on, on `store`, with the
/// simulator `shared` when given (two instances, one provider).
pub(crate) async fn chat_harness_automatic(
    store: Arc<dyn vt_store::Store>,
    shared: Option<vt_simulators::systems::Simulator>,
) -> ChatHarness {
    let parts = Parts {
        store,
        shared,
        ..Parts::in_memory().await
    };
    chat_harness_paying_or_not(parts, Pix::Automatic).await
}

/// A chat harness taking Pix as `pix` says.
pub(crate) async fn chat_harness_pix(pix: Pix) -> ChatHarness {
    chat_harness_pix_handing_off(pix, Default::default()).await
}

/// [`chat_harness_pix`] with `[handoff]` rules of its own (a support board, say).
pub(crate) async fn chat_harness_pix_handing_off(
    pix: Pix,
    handoff: vt_agent::testkit::HandoffConfig,
) -> ChatHarness {
    let parts = Parts {
        handoff,
        ..Parts::in_memory().await
    };
    chat_harness_paying_or_not(parts, pix).await
}

async fn chat_harness_paying_or_not(parts: Parts, pix: Pix) -> ChatHarness {
    let Parts {
        store,
        llm,
        vt,
        shared,
        handoff,
        notices,
        recarga_url,
        transcricao,
        fotos,
        orcamentos,
        conversations,
        autoatendimento,
        review,
    } = parts;
    use vt_connectors::systems::{SystemsConfig, VtSystems};
    use vt_simulators::systems::Simulator;
    let clock = vt_engine::ManualClock::new(
        chrono::DateTime::parse_from_rfc3339("2026-11-22T12:00:00Z")
            .expect("t")
            .into(),
    );
    let sim_clock = clock.clone();
    let sim = shared.unwrap_or_else(|| {
        Simulator::new(vt_simulators::systems::SimulatorConfig {
            now: Some(Arc::new(move || sim_clock.now())),
            ..quick_simulator()
        })
    });
    let running = sim.clone().spawn(0).await.expect("simulator");
    let mut systems = SystemsConfig {
        timeout_cap_ms: Some(300),
        max_retry_wait_ms: 20,
        ..SystemsConfig::single(&running.url)
    };
    if let Some(url) = recarga_url {
        systems.recarga_url = url;
    }
    let mut ext = vt_contract::context::Extensions::default()
        .with(SystemsPort::new(VtSystems::new(systems).expect("client")))
        .with(vt.clone())
        .with(autoatendimento);
    if let Some((phone, config)) = notices {
        let now = clock.clone();
        let port = vt_agent::testkit::WhatsAppNotices::new(
            &vt_store::Stores::of(&store),
            &phone,
            config,
            vt_domain::vt::timezone::Timezone::sao_paulo(),
        )
        .with_clock(Arc::new(move || now.now()));
        ext = ext.with(vt_domain::stages::channel_notices::ChannelNoticesPort(Arc::new(
            port,
        )));
    }
    let config = vt_agent::Config {
        engine: fast_config(),
        // Teams are `[[equipes]]` in a configuration file; a harness names them with its handoff.
        equipes: handoff.equipes.clone(),
        handoff,
        vt,
        pix: match pix {
            Pix::Provider | Pix::NativeOrders | Pix::ProviderAndCard | Pix::Automatic => {
                Some(format!("{}/pix/v2", running.url))
            }
            Pix::Tampering => Some(format!("{}/pix/v2", tampering_provider().await)),
            Pix::Off | Pix::Refused => None,
        }
        .map(|api_url| vt_connectors::pix::PixConfig {
            api_url,
            chave: "recargas@operadora.example.com.br".into(),
            whatsapp_order_details: pix == Pix::NativeOrders,
            automatico: vt_domain::pix::automatico::AutomaticoConfig {
                ativo: pix == Pix::Automatic,
                ..Default::default()
            },
            ..Default::default()
        }),
        cartao: if pix == Pix::ProviderAndCard {
            card_config(&running.url)
        } else {
            Default::default()
        },
        transcricao,
        fotos,
        orcamentos,
        faq_dir: review.as_ref().map(|(faq, _)| faq.clone()),
        revisao: vt_agent::testkit::RevisaoConfig {
            pasta: review.map(|(_, dir)| dir),
            ..Default::default()
        },
        ..Default::default()
    };
    // As the composition root: a complaint reads the conversation's charges.
    ext = ext.with(vt_agent::testkit::payments_port(store.clone()));
    if let Some(setup) = vt_agent::testkit::card_setup(&config).expect("card provider") {
        ext = ext.with(vt_agent::testkit::card_port(store.clone(), setup));
    }
    if pix == Pix::Refused {
        ext = ext.with(vt_domain::tools::MeiosIndisponiveis {
            pix: true,
            cartao_credito: true,
        });
    }
    if let Some(pix) = &config.pix {
        let setup = vt_agent::testkit::PixSetup {
            psp: vt_connectors::pix::Psp::new(pix).expect("provider"),
            config: pix.clone(),
        };
        if pix.automatico.ativo {
            ext = ext.with(vt_agent::testkit::automatic_port(store.clone(), setup.clone()));
        }
        ext = ext.with(vt_agent::testkit::pix_port(
            store.clone(),
            setup,
            vt_agent::testkit::channel_book(),
        ));
    }
    let llm: Option<Arc<dyn LlmProvider>> = llm.map(|l| l as Arc<dyn LlmProvider>);
    let engine = vt_agent::share(
        vt_agent::build_engine(&config, llm.clone(), ext)
            .expect("engine")
            .with_clock(Clock::Manual(clock.clone())),
        Some(store.clone()),
        config.recargas.clone(),
    );
    let service = Arc::new(
        vt_agent::build_service(
            &config,
            engine,
            vt_store::Stores {
                conversations: conversations.unwrap_or_else(|| store.clone()),
                ..vt_store::Stores::of(&store)
            },
        )
        .await
        .expect("service"),
    );
    ChatHarness {
        clock,
        service,
        sim,
        store,
        _running: running,
    }
}

impl ChatHarness {
    /// Sends `text` as the user of conversation `conv` and returns the reply.
    pub(crate) async fn say(&self, conv: &str, text: &str) -> vt_agent::Handled {
        let msg = vt_agent::Inbound {
            agent_id: "vt".into(),
            conversation_id: Some(conv.into()),
            user: user(),
            text: text.into(),
            ..Default::default()
        };
        self.service.messages().handle(msg).await.expect("handled")
    }

    pub(crate) fn recharges(&self) -> usize {
        self.sim
            .ledger()
            .iter()
            .filter(|e| e.efeito == Some(vt_simulators::systems::Efeito::RecargaEfetivada))
            .count()
    }
}
