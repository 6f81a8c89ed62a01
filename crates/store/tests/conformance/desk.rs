//! The live desk: the log read by sequence with each case's tenant, team and protocol; lines of one
//! kind over a time, one tenant's only; a transfer's note written with the move; canned answers kept,
//! replaced and removed per tenant.

use super::*;
use vt_store::{CannedAnswer, CaseTransfer};

pub(crate) async fn the_desk_log_is_read_by_sequence_and_canned_answers_are_kept_per_tenant(
    store: Arc<dyn Store>,
) {
    let now = t("2026-11-23T10:00:00Z");
    let head = store.desk_head().await.expect("head");
    let new = |id: &str, conv: &str, tenant: &str| NewCase {
        id: id.into(),
        conversation_id: conv.into(),
        tenant_id: tenant.into(),
        channel: "whatsapp".into(),
        reason: "pediu um atendente".into(),
        team: "atendimento".into(),
        protocol: format!("20261123-{id}"),
        ..NewCase::default()
    };
    store
        .open_case(&new("d-1", "c-d1", "A"), now)
        .await
        .expect("open A");
    store
        .open_case(&new("d-2", "c-d2", "B"), now)
        .await
        .expect("open B");
    let moved = store
        .transfer_case(&CaseTransfer {
            case_id: "d-1".into(),
            who: "ana".into(),
            note: Some("segue para o financeiro".into()),
            team: "financeiro".into(),
            owner: Some("bia".into()),
            now: now + chrono::Duration::minutes(5),
        })
        .await
        .expect("transfer")
        .expect("open");
    assert_eq!(moved.team, "financeiro");

    // Read after the head: the openings (naming their team), the note, then the transfer — each with
    // its case's tenant and team now.
    let lines = store.desk_lines(head, 100).await.expect("lines");
    let seen: Vec<(&str, &str, &str, Option<&str>)> = lines
        .iter()
        .map(|l| {
            (
                l.line.case_id.as_str(),
                l.line.what.as_str(),
                l.tenant_id.as_str(),
                l.line.detail.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("d-1", "aberto", "A", Some("atendimento")),
            ("d-2", "aberto", "B", Some("atendimento")),
            ("d-1", "nota_interna", "A", Some("segue para o financeiro")),
            ("d-1", "transferido", "A", Some("financeiro (@bia)")),
        ]
    );
    assert!(lines.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(lines[3].team, "financeiro");
    assert_eq!(lines[0].protocol.as_deref(), Some("20261123-d-1"));
    assert_eq!(store.desk_head().await.expect("head"), lines[3].seq);
    assert_eq!(store.desk_lines(lines[1].seq, 1).await.expect("one").len(), 1);

    // Lines of one kind, one tenant's only, in the time asked.
    let (from, to) = (now, now + chrono::Duration::hours(1));
    let notes = store
        .case_lines(Some("A"), "nota_interna", from, to)
        .await
        .expect("A");
    assert_eq!(notes.len(), 1);
    assert!(
        store
            .case_lines(Some("B"), "nota_interna", from, to)
            .await
            .expect("B")
            .is_empty()
    );
    let later = to + chrono::Duration::hours(1);
    assert!(
        store
            .case_lines(None, "nota_interna", to, later)
            .await
            .expect("later")
            .is_empty()
    );

    // Canned answers: kept, replaced by shortcut, per tenant, removed once.
    let answer = |tenant: &str, shortcut: &str, team: Option<&str>, body: &str| CannedAnswer {
        tenant_id: tenant.into(),
        shortcut: shortcut.into(),
        team: team.map(str::to_owned),
        body: body.into(),
        updated_by: "operacao".into(),
        updated_at: now,
    };
    store
        .save_canned_answer(&answer("A", "ola", None, "Olá {nome}!"))
        .await
        .expect("save");
    store
        .save_canned_answer(&answer("A", "prazo", Some("financeiro"), "Até 2 dias úteis."))
        .await
        .expect("save");
    store
        .save_canned_answer(&answer("B", "ola", None, "Oi!"))
        .await
        .expect("save B");
    store
        .save_canned_answer(&answer("A", "ola", None, "Olá, {nome}!"))
        .await
        .expect("replace");
    let kept = store.canned_answers("A").await.expect("A's");
    assert_eq!(
        kept,
        [
            answer("A", "ola", None, "Olá, {nome}!"),
            answer("A", "prazo", Some("financeiro"), "Até 2 dias úteis."),
        ]
    );
    assert!(store.delete_canned_answer("A", "ola").await.expect("delete"));
    assert!(!store.delete_canned_answer("A", "ola").await.expect("again"));
    assert_eq!(store.canned_answers("B").await.expect("B's").len(), 1);
}
