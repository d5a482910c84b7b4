//! Which certificate authorities a provider's TLS certificate must chain to.
//!
//! By default the system's roots (what Pingora's connector loads at start). A provider may name a
//! CA file instead (`providers.NAME.tls.ca_file`): a self-hosted model server, a private PKI, a
//! TLS-inspecting egress proxy. The file is read and checked once, at load, so a bad file is a
//! configuration error and never a failure (or a panic inside the connector) on a request.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use pingora::protocols::tls::CaType;
use pingora::tls::{CertificateDer, RootCertStore};
use pingora::utils::tls::WrappedX509;
use x509_parser::pem::Pem;
use x509_parser::prelude::FromDer;
use x509_parser::prelude::X509Certificate;

/// The certificates of a provider's CA file, ready for Pingora's per-peer trust store.
#[derive(Clone)]
pub struct CaFile {
    /// What the connector trusts instead of the system roots for this provider's hosts.
    pub certs: Arc<CaType>,
    /// Identifies this set of roots in the connection pool: Pingora's pool key does not include
    /// the trust store, so without it a connection verified against one provider's CA could be
    /// reused for another provider at the same address that trusts only the system roots.
    pub pool_group: u64,
}

impl std::fmt::Debug for CaFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CaFile({} certificates)", self.certs.len())
    }
}

impl CaFile {
    /// Read `path`: PEM, one or more `CERTIFICATE` blocks. The error names the file and says
    /// what is wrong with it.
    pub fn load(path: &str) -> Result<CaFile, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("`{path}` cannot be read: {e}"))?;
        CaFile::from_pem(&bytes).map_err(|m| format!("`{path}` {m}"))
    }

    /// Parse PEM text; the error completes a sentence starting with the file's name.
    pub fn from_pem(pem: &[u8]) -> Result<CaFile, String> {
        let mut certs = Vec::new();
        let mut hasher = DefaultHasher::new();
        for (i, block) in Pem::iter_from_buffer(pem).enumerate() {
            let n = i + 1;
            let block = block.map_err(|e| format!("has an unreadable PEM block (#{n}): {e}"))?;
            if block.label != "CERTIFICATE" {
                // Only the label is named: a private key put here by mistake stays unprinted.
                return Err(format!(
                    "holds a `{}` PEM block (#{n}); a CA file holds CERTIFICATE blocks only",
                    block.label
                ));
            }
            // Pingora parses each certificate again per connection and panics on one it cannot
            // read; parsing with the same parser here keeps that from ever happening.
            let cert = WrappedX509::try_new(block.contents.clone(), |raw| {
                X509Certificate::from_der(raw).map(|(_, c)| c)
            })
            .map_err(|e| format!("has a certificate that cannot be parsed (#{n}): {e}"))?;
            // And rustls must accept it as a trust anchor, as it will at each handshake.
            RootCertStore::empty()
                .add(CertificateDer::from(block.contents.clone()))
                .map_err(|e| {
                    format!("has a certificate that cannot be a trust root (#{n}): {e}")
                })?;
            block.contents.hash(&mut hasher);
            certs.push(cert);
        }
        if certs.is_empty() {
            return Err("holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into());
        }
        Ok(CaFile {
            certs: Arc::from(certs.into_boxed_slice()),
            // 0 is the group of connections verified against the system roots.
            pool_group: hasher.finish() | 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_files_without_certificates_by_what_they_hold() {
        let e = CaFile::from_pem(b"hello").unwrap_err();
        assert!(e.contains("holds no PEM certificate"), "{e}");
        let key = b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        let e = CaFile::from_pem(key).unwrap_err();
        assert!(e.contains("`PRIVATE KEY` PEM block (#1)"), "{e}");
        assert!(!e.contains("AAAA"));
        let junk = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let e = CaFile::from_pem(junk).unwrap_err();
        assert!(e.contains("cannot be parsed (#1)"), "{e}");
        let e = CaFile::load("/nonexistent/ca.pem").unwrap_err();
        assert!(e.starts_with("`/nonexistent/ca.pem` cannot be read"), "{e}");
    }

    fn cert_pem(name: &str) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
        params.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn loads_every_certificate_and_groups_by_content() {
        let (a, b) = (cert_pem("a.example"), cert_pem("b.example"));
        let both = CaFile::from_pem(format!("# bundle\n{a}\n{b}").as_bytes()).unwrap();
        assert_eq!(both.certs.len(), 2);
        let again = CaFile::from_pem(format!("{a}{b}").as_bytes()).unwrap();
        assert_eq!(both.pool_group, again.pool_group);
        let one = CaFile::from_pem(a.as_bytes()).unwrap();
        assert_eq!(one.certs.len(), 1);
        assert_ne!(one.pool_group, both.pool_group);
        assert_ne!(one.pool_group, 0);
    }
}
