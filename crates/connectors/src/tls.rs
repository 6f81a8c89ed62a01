//! Mutual TLS to the external systems (`[systems.tls]`, or one system's `[systems.saldo.tls]`…): the
//! client certificate and key the system asks for, and an extra CA to trust (a private PKI). Every
//! file is read and checked when the client is built — unreadable, not PEM, expired or not yet
//! valid, a key that does not match its certificate — so a bad configuration stops the start with a
//! message naming the file and the reason, before any card holder meets it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A system's TLS settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// The client certificate (PEM; its chain may follow it).
    pub client_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub client_key: Option<PathBuf>,
    /// An extra CA to trust (PEM), besides the system's roots.
    pub ca_cert: Option<PathBuf>,
}

impl TlsConfig {
    /// Whether it asks for anything.
    pub fn is_set(&self) -> bool {
        self.client_cert.is_some() || self.client_key.is_some() || self.ca_cert.is_some()
    }
}

/// A TLS file that cannot serve, and why (the operator's words; no file content).
#[derive(Debug, thiserror::Error)]
#[error("{file}: {reason}")]
pub struct TlsError {
    pub file: String,
    pub reason: String,
}

fn error(file: &Path, reason: impl Into<String>) -> TlsError {
    TlsError {
        file: file.display().to_string(),
        reason: reason.into(),
    }
}

fn read(file: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(file).map_err(|e| error(file, format!("não pôde ser lido ({})", e.kind())))
}

/// The client `builder` makes with `tls`'s identity and CA, every file checked first.
pub(crate) fn client(builder: reqwest::ClientBuilder, tls: &TlsConfig) -> Result<reqwest::Client, TlsError> {
    apply(builder, tls)?.build().map_err(|_| match &tls.client_key {
        // With an identity, what the TLS library refuses is the pair.
        Some(key) => error(
            key,
            "não corresponde a client_cert (a biblioteca de TLS recusou o par)",
        ),
        None => error(Path::new("systems.tls"), "o cliente TLS não pôde ser montado"),
    })
}

fn apply(mut builder: reqwest::ClientBuilder, tls: &TlsConfig) -> Result<reqwest::ClientBuilder, TlsError> {
    match (&tls.client_cert, &tls.client_key) {
        (Some(cert), Some(key)) => {
            let cert_pem = read(cert)?;
            let key_pem = read(key)?;
            check_certificate(cert, &cert_pem)?;
            let mut both = cert_pem;
            both.push(b'\n');
            both.extend_from_slice(&key_pem);
            let identity = reqwest::Identity::from_pem(&both)
                .map_err(|_| error(key, "não é uma chave privada PEM deste certificado"))?;
            builder = builder.identity(identity);
        }
        (Some(cert), None) => return Err(error(cert, "não tem client_key ao lado")),
        (None, Some(key)) => return Err(error(key, "não tem client_cert ao lado")),
        (None, None) => {}
    }
    if let Some(ca) = &tls.ca_cert {
        let pem = read(ca)?;
        check_certificate(ca, &pem)?;
        let certs =
            reqwest::Certificate::from_pem_bundle(&pem).map_err(|_| error(ca, "não é um certificado PEM"))?;
        builder = builder.tls_certs_merge(certs);
    }
    Ok(builder)
}

/// The first certificate of `pem` parses and is valid now.
fn check_certificate(file: &Path, pem: &[u8]) -> Result<(), TlsError> {
    let (_, block) =
        x509_parser::pem::parse_x509_pem(pem).map_err(|_| error(file, "não é um certificado PEM"))?;
    let cert = block
        .parse_x509()
        .map_err(|_| error(file, "não contém um certificado X.509 legível"))?;
    let validity = cert.validity();
    let now = x509_parser::time::ASN1Time::now();
    if now > validity.not_after {
        return Err(error(file, format!("venceu em {}", validity.not_after)));
    }
    if now < validity.not_before {
        return Err(error(
            file,
            format!("só vale a partir de {}", validity.not_before),
        ));
    }
    Ok(())
}
