//! `vt-agent serve`: the HTTP API and everything it runs, until Ctrl-C or SIGTERM.

use std::process::ExitCode;

use anyhow::Context as _;

use super::{EXIT_INPUT, ServeArgs};
use crate::config::Config;

pub(super) async fn serve(mut config: Config, args: ServeArgs) -> anyhow::Result<ExitCode> {
    if let Some(addr) = args.addr {
        config.http.addr = addr;
    }
    let Ok(addr) = config.http.addr.parse::<std::net::SocketAddr>() else {
        eprintln!(
            "erro: endereço inválido em --addr / VT_HTTP_ADDR / [http] addr (use HOST:PORTA, ex.: 127.0.0.1:8080)"
        );
        return Ok(ExitCode::from(EXIT_INPUT));
    };
    if config.http.api_keys.is_empty() && !addr.ip().is_loopback() {
        eprintln!(
            "erro: sem chaves de API configuradas ([[http.api_keys]]) o serviço só atende em loopback \
             (127.0.0.1 ou ::1); configure chaves para escutar em {}",
            addr.ip()
        );
        return Ok(ExitCode::from(EXIT_INPUT));
    }
    let server = crate::app::serve::Server::compose(&config).await?;
    for notice in &server.notices {
        eprintln!("{notice}");
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("abrindo {addr}"))?;
    let bound = listener.local_addr()?;
    let access = if server.is_open() {
        "sem chaves de API: aberto, só em loopback"
    } else {
        "chaves de API exigidas"
    };
    eprintln!("vt-agent serve em http://{bound} ({access}). Ctrl-C ou SIGTERM para parar.");
    eprintln!(
        "console web em http://{bound}/console{}",
        if config.console.secret.is_none() {
            " (sem console.secret: as sessões terminam quando o serve parar)"
        } else {
            ""
        }
    );
    server.run(listener, shutdown_signal()).await?;
    eprintln!("vt-agent serve parou: pedidos em andamento concluídos.");
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C, or SIGTERM where there is one.
pub(super) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
