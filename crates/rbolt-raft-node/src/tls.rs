//! TLS with rustls (the `ring` provider): the server's configuration (a certificate chain
//! and key from PEM files, and optionally the certificate authority whose client certificates
//! identify peers and trusted clients), and the client's (the authority to trust, and a
//! certificate of its own for mutual TLS); and [`KeyUsages`], which tells a peer's
//! certificate (`serverAuth` and `clientAuth`) from a client's (`clientAuth` alone).

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

/// The extended key usages a certificate names (RFC 5280, 4.2.1.12), of those the node cares
/// about. A peer's certificate must name both: a peer is a server to its peers and their
/// client. A certificate that names only `clientAuth` is a client's, and is never taken for a
/// peer's, even from the cluster's authority.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyUsages {
    /// `id-kp-serverAuth` (1.3.6.1.5.5.7.3.1).
    pub server_auth: bool,
    /// `id-kp-clientAuth` (1.3.6.1.5.5.7.3.2).
    pub client_auth: bool,
}

impl KeyUsages {
    /// Whether a certificate naming these is a peer's.
    pub fn peer(&self) -> bool {
        self.server_auth && self.client_auth
    }

    /// The usages the extended key usage extension of `cert` (DER) names; none when it has no
    /// such extension or cannot be read (the handshake has verified its signature already;
    /// what cannot be read here grants nothing).
    pub fn of(cert: &[u8]) -> KeyUsages {
        let mut usages = KeyUsages::default();
        for purpose in extended_key_usages(cert).unwrap_or_default() {
            match purpose {
                OID_SERVER_AUTH => usages.server_auth = true,
                OID_CLIENT_AUTH => usages.client_auth = true,
                _ => {}
            }
        }
        usages
    }
}

/// The DER contents of the OIDs of the extended key usages: `id-kp` 1 and 2.
const OID_SERVER_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];
const OID_CLIENT_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02];
/// The DER contents of the OID of the extended key usage extension, 2.5.29.37.
const OID_EXTENDED_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x25];

/// DER tags read here.
const TAG_SEQUENCE: u8 = 0x30;
const TAG_OID: u8 = 0x06;
const TAG_BOOLEAN: u8 = 0x01;
const TAG_OCTET_STRING: u8 = 0x04;
/// `[3] EXPLICIT Extensions` in a `TBSCertificate`.
const TAG_EXTENSIONS: u8 = 0xa3;

/// One DER element at the start of `input`: its tag, its contents and what follows it. Only
/// single-byte tags and definite lengths of up to four bytes, as DER certificates have.
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |len, &b| (len << 8) | usize::from(b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The contents of the element at the start of `input` if it has tag `tag`.
fn der_expect(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (found, contents, rest) = der_element(input)?;
    (found == tag).then_some((contents, rest))
}

/// The OIDs (their DER contents) of the extended key usage extension of `cert`, or `None`
/// when it has none. Each loop walks a slice that shrinks by at least two bytes a step.
fn extended_key_usages(cert: &[u8]) -> Option<Vec<&[u8]>> {
    let (certificate, _) = der_expect(cert, TAG_SEQUENCE)?;
    let (mut tbs, _) = der_expect(certificate, TAG_SEQUENCE)?;
    let extensions = loop {
        let (tag, contents, rest) = der_element(tbs)?;
        if tag == TAG_EXTENSIONS {
            break der_expect(contents, TAG_SEQUENCE)?.0;
        }
        tbs = rest;
    };
    let mut rest = extensions;
    while !rest.is_empty() {
        let (extension, next) = der_expect(rest, TAG_SEQUENCE)?;
        rest = next;
        let (oid, mut value) = der_expect(extension, TAG_OID)?;
        if oid != OID_EXTENDED_KEY_USAGE {
            continue;
        }
        if let Some((_, after)) = der_expect(value, TAG_BOOLEAN) {
            value = after;
        }
        let (octets, _) = der_expect(value, TAG_OCTET_STRING)?;
        let (mut purposes, _) = der_expect(octets, TAG_SEQUENCE)?;
        let mut oids = Vec::new();
        while !purposes.is_empty() {
            let (oid, next) = der_expect(purposes, TAG_OID)?;
            oids.push(oid);
            purposes = next;
        }
        return Some(oids);
    }
    None
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

    /// Checks that the node's own certificate can serve as a peer's: it names the extended key
    /// usages `serverAuth` (its peers check it as a server's) and `clientAuth` (they check it
    /// as a client's, and take it for a peer's only with both).
    pub fn check_peer_cert(&self) -> anyhow::Result<()> {
        let Some(cert) = &self.cert else {
            return Ok(());
        };
        let chain = certs(cert)?;
        let usages = KeyUsages::of(&chain[0]);
        if !usages.peer() {
            let missing: Vec<&str> = [
                (!usages.server_auth).then_some("serverAuth"),
                (!usages.client_auth).then_some("clientAuth"),
            ]
            .into_iter()
            .flatten()
            .collect();
            bail!(
                "{} lacks the extended key usage {}: with --peer-mtls a node's certificate \
                 must name both serverAuth and clientAuth (its peers check it as a server's \
                 and as a client's, and take a certificate with clientAuth alone for a \
                 client's, never a peer's)",
                cert.display(),
                missing.join(" and ")
            );
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

#[cfg(test)]
mod tests {
    use super::KeyUsages;
    use rcgen::ExtendedKeyUsagePurpose as Purpose;

    /// A certificate naming `purposes` (none: no extended key usage extension at all), with
    /// other extensions around it.
    fn cert(purposes: Vec<Purpose>) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = purposes;
        params
            .self_signed(&key)
            .expect("certificate")
            .der()
            .to_vec()
    }

    fn check(purposes: Vec<Purpose>, server_auth: bool, client_auth: bool) {
        let usages = KeyUsages::of(&cert(purposes.clone()));
        assert_eq!(
            usages,
            KeyUsages {
                server_auth,
                client_auth
            },
            "{purposes:?}"
        );
        assert_eq!(usages.peer(), server_auth && client_auth, "{purposes:?}");
    }

    #[test]
    fn a_peer_certificate_names_server_and_client_auth() {
        check(vec![Purpose::ServerAuth, Purpose::ClientAuth], true, true);
        check(vec![Purpose::ClientAuth, Purpose::ServerAuth], true, true);
        check(vec![Purpose::ClientAuth], false, true);
        check(vec![Purpose::ServerAuth], true, false);
        check(vec![Purpose::CodeSigning, Purpose::ClientAuth], false, true);
        check(vec![], false, false);
    }

    #[test]
    fn what_is_not_a_certificate_names_nothing() {
        let good = cert(vec![Purpose::ServerAuth, Purpose::ClientAuth]);
        for input in [
            &[][..],
            &[0x30],
            &[0x30, 0x84, 0xff, 0xff, 0xff, 0xff],
            &good[..40],
        ] {
            assert_eq!(KeyUsages::of(input), KeyUsages::default(), "{input:?}");
        }
        // A truncated certificate grants nothing (and is never read past its end).
        for len in 0..good.len() {
            assert_eq!(KeyUsages::of(&good[..len]), KeyUsages::default(), "{len}");
        }
    }
}
