//! A host proxy that serves its own upstream and delegates `/ai/...` to Switchyard, on one
//! listener.
//!
//! ```text
//! cargo run --example host_delegation -- examples/embedded.yaml 127.0.0.1:8080 127.0.0.1:9000
//! #                                      configuration          listen         the host's upstream
//! curl -X POST localhost:8080/ai/api/v1/rerank -H 'Service-API-Key: demo-key-change-me' \
//!      -H 'Content-Type: application/json' \
//!      -d '{"model":"local-bm25","query":"capital of France","documents":["Paris","Berlin"]}'
//! curl localhost:8080/ai/api/v1/openapi.json   # `servers: [{url: "/ai"}]`
//! curl localhost:8080/anything                 # proxied to 127.0.0.1:9000
//! ```
//!
//! The host's `request_filter` asks Switchyard first: `Ok(true)` is Switchyard's answer,
//! `Ok(false)` ("not mine") sends the request on through Pingora's proxy path to the host's
//! upstream. Switchyard's per-request state nests in the host's context; its metrics and access
//! lines count only its own requests. The configuration has no `listeners:` (the host owns the
//! socket); Switchyard's background services join the host's server, and its client deadlines
//! and connection cap wrap the host's service.

use std::net::SocketAddr;

use async_trait::async_trait;
use pingora::prelude::*;
use pingora::proxy::FailToProxy;
use pingora::services::listening::Service;
use switchyard::{Embedded, RequestCtx};

/// The host's proxy: its own upstream for every path, Switchyard under `/ai`.
pub struct Host {
    /// Switchyard, mounted under `/ai`.
    pub ai: Embedded,
    /// Where the host's own requests go.
    pub upstream: SocketAddr,
}

/// The host's per-request context, with Switchyard's nested in it.
#[derive(Default)]
pub struct HostCtx {
    /// `Some` for the requests Switchyard answers.
    pub ai: Option<RequestCtx>,
}

#[async_trait]
impl ProxyHttp for Host {
    type CTX = HostCtx;

    fn new_ctx(&self) -> HostCtx {
        HostCtx::default()
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut HostCtx) -> Result<bool> {
        // `Ok(true)`: Switchyard answered. `Ok(false)`: not Switchyard's; the host's own logic
        // (its own filters, then `upstream_peer`) takes over.
        self.ai.request_filter(session, &mut ctx.ai).await
    }

    async fn upstream_peer(&self, _: &mut Session, _: &mut HostCtx) -> Result<Box<HttpPeer>> {
        Ok(Box::new(HttpPeer::new(self.upstream, false, String::new())))
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut HostCtx,
    ) -> FailToProxy {
        if let Some(done) = self.ai.fail_to_proxy(session, e, &mut ctx.ai).await {
            return done;
        }
        // The host's own request: a 502 when its upstream failed (Pingora's default answer).
        let code = match e.etype() {
            HTTPStatus(code) => *code,
            _ => 502,
        };
        if session.response_written().is_none() {
            let _ = session.respond_error(code).await;
        }
        FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    fn suppress_error_log(&self, session: &Session, ctx: &HostCtx, e: &Error) -> bool {
        self.ai.suppress_error_log(session, &ctx.ai, e)
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut HostCtx) {
        // Switchyard's requests: its metrics and access line. The host logs its own here.
        self.ai.logging(session, e, &mut ctx.ai).await;
    }
}

/// The host's server: Switchyard from `settings` under `/ai`, the host's own routes proxied to
/// `upstream`, both on the one listener at `listen`.
pub fn server(
    settings: switchyard::config::Settings,
    listen: &str,
    upstream: SocketAddr,
) -> std::result::Result<Server, String> {
    let mut server = Server::new_with_opt_and_conf(None, settings.server);
    server.bootstrap();
    let ai = Embedded::builder(settings.gateway)
        .prefix("/ai")
        .entry_point("edge", "default")
        .build()?;
    // Asynchronous image tasks, shared target health (Redis), the metrics listener.
    server.add_services(ai.background_services(&server.configuration));
    let host = Host {
        ai: ai.clone(),
        upstream,
    };
    // Switchyard's client deadlines and connection cap around the host's proxy.
    let app = ai.edge(http_proxy(&server.configuration, host));
    let mut service = Service::new("host edge".to_string(), app);
    service.add_listener(switchyard::server::listener_config(listen));
    server.add_service(service);
    Ok(server)
}

fn main() {
    switchyard::logging::init().ok();
    let args: Vec<String> = std::env::args().collect();
    let conf = args.get(1).map_or("examples/embedded.yaml", String::as_str);
    let listen = args.get(2).map_or("127.0.0.1:8080", String::as_str);
    let upstream = args.get(3).map_or("127.0.0.1:9000", String::as_str);
    let settings = switchyard::config::load_hosted_file(conf).unwrap_or_else(|problems| {
        eprintln!("{conf}: {}", problems.join("\n  "));
        std::process::exit(1)
    });
    let Ok(upstream) = upstream.parse() else {
        eprintln!("{upstream}: not an IP:port address");
        std::process::exit(1)
    };
    match server(settings, listen, upstream) {
        Ok(server) => server.run_forever(),
        Err(e) => eprintln!("{e}"),
    }
}
