//! Wiring: builds the engine (actions, prompts, skills, model) from a [`Config`]. The one place that
//! knows every part; commands and tests start here.

pub(crate) mod serve;
pub(crate) mod tls_simulator;

use std::sync::Arc;

use anyhow::Context as _;
use vt_connectors::systems::VtSystems;
use vt_contract::ActionRegistry;
use vt_contract::context::Extensions;
use vt_simulators::systems::{Simulator, SimulatorConfig};

use crate::config::Config;
use crate::router::Router;
use crate::service::Services;
use vt_engine::llm::{LlmProvider, RedactedProvider};
use vt_engine::{Catalog, Engine, Prompts};

/// The conversational agent, whose messages go through the router.
pub const CHAT_AGENT: &str = "vt";

/// Every action the product ships.
pub fn registry() -> anyhow::Result<ActionRegistry> {
    let mut registry = ActionRegistry::new();
    vt_domain::register_all(&mut registry)?;
    Ok(registry)
}

/// Loads prompts and skills from the configured folders and checks them against the registry.
pub fn catalog(config: &Config, registry: &ActionRegistry) -> anyhow::Result<(Catalog, Prompts)> {
    let prompts_dir = config.prompts_dir();
    let prompts = Prompts::load(&prompts_dir)
        .with_context(|| format!("carregando os prompts de {}", prompts_dir.display()))?;
    let skills_dir = config.skills_dir();
    let catalog = Catalog::load(&skills_dir, &prompts, registry)
        .with_context(|| format!("carregando as skills de {}", skills_dir.display()))?;
    Ok((catalog, prompts))
}

/// The engine as the configuration describes it. `llm` overrides the configured model (tests pass a
/// scripted one).
pub fn engine(
    config: &Config,
    llm: Option<Arc<dyn LlmProvider>>,
    extensions: Extensions,
) -> anyhow::Result<Engine> {
    let registry = registry()?;
    let (catalog, prompts) = catalog(config, &registry)?;
    let llm = match llm {
        Some(l) => Some(l),
        None => config.llm.provider()?,
    };
    // The operator's FAQ, indexed once: the router answers from it, the model looks it up.
    let faq_dir = config.faq_dir();
    let faq = vt_domain::faq::Faq::load(&faq_dir)
        .with_context(|| format!("carregando a FAQ de {}", faq_dir.display()))?;
    let extensions = extensions.with(vt_domain::faq::SharedFaq(Arc::new(faq)));
    // The model sees masked cards only: the tools take the real number from what the user wrote.
    let llm = llm.map(|l| RedactedProvider::wrap(l, vt_domain::vt::card::mask_cards_in));
    Ok(Engine::new(catalog, prompts, registry, config.engine.clone())
        .with_no_model_reply(crate::router::HELP_TEXT)
        .with_llm(llm)
        .with_extensions(extensions))
}

/// The conversation service over `engine` and `stores` (the whole store, or one whose concerns a
/// test replaces): the intents file is synced into the store and the router reads them from there.
pub async fn service(
    config: &Config,
    engine: Arc<Engine>,
    stores: impl Into<vt_store::Stores>,
) -> anyhow::Result<Services> {
    let pix = pix_setup(config)?;
    let card = card_setup(config)?;
    service_paying(config, engine, stores.into(), (pix, card)).await
}

/// The card provider `[cartao]` describes, when it is a hosted checkout: one client, which the chat
/// tools' port and the service share.
pub fn card_setup(config: &Config) -> anyhow::Result<Option<crate::service::CardSetup>> {
    if !config.cartao.checkout() {
        return Ok(None);
    }
    let provider = vt_connectors::cartao::stripe::Stripe::new(&config.cartao)
        .context("o provedor de cartão ([cartao])")?;
    Ok(Some(crate::service::CardSetup {
        provider: Arc::new(provider),
        config: config.cartao.clone(),
    }))
}

/// The embedded simulator as the card provider, called in this process; its hosted pages served by
/// `serve` at `[http] addr`.
pub(crate) fn simulated_card(sim: &Simulator, config: &Config) -> crate::service::CardSetup {
    sim.cartao().served_at(&format!("http://{}", config.http.addr));
    let provider = vt_connectors::cartao::stripe::Stripe::in_process(sim.local(), sim.cartao().secret());
    crate::service::CardSetup {
        provider: Arc::new(provider),
        config: vt_connectors::cartao::CartaoConfig::default(),
    }
}

/// The payment provider `[pix]` describes, if any: one client, which the chat tools' port and the
/// service share (one token for the process).
pub(crate) fn pix_setup(config: &Config) -> anyhow::Result<Option<crate::service::PixSetup>> {
    config
        .pix
        .as_ref()
        .filter(|pix| !pix.simulated())
        .map(|pix| {
            let psp = vt_connectors::pix::Psp::new(pix).context("o provedor Pix ([pix])")?;
            Ok(crate::service::PixSetup {
                psp,
                config: pix.clone(),
            })
        })
        .transpose()
}

/// Every channel's rules, for the service ([`crate::service::ChannelRules`]): the ones without a
/// configuration section of their own, then each plugged channel's ([`crate::channels::PLUGS`]), in
/// the order the console lists them.
pub fn channel_book() -> crate::service::ChannelBook {
    channel_book_of(crate::channels::PLUGS.iter().copied())
}

/// [`channel_book`] with the channels `plugs`.
pub(crate) fn channel_book_of<'p>(
    plugs: impl Iterator<Item = &'p dyn crate::channels::Plug>,
) -> crate::service::ChannelBook {
    use crate::service::ChannelRules;
    let read_here = |label| ChannelRules {
        label,
        read_in_conversation: true,
        ..ChannelRules::default()
    };
    let sends_itself = |label| ChannelRules {
        label,
        ..ChannelRules::default()
    };
    let plugged: Vec<_> = plugs.map(|plug| (plug.name(), plug.rules())).collect();
    crate::service::ChannelBook::new(
        [
            (vt_engine::TERMINAL, read_here("Terminal")),
            (crate::http::webhooks::CHANNEL, read_here("HTTP")),
        ]
        .into_iter()
        .chain(plugged)
        .chain([
            (crate::http::console::CHANNEL, sends_itself("Console")),
            (crate::flow::API_CHANNEL, read_here("API (fluxo)")),
        ]),
    )
}

/// The operator's Pix key at the embedded simulator's provider.
pub(crate) const SIMULATED_PIX_KEY: &str = "recargas@simulador.vt";

/// The embedded simulator as the payment provider, called in this process.
pub(crate) fn simulated_pix(sim: &Simulator, config: &Config) -> crate::service::PixSetup {
    crate::service::PixSetup {
        psp: vt_connectors::pix::Psp::in_process(sim.local()),
        config: vt_connectors::pix::PixConfig {
            chave: SIMULATED_PIX_KEY.to_owned(),
            // `[pix.automatico]` written alone is the embedded simulator's.
            automatico: config.pix.clone().unwrap_or_default().automatico,
            ..vt_connectors::pix::PixConfig::default()
        },
    }
}

/// [`service`] taking Pix through `pix` and cards through `card` (the ones the engine's ports use).
async fn service_paying(
    config: &Config,
    engine: Arc<Engine>,
    stores: vt_store::Stores,
    payments: (
        Option<crate::service::PixSetup>,
        Option<crate::service::CardSetup>,
    ),
) -> anyhow::Result<Services> {
    let setup = services_config(config, &engine, stores.reports.as_ref(), payments).await?;
    Ok(Services::new(engine, stores, setup))
}

/// What the service is set up with, from `config`: the router (its intents synced into the store),
/// the ways of hearing media, the payment providers, the channels' rules and every setting.
pub(crate) async fn services_config(
    config: &Config,
    engine: &Engine,
    store: &dyn vt_store::ReportStore,
    (pix, card): (
        Option<crate::service::PixSetup>,
        Option<crate::service::CardSetup>,
    ),
) -> anyhow::Result<crate::service::ServicesConfig> {
    let defaults = crate::router::intents::load_file(&config.intents_file())?;
    let intents = crate::router::intents::sync(store, &defaults)
        .await
        .context("carregando as intenções")?;
    let faq = engine
        .extension::<vt_domain::faq::SharedFaq>()
        .map(|f| f.0.clone());
    let router = Router::new(CHAT_AGENT, intents, engine.llm().cloned()).with_faq(faq);
    let transcriber = config
        .transcricao
        .as_ref()
        .map(vt_engine::llm::Transcriber::new)
        .transpose()
        .context("a transcrição ([transcricao])")?;
    let photos = crate::ocr::Tesseract::find(&config.fotos).await.map(|t| {
        (
            Arc::new(t) as Arc<dyn crate::ocr::PhotoReader>,
            config.fotos.max_bytes(),
        )
    });
    Ok(crate::service::ServicesConfig {
        service: config.service,
        router: Some(router),
        handoff: crate::service::HandoffConfig {
            // The board is the channel's, and the channel serves `[vt] tenant_id`.
            board_tenant: config.vt.tenant_id.clone(),
            // A channel keeps the board (or an embedder's configuration says there is one).
            board: config.handoff.board || config.channels.plugs().any(|plug| plug.keeps_board(config)),
            equipes: config.equipes.clone(),
            ..config.handoff.clone()
        },
        recargas: config.recargas.clone(),
        costs: config.custos.clone(),
        budgets: config.orcamentos.clone(),
        resultados: config.resultados.clone(),
        pix,
        card,
        // A channel's rules (its window, native orders) are the channel's; the service asks them.
        channels: channel_book_of(config.channels.plugs()),
        // A tenant with a webhook gets its HTTP conversations' late messages pushed (`serve`'s worker).
        pushed: config
            .http
            .webhooks
            .iter()
            .map(|w| (crate::http::webhooks::CHANNEL.to_owned(), w.tenant.clone()))
            .collect(),
        transcriber,
        photos,
        quiet: config.notificacoes.silencio,
        review: crate::service::ReviewSettings {
            dir: config.review_dir(),
            faq_dir: config.faq_dir(),
            categories: config.revisao.categorias.clone(),
            suggestion_days: config.revisao.sugestoes_dias,
        },
    })
}

/// The configured store, opened for what this process does with it (`usage`), with
/// the data keys installed first (the configured ones, else the key file, made at the first run and
/// said so once) and the sealing prepared ([`vt_store::prepare_sealing`]).
pub(crate) async fn store(
    config: &Config,
    usage: vt_store::Usage,
) -> Result<Arc<dyn vt_store::Store>, vt_store::StoreError> {
    let (keys, source) = install_keys(config)?;
    let shared = config
        .database_url
        .as_deref()
        .is_some_and(|url| url.starts_with("postgres"));
    if shared && matches!(source, vt_store::seal::KeySource::File { .. }) {
        eprintln!(
            "vt-agent: aviso: PostgreSQL com a chave de dados do arquivo local; instâncias que compartilham o banco \
             precisam da mesma chave: configure [storage] encryption_key (VT_ENCRYPTION_KEY)"
        );
    }
    let store = vt_store::open(config.database_url.as_deref(), &config.data_dir, usage).await?;
    match keys.index() {
        // The key file keeps the index key once the store's values were sealed: nothing to ask.
        Some(index) => vt_store::use_index_key(index),
        None => {
            let index = vt_store::prepare_sealing(store.as_ref()).await?;
            if let vt_store::seal::KeySource::File { path, .. } = &source {
                vt_store::seal::write_key_file(path, &keys.with_index(index))?;
            }
        }
    }
    Ok(store)
}

/// Installs the data keys of `config` for this process; returns them and where they came from.
pub(crate) fn install_keys(
    config: &Config,
) -> Result<(vt_store::seal::KeyRing, vt_store::seal::KeySource), vt_store::StoreError> {
    use vt_store::seal::{KeyRing, KeySource};
    let (ring, source) = KeyRing::load(&config.storage, &config.data_dir)?;
    if let KeySource::File { path, created: true } = &source {
        eprintln!(
            "vt-agent: chave de dados criada em {}: ela abre os dados guardados cifrados; guarde-a fora dos backups do banco",
            path.display()
        );
    }
    vt_store::seal::install(ring.clone());
    Ok((ring, source))
}

/// The embedded simulator's book, in the data directory.
pub(crate) const SIMULATOR_BOOK: &str = vt_simulators::systems::book::FILE;

/// The simulator with the magic cards, or with a fixture file applied to them.
pub(crate) fn simulator(settings: &crate::config::SimulatorSettings) -> anyhow::Result<Simulator> {
    let mut config = SimulatorConfig {
        pix_pagar_apos: settings.pix_pagar_apos(),
        boleto_pagar_apos: settings.boleto_pagar_apos(),
        ..SimulatorConfig::default()
    };
    if let Some(n) = settings.notifications_per_second {
        config.notifications_per_second = n;
    }
    Ok(match &settings.fixture {
        Some(path) => Simulator::with_fixture(config, path)?,
        None => Simulator::new(config),
    })
}

/// The client of the external systems `config` names, or of the embedded simulator (returned too)
/// when it names none.
pub(crate) fn systems(config: &Config) -> anyhow::Result<(VtSystems, Option<Simulator>)> {
    Ok(match &config.systems {
        Some(s) => (
            VtSystems::new(s.clone()).context("montando o cliente dos sistemas externos")?,
            None,
        ),
        None => {
            // The simulated world outlives the process: the next command on this data directory
            // sees the balances this one credited.
            let book = config.data_dir.join(SIMULATOR_BOOK);
            let sim = simulator(&config.simulator)?.with_book(&book);
            (VtSystems::in_process(sim.local()), Some(sim))
        }
    })
}

/// A running product: the conversation service (engine + store) and, when no external systems are
/// configured, the embedded simulator it talks to in this process.
pub struct App {
    pub service: Services,
    pub simulator: Option<Simulator>,
    /// The systems' client the engine's stages call (through their port): `serve` checks it at start.
    pub systems: VtSystems,
}

impl App {
    /// Starts what `config` describes; `llm` overrides the configured model; `usage` is what the
    /// process will do with the store.
    pub async fn start(
        config: &Config,
        llm: Option<Arc<dyn LlmProvider>>,
        usage: vt_store::Usage,
    ) -> anyhow::Result<Self> {
        let (systems, simulator) = systems(config)?;
        let store = store(config, usage).await.context("abrindo o banco de dados")?;
        let mut extensions = Extensions::default()
            .with(vt_domain::systems::SystemsPort::new(systems.clone()))
            .with(config.vt.clone())
            .with(config.autoatendimento.clone());
        // A channel that tells a flow's recipients itself (WhatsApp) does it for the engine's stages.
        let stores = vt_store::Stores::of(&store);
        for plug in config.channels.plugs() {
            if let Some(notices) = plug.notices(config, &stores) {
                let port = vt_domain::stages::channel_notices::ChannelNoticesPort(notices);
                extensions = extensions.with(port);
            }
        }
        // A confirmed Pix recharge is charged at the provider, not sent unpaid; with real systems and
        // no provider for a means (Pix, a card), a recharge paid by it is not taken at all.
        if config.systems.is_some() {
            extensions = extensions.with(vt_domain::tools::MeiosIndisponiveis {
                pix: config.pix.is_none(),
                // Taken when a checkout takes it, or the recharge system charges a card itself.
                cartao_credito: config.cartao.provedor.is_none(),
            });
        }
        // A complaint about a payment reads the conversation's charges, whatever provider took them.
        extensions = extensions.with(crate::service::complaints::payments_port(store.clone()));
        let pix = match (pix_setup(config)?, &simulator) {
            (Some(setup), _) => Some(setup),
            // With no provider configured, the embedded simulator is the provider too.
            (None, Some(sim)) => Some(simulated_pix(sim, config)),
            (None, None) => None,
        };
        if let Some(setup) = &pix {
            extensions = extensions.with(crate::service::pix_port(
                store.clone(),
                setup.clone(),
                channel_book_of(config.channels.plugs()),
            ));
            // Recharges that happen by themselves, where the operator turned Pix Automático on.
            if setup.config.automatico.ativo {
                extensions = extensions.with(crate::service::automatic_port(store.clone(), setup.clone()));
            }
        }
        // A confirmed card recharge gets a link to the provider's checkout, never sent unpaid; with
        // no `[cartao]`, the embedded simulator is the card provider too.
        let card = match (card_setup(config)?, &simulator) {
            (Some(setup), _) => Some(setup),
            (None, Some(sim)) if config.cartao.provedor.is_none() => Some(simulated_card(sim, config)),
            _ => None,
        };
        if let Some(setup) = &card {
            extensions = extensions.with(crate::service::card_port(store.clone(), setup.clone()));
        }
        let engine = crate::flow::share(
            engine(config, llm, extensions)?,
            Some(store.clone()),
            config.recargas.clone(),
        );
        Ok(Self {
            service: service_paying(config, engine, stores, (pix, card)).await?,
            simulator,
            systems,
        })
    }

    pub fn engine(&self) -> &Engine {
        self.service.engine()
    }

    /// Ends a one-shot command's use of the app without closing anything: the process is about to
    /// exit. Closing SQLite's last connection starts a WAL checkpoint on its worker thread, which the
    /// exit then cuts short (safe, and wasted: `run-flow` interleaved, 15.0 → 13.3 ms median); left
    /// open, the next process recovers the WAL instead, which `wal_autocheckpoint` keeps short.
    /// Everything is committed by then: each write was awaited.
    pub fn leave(self) {
        std::mem::forget(self);
    }
}
