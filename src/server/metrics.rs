//! The metrics listener: `GET /metrics` in the Prometheus text format, on the address of
//! `metrics.address` and never on an entry point.
//!
//! Pingora's own `HttpServer` and `Service` serve it. `pingora-prometheus` is not used: it exposes
//! the `prometheus` crate's process-wide default registry (several gateways in one process would
//! share one set of counters) and answers every path; this app serves the gateway's own registry
//! at `/metrics` only.

use std::net::SocketAddr;

use crate::metrics::Registry;
use async_trait::async_trait;
use http::Response;
use pingora::apps::http_app::{HttpServer, ServeHttp};
use pingora::protocols::http::ServerSession;
use pingora::services::listening::Service;

/// The app behind the metrics listener.
pub struct MetricsApp {
    registry: Registry,
}

/// The metrics listener's service.
pub fn service(address: SocketAddr, registry: Registry) -> Service<HttpServer<MetricsApp>> {
    let mut service = Service::new(
        "switchyard metrics".to_string(),
        HttpServer::new_app(MetricsApp { registry }),
    );
    service.add_tcp(&address.to_string());
    service
}

#[async_trait]
impl ServeHttp for MetricsApp {
    async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let path = session.req_header().uri.path();
        let (status, content_type, body) = if path != "/metrics" {
            (
                404,
                "text/plain",
                b"not found: metrics are at /metrics\n".to_vec(),
            )
        } else {
            match crate::metrics::encode(&self.registry) {
                Ok(body) => (200, "text/plain; version=0.0.4; charset=utf-8", body),
                Err(e) => {
                    log::error!("{e}");
                    (
                        500,
                        "text/plain",
                        b"metrics could not be encoded\n".to_vec(),
                    )
                }
            }
        };
        let len = body.len();
        let mut answer = Response::new(body);
        *answer.status_mut() = http::StatusCode::from_u16(status).unwrap_or_default();
        let headers = answer.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(content_type),
        );
        headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(len));
        answer
    }
}
