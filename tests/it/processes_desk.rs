//! The desk's requests that change a card, across processes (step 35): `chat` processes racing the
//! card holder's "sim" to one block — on one SQLite data directory and on one PostgreSQL — block it
//! once; a process killed with SIGKILL after the card system ordered a second copy and before the
//! turn was recorded leaves the balance moved once, and the holder's next "sim" is answered with that
//! same order. One simulator, served from this test on loopback, is every process's card system: its
//! ledger tells how many times a card really changed.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vt_simulators::systems::{Efeito, RunningSimulator};

use crate::cli::vt_agent_in;
use crate::processes::{KillAt, Killer, race, simulator, text};

fn done(sim: &RunningSimulator, efeito: Efeito) -> usize {
    sim.simulator
        .ledger()
        .iter()
        .filter(|e| e.efeito == Some(efeito))
        .count()
}

/// `chat` saying `message` in conversation `conv`, on `data` (and `database`, when one is given),
/// talking to the card system at `systems`.
fn chat(
    data: &tempfile::TempDir,
    database: Option<&str>,
    systems: &str,
    conv: &str,
    message: &str,
) -> Command {
    let mut c = vt_agent_in(data);
    c.env("VT_SYSTEMS_URL", systems)
        .args(["chat", "--conversation", conv, "--message", message]);
    if let Some(url) = database {
        c.env("VT_DATABASE_URL", url);
    }
    c
}

/// The card on record, its block asked, then `n` processes answer "sim" at once: it is blocked once,
/// and every answer that speaks of it says so.
async fn block_raced(data: &tempfile::TempDir, database: Option<&str>, sim: &RunningSimulator, n: usize) {
    let conv = "c-bloqueio-corrida";
    for message in ["qual o saldo do 2345678901?", "perdi meu cartão"] {
        let out = race(vec![chat(data, database, &sim.url, conv, message)]).await;
        assert!(out[0].status.success(), "{}", text(&out[0].stderr));
    }
    assert_eq!(done(sim, Efeito::CartaoBloqueado), 0, "nothing before the yes");
    let answers = race(
        (0..n)
            .map(|_| chat(data, database, &sim.url, conv, "sim"))
            .collect(),
    )
    .await;
    for a in &answers {
        assert!(a.status.success(), "{}", text(&a.stderr));
    }
    let replies: Vec<String> = answers.iter().map(|a| text(&a.stdout)).collect();
    assert!(
        replies.iter().any(|r| r.contains("está bloqueado desde")),
        "{replies:#?}"
    );
    assert_eq!(
        done(sim, Efeito::CartaoBloqueado),
        1,
        "blocked once: {replies:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_racing_the_yes_block_once_and_a_kill_after_the_second_copy_was_ordered_moves_the_balance_once()
 {
    let sim = simulator().await;
    let data = tempfile::tempdir().expect("tmp");
    block_raced(&data, None, &sim, 6).await;

    let conv = "c-bloqueio-corrida";
    let quoted = race(vec![chat(&data, None, &sim.url, conv, "quero a segunda via")]).await;
    assert!(
        text(&quoted[0].stdout).contains("Confirma o pedido da segunda via do cartão ****8901"),
        "{}{}",
        text(&quoted[0].stdout),
        text(&quoted[0].stderr)
    );
    // The "sim" goes through a proxy that kills its process once the card system has answered the
    // order, before the process reads the answer.
    let killer = Killer::watching(&sim, "/cartoes/segunda-via").await;
    let mut child = chat(&data, None, &killer.url, conv, "sim")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    killer.arm(KillAt::Charged, child.id());
    let started = Instant::now();
    while done(&sim, Efeito::SegundaViaEmitida) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the order never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let exited = tokio::task::spawn_blocking(move || child.wait().expect("reaped"))
        .await
        .expect("join");
    assert!(!exited.success(), "killed after the order");

    // The holder says "sim" again: the same order under the same key, answered from the card
    // system's record — the balance moved once, and the holder told so.
    let again = race(vec![chat(&data, None, &sim.url, conv, "sim")]).await;
    let told = text(&again[0].stdout);
    assert!(again[0].status.success(), "{}", text(&again[0].stderr));
    assert!(
        told.contains("Segunda via pedida") || told.contains("Não há nenhum pedido"),
        "{told}"
    );
    assert_eq!(done(&sim, Efeito::SegundaViaEmitida), 1, "ordered once: {told}");
    let orders = sim
        .simulator
        .ledger()
        .into_iter()
        .filter(|e| e.method == "POST" && e.path.ends_with("/segunda-via"))
        .count();
    assert!(
        orders <= 2,
        "sent once, and once more at the holder's yes at most: {orders}"
    );
}

#[ignore = "needs PostgreSQL: VT_TEST_POSTGRES_URL (see the tests chapter; .ci/run runs it)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_postgresql_racing_the_yes_block_a_card_once() {
    let pg = vt_store::testkit::PgFixture::start().await;
    let sim = simulator().await;
    let (a, b) = (
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    );
    let url = pg.process_url();
    // Two instances, each with a data directory of its own: only the database is shared.
    let conv = "c-bloqueio-pg";
    for message in ["qual o saldo do 2345678901?", "perdi meu cartão"] {
        let out = race(vec![chat(&a, Some(&url), &sim.url, conv, message)]).await;
        assert!(out[0].status.success(), "{}", text(&out[0].stderr));
    }
    let answers = race(vec![
        chat(&a, Some(&url), &sim.url, conv, "sim"),
        chat(&b, Some(&url), &sim.url, conv, "sim"),
    ])
    .await;
    let replies: Vec<String> = answers.iter().map(|a| text(&a.stdout)).collect();
    for a in &answers {
        assert!(a.status.success(), "{}", text(&a.stderr));
    }
    assert!(
        replies.iter().any(|r| r.contains("está bloqueado desde")),
        "{replies:#?}"
    );
    assert_eq!(
        done(&sim, Efeito::CartaoBloqueado),
        1,
        "blocked once: {replies:#?}"
    );
}
