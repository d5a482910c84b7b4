//! Switchyard mounted under a path prefix of a host that answers its other paths itself.
//!
//! ```text
//! cargo run --example mount_prefix -- examples/embedded.yaml 127.0.0.1:8080
//! curl localhost:8080/                       # the host's own page
//! curl localhost:8080/ai/api/v1/models -H 'Service-API-Key: demo-key-change-me'
//! curl localhost:8080/ai/api/v1/openapi.json # `servers: [{url: "/ai"}]`, paths unchanged
//! curl localhost:8080/healthz                # root-level routes: asked for with root_routes(true)
//! curl localhost:8080/ai/nope                # Switchyard's 404 (the prefix is its namespace)
//! ```
//!
//! Under `/ai`, every route is `/ai` plus the standalone path, and what Switchyard links to
//! carries the prefix: hosted images (`http://host/ai/api/v1/files/{id}`, or
//! `images.public_base_url` + `/ai`), lifecycle `Link` headers, the OpenAPI document's server.
//! `/healthz` and `/v1/rerank` (LiteLLM's Jina path) stay at the server's root only with
//! `root_routes(true)`; they are always served under the prefix too. `host_delegation.rs` shows
//! the same mount with a host that proxies its own routes to an upstream.

use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::proxy::FailToProxy;
use switchyard::{Embedded, RequestCtx};

/// A host whose own answer is one page; Switchyard has `/ai`.
pub struct Site {
    /// Switchyard, under `/ai`.
    pub ai: Embedded,
}

#[async_trait]
impl ProxyHttp for Site {
    type CTX = Option<RequestCtx>;

    fn new_ctx(&self) -> Self::CTX {
        None
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut Self::CTX) -> Result<bool> {
        if self.ai.request_filter(session, ctx).await? {
            return Ok(true);
        }
        // Not Switchyard's: the host answers it here (a proxy would go on to `upstream_peer`).
        let page = Bytes::from_static(b"the host's own page\n");
        let mut head = ResponseHeader::build(200, Some(2))?;
        head.insert_header("content-type", "text/plain")?;
        head.insert_header("content-length", page.len().to_string())?;
        session.write_response_header(Box::new(head), false).await?;
        session.write_response_body(Some(page), true).await?;
        Ok(true)
    }

    async fn upstream_peer(&self, _: &mut Session, _: &mut Self::CTX) -> Result<Box<HttpPeer>> {
        Error::e_explain(InternalError, "every request is answered in request_filter")
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut Self::CTX,
    ) -> FailToProxy {
        match self.ai.fail_to_proxy(session, e, ctx).await {
            Some(done) => done,
            None => FailToProxy {
                error_code: 0,
                can_reuse_downstream: false,
            },
        }
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut Self::CTX) {
        self.ai.logging(session, e, ctx).await;
    }
}

/// The host's server on `listen`: Switchyard from `settings` under `/ai`, with `/healthz` and
/// `/v1/rerank` kept at the root; every other path the host's page.
pub fn server(
    settings: switchyard::config::Settings,
    listen: &str,
) -> std::result::Result<Server, String> {
    let mut server = Server::new_with_opt_and_conf(None, settings.server);
    server.bootstrap();
    let ai = Embedded::builder(settings.gateway)
        .prefix("/ai")
        .root_routes(true)
        .build()?;
    server.add_services(ai.background_services(&server.configuration));
    let mut service = http_proxy_service(&server.configuration, Site { ai });
    service.add_tcp(listen);
    server.add_service(service);
    Ok(server)
}

fn main() {
    switchyard::logging::init().ok();
    let conf = std::env::args().nth(1);
    let conf = conf.as_deref().unwrap_or("examples/embedded.yaml");
    let listen = std::env::args().nth(2);
    let listen = listen.as_deref().unwrap_or("127.0.0.1:8080");
    let settings = switchyard::config::load_hosted_file(conf).unwrap_or_else(|problems| {
        eprintln!("{conf}: {}", problems.join("\n  "));
        std::process::exit(1)
    });
    match server(settings, listen) {
        Ok(server) => server.run_forever(),
        Err(e) => eprintln!("{e}"),
    }
}
