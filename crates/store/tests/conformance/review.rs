//! The review queue: a message flagged once per source however often, labelled or dismissed once,
//! its note and expectation kept; the FAQ's decisions, the first one standing.

use super::*;
use vt_store::{Expectation, FaqDecision, NewReviewItem, ReviewLabel, ReviewState};

pub(crate) async fn a_flag_is_queued_once_and_labelled_once(store: Arc<dyn Store>) {
    let now = t("2026-11-23T10:00:00Z");
    let item = |tenant: &str, message: i64, source: &str| NewReviewItem {
        tenant_id: tenant.into(),
        conversation_id: format!("c-rev-{tenant}"),
        message_id: message,
        source: source.into(),
        reason: Some("informacao_incorreta".into()),
        note: Some("disse que não tem taxa; tem".into()),
        flagged_by: Some("ana".into()),
        created_at: now,
    };
    let first = store
        .enqueue_review(&item("A", 7, "sinalizada"))
        .await
        .expect("flag");
    assert!(first.is_some());
    // The same message flagged again for the same source is the same item; another source is another.
    assert_eq!(
        store
            .enqueue_review(&item("A", 7, "sinalizada"))
            .await
            .expect("again"),
        None
    );
    let auto = store
        .enqueue_review(&item("A", 7, "csat_baixo"))
        .await
        .expect("auto");
    assert!(auto.is_some() && auto != first);
    store
        .enqueue_review(&item("B", 3, "sinalizada"))
        .await
        .expect("B");

    assert_eq!(store.flagged_messages("c-rev-A").await.expect("flagged"), vec![7]);
    assert!(store.flagged_messages("c-rev-C").await.expect("none").is_empty());
    let of_a = store.review_items(Some("A"), 10).await.expect("A's");
    assert_eq!(of_a.len(), 2);
    assert!(
        of_a.iter()
            .all(|i| i.item.tenant_id == "A" && i.state == ReviewState::Aberto)
    );
    assert_eq!(store.review_items(None, 10).await.expect("all").len(), 3);

    let id = first.expect("id");
    let kept = store.review_item(id).await.expect("read").expect("there");
    assert_eq!(
        kept.item,
        item("A", 7, "sinalizada"),
        "the note comes back opened"
    );
    let label = ReviewLabel {
        labels: vec!["faltou_informacao".into()],
        expectation: Expectation {
            contains: vec!["taxa".into()],
            ..Expectation::default()
        },
        test_file: "revisao-1.yaml".into(),
        by: "root".into(),
        at: now,
    };
    assert!(store.label_review(id, &label).await.expect("label"));
    assert!(
        !store.label_review(id, &label).await.expect("twice"),
        "labelled once"
    );
    assert!(
        !store.dismiss_review(id, "root", now).await.expect("dismiss"),
        "not open any more"
    );
    let labelled = store.review_item(id).await.expect("read").expect("there");
    assert_eq!(labelled.state, ReviewState::Rotulado);
    assert_eq!(labelled.labels, label.labels);
    assert_eq!(labelled.expectation, Some(label.expectation));
    assert_eq!(labelled.test_file.as_deref(), Some("revisao-1.yaml"));
    assert!(
        store
            .dismiss_review(auto.expect("id"), "root", now)
            .await
            .expect("dismiss")
    );

    let decision = |what: &str| FaqDecision {
        tenant_id: "A".into(),
        suggestion: "s-1".into(),
        decision: what.into(),
        entry: None,
        decided_by: "root".into(),
        decided_at: now,
    };
    assert!(store.decide_faq(&decision("aprovada")).await.expect("decide"));
    assert!(!store.decide_faq(&decision("descartada")).await.expect("again"));
    let kept = store.faq_decisions("A").await.expect("decisions");
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].decision, "aprovada");
    assert!(store.faq_decisions("B").await.expect("B").is_empty());
}
