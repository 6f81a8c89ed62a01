//! Mutual TLS to the external systems: certificates made at test time (a private CA, the server's, a
//! good client's, an expired one), the simulator served over TLS on loopback asking for a client
//! certificate. With the right identity and the CA trusted, a flow runs; without a certificate the
//! system refuses and the check says so; an expired certificate or a key of another certificate stops
//! the client from being built, naming the file.

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, KeyUsagePurpose};
use vt_connectors::TlsConfig;
use vt_connectors::systems::{SystemsConfig, VtSystems};
use vt_domain::systems::SystemsPort;
use vt_simulators::systems::Simulator;

use crate::support::quick_simulator;

/// The certificates of one test, written as PEM files.
struct Pki {
    dir: tempfile::TempDir,
    ca_der: rustls::pki_types::CertificateDer<'static>,
    server: (
        rustls::pki_types::CertificateDer<'static>,
        rustls::pki_types::PrivateKeyDer<'static>,
    ),
}

impl Pki {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tmp");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("key")).expect("ca");
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).expect("write");
        let server_key = KeyPair::generate().expect("key");
        let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .expect("params")
            .signed_by(&server_key, &ca)
            .expect("server cert");
        let write_client = |name: &str, params: CertificateParams| {
            let key = KeyPair::generate().expect("key");
            let cert = params.signed_by(&key, &ca).expect("client cert");
            std::fs::write(dir.path().join(format!("{name}.pem")), cert.pem()).expect("write");
            std::fs::write(dir.path().join(format!("{name}.key")), key.serialize_pem()).expect("write");
        };
        write_client(
            "cliente",
            CertificateParams::new(Vec::<String>::new()).expect("params"),
        );
        let mut expired = CertificateParams::new(Vec::<String>::new()).expect("params");
        expired.not_before = rcgen::date_time_ymd(2020, 1, 1);
        expired.not_after = rcgen::date_time_ymd(2021, 1, 1);
        write_client("vencido", expired);
        write_client(
            "outro",
            CertificateParams::new(Vec::<String>::new()).expect("params"),
        );
        Self {
            ca_der: ca.der().clone(),
            server: (
                server.der().clone(),
                rustls::pki_types::PrivateKeyDer::Pkcs8(server_key.serialize_der().into()),
            ),
            dir,
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn tls(&self, cert: Option<&str>, key: Option<&str>) -> TlsConfig {
        TlsConfig {
            client_cert: cert.map(|c| self.file(c)),
            client_key: key.map(|k| self.file(k)),
            ca_cert: Some(self.file("ca.pem")),
        }
    }
}

/// The simulator over TLS on loopback, asking every client for a certificate of the CA.
async fn serve_tls(pki: &Pki, sim: &Simulator) -> String {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca_der.clone()).expect("root");
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .expect("verifier");
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![pki.server.0.clone()], pki.server.1.clone_key())
        .expect("server config");
    vt_agent::testkit::serve_with(sim.router(), config, 0)
        .await
        .expect("serve")
}

fn systems(url: &str, tls: TlsConfig) -> SystemsConfig {
    SystemsConfig {
        timeout_cap_ms: Some(3_000),
        max_retry_wait_ms: 20,
        tls,
        ..SystemsConfig::single(url)
    }
}

fn built_error(config: SystemsConfig) -> String {
    match VtSystems::new(config) {
        Ok(_) => panic!("the client was built"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_runs_over_mutual_tls_and_a_bad_certificate_is_named() {
    let pki = Pki::new();
    let sim = Simulator::new(quick_simulator());
    let url = serve_tls(&pki, &sim).await;

    // The right identity and the CA trusted: the check passes and a flow with a recharge runs.
    let good = systems(&url, pki.tls(Some("cliente.pem"), Some("cliente.key")));
    let checks = VtSystems::new(good.clone())
        .expect("client")
        .check("1234567890")
        .await;
    assert!(checks.iter().all(|c| c.ok), "{checks:?}");
    let ext = vt_contract::context::Extensions::default()
        .with(SystemsPort::new(VtSystems::new(good).expect("client")));
    let engine = vt_agent::build_engine(&vt_agent::Config::default(), None, ext).expect("engine");
    let input = r#"{"cartao": "1234567890", "recarga": {"valor": 20, "meio_pagamento": {"tipo": "pix", "token": "tok_x"}}}"#;
    let ran = vt_agent::run_flow(&engine, input).await.expect("flow");
    assert_eq!(
        ran.output.status,
        vt_agent::FlowStatus::Concluido,
        "{:?}",
        ran.output
    );
    assert_eq!(sim.charges("1234567890"), 1);

    // No client certificate: the server refuses the handshake and serves nothing. The client sees a
    // refused connection, or — in TLS 1.3, where the refusal comes after its side of the handshake —
    // no answer before its timeout; either way no system answered.
    let none = VtSystems::new(systems(&url, pki.tls(None, None)))
        .expect("client")
        .check("1234567890")
        .await;
    assert!(none.iter().all(|c| !c.ok && c.status.is_none()), "{none:?}");

    // Files that cannot serve stop the start, naming the file and why.
    let expired = built_error(systems(&url, pki.tls(Some("vencido.pem"), Some("vencido.key"))));
    assert!(
        expired.contains("vencido.pem") && expired.contains("venceu"),
        "{expired}"
    );
    let missing = built_error(systems(
        &url,
        pki.tls(Some("nao-existe.pem"), Some("cliente.key")),
    ));
    assert!(
        missing.contains("nao-existe.pem") && missing.contains("não pôde ser lido"),
        "{missing}"
    );
    let lone = built_error(systems(&url, pki.tls(Some("cliente.pem"), None)));
    assert!(
        lone.contains("cliente.pem") && lone.contains("client_key"),
        "{lone}"
    );
    let mismatched = built_error(systems(&url, pki.tls(Some("cliente.pem"), Some("outro.key"))));
    assert!(
        mismatched.contains("outro.key") && mismatched.contains("não corresponde"),
        "{mismatched}"
    );
    assert_eq!(sim.charges("1234567890"), 1, "nothing else was charged");
}

/// `vt-agent simulator --tls DIR --auth oauth2` makes its certificates and serves over mutual TLS:
/// `systems check` with the files it wrote passes (token over TLS too); without the client
/// certificate it fails, naming each system.
#[test]
fn the_simulator_serves_mutual_tls_with_certificates_it_makes() {
    let secret = "segredo-do-simulador-tls-0123";
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let data = tempfile::tempdir().expect("tmp");
    let pki = data.path().join("pki");
    let mut simulator = crate::cli::vt_agent_in(&data)
        .env("VT_SIMULATOR_CLIENT_SECRET", secret)
        .args([
            "simulator",
            "--port",
            &port.to_string(),
            "--auth",
            "oauth2",
            "--tls",
        ])
        .arg(&pki)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("simulator");
    let up = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        pki.join("cliente.key").exists() && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(up, "the simulator listens and wrote the client's files");
    let url = format!("https://127.0.0.1:{port}");
    let config = |with_identity: bool| {
        let identity = if with_identity {
            format!(
                "client_cert = \"{}\"\nclient_key = \"{}\"\n",
                pki.join("cliente.pem").display(),
                pki.join("cliente.key").display()
            )
        } else {
            String::new()
        };
        let file = data.path().join(format!("vt-agent-{with_identity}.toml"));
        std::fs::write(
            &file,
            format!(
                "[systems]\nsaldo_url = \"{url}\"\nrecarga_url = \"{url}\"\nnotificacao_url = \"{url}\"\n[systems.auth]\nkind = \"oauth2\"\ntoken_url = \"{url}/oauth/token\"\nclient_id = \"vt-agent\"\n[systems.tls]\nca_cert = \"{}\"\n{identity}",
                pki.join("ca.pem").display()
            ),
        )
        .expect("config");
        file
    };
    let check = |file: PathBuf| {
        crate::cli::vt_agent_in(&data)
            .env("VT_SYSTEMS_CLIENT_SECRET", secret)
            .arg("--config")
            .arg(file)
            .args(["systems", "check"])
            .output()
            .expect("check")
    };
    let good = check(config(true));
    let bad = check(config(false));
    let _ = simulator.kill();
    let _ = simulator.wait();
    let said = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    };
    assert_eq!(good.status.code(), Some(0), "{}", said(&good));
    assert_eq!(
        said(&good).lines().filter(|l| l.starts_with("ok")).count(),
        4,
        "{}",
        said(&good)
    );
    assert_eq!(bad.status.code(), Some(1), "{}", said(&bad));
    assert!(said(&bad).contains("FALHA saldo"), "{}", said(&bad));
    assert_eq!(
        said(&good).matches("tls: certificado de cliente aceito").count(),
        4,
        "{}",
        said(&good)
    );
    assert!(!said(&good).contains(secret) && !said(&bad).contains(secret));
}

/// The payment provider asks for the operator's client certificate too (every PSP does): with
/// `[pix.tls]` a charge is created and read back over mutual TLS; without a certificate nothing is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pix_provider_is_reached_over_mutual_tls_and_refuses_a_client_without_a_certificate() {
    use vt_connectors::pix::{PixConfig, Psp};
    use vt_domain::pix::api::{Calendario, CobPedido, CobStatus, ValorOriginal};
    let pki = Pki::new();
    let sim = Simulator::new(quick_simulator());
    let url = serve_tls(&pki, &sim).await;
    let pix = |tls: TlsConfig| PixConfig {
        api_url: format!("{url}/pix/v2"),
        chave: "recargas@operadora.example.com.br".into(),
        tls,
        ..PixConfig::default()
    };
    let pedido = CobPedido {
        calendario: Calendario {
            criacao: None,
            expiracao: 900,
        },
        valor: ValorOriginal {
            original: rust_decimal::dec!(20),
        },
        chave: "recargas@operadora.example.com.br".into(),
        solicitacao_pagador: Some("Recarga de vale-transporte, cartão ****7890".into()),
    };
    let txid = vt_domain::pix::txid("k-mtls", 0);

    let good = Psp::new(&pix(pki.tls(Some("cliente.pem"), Some("cliente.key")))).expect("client");
    let cob = good.criar_cob(&txid, &pedido).await.expect("created over mTLS");
    vt_domain::pix::BrCode::checked(
        cob.pix_copia_e_cola.as_deref().unwrap_or_default(),
        pedido.valor.original,
    )
    .expect("a valid code");
    assert_eq!(good.cob(&txid).await.expect("read").status, CobStatus::Ativa);

    let without = Psp::new(&pix(pki.tls(None, None))).expect("client");
    let other = vt_domain::pix::txid("k-mtls", 1);
    assert!(
        without.criar_cob(&other, &pedido).await.is_err(),
        "no certificate, no charge"
    );
    assert!(sim.pix().charge(&other).is_none(), "nothing reached the provider");
}
