//! TLS with rustls (the `ring` provider): the server's configuration (a certificate chain
//! and key from PEM files, and optionally the certificate authority whose client certificates
//! identify peers and trusted clients), and the client's (the authority to trust, and a
//! certificate of its own for mutual TLS).

use anyhow::{Context, bail};
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The files of a node's TLS.
#[derive(Clone, Debug, Default)]
pub struct TlsFiles {
    /// The certificate chain, PEM (the node's own certificate first).
    pub cert: Option<PathBuf>,
    /// The private key of the certificate, PEM.
    pub key: Option<PathBuf>,
    /// The certificate authority, PEM: the node trusts it for its peers' server
    /// certificates and, when client certificates are asked for, for theirs.
    pub ca: Option<PathBuf>,
}

/// The crypto provider every TLS configuration here uses.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading certificates from {}", path.display()))?;
    if certs.is_empty() {
        bail!("{} holds no PEM certificate", path.display());
    }
    Ok(certs)
}

fn key(path: &Path) -> anyhow::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path)
        .with_context(|| format!("reading the private key from {}", path.display()))
}

fn roots(path: &Path) -> anyhow::Result<Arc<RootCertStore>> {
    let mut roots = RootCertStore::empty();
    for cert in certs(path)? {
        roots
            .add(cert)
            .with_context(|| format!("a certificate of {}", path.display()))?;
    }
    Ok(Arc::new(roots))
}

impl TlsFiles {
    /// Whether the node serves TLS (a certificate and its key are given).
    pub fn enabled(&self) -> bool {
        self.cert.is_some()
    }

    /// Checks that the files come in the combinations that make sense.
    pub fn check(&self, client_certs: bool) -> anyhow::Result<()> {
        if self.cert.is_some() != self.key.is_some() {
            bail!("--tls-cert and --tls-key go together");
        }
        if client_certs && (self.ca.is_none() || !self.enabled()) {
            bail!("--peer-mtls needs --tls-cert, --tls-key and --tls-ca");
        }
        Ok(())
    }

    /// The server's configuration. With `client_certs`, a client may present a certificate
    /// signed by the authority (peers must, see the server); without one it is still served
    /// as an unauthenticated client.
    pub fn server(&self, client_certs: bool) -> anyhow::Result<Option<Arc<rustls::ServerConfig>>> {
        let (Some(cert), Some(key_path)) = (&self.cert, &self.key) else {
            return Ok(None);
        };
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?;
        let builder = match (&self.ca, client_certs) {
            (Some(ca), true) => {
                let verifier = WebPkiClientVerifier::builder_with_provider(roots(ca)?, provider())
                    .allow_unauthenticated()
                    .build()
                    .context("the client certificate verifier")?;
                builder.with_client_cert_verifier(verifier)
            }
            _ => builder.with_no_client_auth(),
        };
        let config = builder
            .with_single_cert(certs(cert)?, key(key_path)?)
            .context("the server certificate and key")?;
        Ok(Some(Arc::new(config)))
    }

    /// The client's configuration, when the node talks TLS: trusting the authority, and with
    /// the node's certificate as its client certificate when `present_cert`.
    pub fn client(&self, present_cert: bool) -> anyhow::Result<Option<rustls::ClientConfig>> {
        let Some(ca) = &self.ca else {
            return Ok(None);
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_root_certificates(roots(ca)?);
        let config = match (&self.cert, &self.key, present_cert) {
            (Some(cert), Some(key_path), true) => builder
                .with_client_auth_cert(certs(cert)?, key(key_path)?)
                .context("the client certificate and key")?,
            _ => builder.with_no_client_auth(),
        };
        Ok(Some(config))
    }
}
