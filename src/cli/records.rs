//! What is on record, read from the command line: `outbox`, `cases`, `recorrencias`, `flows`, `audit`, `usage`.

use std::process::ExitCode;

use super::{
    AuditArgs, CasesArgs, EXIT_INPUT, FlowsArgs, OutboxArgs, RecorrenciasArgs, UsageArgs, say_error,
};
use crate::config::Config;
use vt_store::Usage;

pub(super) async fn outbox(
    config: &Config,
    store_usage: Usage,
    args: OutboxArgs,
) -> anyhow::Result<ExitCode> {
    use vt_store::OutboxStatus;
    let store = crate::app::store(config, store_usage).await?;
    if let Some(id) = args.retry {
        if store.requeue(id, chrono::Utc::now()).await? {
            println!("item {id} volta para a fila com novas tentativas");
            return Ok(ExitCode::SUCCESS);
        }
        say_error(&format!(
            "o item {id} não existe ou não está na fila de mortos (status failed)"
        ));
        return Ok(ExitCode::from(EXIT_INPUT));
    }
    let pending = store.outbox_items(OutboxStatus::Pending, args.limit).await?;
    let held = store.outbox_items(OutboxStatus::Held, args.limit).await?;
    let failed = store.outbox_items(OutboxStatus::Failed, args.limit).await?;
    print!("{}", crate::runs::outbox_report(&pending, &held, &failed));
    Ok(ExitCode::SUCCESS)
}

/// `vt-agent cases`: see [`Command::Cases`](super::Command::Cases).
pub(super) async fn cases(config: &Config, store_usage: Usage, args: CasesArgs) -> anyhow::Result<ExitCode> {
    let store = crate::app::store(config, store_usage).await?;
    if let Some(protocol) = &args.protocolo {
        let Some(case) = store.case_by_protocol(args.tenant.as_deref(), protocol).await? else {
            say_error(&format!("nenhum atendimento com o protocolo {}", protocol.trim()));
            return Ok(ExitCode::from(1));
        };
        let log = store.case_events(&case.id).await?;
        let tz = config.vt.politicas.timezone.clone();
        print!("{}", crate::runs::case_report(&case, &log, &tz));
        return Ok(ExitCode::SUCCESS);
    }
    let cases = store.cases(args.tenant.as_deref(), args.limit).await?;
    print!("{}", crate::runs::cases_report(&cases, chrono::Utc::now()));
    Ok(ExitCode::SUCCESS)
}

/// `vt-agent recorrencias`: see [`Command::Recorrencias`](super::Command::Recorrencias).
pub(super) async fn recorrencias(
    config: &Config,
    store_usage: Usage,
    args: RecorrenciasArgs,
) -> anyhow::Result<ExitCode> {
    let store = crate::app::store(config, store_usage).await?;
    let lines = crate::runs::recurrences(store.as_ref(), args.tenant.as_deref(), args.limit).await?;
    print!("{}", crate::runs::recurrences_report(&lines));
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn audit(config: &Config, store_usage: Usage, args: AuditArgs) -> anyhow::Result<()> {
    let store = crate::app::store(config, store_usage).await?;
    let records = store.audit_records(args.limit).await?;
    print!("{}", crate::runs::audit_report(&records));
    Ok(())
}

pub(super) async fn flows(config: &Config, store_usage: Usage, args: FlowsArgs) -> anyhow::Result<ExitCode> {
    let store = crate::app::store(config, store_usage).await?;
    if let Some(id) = &args.id {
        let Some(run) = store.flow_run(id).await? else {
            say_error("nenhuma execução com esse id (veja `vt-agent flows`)");
            return Ok(ExitCode::from(EXIT_INPUT));
        };
        print!("{}", crate::runs::flow_report(&run));
        return Ok(ExitCode::SUCCESS);
    }
    if args.pendentes {
        let followups = store.followups(true, args.limit).await?;
        let charges = store
            .charges_in(vt_store::ChargeStatus::Ativa, args.limit)
            .await?;
        let now = chrono::Utc::now();
        print!("{}", crate::runs::followups_report(&followups, now));
        print!("\n{}", crate::runs::pix_report(&charges, now));
        return Ok(ExitCode::SUCCESS);
    }
    let runs = store.flow_runs(args.limit).await?;
    let attempts = store.recharge_attempts(args.limit).await?;
    // What the listed runs' paid notices cost (a flow calls no model).
    let oldest = runs.iter().map(|r| r.created_at).min();
    let costs = match oldest {
        Some(since) => store.message_costs_since(since).await?,
        None => Vec::new(),
    };
    print!(
        "{}",
        crate::runs::report(&runs, (&attempts, &costs), chrono::Utc::now())
    );
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn usage(config: &Config, store_usage: Usage, args: UsageArgs) -> anyhow::Result<()> {
    let store = crate::app::store(config, store_usage).await?;
    let tz = &config.vt.politicas.timezone;
    let today = tz.local(chrono::Utc::now()).date_naive();
    let first = today - chrono::Days::new(u64::from(args.dias - 1));
    // From the day before in UTC: the local day starts up to a day earlier or later.
    let since = first.and_time(chrono::NaiveTime::MIN).and_utc() - chrono::Duration::days(1);
    if args.desfechos {
        let records = store.outcomes_since(since).await?;
        let groups = crate::usage::outcomes::by_day(&records, tz, first);
        if groups.is_empty() {
            println!("Nenhum atendimento terminado desde {first}.");
        } else {
            println!("{}", crate::usage::outcomes::table(&groups));
        }
    }
    if args.custos {
        let records = store.usage_since(since).await?;
        let messages = store.message_costs_since(since).await?;
        let flows = store.flow_runs_since(since).await?;
        let spending = crate::usage::Spending {
            turns: &records,
            messages: &messages,
            flows: &flows,
        };
        let rows = crate::usage::costs(spending, tz, first);
        if rows.is_empty() {
            println!("Nenhum turno registrado desde {first}.");
        } else {
            println!("{}", crate::usage::costs_table(&rows));
        }
        return Ok(());
    }
    if args.desfechos {
        return Ok(());
    }
    let rows = store
        .usage_summary(chrono::Utc::now() - chrono::Duration::days(7))
        .await?;
    if rows.is_empty() {
        println!("Nenhum turno registrado nos últimos 7 dias.");
        return Ok(());
    }
    println!("{}", crate::usage::table(&rows));
    Ok(())
}
