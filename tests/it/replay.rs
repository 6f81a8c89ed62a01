//! `vt-agent replay` (step 30): a day of conversations recorded against the simulator — balances, a
//! Pix paid, a correction, a case, a FAQ answer, a burst — replayed through candidates and judged by
//! what they did; the reports hold no card, phone number or name from the store.

use std::path::Path;
use std::sync::Arc;

use crate::support::{Pix, chat_harness_pix, user};

const CARDS: [&str; 5] = [
    "1234567890",
    "2345678901",
    "3456789012",
    "4567890123",
    "5678901234",
];

/// A candidate's configuration: the current one, its FAQ and intents from `dir` when given.
fn candidate(faq: Option<&Path>, intents: Option<&Path>) -> vt_agent::Config {
    vt_agent::Config {
        faq_dir: faq.map(Path::to_path_buf),
        intents_file: intents.map(Path::to_path_buf),
        ..Default::default()
    }
}

fn options(
    ids: &[&str],
    candidate: vt_agent::Config,
    out: &Path,
    baseline: Option<&Path>,
) -> vt_agent::testkit::ReplayOptions {
    vt_agent::testkit::ReplayOptions {
        selection: vt_agent::testkit::ReplaySelection {
            ids: Some(ids.iter().map(|s| (*s).to_owned()).collect()),
            ..Default::default()
        },
        candidate,
        live_model: None,
        baseline: baseline.map(Path::to_path_buf),
        approve: false,
        out: out.to_path_buf(),
        repeat: 1,
        min_pass: 1,
    }
}

/// Every file under `dir`, as text.
fn everything_in(dir: &Path) -> String {
    let mut all = String::new();
    for entry in walk(dir) {
        all.push_str(&std::fs::read_to_string(&entry).unwrap_or_default());
    }
    all
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A copy of `from` with every file's text changed by `edit`.
fn copied(from: &Path, to: &Path, edit: impl Fn(&str) -> String) {
    std::fs::create_dir_all(to).expect("dir");
    for e in std::fs::read_dir(from).expect("dir").flatten() {
        let text = std::fs::read_to_string(e.path()).expect("read");
        std::fs::write(to.join(e.file_name()), edit(&text)).expect("write");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_replayed_passes_unchanged_reports_words_and_fails_exactly_on_a_broken_correction() {
    let h = Arc::new(chat_harness_pix(Pix::Provider).await);
    // The day: a balance; a Pix recharge paid; a correction (40 → 60) paid; a case; a FAQ answer; a
    // burst.
    h.say("c-saldo", &format!("saldo do cartão {}", CARDS[0])).await;
    h.say("c-pix", &format!("quero colocar 20 no cartao {} pix", CARDS[1]))
        .await;
    h.say("c-pix", "sim").await;
    h.say(
        "c-correcao",
        &format!("quero colocar 40 no cartao {} pix", CARDS[2]),
    )
    .await;
    h.say("c-correcao", "pera, muda pra 60").await;
    h.say("c-correcao", "sim").await;
    for conv in ["c-pix", "c-correcao"] {
        for charge in h.store.conversation_charges(conv).await.expect("charges") {
            h.sim.pix().pay(&charge.txid, false).expect("paid");
            h.service.payments().settle(&charge.txid).await.expect("settled");
        }
    }
    h.say(
        "c-caso",
        "meu nome é Beatriz Lima, meu telefone é (11) 98765-4321",
    )
    .await;
    h.say("c-caso", "quero falar com um atendente").await;
    h.say("c-faq", "quanto tempo demora pra cair a recarga?").await;
    // A voice note as the store holds it once heard: its transcript, marked.
    h.say("c-voz", &format!("🎤 qual o saldo do cartão {}", CARDS[0]))
        .await;
    let burst = ["oi", &format!("saldo do cartão {}", CARDS[3])];
    let mut received = Vec::new();
    for (i, text) in burst.iter().enumerate() {
        let msg = vt_agent::Inbound {
            agent_id: "vt".into(),
            conversation_id: Some("c-rajada".into()),
            user: user(),
            text: (*text).to_owned(),
            channel_message_id: Some(format!("rajada-{i}")),
            ..Default::default()
        };
        received.extend(h.service.messages().receive(&msg).await.expect("stored"));
    }
    for r in received {
        h.service.messages().process(r).await.expect("processed");
    }
    // A conversation whose systems answers were never recorded (stored, never processed).
    let old = vt_agent::Inbound {
        agent_id: "vt".into(),
        conversation_id: Some("c-antiga".into()),
        user: user(),
        text: format!("saldo do cartão {}", CARDS[4]),
        channel_message_id: Some("antiga-1".into()),
        ..Default::default()
    };
    h.service.messages().receive(&old).await.expect("stored");
    let day = [
        "c-saldo",
        "c-pix",
        "c-correcao",
        "c-caso",
        "c-faq",
        "c-rajada",
        "c-voz",
    ];
    let store: Arc<dyn vt_store::Store> = h.store.clone();
    let dir = tempfile::tempdir().expect("dir");

    // Unchanged: every case passes, with no model call, and the run becomes the baseline.
    let out = dir.path().join("sem-mudanca");
    let baseline = dir.path().join("baseline.json");
    let mut approve = options(&day, candidate(None, None), &out, Some(&baseline));
    approve.approve = true;
    let run = vt_agent::testkit::replay(store.as_ref(), &approve)
        .await
        .expect("replayed");
    for c in &run.cases {
        assert_eq!(
            c.verdict,
            vt_agent::testkit::Verdict::Pass,
            "{}: {:?} {:?}",
            c.id,
            c.errors,
            c.diff
        );
        assert_eq!(c.live_model_calls(), 0);
    }
    assert_eq!(
        (run.cases.len(), run.exit_code()),
        (7, 0),
        "{}",
        run.summary_line()
    );
    assert!(baseline.exists(), "an accepted run is the baseline");
    let unchanged: Vec<f64> = run.cases.iter().map(|c| c.similarity).collect();

    // Wording only (the FAQ's answers reworded): every case passes; the words are reported.
    let faq = dir.path().join("faq");
    copied(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("faq").as_path(),
        &faq,
        |t| t.replace("o que leva até 3 dias úteis", "o que leva no máximo 3 dias úteis"),
    );
    let out = dir.path().join("palavras");
    let run = vt_agent::testkit::replay(
        store.as_ref(),
        &options(&day, candidate(Some(&faq), None), &out, Some(&baseline)),
    )
    .await
    .expect("replayed");
    assert_eq!(run.exit_code(), 0, "{}", run.summary_line());
    let reworded: Vec<usize> = run
        .cases
        .iter()
        .zip(&unchanged)
        .enumerate()
        .filter(|(_, (c, before))| (c.similarity - **before).abs() > 1e-9)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(reworded, [4], "only the FAQ's answer changed words");
    let junit = std::fs::read_to_string(out.join("junit.xml")).expect("junit");
    assert!(
        junit.contains("no máximo 3 dias úteis") && !junit.contains("<failure"),
        "the words' diff, no verdict: {junit}"
    );
    let summary = std::fs::read_to_string(out.join("summary.md")).expect("summary");
    assert!(
        summary.contains("7 casos: 7 passaram, 0 falharam, 0 com erro"),
        "{summary}"
    );

    // A fault in the candidate: the router's recharge intent turned off, so a correction is no longer
    // taken — "sim" confirms the 40. Exactly the cases that prepare a recharge fail, on the charge.
    let intents = dir.path().join("intents.toml");
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("intents/default.toml"))
        .expect("intents");
    let broken = text.replacen(
        "key = \"preparar_recarga\"\n",
        "key = \"preparar_recarga\"\nactive = false\n",
        1,
    );
    assert_ne!(broken, text);
    std::fs::write(&intents, broken).expect("write");
    let out = dir.path().join("falha");
    let run = vt_agent::testkit::replay(
        store.as_ref(),
        &options(&day, candidate(None, Some(&intents)), &out, Some(&baseline)),
    )
    .await
    .expect("replayed");
    let failed: Vec<String> = run
        .cases
        .iter()
        .filter(|c| c.verdict == vt_agent::testkit::Verdict::Fail)
        .map(|c| c.id.clone())
        .collect();
    let of = |conv: &str| {
        run.cases[day.iter().position(|d| *d == conv).expect("case")]
            .id
            .clone()
    };
    assert_eq!(failed, [of("c-pix"), of("c-correcao")], "{}", run.summary_line());
    let correction = run.cases.iter().find(|c| c.id == of("c-correcao")).expect("case");
    let diff = correction.diff.as_ref().expect("the effect diff");
    assert!(
        diff.iter()
            .any(|(was, _)| was == "cobrança Pix de R$ 60,00 emitida"),
        "the baseline charged 60, said as a sentence: {diff:?}"
    );
    // A case written for a test carries what it was judged by: played again as a transcript it
    // passes on the product it was recorded on and fails on the broken candidate (on 80722d3 its
    // turns expected nothing, and it passed on both).
    let written = out.join("cases").join(format!("{}.yaml", of("c-correcao")));
    let yaml = std::fs::read_to_string(&written).expect("the written case");
    assert!(yaml.contains("R$ 60,00") && yaml.contains("000201"), "{yaml}");
    let kept = vt_agent::testkit::run_file(&written, &vt_agent::testkit::RunOptions::default()).await;
    assert!(kept.passed, "{:?}", kept.failure.map(|f| f.to_string()));
    let broken = vt_agent::testkit::RunOptions {
        config: candidate(None, Some(&intents)),
        ..vt_agent::testkit::RunOptions::default()
    };
    let caught = vt_agent::testkit::run_file(&written, &broken).await;
    assert!(
        !caught.passed,
        "the broken correction is caught by the written case"
    );
    assert_eq!(run.exit_code(), 1);
    let junit = std::fs::read_to_string(out.join("junit.xml")).expect("junit");
    assert_eq!(junit.matches("<failure").count(), 2, "{junit}");
    assert!(!junit.contains("<error"), "{junit}");
    assert!(junit.contains("<property name=\"reais\""), "{junit}");

    // The console's Replay page shows that run: the failed cases' effects side by side, each case a
    // transcript to keep.
    let state = vt_agent::AppState::new(h.service.clone(), "vt", crate::console::config())
        .with_console(&vt_agent::testkit::ConsoleConfig {
            secret: Some(crate::console::SECRET.into()),
            ..Default::default()
        })
        .with_replay_dir(out.clone());
    let served = crate::support::serve_state(h.clone(), state).await;
    let get = |path: String, who: &'static str| {
        let url = format!("{}{path}", served.url);
        async move {
            crate::console::no_redirects()
                .get(url)
                .header(
                    "cookie",
                    crate::console::session(who, 600, crate::console::SECRET),
                )
                .send()
                .await
                .expect("request")
        }
    };
    let page = get("/console/replay".into(), "operacao").await;
    assert_eq!(page.status(), 200);
    let html = page.text().await.expect("html");
    assert!(
        html.contains("falharam") && html.contains(&of("c-correcao")),
        "{html}"
    );
    assert!(
        html.contains("lado-a-lado") && html.contains("60"),
        "the effects side by side: {html}"
    );
    let kept = get(format!("/console/replay/casos/{}.yaml", of("c-caso")), "operacao").await;
    assert_eq!(kept.status(), 200);
    let yaml = kept.text().await.expect("yaml");
    let transcript: vt_agent::Transcript = serde_yaml::from_str(&yaml).expect("a transcript");
    assert_eq!(transcript.turns.len(), 2);
    assert!(!yaml.contains("Beatriz") && !yaml.contains("98765"), "{yaml}");
    assert_eq!(
        get("/console/replay".into(), "suporte").await.status(),
        403,
        "administrators only"
    );
    assert_eq!(
        get("/console/replay/casos/..%2F..%2Freport.json".into(), "operacao")
            .await
            .status(),
        404
    );

    // A recording that misses the systems' answer: an error, never a failure.
    let out = dir.path().join("sem-gravacao");
    let run = vt_agent::testkit::replay(
        store.as_ref(),
        &options(&["c-antiga"], candidate(None, None), &out, None),
    )
    .await
    .expect("replayed");
    assert_eq!(
        run.cases[0].verdict,
        vt_agent::testkit::Verdict::Error,
        "{:?}",
        run.cases[0]
    );
    assert_eq!(run.exit_code(), 2);
    let junit = std::fs::read_to_string(out.join("junit.xml")).expect("junit");
    assert!(junit.contains("<error") && !junit.contains("<failure"), "{junit}");

    // A baseline case missing from a run fails it.
    let out = dir.path().join("caso-ausente");
    let run = vt_agent::testkit::replay(
        store.as_ref(),
        &options(&day[..6], candidate(None, None), &out, Some(&baseline)),
    )
    .await
    .expect("replayed");
    assert_eq!(run.exit_code(), 1, "{}", run.summary_line());

    // Nothing personal from the store in any report or exported case.
    let written = everything_in(dir.path());
    for private in
        CARDS
            .iter()
            .copied()
            .chain(["Beatriz", "Lima", "98765-4321", "987654321", "c-caso", "maria"])
    {
        assert!(!written.contains(private), "{private} in the replay's output");
    }
    assert!(written.contains("****7890"), "cards are shown masked");
}

/// A conversation the model answered replays with the model's recorded reply where the candidate's
/// request is the recorded one, and counts it: no live model is needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_turn_replays_from_its_recorded_reply() {
    use vt_engine::llm::scripted::Scripted;
    use vt_engine::llm::scripted::ScriptedProvider;
    let llm = Arc::new(ScriptedProvider::new([
        Scripted::text("general_chat"),
        Scripted::text("O VT é para o transporte; o VR, para as refeições."),
    ]));
    let h = crate::support::chat_harness(Some(llm.clone()), vt_domain::tools::VtSettings::default()).await;
    let said = h.say("c-modelo", "qual a diferença entre VT e VR?").await;
    assert!(said.reply_text().contains("refeições"), "{}", said.reply_text());
    let dir = tempfile::tempdir().expect("dir");
    let run = vt_agent::testkit::replay(
        h.store.as_ref(),
        &options(&["c-modelo"], candidate(None, None), dir.path(), None),
    )
    .await
    .expect("replayed");
    let case = &run.cases[0];
    assert_eq!(
        case.verdict,
        vt_agent::testkit::Verdict::Pass,
        "{:?}",
        case.errors
    );
    assert_eq!(
        case.recorded_model_calls(),
        1,
        "the model's reply came from the recording"
    );
    assert_eq!(case.live_model_calls(), 0);
    assert!(
        (case.similarity - 1.0).abs() < 1e-9,
        "the same words: {}",
        case.similarity
    );
}

/// What a paid Pix did after the conversation is among the conversation's effects, in the order it
/// happened — the charge, the recharge the payment sent (refused), the payment returned, the case a
/// person gets — and the replay pays it again and does the same (on 80722d3 the recording held the
/// charge alone). The case written from it pays too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_payment_did_after_the_conversation_is_replayed_in_order() {
    let h = Arc::new(chat_harness_pix(Pix::Provider).await);
    // The recharge system refuses recharges of this magic card.
    h.say("c-negada", "quero colocar 25 no cartao 7777777777 pix")
        .await;
    h.say("c-negada", "sim").await;
    for charge in h.store.conversation_charges("c-negada").await.expect("charges") {
        h.sim.pix().pay(&charge.txid, false).expect("paid");
        assert_eq!(
            h.service.payments().settle(&charge.txid).await.expect("settled"),
            vt_agent::testkit::Settled::Refunded
        );
    }
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("pago");
    let store: Arc<dyn vt_store::Store> = h.store.clone();
    let run = vt_agent::testkit::replay(
        store.as_ref(),
        &options(&["c-negada"], candidate(None, None), &out, None),
    )
    .await
    .expect("replayed");
    assert_eq!(run.exit_code(), 0, "{}", run.summary_line());
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).expect("report"))
            .expect("json");
    let mutating = |key: &str| -> Vec<String> {
        report["cases"][0][key]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["class"] == "mutating")
            .map(|e| e["kind"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(mutating("expected"), ["pix", "recarga", "devolucao", "caso"]);
    assert_eq!(
        mutating("effects"),
        mutating("expected"),
        "the replay paid and did the same"
    );
    let written = out.join("cases").join(format!("{}.yaml", run.cases[0].id));
    let yaml = std::fs::read_to_string(&written).expect("the written case");
    assert!(yaml.contains("pays:"), "{yaml}");
    let kept = vt_agent::testkit::run_file(&written, &vt_agent::testkit::RunOptions::default()).await;
    assert!(kept.passed, "{:?}", kept.failure.map(|f| f.to_string()));
}
