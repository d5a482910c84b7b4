//! Switchyard's authentication and per-caller limits guarding a route of the host, as a Pingora
//! `HttpModule` (`switchyard::embed::AuthModule`).
//!
//! ```text
//! cargo run --example auth_module -- examples/embedded.yaml 127.0.0.1:8080 127.0.0.1:9000
//! curl localhost:8080/private/report                    # 401, Switchyard's error body
//! curl localhost:8080/private/report -H 'Service-API-Key: demo-key-change-me'
//! #   proxied to 127.0.0.1:9000 with `x-caller: key:demo`, the key itself not forwarded
//! curl localhost:8080/public                            # proxied, no credentials needed
//! ```
//!
//! The module checks the same API keys and JWTs as Switchyard (`auth:` in the configuration)
//! and counts the same `requests_per_minute` and `concurrent` limits, in the same store (Redis
//! when configured), so a caller's budget covers the host's routes and Switchyard's alike. A
//! request it refuses never reaches `request_filter`: Pingora hands the error to
//! `fail_to_proxy`, where `AuthModule::answer_refusal` writes Switchyard's error answer (401;
//! 429 with `Retry-After`). Switchyard, mounted under `/ai`, authenticates its own requests:
//! the module guards only the host's prefixes.

use std::net::SocketAddr;

use async_trait::async_trait;
use pingora::http::RequestHeader;
use pingora::modules::http::compression::ResponseCompressionBuilder;
use pingora::modules::http::HttpModules;
use pingora::prelude::*;
use pingora::proxy::FailToProxy;
use switchyard::embed::{AuthModule, Authenticated};
use switchyard::{Embedded, RequestCtx};

/// A host with a guarded `/private` and an open rest, both proxied to its upstream, and
/// Switchyard under `/ai`.
pub struct Guarded {
    /// Switchyard, whose configuration the module authenticates against.
    pub ai: Embedded,
    /// Where the host's own requests go.
    pub upstream: SocketAddr,
}

#[async_trait]
impl ProxyHttp for Guarded {
    type CTX = Option<RequestCtx>;

    fn new_ctx(&self) -> Self::CTX {
        None
    }

    fn init_downstream_modules(&self, modules: &mut HttpModules) {
        // Pingora's default module (compression, off), and the guard on the host's route.
        modules.add_module(ResponseCompressionBuilder::enable(0));
        modules.add_module(Box::new(AuthModule::new(&self.ai).guard("/private")));
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut Self::CTX) -> Result<bool> {
        self.ai.request_filter(session, ctx).await
    }

    async fn upstream_peer(&self, _: &mut Session, _: &mut Self::CTX) -> Result<Box<HttpPeer>> {
        Ok(Box::new(HttpPeer::new(self.upstream, false, String::new())))
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream_request: &mut RequestHeader,
        _: &mut Self::CTX,
    ) -> Result<()> {
        // The upstream learns who called, never the caller's credential.
        upstream_request.remove_header("service-api-key");
        upstream_request.remove_header("authorization");
        let caller = Authenticated::of(session).and_then(Authenticated::caller);
        if let Some(caller) = caller {
            upstream_request.insert_header("x-caller", caller)?;
        }
        Ok(())
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut Self::CTX,
    ) -> FailToProxy {
        if let Some(done) = self.ai.fail_to_proxy(session, e, ctx).await {
            return done;
        }
        // The module's refusal, in Switchyard's error shape.
        if let Some(done) = AuthModule::answer_refusal(session).await {
            return done;
        }
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

    fn suppress_error_log(&self, session: &Session, ctx: &Self::CTX, e: &Error) -> bool {
        // A caller refused by the module is the client's doing, not an error of the server.
        let refused = Authenticated::of(session).is_some_and(Authenticated::refused);
        refused || self.ai.suppress_error_log(session, ctx, e)
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut Self::CTX) {
        self.ai.logging(session, e, ctx).await;
    }
}

/// The host's server on `listen`: Switchyard from `settings` under `/ai`, the host's routes
/// proxied to `upstream`, `/private` guarded.
pub fn server(
    settings: switchyard::config::Settings,
    listen: &str,
    upstream: SocketAddr,
) -> std::result::Result<Server, String> {
    let mut server = Server::new_with_opt_and_conf(None, settings.server);
    server.bootstrap();
    let ai = Embedded::builder(settings.gateway).prefix("/ai").build()?;
    server.add_services(ai.background_services(&server.configuration));
    let mut service = http_proxy_service(&server.configuration, Guarded { ai, upstream });
    service.add_tcp(listen);
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
