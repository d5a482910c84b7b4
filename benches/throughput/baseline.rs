//! The baseline: a plain Pingora reverse proxy that parses nothing.
//!
//! Its `ProxyHttp` implementation only says where to go: `upstream_peer` returns a clone of the
//! fake provider's `HttpPeer`, built once at start. Request and response bodies stream through
//! Pingora's own proxy path untouched. It runs as its own process (the bench executable re-run with
//! `SWITCHYARD_BENCH_ROLE=baseline`), with the same server settings as the gateway (one worker
//! thread, Pingora's default upstream pool of 128), and exits when its stdin closes.
//!
//! A request whose path starts with `/tls/` goes to the fake's TLS listener instead (the `*-https`
//! workloads): a second `HttpPeer`, also built once, with TLS, the SNI `127.0.0.1` (the address
//! the fake's certificate names) and the bench's CA as the peer's trust roots (`PeerOptions::ca`,
//! as the gateway's `tls.ca_file` does). Its connections are pooled like the plain ones; the path
//! goes to the fake as it is (the fake ignores the prefix). The choice is one prefix comparison per
//! request, paid by the plaintext scenarios as well.

use std::io::BufRead;
use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use pingora::protocols::tls::CaType;
use pingora::proxy::{http_proxy_service, ProxyHttp, Session};
use pingora::server::configuration::ServerConf;
use pingora::server::Server;
use pingora::upstreams::peer::HttpPeer;
use pingora::utils::tls::{parse_x509, WrappedX509};
use x509_parser::pem::Pem;
use x509_parser::prelude::{FromDer, X509Certificate};

struct Passthrough {
    peer: HttpPeer,
    tls_peer: HttpPeer,
}

#[async_trait]
impl ProxyHttp for Passthrough {
    type CTX = ();

    fn new_ctx(&self) {}

    async fn upstream_peer(
        &self,
        session: &mut Session,
        _ctx: &mut (),
    ) -> pingora::Result<Box<HttpPeer>> {
        let peer = if session.req_header().uri.path().starts_with("/tls/") {
            &self.tls_peer
        } else {
            &self.peer
        };
        Ok(Box::new(peer.clone()))
    }
}

/// Run the proxy: listen on `SWITCHYARD_BENCH_LISTEN`, forward to `SWITCHYARD_BENCH_UPSTREAM`
/// (plain) or `SWITCHYARD_BENCH_TLS_UPSTREAM` (TLS, trusting `SWITCHYARD_BENCH_TLS_CA`).
pub fn main() -> Result<(), String> {
    let var = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
    let listen = var("SWITCHYARD_BENCH_LISTEN")?;
    let upstream: SocketAddr = var("SWITCHYARD_BENCH_UPSTREAM")?
        .parse()
        .map_err(|e| format!("SWITCHYARD_BENCH_UPSTREAM: {e}"))?;
    std::thread::spawn(|| {
        let mut line = String::new();
        while std::io::stdin().lock().read_line(&mut line).unwrap_or(0) > 0 {
            line.clear();
        }
        std::process::exit(0);
    });
    let conf = ServerConf {
        threads: 1,
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(1),
        pid_file: format!("/tmp/switchyard-bench-baseline-{}.pid", std::process::id()),
        upgrade_sock: format!("/tmp/switchyard-bench-baseline-{}.sock", std::process::id()),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let peer = HttpPeer::new(upstream, false, String::new());
    let tls_upstream: SocketAddr = var("SWITCHYARD_BENCH_TLS_UPSTREAM")?
        .parse()
        .map_err(|e| format!("SWITCHYARD_BENCH_TLS_UPSTREAM: {e}"))?;
    let mut tls_peer = HttpPeer::new(tls_upstream, true, tls_upstream.ip().to_string());
    // Without it (`SWITCHYARD_BENCH_TLS_ROOTS=system`) the CA is in `SSL_CERT_FILE`, among the
    // connector's system roots.
    if let Ok(path) = std::env::var("SWITCHYARD_BENCH_TLS_CA") {
        tls_peer.options.ca = Some(ca(&path)?);
    }
    let mut service = http_proxy_service(&server.configuration, Passthrough { peer, tls_peer });
    service.add_tcp(&listen);
    server.add_service(service);
    server.run_forever()
}

/// The certificates of the PEM file at `path`, as Pingora's rustls connector takes per-peer trust
/// roots (it turns them into a root store at each new connection).
fn ca(path: &str) -> Result<Arc<CaType>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let mut certs = Vec::new();
    for block in Pem::iter_from_buffer(&pem) {
        let block = block.map_err(|e| format!("{path}: {e}"))?;
        // Parsed here once, so a bad file fails at start rather than panicking in the connector.
        X509Certificate::from_der(&block.contents).map_err(|e| format!("{path}: {e}"))?;
        certs.push(WrappedX509::new(block.contents, parse_x509));
    }
    if certs.is_empty() {
        return Err(format!("{path}: no certificate"));
    }
    Ok(Arc::from(certs.into_boxed_slice()))
}
