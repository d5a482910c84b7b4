//! Switchyard's metrics in the host's own Prometheus registry: the host serves one `/metrics`
//! with its own families and Switchyard's, and Switchyard needs no metrics listener of its own.
//!
//! ```text
//! cargo run --example host_metrics -- examples/embedded.yaml 127.0.0.1:8080
//! curl localhost:8080/ai/api/v1/models -H 'Service-API-Key: demo-key-change-me'
//! curl localhost:8080/metrics   # host_pages_total and switchyard_requests_total, ...
//! ```
//!
//! `Builder::metrics_registry(&registry)` switches Switchyard's metrics on and registers every
//! one of its families in `registry` (needs the `metrics` cargo feature, on by default); from
//! then on whatever gathers `registry` gathers Switchyard's series too. A configuration with a
//! `metrics:` section still gets its own listener serving Switchyard's families alone.

use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::proxy::FailToProxy;
use prometheus::{Encoder, IntCounter, Registry, TextEncoder};
use switchyard::{Embedded, RequestCtx};

/// A host with a metrics page of its own and one counter; Switchyard has `/ai`.
pub struct Monitored {
    /// Switchyard, under `/ai`, recording into `registry` too.
    pub ai: Embedded,
    /// The host's registry: its own families and Switchyard's.
    pub registry: Registry,
    /// The host's own metric: pages it answered.
    pub pages: IntCounter,
}

impl Monitored {
    async fn answer(
        &self,
        session: &mut Session,
        status: u16,
        kind: &str,
        body: Vec<u8>,
    ) -> Result<bool> {
        let body = Bytes::from(body);
        let mut head = ResponseHeader::build(status, Some(2))?;
        head.insert_header("content-type", kind)?;
        head.insert_header("content-length", body.len().to_string())?;
        session.write_response_header(Box::new(head), false).await?;
        session.write_response_body(Some(body), true).await?;
        Ok(true)
    }
}

#[async_trait]
impl ProxyHttp for Monitored {
    type CTX = Option<RequestCtx>;

    fn new_ctx(&self) -> Self::CTX {
        None
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut Self::CTX) -> Result<bool> {
        if self.ai.request_filter(session, ctx).await? {
            return Ok(true);
        }
        if session.req_header().uri.path() == "/metrics" {
            // One exposition of the host's registry: its families and Switchyard's.
            let mut text = Vec::new();
            if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut text) {
                return self
                    .answer(session, 500, "text/plain", e.to_string().into_bytes())
                    .await;
            }
            return self
                .answer(session, 200, "text/plain; version=0.0.4", text)
                .await;
        }
        self.pages.inc();
        self.answer(
            session,
            200,
            "text/plain",
            b"the host's own page\n".to_vec(),
        )
        .await
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
        // Switchyard counts its own requests here (`switchyard_requests_total`, ...).
        self.ai.logging(session, e, ctx).await;
    }
}

/// The host's server on `listen`: Switchyard from `settings` under `/ai`, recording into the
/// host's registry; `/metrics` serves that registry, every other path the host's page.
pub fn server(
    settings: switchyard::config::Settings,
    listen: &str,
) -> std::result::Result<Server, String> {
    let registry = Registry::new();
    let pages = IntCounter::new("host_pages_total", "Pages the host answered itself")
        .map_err(|e| e.to_string())?;
    registry
        .register(Box::new(pages.clone()))
        .map_err(|e| e.to_string())?;
    let mut server = Server::new_with_opt_and_conf(None, settings.server);
    server.bootstrap();
    let ai = Embedded::builder(settings.gateway)
        .prefix("/ai")
        .metrics_registry(&registry)
        .build()?;
    server.add_services(ai.background_services(&server.configuration));
    let host = Monitored {
        ai,
        registry,
        pages,
    };
    let mut service = http_proxy_service(&server.configuration, host);
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
