//! TLS for the fake provider's second listener: a local CA made at start, a certificate for
//! 127.0.0.1 and `localhost` signed by it, and the handshake counts the bench reads back.
//!
//! Every real provider is reached over HTTPS, so the `*-https` workloads put TLS between the
//! proxy (or the gateway) and the fake. The CA's certificate is written as PEM to the bench's
//! temporary directory: the gateway names it in `tls.ca_file`, the baseline proxy puts it in its
//! peer's `PeerOptions::ca`. The counts (connections accepted, full and resumed handshakes) show
//! whether the proxies pool their connections: a pooled run makes about one handshake per
//! connection, an unpooled one a handshake per request.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::server::ServerSessionMemoryCache;
use tokio_rustls::rustls::{self, HandshakeKind, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// The names the fake's certificate is valid for (what the gateway's and the proxy's SNI or IP
/// check will see: they connect to 127.0.0.1).
const NAMES: [&str; 2] = ["127.0.0.1", "localhost"];

/// Server-side session cache entries: more than the bench's largest connection count, so that
/// resumption is never limited by the fake (a real provider's cache is large).
const SESSION_CACHE: usize = 4096;

fn err(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{what}: {e}"))
}

/// Make a CA and a server certificate signed by it; write the CA's PEM to `dir/ca.pem`. Returns
/// the acceptor and the PEM file's path.
pub fn acceptor(dir: &Path) -> io::Result<(TlsAcceptor, String)> {
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(|e| err("CA", e))?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "Switchyard bench CA");
    let ca_key = KeyPair::generate().map_err(|e| err("CA key", e))?;
    let issuer = CertifiedIssuer::self_signed(ca, ca_key).map_err(|e| err("CA", e))?;
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, issuer.pem())?;

    let names: Vec<String> = NAMES.iter().map(|n| n.to_string()).collect();
    let mut leaf = CertificateParams::new(names).map_err(|e| err("certificate", e))?;
    leaf.distinguished_name
        .push(DnType::CommonName, "fake provider");
    let key = KeyPair::generate().map_err(|e| err("key", e))?;
    let cert = leaf
        .signed_by(&key, &issuer)
        .map_err(|e| err("certificate", e))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err("TLS versions", e))?
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)
        .map_err(|e| err("TLS certificate", e))?;
    config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((
        TlsAcceptor::from(Arc::new(config)),
        ca_file.to_string_lossy().into_owned(),
    ))
}

/// What the fake's TLS listener has seen since it started.
#[derive(Default)]
pub struct Counts {
    /// TCP connections accepted (each one a handshake attempt).
    pub accepted: AtomicU64,
    /// Handshakes completed with a full key exchange and certificate.
    pub full: AtomicU64,
    /// Handshakes that resumed an earlier session (no certificate sent or checked).
    pub resumed: AtomicU64,
}

impl Counts {
    pub fn handshake(&self, kind: Option<HandshakeKind>) {
        let counter = match kind {
            Some(HandshakeKind::Resumed) => &self.resumed,
            _ => &self.full,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// `accepted full resumed`, the body of the fake's `/_bench/tls-stats` answer.
    pub fn line(&self) -> String {
        format!(
            "{} {} {}",
            self.accepted.load(Ordering::Relaxed),
            self.full.load(Ordering::Relaxed),
            self.resumed.load(Ordering::Relaxed)
        )
    }
}

/// The counts, as read from the fake by the bench (between load runs, over plain HTTP).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    pub accepted: u64,
    pub full: u64,
    pub resumed: u64,
}

impl Snapshot {
    /// What happened between `before` and `self`.
    pub fn since(self, before: Snapshot) -> Snapshot {
        Snapshot {
            accepted: self.accepted.saturating_sub(before.accepted),
            full: self.full.saturating_sub(before.full),
            resumed: self.resumed.saturating_sub(before.resumed),
        }
    }

    /// Read the fake's counts from its plain listener at `fake`.
    pub fn read(fake: std::net::SocketAddr) -> Result<Snapshot, String> {
        use std::io::{Read, Write};
        let timeout = std::time::Duration::from_secs(2);
        let mut conn = std::net::TcpStream::connect_timeout(&fake, timeout)
            .map_err(|e| format!("TLS counts: {e}"))?;
        let _ = conn.set_read_timeout(Some(timeout));
        conn.write_all(
            b"GET /_bench/tls-stats HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n",
        )
        .map_err(|e| format!("TLS counts: {e}"))?;
        // The fake keeps the connection open (it ignores `Connection: close`): read until the
        // body, whose length is in the head, is in.
        let mut got = Vec::new();
        let mut chunk = [0u8; 512];
        loop {
            let n = conn
                .read(&mut chunk)
                .map_err(|e| format!("TLS counts: {e}"))?;
            if n == 0 {
                return Err("TLS counts: connection closed early".into());
            }
            got.extend_from_slice(&chunk[..n]);
            if let Ok(Some(head)) = crate::http::parse_response_head(&got) {
                let crate::http::Framing::Length(len) = head.framing else {
                    return Err("TLS counts: unexpected framing".into());
                };
                if got.len() >= head.len + len {
                    let body = String::from_utf8_lossy(&got[head.len..head.len + len]);
                    let v: Vec<u64> = body
                        .split_whitespace()
                        .filter_map(|x| x.parse().ok())
                        .collect();
                    return match v[..] {
                        [accepted, full, resumed] => Ok(Snapshot {
                            accepted,
                            full,
                            resumed,
                        }),
                        _ => Err(format!("TLS counts: unexpected answer {body:?}")),
                    };
                }
            }
        }
    }
}
