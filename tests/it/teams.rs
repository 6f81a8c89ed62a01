//! A support team, at the service, on a fixed clock: protocol numbers, cases offered in turn (one
//! agent away, capacity, an offer not accepted moving on), SLA clocks a bot's message never stops,
//! transfers between teams that keep the protocol and the log — and two instances on PostgreSQL that
//! never offer one case twice nor give two cases one protocol.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use vt_agent::testkit::{CaseError, Equipe, HandoffConfig, SupportAgent};
use vt_domain::tools::VtSettings;
use vt_store::Store;
use vt_store::records::CaseState;

use crate::support::{ChatHarness, chat_harness_handing_off};
use vt_store::testkit::PgFixture;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).expect("time").with_timezone(&Utc)
}

/// Monday 2026-11-23, 10:00 in São Paulo.
const MONDAY_10: &str = "2026-11-23T13:00:00Z";

fn agent(login: &str) -> SupportAgent<'_> {
    SupportAgent {
        login,
        name: login,
        tenant: None,
    }
}

fn team(nome: &str, toml: &str) -> Equipe {
    let mut e: Equipe = toml::from_str(&format!("nome = \"{nome}\"\n{toml}")).expect("team");
    e.nome = nome.into();
    e
}

async fn sqlite() -> Arc<dyn Store> {
    Arc::new(
        vt_store::sqlite::SqliteStore::connect("sqlite::memory:")
            .await
            .expect("store"),
    )
}

async fn desk(store: Arc<dyn Store>, equipes: Vec<Equipe>) -> ChatHarness {
    let handoff = HandoffConfig {
        equipes,
        ..Default::default()
    };
    let h = chat_harness_handing_off(store, None, VtSettings::default(), None, handoff).await;
    h.clock.set(at(MONDAY_10));
    h
}

async fn open(h: &ChatHarness, conversation: &str) -> vt_store::records::Case {
    h.say(conversation, "quero falar com um atendente").await;
    h.store
        .open_case_of(conversation)
        .await
        .expect("read")
        .expect("the transfer opened a case")
}

async fn offered(h: &ChatHarness, conversation: &str) -> Option<String> {
    let case = h
        .store
        .open_case_of(conversation)
        .await
        .expect("read")
        .expect("case");
    case.offered_to
}

#[tokio::test]
async fn cases_are_offered_in_turn_skipping_the_away_and_the_full_and_an_offer_not_taken_moves_on() {
    let suporte = team(
        "suporte",
        "membros = [\"ana\", \"bia\", \"caio\"]\natribuicao = \"rodizio\"\ncapacidade = 1\naceitar_em_minutos = 5\nhorario = \"seg-sex 08:00-18:00\"",
    );
    let h = desk(sqlite().await, vec![suporte]).await;
    h.service.cases().set_away("bia", true).await.expect("away");
    let first = open(&h, "c-1").await;
    for (minute, conversation) in [(1, "c-2"), (2, "c-3")] {
        h.clock.set(at(MONDAY_10) + chrono::Duration::minutes(minute));
        open(&h, conversation).await;
    }
    assert_eq!(first.team, "suporte");
    assert_eq!(first.protocol.as_deref(), Some("20261123-000001"));

    // bia is away, and each agent holds one case at most: ana, caio, then nobody.
    assert_eq!(h.service.cases().assign_waiting().await, 2);
    assert_eq!(offered(&h, "c-1").await.as_deref(), Some("ana"));
    assert_eq!(offered(&h, "c-2").await.as_deref(), Some("caio"));
    assert_eq!(
        offered(&h, "c-3").await,
        None,
        "everyone available is at capacity"
    );
    assert_eq!(h.service.cases().assign_waiting().await, 0, "live offers stay");

    // ana accepts hers; caio lets his expire.
    h.service
        .cases()
        .claim_case(&first.id, agent("ana"))
        .await
        .expect("claim");
    h.clock.set(at(MONDAY_10) + chrono::Duration::minutes(8));
    assert_eq!(h.service.cases().assign_waiting().await, 1);
    // c-2 is never offered to caio again and nobody else may have it; c-3 goes to caio, now free.
    assert_eq!(offered(&h, "c-2").await, None);
    assert_eq!(offered(&h, "c-3").await.as_deref(), Some("caio"));

    // bia is back: the case caio let go is hers.
    h.service.cases().set_away("bia", false).await.expect("back");
    assert_eq!(h.service.cases().assign_waiting().await, 1);
    assert_eq!(offered(&h, "c-2").await.as_deref(), Some("bia"));
    let second = h.store.open_case_of("c-2").await.expect("read").expect("case");
    let log: Vec<(String, Option<String>)> = h
        .store
        .case_events(&second.id)
        .await
        .expect("log")
        .into_iter()
        .map(|e| (e.what, e.detail))
        .filter(|(what, _)| what.starts_with("ofer"))
        .collect();
    assert_eq!(
        log,
        [
            ("oferecido".to_owned(), Some("caio".to_owned())),
            ("oferta_expirada".to_owned(), Some("caio".to_owned())),
            ("oferecido".to_owned(), Some("bia".to_owned())),
        ]
    );
    // Manual claim keeps working for anyone, and ends the offer.
    let Ok(vt_store::records::Claim::Claimed(claimed)) =
        h.service.cases().claim_case(&second.id, agent("ana")).await
    else {
        panic!("anyone may claim a waiting case");
    };
    assert_eq!(
        (claimed.owner.as_deref(), claimed.offered_to),
        (Some("ana"), None)
    );
}

#[tokio::test]
async fn out_of_hours_no_case_is_offered_until_the_desk_opens() {
    let suporte = team(
        "suporte",
        "membros = [\"ana\"]\natribuicao = \"menos_ocupado\"\nhorario = \"seg-sex 08:00-18:00\"",
    );
    let h = desk(sqlite().await, vec![suporte]).await;
    // Carnival Tuesday 2027, 10:00: a national holiday.
    h.clock.set(at("2027-02-09T13:00:00Z"));
    let transfer = h.say("c-carnaval", "quero falar com um atendente").await;
    assert!(
        transfer
            .reply_text()
            .contains("uma pessoa responde amanhã às 08:00"),
        "{}",
        transfer.reply_text()
    );
    assert_eq!(h.service.cases().assign_waiting().await, 0);
    h.clock.set(at("2027-02-10T11:00:00Z"));
    assert_eq!(h.service.cases().assign_waiting().await, 1);
    assert_eq!(offered(&h, "c-carnaval").await.as_deref(), Some("ana"));
}

#[tokio::test]
async fn a_transfer_between_teams_keeps_the_protocol_and_the_log_and_is_told_once() {
    let sla = "[sla]\nprimeira_resposta = 10\nresolucao = 60";
    let geral = team("geral", &format!("padrao = true\n{sla}"));
    let financeiro = team(
        "financeiro",
        &format!("motivos = [\"pagamento_nao_creditado\"]\nmembros = [\"bia\"]\n{sla}"),
    );
    let h = desk(sqlite().await, vec![geral, financeiro]).await;
    let case = open(&h, "c-transf").await;
    assert_eq!(
        case.team, "geral",
        "a card holder's request goes to the default team"
    );
    assert_eq!(case.motivo, vt_contract::HandoffReason::PedidoDoCliente);
    let protocol = case.protocol.clone().expect("protocol");
    // The bot's acknowledgement is no response: the first-response clock still runs.
    let ack = h.say("c-transf", "alô?").await;
    assert!(ack.reply_text().contains("encaminhada"), "{}", ack.reply_text());
    h.clock.set(at(MONDAY_10) + chrono::Duration::minutes(9));
    let clocks = h.service.cases().clocks(&case.id).await.expect("clocks");
    let first = clocks.primeira_resposta.expect("first");
    assert!(!first.stopped, "a bot message stops no clock");
    assert_eq!(first.status.as_str(), "vencendo");

    h.service
        .cases()
        .claim_case(&case.id, agent("ana"))
        .await
        .expect("claim");
    h.service
        .cases()
        .agent_reply(&case.id, agent("ana"), "Vou verificar seu pagamento.")
        .await
        .expect("reply");
    let moved = h
        .service
        .cases()
        .transfer_case(
            &case.id,
            agent("ana"),
            "financeiro",
            None,
            Some("boleto pago, não creditado"),
        )
        .await
        .expect("transfer");
    assert_eq!(
        (moved.team.as_str(), moved.state, moved.owner.as_deref()),
        ("financeiro", CaseState::Aguardando, None)
    );
    assert_eq!(moved.protocol.as_deref(), Some(protocol.as_str()));
    assert_eq!(moved.id, case.id, "the same case, not a new one");
    let told: Vec<String> = h
        .store
        .messages("c-transf")
        .await
        .expect("messages")
        .into_iter()
        .filter_map(|m| m.message.text().map(str::to_owned))
        .filter(|t| t.contains("equipe financeiro"))
        .collect();
    assert_eq!(told.len(), 1, "told once: {told:?}");
    assert!(told[0].contains(&protocol), "{}", told[0]);
    // The receiving team's clock starts at the transfer, under its own promise; the first response,
    // at 9 minutes, stays ana's under geral's (the month's report credits it there).
    let clocks = h.service.cases().clocks(&case.id).await.expect("clocks");
    let first = clocks.primeira_resposta.expect("first");
    assert!(
        first.running && !first.stopped && first.elapsed == 0.0,
        "{first:?}"
    );
    let month = chrono::NaiveDate::from_ymd_opt(2026, 11, 1).expect("month");
    let report = h.service.cases().report(None, month).await.expect("report");
    let line = |name: &str| report.agents.iter().find(|l| l.nome == name).cloned();
    let ana = line("geral/ana").expect("ana's first response is hers");
    assert_eq!(ana.primeira_resposta_mediana, Some(9), "{report:?}");
    let geral = report.teams.iter().find(|l| l.nome == "geral").expect("geral");
    assert_eq!((geral.primeira_resposta_mediana, geral.casos), (Some(9), 0));
    let financeiro = report
        .teams
        .iter()
        .find(|l| l.nome == "financeiro")
        .expect("financeiro");
    assert_eq!(
        (financeiro.primeira_resposta_mediana, financeiro.casos),
        (None, 1)
    );
    let whats: Vec<String> = h
        .store
        .case_events(&case.id)
        .await
        .expect("log")
        .into_iter()
        .map(|e| e.what)
        .collect();
    for line in ["aberto", "assumido", "mensagem_atendente", "transferido"] {
        assert!(whats.iter().any(|w| w == line), "{line} in {whats:?}");
    }
    // To an agent: theirs at once. To a team that does not exist: refused, nothing moves.
    let mine = h
        .service
        .cases()
        .transfer_case(&case.id, agent("ana"), "financeiro", Some("bia"), None)
        .await
        .expect("to bia");
    assert_eq!(
        (mine.state, mine.owner.as_deref()),
        (CaseState::EmAtendimento, Some("bia"))
    );
    let refused = h
        .service
        .cases()
        .transfer_case(&case.id, agent("bia"), "nenhuma", None, None)
        .await;
    assert!(matches!(refused, Err(CaseError::Refused(_))), "{refused:?}");
    // Found by its protocol number.
    let found = h
        .service
        .cases()
        .case_by_protocol(&protocol, agent("bia"))
        .await
        .expect("by protocol");
    assert_eq!(found.id, case.id);
}

/// Two instances (two services on one store): cases opened at once on both get distinct protocols,
/// and each waiting case is offered once although both pass at the same time.
async fn two_instances_never_share_a_protocol_nor_offer_a_case_twice(
    first: Arc<dyn Store>,
    second: Arc<dyn Store>,
) {
    let suporte = || {
        team(
            "suporte",
            "membros = [\"ana\", \"bia\", \"caio\"]\natribuicao = \"rodizio\"\ncapacidade = 20",
        )
    };
    let a = desk(first, vec![suporte()]).await;
    let b = desk(second, vec![suporte()]).await;
    let opened = futures::future::join_all((0..12).map(|i| {
        let h = if i % 2 == 0 { &a } else { &b };
        async move { open(h, &format!("c-par-{i}")).await }
    }))
    .await;
    let mut protocols: Vec<String> = opened.iter().filter_map(|c| c.protocol.clone()).collect();
    protocols.sort();
    protocols.dedup();
    assert_eq!(protocols.len(), 12, "{protocols:?}");
    let (x, y) = tokio::join!(
        a.service.cases().assign_waiting(),
        b.service.cases().assign_waiting()
    );
    assert_eq!(x + y, 12, "each case offered once in all: {x} + {y}");
    for case in &opened {
        let offers = a
            .store
            .case_events(&case.id)
            .await
            .expect("log")
            .into_iter()
            .filter(|e| e.what == "oferecido")
            .count();
        assert_eq!(offers, 1, "{}", case.id);
    }
}

#[tokio::test]
async fn two_instances_on_sqlite_never_share_a_protocol_nor_offer_a_case_twice() {
    let store = sqlite().await;
    two_instances_never_share_a_protocol_nor_offer_a_case_twice(store.clone(), store).await;
}

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test]
async fn two_instances_on_postgres_never_share_a_protocol_nor_offer_a_case_twice() {
    let pg = PgFixture::start().await;
    two_instances_never_share_a_protocol_nor_offer_a_case_twice(pg.store.clone(), pg.second.clone()).await;
    pg.cleanup().await;
}

/// The desk in the console, in Chromium: a support agent lands on the queue, works a case whose
/// conversation had a balance, a Pix recharge paid and a boleto, and moves it to another team; an
/// administrator reads the month's report and its CSV, and the usage page's figures match a count
/// of the same data. No engine internal on the support agent's pages; money in reais.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_support_team_works_from_the_console_and_its_manager_reads_the_month() {
    use crate::console::{ADMIN, SECRET, SUPPORT, no_redirects, serve_with, session};
    let sla = "[sla]\nprimeira_resposta = 30\nresolucao = 240";
    let handoff = HandoffConfig {
        equipes: vec![
            team("geral", &format!("padrao = true\nmembros = [\"suporte\"]\n{sla}")),
            team(
                "financeiro",
                &format!("motivos = [\"pagamento_nao_creditado\"]\n{sla}"),
            ),
        ],
        ..Default::default()
    };
    let chat =
        Arc::new(crate::support::chat_harness_pix_handing_off(crate::support::Pix::Provider, handoff).await);
    let conv = "c-equipe";
    chat.say(conv, "saldo do cartão 1234567890").await;
    chat.say(conv, "recarregar 20 no cartão 1234567890 via pix").await;
    chat.say(conv, "sim").await;
    let txid = chat
        .store
        .conversation_charges(conv)
        .await
        .expect("charges")
        .pop()
        .expect("a charge")
        .txid;
    chat.sim.pix().pay(&txid, false).expect("paid");
    chat.service.payments().settle(&txid).await.expect("settled");
    chat.say(conv, "recarregar 20 no cartão 1234567890 no boleto")
        .await;
    chat.say(conv, "sim").await;
    chat.say(conv, "quero falar com um atendente").await;
    chat.say("c-outra", "quero falar com um atendente").await;
    let case = chat
        .store
        .open_case_of(conv)
        .await
        .expect("read")
        .expect("a case");
    let protocol = case.protocol.clone().expect("protocol");
    let s = serve_with(chat.clone()).await;
    let Some(b) = crate::browser::Browser::start_for("equipe").await else {
        return;
    };
    let base = s.url.as_str();

    // The support agent lands on the queue: both cases wait there, named by protocol.
    b.sign_in(base, SUPPORT).await;
    b.wait_path("/console/fila").await;
    let waiting = b.text("#aguardando").await;
    assert!(
        waiting.contains(&protocol) && waiting.contains("****7890"),
        "{waiting}"
    );
    assert!(b.text("#contagem-fila").await.starts_with("2 ·"));
    b.shot("01-fila").await;

    // The case: its clocks, the payments as panels, the conversation as a chat.
    b.click(&format!("a[href='/console/cases/{}']", case.id)).await;
    let pix = b.text(".pagamento-pix").await;
    assert!(
        pix.contains("R$ 20,00") && pix.contains("paga e creditada"),
        "{pix}"
    );
    let boleto = b.text(".pagamento-boleto").await;
    assert!(
        boleto.contains("Linha digitável")
            && boleto.contains("Vencimento")
            && boleto.contains("aguardando pagamento"),
        "{boleto}"
    );
    assert!(b.text("#prazos").await.contains("Primeira resposta"));
    // The protocol number said to the card holder is no card: shown whole in the chat.
    assert!(b.text("#mensagens").await.contains(&protocol));
    let page = b.source().await;
    for internal in [
        "consultar_saldo",
        "preparar_recarga",
        "confirmar_recarga",
        "transferir_para_humano",
        "estado atualizado",
        "{\"",
        "BRL ",
        "Detalhes técnicos",
    ] {
        assert!(
            !page.contains(internal),
            "{internal} on a support agent's case page"
        );
    }
    assert!(!page.contains("1234567890"), "no card in clear");
    b.shot("02-atendimento").await;
    b.submit("#assumir").await;
    b.type_into("#texto", "Vou verificar o boleto.").await;
    b.submit("#enviar").await;
    b.element("#equipe").await;
    b.client
        .execute("document.getElementById('equipe').value = 'financeiro';", vec![])
        .await
        .expect("pick a team");
    b.type_into("#nota-transferencia", "Boleto pago e não creditado.")
        .await;
    b.submit("#transferir").await;
    assert!(b.text(".aviso.ok").await.contains("financeiro"));
    let moved = chat.store.case(&case.id).await.expect("read").expect("case");
    assert_eq!(
        (moved.team.as_str(), moved.protocol.as_deref()),
        ("financeiro", Some(protocol.as_str()))
    );
    b.sign_out().await;

    // The manager: the month per team and agent, as a page and as CSV.
    b.sign_in(base, ADMIN).await;
    b.wait_path("/console/fila").await;
    assert!(b.text("#equipes").await.contains("financeiro"));
    b.click("nav a[href='/console/relatorio']").await;
    let teams = b.text("#por-equipe").await;
    assert!(teams.contains("financeiro") && teams.contains("geral"), "{teams}");
    b.shot("03-relatorio").await;
    let admin = session("operacao", 600, SECRET);
    let csv = no_redirects()
        .get(format!("{base}/console/relatorio?mes=2026-11&formato=csv"))
        .header("cookie", &admin)
        .send()
        .await
        .expect("csv")
        .text()
        .await
        .expect("text");
    assert!(csv.starts_with("\u{feff}mes;tipo;nome;casos"), "{csv}");
    assert!(csv.contains("2026-11;equipe;financeiro;1;"), "{csv}");
    assert!(csv.contains("2026-11;equipe;geral;1;"), "{csv}");
    assert!(csv.contains("2026-11;agente;financeiro/suporte;1;"), "{csv}");

    // The usage page's figures are a count of the same data: turns, and flows split by who started
    // them.
    let html = no_redirects()
        .get(format!("{base}/console/usage?dias=30"))
        .header("cookie", &admin)
        .send()
        .await
        .expect("usage")
        .text()
        .await
        .expect("html");
    // By hand: the 7 messages said above, and the flows no chat turn started (the paid Pix's recharge).
    let runs = chat.store.flow_runs(1_000).await.expect("runs");
    let mut alone = 0;
    for r in &runs {
        let run = chat
            .store
            .flow_run(&r.execucao_id)
            .await
            .expect("run")
            .expect("there");
        alone += usize::from(run.parent_execucao_id.is_none());
    }
    assert_eq!(alone, 1, "the paid Pix's recharge");
    let turns = 7 + alone;
    assert!(
        html.contains(&format!("{turns} turno(s)")),
        "{turns} turns in {html}"
    );
    assert!(
        html.contains(&format!(
            "{} fluxo(s) no período: {alone} avulso(s) (API, lote ou pagamento confirmado",
            runs.len()
        )),
        "{} flows in {html}",
        runs.len()
    );
    b.close().await;
}

/// A transfer to a team that is closed now says when a person will answer there, as a case opened
/// there does (on 80722d3 it said nothing, though the case page knew it).
#[tokio::test]
async fn a_transfer_to_a_closed_team_says_when_a_person_answers() {
    let geral = team("geral", "padrao = true");
    let financeiro = team(
        "financeiro",
        "membros = [\"bia\"]\nhorario = \"seg-sex 08:00-18:00\"",
    );
    let h = desk(sqlite().await, vec![geral, financeiro]).await;
    // Saturday 2026-11-28, 20:00 in São Paulo: the default team (no hours) is open, finance is not.
    h.clock.set(at("2026-11-28T23:00:00Z"));
    let case = open(&h, "c-fechada").await;
    h.service
        .cases()
        .claim_case(&case.id, agent("ana"))
        .await
        .expect("claim");
    h.service
        .cases()
        .transfer_case(
            &case.id,
            agent("ana"),
            "financeiro",
            None,
            Some("boleto pago, não creditado"),
        )
        .await
        .expect("transfer");
    let told = crate::support::said(&h, "c-fechada").await.pop().expect("told");
    assert!(
        told.contains("equipe financeiro") && told.contains("uma pessoa responde na segunda-feira às 08:00"),
        "{told}"
    );
}
