//! Flow runs and their stages; batch jobs, their lines and their shared chunks.

use super::*;

pub(crate) async fn flow_runs_keep_their_stages(store: Arc<dyn Store>) {
    let run = FlowRunRecord {
        parent_execucao_id: None,
        execucao_id: "exec-flow".into(),
        status: RunStatus::Concluido,
        input: json!({"cartao": "1111111111"}),
        stages: vec![
            ("rf01_preparar_consulta".into(), json!({"a": 1})),
            ("rf02_executar_consulta".into(), json!({"status": 200})),
        ],
        created_at: t("2026-11-22T10:00:00Z"),
    };
    store.save_flow_run(&run).await.expect("save");
    assert_eq!(store.flow_run("exec-flow").await.expect("load"), Some(run));
    assert_eq!(store.flow_run("nope").await.expect("load"), None);
}

pub(crate) async fn a_flow_run_is_on_record_before_it_finishes(store: Arc<dyn Store>) {
    let started = t("2026-11-22T12:00:00Z");
    let conv = conversation("c-flow");
    store
        .begin_flow_run(
            &conv,
            &ChatMessage::user("{\"cartao\":\"****7890\"}"),
            "exec-f",
            &json!({"cartao": "1234567890"}),
            started,
        )
        .await
        .expect("begin");
    let runs = store.flow_runs(10).await.expect("list");
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0].status.as_str(), runs[0].finished_at),
        ("em_andamento", None)
    );
    // With it, in the same transaction: the flow's conversation and its input message.
    assert!(store.conversation("c-flow").await.expect("read").is_some());
    let messages = store.messages("c-flow").await.expect("read");
    assert_eq!(messages.len(), 1);
    assert_eq!(
        messages[0].message,
        ChatMessage::user("{\"cartao\":\"****7890\"}")
    );
    let exec = execution("exec-f", "c-flow");
    let run = FlowRunRecord {
        parent_execucao_id: None,
        execucao_id: "exec-f".into(),
        status: RunStatus::Concluido,
        input: json!({"cartao": "1234567890"}),
        stages: vec![("rf01_preparar_consulta".into(), json!({"ok": true}))],
        created_at: started,
    };
    let turn = TurnRecord {
        conversation: &conv,
        messages: &[],
        execution: &exec,
        events: &[],
        usage: None,
        flow_runs: std::slice::from_ref(&run),
        context: None,
        outbox: &[],
        accepted_message: None,
        case: None,
    };
    store
        .save_turn(turn, t("2026-11-22T12:00:01Z"))
        .await
        .expect("finish");
    let runs = store.flow_runs(10).await.expect("list");
    assert_eq!(runs.len(), 1, "the same row, completed");
    assert_eq!(runs[0].status, RunStatus::Concluido);
    assert_eq!(runs[0].finished_at, Some(t("2026-11-22T12:00:01Z")));
    assert_eq!(
        store
            .flow_run("exec-f")
            .await
            .expect("read")
            .expect("run")
            .stages
            .len(),
        1
    );
}

/// A batch group: many runs, their stages and lines in one call (multi-row statements), then a rerun of
/// a line that replaces its result.
pub(crate) async fn a_shared_batchs_chunks_go_to_one_instance_each_and_a_dead_ones_come_back(
    store: Arc<dyn Store>,
) {
    let now = t("2026-11-22T10:00:00Z");
    let mut job = super::batch_job("lote-partilhado", "empresa-a", now);
    job.source = Some("{}".into());
    store.open_batch(&job).await.expect("batch");
    assert_eq!(
        store.claimable_batches(now).await.expect("claimable"),
        ["lote-partilhado"],
        "not split yet: anyone may start it"
    );
    store.share_batch("lote-partilhado", 3).await.expect("share");
    store
        .share_batch("lote-partilhado", 3)
        .await
        .expect("again: nothing changes");
    let lease = now + chrono::Duration::seconds(15);
    let (a, b) = tokio::join!(
        store.claim_batch_chunk("lote-partilhado", "a", now, lease),
        store.claim_batch_chunk("lote-partilhado", "b", now, lease)
    );
    let (a, b) = (a.expect("a").expect("a chunk"), b.expect("b").expect("b chunk"));
    assert_ne!(a, b, "one chunk each");
    let c = store
        .claim_batch_chunk("lote-partilhado", "c", now, lease)
        .await
        .expect("c")
        .expect("the third");
    assert!(
        store
            .claim_batch_chunk("lote-partilhado", "d", now, lease)
            .await
            .expect("d")
            .is_none(),
        "all leased"
    );
    assert!(store.claimable_batches(now).await.expect("claimable").is_empty());
    assert_eq!(
        store
            .batch_chunks_open("lote-partilhado", now)
            .await
            .expect("open"),
        (3, 3)
    );
    assert!(
        !store
            .renew_batch_chunk("lote-partilhado", a, "b", lease)
            .await
            .expect("renew")
    );
    // a is done; b gives its chunk back unfinished, to retry in a minute; c dies (its lease runs out).
    store
        .release_batch_chunk("lote-partilhado", a, "a", true, now)
        .await
        .expect("done");
    let retry = now + chrono::Duration::minutes(1);
    store
        .release_batch_chunk("lote-partilhado", b, "b", false, retry)
        .await
        .expect("back");
    let later = lease + chrono::Duration::seconds(1);
    assert_eq!(
        store
            .claim_batch_chunk(
                "lote-partilhado",
                "d",
                later,
                later + chrono::Duration::seconds(15)
            )
            .await
            .expect("d"),
        Some(c),
        "the dead instance's chunk, not the one waiting to be retried"
    );
    assert_eq!(
        store
            .claim_batch_chunk(
                "lote-partilhado",
                "d",
                retry,
                retry + chrono::Duration::seconds(15)
            )
            .await
            .expect("d"),
        Some(b)
    );
    assert_eq!(
        store
            .batch_chunks_open("lote-partilhado", retry)
            .await
            .expect("open"),
        (2, 1),
        "b's and c's open; c's new lease has run out by then too"
    );
    store
        .save_batch_lines(
            "lote-partilhado",
            &[
                vt_store::records::BatchLine {
                    line: 4,
                    status: LineStatus::Concluido,
                    result: json!({}),
                },
                vt_store::records::BatchLine {
                    line: 40,
                    status: LineStatus::Concluido,
                    result: json!({}),
                },
            ],
            &[],
            now,
        )
        .await
        .expect("lines");
    assert_eq!(
        store.ended_lines("lote-partilhado", 1, 32).await.expect("ended"),
        [4]
    );
    // Every chunk done, the job not marked finished (its last instance died in between): an instance
    // joins it, to finish it.
    for (chunk, owner) in [(b, "d"), (c, "d")] {
        store
            .release_batch_chunk("lote-partilhado", chunk, owner, true, retry)
            .await
            .expect("done");
    }
    assert_eq!(
        store
            .batch_chunks_open("lote-partilhado", retry)
            .await
            .expect("open"),
        (0, 0)
    );
    assert_eq!(
        store.claimable_batches(retry).await.expect("claimable"),
        ["lote-partilhado"]
    );
    store
        .finish_batch("lote-partilhado", retry)
        .await
        .expect("finish");
    assert_eq!(
        store
            .batch_chunks_open("lote-partilhado", retry)
            .await
            .expect("open"),
        (0, 0)
    );
    assert!(
        store
            .claimable_batches(retry)
            .await
            .expect("claimable")
            .is_empty()
    );
}

pub(crate) async fn a_batch_group_stores_every_run_stage_and_line(store: Arc<dyn Store>) {
    let now = t("2026-11-22T10:00:00Z");
    store
        .open_batch(&super::batch_job("lote-grupo", "empresa-a", now))
        .await
        .expect("batch");
    let run = |id: &str, stages: usize| FlowRunRecord {
        parent_execucao_id: None,
        execucao_id: id.into(),
        status: RunStatus::Concluido,
        input: json!({"cartao": id}),
        stages: (0..stages)
            .map(|i| (format!("rf{:02}", i + 1), json!({"etapa": i, "de": id})))
            .collect(),
        created_at: now,
    };
    let runs = vec![run("exec-g1", 10), run("exec-g2", 3)];
    let line = |n: i64, status: LineStatus| vt_store::records::BatchLine {
        line: n,
        status,
        result: json!({"line": n, "status": status.as_str()}),
    };
    let lines = vec![
        line(1, LineStatus::Concluido),
        line(2, LineStatus::Concluido),
        line(3, LineStatus::Erro),
    ];
    store
        .save_batch_lines("lote-grupo", &lines, &runs, now)
        .await
        .expect("group");
    for r in &runs {
        assert_eq!(
            store.flow_run(&r.execucao_id).await.expect("run").as_ref(),
            Some(r)
        );
    }
    assert_eq!(store.batch_lines("lote-grupo").await.expect("lines"), lines);
    // The line that failed, run again.
    store
        .save_batch_lines("lote-grupo", &[line(3, LineStatus::Concluido)], &[], now)
        .await
        .expect("rerun");
    assert_eq!(
        store.batch_lines("lote-grupo").await.expect("lines"),
        [
            line(1, LineStatus::Concluido),
            line(2, LineStatus::Concluido),
            line(3, LineStatus::Concluido)
        ]
    );
}
