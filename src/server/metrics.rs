//! The metrics listener: `GET /metrics` in the Prometheus text format, on the address of
//! `metrics.address` and never on an entry point; and the operator's response-cache purge,
//! `POST /cache/purge?model=NAME[&key=HEX]`, there for the same reason (an operator's listener,
//! not the public's).
//!
//! Pingora's own `HttpServer` and `Service` serve it. `pingora-prometheus` is not used: it exposes
//! the `prometheus` crate's process-wide default registry (several gateways in one process would
//! share one set of counters) and answers every path; this app serves the gateway's own registry
//! at `/metrics` only.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::gateway::GatewayState;
use crate::metrics::Registry;
use async_trait::async_trait;
use http::Response;
use pingora::apps::http_app::{HttpServer, ServeHttp};
use pingora::protocols::http::ServerSession;
use pingora::services::listening::Service;

/// The app behind the metrics listener.
pub(crate) struct MetricsApp {
    registry: Registry,
    state: Arc<GatewayState>,
}

/// The metrics listener's service.
pub(crate) fn service(
    address: SocketAddr,
    registry: Registry,
    state: Arc<GatewayState>,
) -> Service<HttpServer<MetricsApp>> {
    let mut service = Service::new(
        "switchyard metrics".to_string(),
        HttpServer::new_app(MetricsApp { registry, state }),
    );
    service.add_tcp(&address.to_string());
    service
}

#[async_trait]
impl ServeHttp for MetricsApp {
    async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let path = session.req_header().uri.path();
        let (status, content_type, body) = if path == "/cache/purge" {
            let h = session.req_header();
            let query = h.uri.query().unwrap_or("").to_string();
            let post = h.method == http::Method::POST;
            purge(&self.state, post, &query).await
        } else if path != "/metrics" {
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

/// `POST /cache/purge?model=NAME` (every entry of the model) or `...&key=HEX` (one entry, the
/// key an answer's `Switchyard-Cache-Key` named): a JSON answer saying what was dropped.
async fn purge(state: &GatewayState, post: bool, query: &str) -> (u16, &'static str, Vec<u8>) {
    let answer = |status: u16, v: serde_json::Value| {
        (status, "application/json", v.to_string().into_bytes())
    };
    if !post {
        return answer(405, serde_json::json!({"error": "a purge is a POST"}));
    }
    let (mut model, mut key) = (None, None);
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("model", v)) => model = Some(decode(v)),
            Some(("key", v)) => key = Some(decode(v)),
            _ => {}
        }
    }
    let Some(model) = model.filter(|m| !m.is_empty()) else {
        return answer(
            400,
            serde_json::json!({"error": "name the model: ?model=NAME[&key=HEX]"}),
        );
    };
    let cache = state.cache();
    match key {
        Some(key) => match cache.purge_key(&model, &key).await {
            Ok(found) => answer(
                200,
                serde_json::json!({"model": model, "key": key, "purged": u8::from(found)}),
            ),
            Err(e) => answer(400, serde_json::json!({"error": e})),
        },
        None => match cache.purge_model(&model).await {
            Ok(n) => answer(200, serde_json::json!({"model": model, "purged": n})),
            Err(e) => {
                log::warn!("response cache purge of {model}: {e}");
                answer(
                    503,
                    serde_json::json!({"error": "the cache's store could not be reached"}),
                )
            }
        },
    }
}

/// A query value with its percent-escapes (and `+` for a space) decoded.
pub(crate) fn decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("g"), 16) {
                    Ok(c) => {
                        out.push(c);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
