//! `vt-agent simulator --tls DIR`: the simulator over TLS that asks every client for a certificate, as
//! a payment provider does. At start it makes a private CA, its own server certificate (for
//! `127.0.0.1` and `localhost`) and a client certificate, and writes what a client needs into DIR —
//! `ca.pem`, `cliente.pem`, `cliente.key` — so the product's `[systems.tls]` can point at them and the
//! whole mutual-TLS path runs offline.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, KeyUsagePurpose};

/// What a client of the simulator needs, written into the directory.
pub(crate) struct Written {
    pub ca: std::path::PathBuf,
    pub client_cert: std::path::PathBuf,
    pub client_key: std::path::PathBuf,
}

/// Makes the CA and certificates, writes the client's files into `dir`, and the server's TLS config.
fn pki(dir: &Path) -> anyhow::Result<(rustls::ServerConfig, Written)> {
    std::fs::create_dir_all(dir).with_context(|| format!("criando {}", dir.display()))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let server_key = KeyPair::generate()?;
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])?
        .signed_by(&server_key, &ca)?;
    let client_key = KeyPair::generate()?;
    let client = CertificateParams::new(Vec::<String>::new())?.signed_by(&client_key, &ca)?;
    let written = Written {
        ca: dir.join("ca.pem"),
        client_cert: dir.join("cliente.pem"),
        client_key: dir.join("cliente.key"),
    };
    let write = |path: &Path, text: String| {
        std::fs::write(path, text).with_context(|| format!("gravando {}", path.display()))
    };
    write(&written.ca, ca.pem())?;
    write(&written.client_cert, client.pem())?;
    write(&written.client_key, client_key.serialize_pem())?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone())?;
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()?;
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![server.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(server_key.serialize_der().into()),
        )?;
    Ok((config, written))
}

/// Serves `router` over TLS on `127.0.0.1:port`, asking for a client certificate of the CA it made;
/// the client's files go into `dir`. Returns the URL and what was written.
pub(crate) async fn serve(router: axum::Router, port: u16, dir: &Path) -> anyhow::Result<(String, Written)> {
    let (config, written) = pki(dir)?;
    Ok((serve_with(router, config, port).await?, written))
}

/// Serves `router` on `127.0.0.1:port` with `config` (which says what it asks of clients); a client
/// that fails the handshake is served nothing. Returns the URL.
pub async fn serve_with(
    router: axum::Router,
    config: rustls::ServerConfig,
    port: u16,
) -> std::io::Result<String> {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let url = format!("https://127.0.0.1:{}", listener.local_addr()?.port());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, router) = (acceptor.clone(), router.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper_util::service::TowerToHyperService::new(router);
                let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok(url)
}
