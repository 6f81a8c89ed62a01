//! The console's usage page and metrics: a tenant past 80 % of its monthly budget, how conversations
//! ended and what they cost, payment codes whole and masked, the questions the FAQ did not answer.

use crate::console::*;
use crate::support::{Served, chat_harness};
use chrono::Utc;
use std::sync::Arc;
use vt_store::records::UsageRecord;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_usage_page_warns_of_a_tenant_past_80_percent_of_its_monthly_budget() {
    let chat = Arc::new(
        crate::support::chat_harness_budgeted(vec![vt_agent::testkit::Orcamento {
            tenant: "default".into(),
            mensal_brl: rust_decimal::Decimal::ONE,
        }])
        .await,
    );
    // R$ 0,85 spent this month (by the service's clock) of R$ 1,00.
    chat.store
        .record_usage(&UsageRecord {
            conversation_id: "conversa-cara".into(),
            intent_key: "general_chat".into(),
            action_type: "reasoning".into(),
            created_at: chat.clock.now(),
            tenant_id: "default".into(),
            custo_micro_brl: Some(850_000),
            ..Default::default()
        })
        .await
        .expect("usage");
    let s = serve_with(chat).await;
    let html = usage_page(&s).await;
    assert!(
        html.contains("Orçamento do mês do tenant default: 85 % usado"),
        "the banner: {html}"
    );
    assert!(!html.contains("o modelo não é chamado"), "not spent yet");
    // What the tenant spent in the period: one conversation of R$ 0,85, no flow run.
    assert!(
        html.contains(
            "<tr><td>default</td><td>1</td><td>R$ 0,85</td><td>R$ 0,85</td><td>0</td><td>—</td></tr>"
        ),
        "the spending table: {html}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_usage_page_and_the_metrics_show_how_conversations_ended_and_what_people_scored() {
    let chat = Arc::new(crate::support::chat_harness(None, Default::default()).await);
    let now = Utc::now();
    let outcome = |id: &str, desfecho, nota, custo| vt_store::records::OutcomeRecord {
        id: id.into(),
        conversation_id: format!("conversa-{id}"),
        tenant_id: "default".into(),
        channel: "whatsapp".into(),
        desde: None,
        ate: now - chrono::Duration::hours(1),
        desfecho,
        intencao: "consultar_saldo".into(),
        assunto: "saldo".into(),
        caso_id: None,
        custo_micro_brl: custo,
        reaberta: false,
        reabre: None,
        pesquisa_em: None,
        nota,
        created_at: now,
    };
    use vt_store::records::Desfecho as D;
    for o in [
        outcome("a", D::ResolvidaPeloBot, Some(5), Some(20_000)),
        outcome("b", D::ResolvidaPeloBot, Some(4), Some(20_000)),
        outcome("c", D::ResolvidaPorPessoa, Some(3), Some(40_000)),
        outcome("d", D::Abandonada, None, Some(0)),
    ] {
        assert!(chat.store.record_outcome(&o).await.expect("outcome"));
    }
    let s = serve_with(chat).await;
    let html = no_redirects()
        .get(format!("{}/console/usage", s.url))
        .header("cookie", session("operacao", 600, SECRET))
        .send()
        .await
        .expect("request")
        .text()
        .await
        .expect("html");
    assert!(html.contains("Como as conversas terminaram"), "{html}");
    // The bot's scores (5 and 4) apart from the person's (3).
    assert!(html.contains("resolvidos pelo bot</dt><dd>4,5</dd>"), "{html}");
    assert!(html.contains("resolvidos por pessoa</dt><dd>3,0</dd>"), "{html}");
    // Half by the bot, a quarter by a person, a quarter abandoned; R$ 0,08 over three resolved.
    let row = html
        .split("<tr>")
        .find(|r| r.contains("<td>consultar_saldo</td>"))
        .expect("the intent's row");
    for cell in [
        "<td>4</td>",
        "<td>50,0</td>",
        "<td>25,0</td>",
        "<td>0,0</td>",
        "<td>4,5</td>",
        "R$ 0,0267",
    ] {
        assert!(row.contains(cell), "{cell} in {row}");
    }
    let metrics = s
        .client
        .get(format!("{}/metrics", s.url))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    for line in [
        "vt_desfechos_30d{tenant=\"default\",desfecho=\"resolvida_pelo_bot\"} 2",
        "vt_desfechos_30d{tenant=\"default\",desfecho=\"abandonada\"} 1",
        "vt_desfechos_30d{tenant=\"default\",desfecho=\"reaberta\"} 0",
        "vt_nota_media_30d{tenant=\"default\",quem=\"bot\"} 4.5",
        "vt_nota_media_30d{tenant=\"default\",quem=\"pessoa\"} 3.0",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    assert!(
        metrics.contains("vt_custo_por_resolvida_reais_30d{tenant=\"default\"} 0.0266"),
        "{metrics}"
    );
}

/// A conversation's own payment codes are its person's to copy: the console's conversation page, a
/// support agent's (masked) transcript download and the HTTP API's conversation view show the Pix
/// copia-e-cola, the payment's endToEndId and a boleto's line whole — and still mask the card.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_views_show_the_conversations_payment_codes_whole_and_still_mask_the_card() {
    let chat = Arc::new(crate::support::chat_harness_paying().await);
    let conv = "c-codigos";
    chat.say(conv, "recarregar 20 no cartão 1234567890 via pix").await;
    let code = chat.say(conv, "sim").await.replies[1].text.clone();
    let txid = chat
        .store
        .conversation_charges(conv)
        .await
        .expect("charges")
        .pop()
        .expect("a charge")
        .txid;
    let paid = chat.sim.pix().pay(&txid, false).expect("paid");
    chat.service.payments().settle(&txid).await.expect("settled");
    chat.say(conv, "recarregar 20 no cartão 1234567890 no boleto")
        .await;
    let boleto = chat.say(conv, "sim").await.replies[1].text.clone();
    assert_eq!(
        boleto.chars().filter(char::is_ascii_digit).count(),
        47,
        "{boleto}"
    );
    let e2e = paid.end_to_end_id.clone();
    let s = serve_with(chat).await;
    let unescape = |html: String| html.replace("&#x2f;", "/").replace("&amp;", "&");
    let support = session("suporte", 600, SECRET);
    let page = no_redirects()
        .get(format!("{}/console/conversations/{conv}", s.url))
        .header("cookie", &support)
        .send()
        .await
        .expect("page");
    let html = unescape(page.text().await.expect("html"));
    let api: serde_json::Value = reqwest::Client::new()
        .get(format!("{}/v1/conversations/{conv}", s.url))
        .bearer_auth(CLIENT)
        .send()
        .await
        .expect("view")
        .json()
        .await
        .expect("json");
    let api = api.to_string();
    for (view, text) in [("console", &html), ("api", &api)] {
        for whole in [code.as_str(), e2e.as_str(), boleto.as_str()] {
            assert!(text.contains(whole), "{view}: {whole} shown whole in {text}");
        }
        assert!(!text.contains("1234567890"), "{view}: the card in clear");
        assert!(text.contains("****7890"), "{view}: the card masked");
    }
}

/// The usage page as an admin reads it.
pub(crate) async fn usage_page(s: &Served) -> String {
    let page = no_redirects()
        .get(format!("{}/console/usage", s.url))
        .header("cookie", session("operacao", 600, SECRET))
        .send()
        .await
        .expect("request");
    assert_eq!(page.status(), 200);
    page.text().await.expect("html")
}

/// The usage page lists the questions neither a rule nor the FAQ answered (they went to the model),
/// cards masked — and not those the FAQ answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_usage_page_lists_the_questions_the_faq_did_not_answer() {
    use vt_engine::llm::scripted::Scripted;
    use vt_engine::llm::scripted::ScriptedProvider;
    let llm = Arc::new(ScriptedProvider::new([
        Scripted::text("general_chat"),
        Scripted::text("O VT é para o transporte; o VR, para as refeições."),
    ]));
    let chat = Arc::new(chat_harness(Some(llm), vt_domain::tools::VtSettings::default()).await);
    chat.say("sem-faq", "o cartão 1234567890 serve de vale refeição?")
        .await;
    let faq = chat.say("com-faq", "como faço pra recarregar?").await;
    assert!(
        faq.reply_text().contains("confirmação"),
        "the FAQ answered: {}",
        faq.reply_text()
    );
    let s = serve_with(chat).await;
    let html = usage_page(&s).await;
    let section = html
        .split("id=\"tabela-sem-resposta\"")
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .unwrap_or_else(|| panic!("the section's table: {html}"));
    assert!(
        section.contains("o cartão ****7890 serve de vale refeição?"),
        "{section}"
    );
    assert!(!section.contains("1234567890"), "a card in clear: {section}");
    assert!(
        !section.contains("recarregar"),
        "the FAQ answered that one: {section}"
    );
}
