//! `vt-agent systems check` and `vt-agent simulator`: the external systems, real or simulated.

use std::process::ExitCode;

use anyhow::Context as _;

use super::SimulatorArgs;
use crate::config::Config;

/// `vt-agent systems check`: see [`SystemsCommand::Check`](super::SystemsCommand::Check).
pub(super) async fn check_systems(config: &Config, cartao: &str) -> anyhow::Result<ExitCode> {
    let (systems, _simulator) = crate::app::systems(config)?;
    let found = systems.check(cartao).await;
    for check in &found {
        println!("{}", check.line());
    }
    Ok(if found.iter().all(|c| c.ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub(super) async fn simulator(args: SimulatorArgs) -> anyhow::Result<()> {
    let auth = args.auth()?;
    let sim = crate::app::simulator(&crate::config::SimulatorSettings {
        fixture: args.fixture,
        // A system of its own: its Pix charges and boletos are paid through
        // `POST /_simulador/pix/{txid}/pagar` and `POST /_simulador/boletos/{linha}/pagar`.
        pix_pagar_apos_segundos: Some(0),
        boleto_pagar_apos_segundos: Some(0),
        ..crate::config::SimulatorSettings::default()
    })?;
    if let Some(dir) = &args.tls {
        let (url, written) =
            crate::app::tls_simulator::serve(sim.router_behind(auth), args.port, dir).await?;
        eprintln!(
            "simulador de VT em {url} (TLS com certificado de cliente; autenticação: {}); para o cliente: ca_cert = {}, client_cert = {}, client_key = {} (Ctrl-C para parar)",
            args.auth,
            written.ca.display(),
            written.client_cert.display(),
            written.client_key.display()
        );
        tokio::signal::ctrl_c().await.context("esperando o Ctrl-C")?;
        return Ok(());
    }
    let running = sim.spawn_behind(args.port, auth).await?;
    eprintln!(
        "simulador de VT em {} (autenticação: {}; Ctrl-C para parar)",
        running.url, args.auth
    );
    tokio::signal::ctrl_c().await.context("esperando o Ctrl-C")?;
    running.task.abort();
    Ok(())
}
