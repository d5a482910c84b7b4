//! A listener's certificate and key, read from PEM files and checked: at least one certificate,
//! a private key of a kind the TLS stack can sign with, and the key belonging to the first
//! certificate. Used when the configuration is loaded (so `switchyard -t` reports a bad file)
//! and by `server::tls` each time the files are replaced.
//!
//! Pingora can load the files itself, but panics on a bad one (`TlsSettings::build`); here every
//! problem is an error naming the file, and the files' contents never appear in it.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

/// Read `cert_file` (the chain, the server's certificate first) and `key_file` (its key) into a
/// key ready to serve. The error names the file at fault.
pub(crate) fn load(cert_file: &str, key_file: &str) -> Result<Arc<CertifiedKey>, String> {
    let cert_pem = read(cert_file)?;
    let key_pem = read(key_file)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{cert_file}: not a PEM certificate chain ({e})"))?;
    if chain.is_empty() {
        return Err(format!("{cert_file}: no PEM certificate in it"));
    }
    // `from_pem_slice` takes the first key of any supported kind and skips other sections.
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => format!(
            "{key_file}: no private key in it (PEM: PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)"
        ),
        // The PEM error says where the file went wrong, never what it holds.
        other => format!("{key_file}: not a PEM private key ({other})"),
    })?;
    let provider = provider();
    CertifiedKey::from_der(chain, key, &provider)
        .map(Arc::new)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => {
                format!(
                    "{key_file}: this key does not belong to the first certificate of {cert_file}"
                )
            }
            rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented => {
                format!("{cert_file}: the first certificate cannot be read ({e})")
            }
            other => format!("{key_file}: the key cannot be used ({other})"),
        })
}

/// The crypto provider Pingora's TLS listeners use (it installs ring as the process default).
fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

fn read(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{path}: cannot be read ({e})"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A directory of its own for one test's files, removed at the end.
    pub(crate) struct Dir(pub std::path::PathBuf);

    impl Dir {
        pub(crate) fn new() -> Dir {
            let path =
                std::env::temp_dir().join(format!("switchyard-tls-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(&path).unwrap();
            Dir(path)
        }

        /// Write `name` with `text`; its path.
        pub(crate) fn file(&self, name: &str, text: &str) -> String {
            let path = self.0.join(name);
            std::fs::write(&path, text).unwrap();
            path.to_string_lossy().into_owned()
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A self-signed certificate for `name`, and its key (PEM).
    pub(crate) fn self_signed(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn a_good_pair_loads() {
        let dir = Dir::new();
        let (cert, key) = self_signed("localhost");
        let loaded = load(&dir.file("c.pem", &cert), &dir.file("k.pem", &key)).unwrap();
        assert_eq!(loaded.cert.len(), 1);
    }

    #[test]
    fn a_missing_file_is_named() {
        let dir = Dir::new();
        let (_, key) = self_signed("localhost");
        let key = dir.file("k.pem", &key);
        let err = load("/nonexistent/cert.pem", &key).unwrap_err();
        assert!(
            err.starts_with("/nonexistent/cert.pem: cannot be read"),
            "{err}"
        );
    }

    #[test]
    fn a_file_without_certificate_is_named() {
        let dir = Dir::new();
        let (_, key) = self_signed("localhost");
        let key = dir.file("k.pem", &key);
        // The key where the certificate should be: PEM, but no certificate in it.
        let err = load(&key, &key).unwrap_err();
        assert_eq!(err, format!("{key}: no PEM certificate in it"));
    }

    #[test]
    fn a_file_without_key_is_named() {
        let dir = Dir::new();
        let (cert, _) = self_signed("localhost");
        let cert = dir.file("c.pem", &cert);
        let err = load(&cert, &cert).unwrap_err();
        assert!(
            err.starts_with(&format!("{cert}: no private key in it")),
            "{err}"
        );
    }

    #[test]
    fn a_key_of_another_certificate_is_refused_without_showing_it() {
        let dir = Dir::new();
        let (cert, _) = self_signed("localhost");
        let (_, other_key) = self_signed("localhost");
        let (cert, key) = (dir.file("c.pem", &cert), dir.file("k.pem", &other_key));
        let err = load(&cert, &key).unwrap_err();
        assert_eq!(
            err,
            format!("{key}: this key does not belong to the first certificate of {cert}")
        );
        let secret = other_key.lines().nth(1).unwrap();
        assert!(!err.contains(secret));
    }

    #[test]
    fn a_certificate_that_is_not_one_is_named() {
        let dir = Dir::new();
        let (_, key) = self_signed("localhost");
        let key = dir.file("k.pem", &key);
        let junk =
            "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n";
        let cert = dir.file("c.pem", junk);
        let err = load(&cert, &key).unwrap_err();
        assert!(
            err.starts_with(&format!("{cert}: the first certificate cannot be read")),
            "{err}"
        );
        let cert = dir.file("c2.pem", "-----BEGIN CERTIFICATE-----\n%%%\n");
        let err = load(&cert, &key).unwrap_err();
        assert!(
            err.starts_with(&format!("{cert}: not a PEM certificate chain")),
            "{err}"
        );
    }
}
