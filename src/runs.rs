//! What an operator reads from the command line: flow runs and recharge attempts (`vt-agent flows`) —
//! interrupted runs and attempts whose outcome is unknown stand out, keys shown so a rerun can be matched
//! to what was sent — and the outbox (`vt-agent outbox`): what waits to be sent and what was
//! dead-lettered, with the reason — and the automatic recharges (`vt-agent recorrencias`). Cards are masked
//! everywhere.

use chrono::{DateTime, Utc};
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};
use serde_json::Value;
use vt_domain::vt::mask_card;

use vt_store::{
    AuditRecord, FlowRunSummary, FollowUpView, MessageCost, OutboxItem, RechargeAttemptRecord, RunStatus,
};

/// A run still `em_andamento` after this long outlived every timeout of its stages: its process is gone.
const INTERRUPTED_AFTER: chrono::Duration = chrono::Duration::minutes(2);

/// What run `execucao_id` cost: its paid notices among `costs` (a flow calls no model; none is
/// R$ 0), unknown when one had no price.
fn run_cost(execucao_id: &str, costs: &[MessageCost]) -> Option<rust_decimal::Decimal> {
    costs
        .iter()
        .filter(|c| c.execucao_id.as_deref() == Some(execucao_id))
        .map(|c| c.custo_micro_brl.map(crate::costs::from_micro_brl))
        .sum()
}

/// The two tables, with a line saying what to do about unknown outcomes; each run with what its paid
/// notices (`costs`) cost.
pub fn report(
    runs: &[FlowRunSummary],
    (attempts, costs): (&[RechargeAttemptRecord], &[MessageCost]),
    now: DateTime<Utc>,
) -> String {
    let mut out = String::new();
    if runs.is_empty() {
        out.push_str("Nenhuma execução de fluxo registrada.\n");
    } else {
        let mut t = table(["execução", "status", "cartão", "início", "fim", "custo"]);
        for r in runs {
            let card = r.input.get("cartao").and_then(Value::as_str).map(mask_card);
            t.add_row([
                r.execucao_id.clone(),
                run_status(r, now),
                card.unwrap_or_default(),
                local(r.created_at),
                r.finished_at.map(local).unwrap_or_else(|| "—".into()),
                crate::costs::reais(run_cost(&r.execucao_id, costs)),
            ]);
        }
        out.push_str(&format!("Execuções de fluxo (mais recentes primeiro):\n{t}\n"));
    }
    if !attempts.is_empty() {
        let mut t = table([
            "chave de idempotência",
            "status",
            "cartão",
            "valor",
            "envios",
            "execução",
        ]);
        for a in attempts {
            t.add_row([
                a.attempt.idempotency_key.clone(),
                a.status.as_str().to_owned(),
                a.attempt.cartao_mascarado.clone(),
                money(&a.attempt.moeda, a.attempt.valor),
                a.sends.to_string(),
                a.attempt.execucao_id.clone(),
            ]);
        }
        out.push_str(&format!("\nTentativas de recarga:\n{t}\n"));
        if attempts.iter().any(|a| a.status.is_unknown()) {
            out.push_str(
                "\nTentativas `enviando` ou `pendente` têm resultado desconhecido: rodar de novo a mesma entrada \
                 (ou pedir a mesma recarga) reusa a mesma chave, e o sistema de recarga não cobra duas vezes.\n",
            );
        }
    }
    out
}

/// Recharges whose outcome is unknown, as `serve` follows them up: the next check and the deadline.
pub(crate) fn followups_report(followups: &[FollowUpView], now: DateTime<Utc>) -> String {
    if followups.is_empty() {
        return "Nenhuma recarga com resultado desconhecido.\n".into();
    }
    let mut t = table([
        "chave de idempotência",
        "status",
        "cartão",
        "valor",
        "verificações",
        "próxima verificação",
        "prazo",
        "execução",
    ]);
    for f in followups {
        let next = if f.next_check_at <= now {
            "agora (o `serve` verifica)".to_owned()
        } else {
            local(f.next_check_at)
        };
        t.add_row([
            f.attempt.attempt.idempotency_key.clone(),
            f.attempt.status.as_str().to_owned(),
            f.attempt.attempt.cartao_mascarado.clone(),
            money(&f.attempt.attempt.moeda, f.attempt.attempt.valor),
            f.checks.to_string(),
            next,
            local(f.deadline_at),
            f.attempt.attempt.execucao_id.clone(),
        ]);
    }
    format!(
        "Recargas com resultado desconhecido (a próxima verificação primeiro):\n{t}\n\
         O `serve` envia de novo a mesma requisição com a mesma chave até o prazo; depois, um atendente verifica.\n"
    )
}

/// Pix charges waiting for payment (the code the card holder has; no card in it).
pub(crate) fn pix_report(charges: &[vt_store::PixCharge], now: DateTime<Utc>) -> String {
    if charges.is_empty() {
        return "Nenhuma cobrança Pix esperando pagamento.\n".into();
    }
    let mut t = table(["txid", "valor", "código", "criada", "expira", "conversa"]);
    for c in charges {
        let expira = if c.expires_at <= now {
            format!("{} (expirou: o `serve` retira)", local(c.expires_at))
        } else {
            local(c.expires_at)
        };
        t.add_row([
            c.txid.clone(),
            money("BRL", c.amount),
            c.n.to_string(),
            local(c.created_at),
            expira,
            c.conversation_id.clone(),
        ]);
    }
    format!("Cobranças Pix esperando pagamento (a que expira primeiro antes):\n{t}\n")
}

/// Support agents' card lookups.
pub(crate) fn audit_report(records: &[AuditRecord]) -> String {
    if records.is_empty() {
        return "Nenhuma consulta de atendente registrada.\n".into();
    }
    let mut t = table([
        "quando",
        "atendente",
        "tenant",
        "canal",
        "cartão",
        "hash do cartão",
        "resultado",
    ]);
    for r in records {
        t.add_row([
            local(r.at),
            r.support_user.clone(),
            r.tenant_id.clone(),
            r.channel.clone(),
            r.cartao.clone(),
            r.cartao_hash.chars().take(16).collect(),
            r.outcome.clone(),
        ]);
    }
    format!("Consultas de atendentes (mais recentes primeiro):\n{t}\n")
}

/// Pending and dead-lettered outbox items.
/// `vt-agent cases`: open cases first, with how long they have waited or been claimed.
pub(crate) fn cases_report(cases: &[vt_store::Case], now: DateTime<Utc>) -> String {
    if cases.is_empty() {
        return "Nenhum atendimento registrado.\n".into();
    }
    let mut t = table([
        "protocolo",
        "equipe",
        "situação",
        "atendente",
        "canal",
        "conversa",
        "aberto há",
        "motivo",
    ]);
    for c in cases {
        let since = c.closed_at.unwrap_or(now);
        t.add_row([
            c.protocol.clone().unwrap_or_else(|| c.id.clone()),
            c.team.clone(),
            c.state.as_str().to_owned(),
            c.owner.clone().unwrap_or_else(|| "—".into()),
            c.channel.clone(),
            c.conversation_id.clone(),
            age(since - c.opened_at),
            format!(
                "{}: {}",
                c.motivo.label(),
                vt_domain::vt::card::mask_cards_in(&c.reason)
                    .chars()
                    .take(60)
                    .collect::<String>()
            ),
        ]);
    }
    format!("{t}\n")
}

/// A recurrence as the operator lists it: `vt-agent recorrencias`, the console's page.
#[derive(Debug, Clone)]
pub(crate) struct RecurrenceLine {
    pub recurrence: vt_store::Recurrence,
    /// "BRL 50,00 sempre que o saldo ficar abaixo de BRL 20,00".
    pub termos: String,
    /// `YYYY-MM-DD` of the next debit, when one is scheduled.
    pub proxima: Option<String>,
    /// How many of its charges were credited.
    pub creditadas: usize,
}

/// Every recurrence (of `tenant` when given), newest first, with its next debit.
pub(crate) async fn recurrences(
    store: &dyn vt_store::RecurrenceStore,
    tenant: Option<&str>,
    limit: i64,
) -> Result<Vec<RecurrenceLine>, vt_store::StoreError> {
    let listed = store.recurrence_listing(tenant, limit).await?;
    Ok(listed
        .into_iter()
        .map(|l| RecurrenceLine {
            termos: l.recurrence.termos().describe(),
            proxima: l.next_debit,
            creditadas: usize::try_from(l.credited).unwrap_or_default(),
            recurrence: l.recurrence,
        })
        .collect())
}

/// `vt-agent recorrencias`: the table.
pub(crate) fn recurrences_report(lines: &[RecurrenceLine]) -> String {
    if lines.is_empty() {
        return "Nenhuma recarga automática registrada.\n".into();
    }
    let mut t = table([
        "cartão",
        "inquilino",
        "termos",
        "situação",
        "próximo débito",
        "creditadas",
        "último resultado",
    ]);
    for l in lines {
        let r = &l.recurrence;
        t.add_row([
            r.card_masked.clone(),
            r.tenant_id.clone(),
            l.termos.clone(),
            r.status.as_str().to_owned(),
            l.proxima.clone().unwrap_or_else(|| "—".into()),
            l.creditadas.to_string(),
            vt_domain::vt::card::mask_cards_in(r.last_outcome.as_deref().unwrap_or("—")),
        ]);
    }
    format!("{t}\n")
}

/// One case as `vt-agent cases --protocolo` prints it: what it is, then its log (cards masked).
pub(crate) fn case_report(
    case: &vt_store::Case,
    log: &[vt_store::CaseEvent],
    tz: &vt_domain::vt::timezone::Timezone,
) -> String {
    let when = |t: DateTime<Utc>| tz.local(t).format("%d/%m/%Y %H:%M").to_string();
    let mask = |t: &str| vt_domain::vt::card::mask_cards_in(t);
    let mut out = format!(
        "protocolo  {}\ncaso       {}\nequipe     {}\nmotivo     {} ({})\nsituação   {}\natendente  {}\ncanal      {}\nconversa   {}\naberto em  {}\n",
        case.protocol.as_deref().unwrap_or("—"),
        case.id,
        case.team,
        case.motivo.label(),
        mask(&case.reason),
        case.state.as_str(),
        case.owner.as_deref().unwrap_or("—"),
        case.channel,
        case.conversation_id,
        when(case.opened_at),
    );
    if let Some(closed) = case.closed_at {
        out.push_str(&format!("encerrado  {}\n", when(closed)));
    }
    let mut t = table(["quando", "quem", "o quê", "detalhe"]);
    for e in log {
        let detail: String = e
            .detail
            .as_deref()
            .map(mask)
            .unwrap_or_default()
            .chars()
            .take(80)
            .collect();
        t.add_row([when(e.at), e.who.clone(), e.what.clone(), detail]);
    }
    format!("{out}\n{t}\n")
}

/// A duration as people say it: `45 s`, `12 min`, `3 h 05 min`, `2 d 4 h`.
fn age(d: chrono::Duration) -> String {
    let s = d.num_seconds().max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3_600 => format!("{} min", s / 60),
        3_600..86_400 => format!("{} h {:02} min", s / 3_600, s % 3_600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3_600),
    }
}

pub(crate) fn outbox_report(pending: &[OutboxItem], held: &[OutboxItem], failed: &[OutboxItem]) -> String {
    let mut out = String::new();
    for (title, items) in [
        ("Na fila", pending),
        ("Aguardando o cliente escrever (fora da janela de 24 h)", held),
        ("Não entregues", failed),
    ] {
        if items.is_empty() {
            out.push_str(&format!("{title}: nenhum.\n"));
            continue;
        }
        let mut t = table([
            "id",
            "canal",
            "conversa",
            "tentativas",
            "próxima",
            "motivo",
            "texto",
        ]);
        for i in items {
            let text = crate::outbox::ReplyPayload::of(i)
                .map(|r| r.text)
                .unwrap_or_default();
            let text: String = vt_domain::vt::card::mask_cards_in(&text)
                .chars()
                .take(60)
                .collect();
            t.add_row([
                i.id.to_string(),
                i.destination.clone(),
                i.conversation_id.clone().unwrap_or_default(),
                format!("{}/{}", i.attempts, i.max_attempts),
                local(i.next_attempt_at),
                i.last_error.clone().unwrap_or_default(),
                text,
            ]);
        }
        out.push_str(&format!("{title}:\n{t}\n"));
    }
    out
}

fn table<const N: usize>(header: [&str; N]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header);
    t
}

/// A recharge's value as people read it (`BRL 60,00`).
fn money(moeda: &str, valor: rust_decimal::Decimal) -> String {
    vt_domain::vt::format_money(moeda, valor, vt_domain::vt::Idioma::PtBr)
}

fn run_status(r: &FlowRunSummary, now: DateTime<Utc>) -> String {
    if r.status == RunStatus::EmAndamento && now - r.created_at > INTERRUPTED_AFTER {
        "interrompida".into()
    } else {
        r.status.as_str().to_owned()
    }
}

/// One flow run whole: its status, input and each stage's output, cards masked (ids, keys and times
/// whole).
pub(crate) fn flow_report(run: &vt_store::FlowRunRecord) -> String {
    let mask = |s: &str| vt_contract::redact::secrets(&vt_domain::vt::card::mask_cards_in(s)).into_owned();
    let pretty =
        |v: &Value| vt_contract::json::to_pretty(&crate::flow::masked_json(v, mask)).unwrap_or_default();
    let mut out = format!(
        "execução {} · {} · iniciada {}\n\nentrada:\n{}\n",
        run.execucao_id,
        run.status.as_str(),
        local(run.created_at),
        pretty(&run.input)
    );
    // The stages are the run's output: its `resultado` is the last one.
    for (stage, output) in &run.stages {
        out.push_str(&format!("\n{stage}:\n{}\n", pretty(output)));
    }
    out
}

fn local(t: DateTime<Utc>) -> String {
    vt_domain::vt::timezone::Timezone::sao_paulo()
        .local(t)
        .format("%d/%m/%Y %H:%M:%S")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_old_unfinished_run_shows_as_interrupted_and_cards_are_masked() {
        let now = Utc::now();
        let run = |status: RunStatus, age: i64| FlowRunSummary {
            execucao_id: format!("exec-{}-{age}", status.as_str()),
            status,
            input: json!({"cartao": "9999999999"}),
            created_at: now - chrono::Duration::minutes(age),
            finished_at: None,
        };
        let text = report(
            &[run(RunStatus::EmAndamento, 10), run(RunStatus::EmAndamento, 0)],
            (&[], &[]),
            now,
        );
        assert!(
            text.contains("interrompida") && text.contains("em_andamento"),
            "{text}"
        );
        assert!(
            text.contains("****9999") && !text.contains("9999999999"),
            "{text}"
        );
    }
}
