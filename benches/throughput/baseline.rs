//! The baseline: a plain Pingora reverse proxy that parses nothing.
//!
//! Its `ProxyHttp` implementation only says where to go: `upstream_peer` returns a clone of the
//! fake provider's `HttpPeer`, built once at start. Request and response bodies stream through
//! Pingora's own proxy path untouched. It runs as its own process (the bench executable re-run with
//! `SWITCHYARD_BENCH_ROLE=baseline`), with the same server settings as the gateway (one worker
//! thread, Pingora's default upstream pool of 128), and exits when its stdin closes.

use std::io::BufRead;
use std::net::SocketAddr;

use async_trait::async_trait;
use pingora::proxy::{http_proxy_service, ProxyHttp, Session};
use pingora::server::configuration::ServerConf;
use pingora::server::Server;
use pingora::upstreams::peer::HttpPeer;

struct Passthrough {
    peer: HttpPeer,
}

#[async_trait]
impl ProxyHttp for Passthrough {
    type CTX = ();

    fn new_ctx(&self) {}

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        _ctx: &mut (),
    ) -> pingora::Result<Box<HttpPeer>> {
        Ok(Box::new(self.peer.clone()))
    }
}

/// Run the proxy: listen on `SWITCHYARD_BENCH_LISTEN`, forward to `SWITCHYARD_BENCH_UPSTREAM`.
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
    let mut service = http_proxy_service(&server.configuration, Passthrough { peer });
    service.add_tcp(&listen);
    server.add_service(service);
    server.run_forever()
}
