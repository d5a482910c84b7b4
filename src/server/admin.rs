//! The management API (issue 47): `/admin/v1/*` on its own listener (`admin.address`, off by
//! default and never an entry point's), a Pingora `HttpServer` app like the metrics listener.
//! Every `/admin/v1/*` request carries an administrator's credential (`admin_auth.rs`); every
//! state-changing action is written to the audit table in the transaction that makes it
//! (`tenants::store`). `GET /console*` serves the web console's files (`console.rs`), which need
//! no credential to load (every API call the console makes carries one).
//!
//! - `admin_routes.rs`: the routes, one list;
//! - `admin_auth.rs`: administrators' credentials, failed logins per IP;
//! - `admin_handlers.rs`: tenants, keys, audit and models;
//! - `admin_error.rs`: the error answers.
//!
//! The API's contract is `openapi/admin_openapi.json`, served at `/admin/v1/openapi.json`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use http::Response;
use pingora::apps::http_app::{HttpServer, ServeHttp};
use pingora::protocols::http::ServerSession;
use pingora::services::listening::Service;
use serde_json::Value;

use super::admin_auth::{self, Admin, FailedLogins};
use super::admin_error::ApiError;
use super::admin_routes::{self, Matched};
use crate::config::tenants::TenantsSettings;
use crate::gateway::GatewayState;
use crate::tenants::db::AdminDb;

/// The largest request body the API reads.
const MAX_BODY: usize = 64 * 1024;

/// The management API's OpenAPI document.
const OPENAPI: &str = include_str!("../../openapi/admin_openapi.json");

/// The app behind the management listener.
pub(crate) struct AdminApp {
    pub(crate) state: Arc<GatewayState>,
    pub(crate) db: AdminDb,
    logins: FailedLogins,
}

/// One request, as the handlers see it.
pub(crate) struct Request<'a> {
    pub(crate) admin: Admin,
    pub(crate) from: Option<IpAddr>,
    pub(crate) params: Vec<&'a str>,
    pub(crate) query: &'a str,
    pub(crate) body: Bytes,
}

/// A handler's answer: its status and JSON body.
pub(crate) type Answer = Result<(u16, Value), ApiError>;

/// The management listener's service on `address`.
pub(crate) fn service(
    address: SocketAddr,
    state: Arc<GatewayState>,
    tenants: TenantsSettings,
) -> Service<HttpServer<AdminApp>> {
    let app = AdminApp {
        state,
        db: AdminDb::new(tenants),
        logins: FailedLogins::default(),
    };
    let mut service = Service::new("switchyard admin".to_string(), HttpServer::new_app(app));
    service.add_tcp(&address.to_string());
    service
}

/// The request's body, at most [`MAX_BODY`] bytes.
async fn body(session: &mut ServerSession) -> Result<Bytes, ApiError> {
    let mut out = Vec::new();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                if out.len() + chunk.len() > MAX_BODY {
                    return Err(ApiError::new(
                        413,
                        "payload_too_large",
                        format!("request body too large: the limit is {MAX_BODY} bytes"),
                    ));
                }
                out.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(Bytes::from(out)),
            Err(_) => {
                return Err(ApiError::new(
                    400,
                    "invalid_request",
                    "the request body could not be read",
                ))
            }
        }
    }
}

fn answer(status: u16, content_type: &str, body: Vec<u8>) -> Response<Vec<u8>> {
    let len = body.len();
    let mut answer = Response::new(body);
    *answer.status_mut() = http::StatusCode::from_u16(status).unwrap_or_default();
    let h = answer.headers_mut();
    if let Ok(v) = http::HeaderValue::from_str(content_type) {
        h.insert(http::header::CONTENT_TYPE, v);
    }
    h.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(len));
    h.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    answer
}

/// A console file with the console's headers (its policy, `nosniff`, no framing, no caching).
fn console_answer(content_type: &str, bytes: &[u8]) -> Response<Vec<u8>> {
    let mut answer = answer(200, content_type, bytes.to_vec());
    for (name, value) in super::console::HEADERS {
        // Constants (their unit test parses each), so neither conversion fails.
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(value),
        ) {
            answer.headers_mut().insert(name, value);
        }
    }
    answer
}

fn json(status: u16, v: &Value) -> Response<Vec<u8>> {
    answer(status, "application/json", v.to_string().into_bytes())
}

impl AdminApp {
    /// An authenticated `/admin/v1/*` request to its answer.
    async fn api(&self, session: &mut ServerSession, path: &str) -> Answer {
        let method = session.req_header().method.as_str().to_string();
        let (method_s, template, params) = match admin_routes::route(&method, path) {
            Matched::Route(m, t, p) => (m, t, p),
            Matched::WrongMethod(allowed) => {
                return Err(ApiError::new(
                    405,
                    "method_not_allowed",
                    format!("method not allowed; use {allowed}"),
                ))
            }
            Matched::NotFound => return Err(ApiError::new(404, "not_found", "no such endpoint")),
        };
        let from = session
            .client_addr()
            .and_then(|a| a.as_inet().map(|a| a.ip()));
        let settings = self.state.settings();
        let Some(admin) = &settings.admin else {
            return Err(ApiError::new(404, "not_found", "no management API"));
        };
        let who = admin_auth::authenticate(
            &admin.auth,
            &self.logins,
            admin.failed_logins_per_minute,
            &session.req_header().headers,
            from,
        )?;
        let query = session.req_header().uri.query().unwrap_or("").to_string();
        let body = body(session).await?;
        let req = Request {
            admin: who,
            from,
            params,
            query: &query,
            body,
        };
        if template == "/admin/v1/openapi.json" {
            return serde_json::from_str(OPENAPI)
                .map(|v| (200, v))
                .map_err(|e| ApiError::new(500, "internal_error", format!("the document: {e}")));
        }
        let within = self.db.timeout().max(std::time::Duration::from_secs(5)) * 2;
        match tokio::time::timeout(within, self.handle(method_s, template, &req)).await {
            Ok(answer) => answer,
            Err(_) => Err(ApiError::database("a request's statements took too long")),
        }
    }
}

#[async_trait]
impl ServeHttp for AdminApp {
    async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let path = session.req_header().uri.path().to_string();
        if let Some(rest) = path.strip_prefix("/console") {
            let get = matches!(
                session.req_header().method,
                http::Method::GET | http::Method::HEAD
            );
            return match super::console::asset(rest)
                .filter(|_| get && (rest.is_empty() || rest.starts_with('/')))
            {
                Some((content_type, bytes)) => console_answer(content_type, bytes),
                None => json(404, &ApiError::not_found("console asset").body()),
            };
        }
        if !path.starts_with("/admin/v1/") {
            return json(
                404,
                &ApiError::new(
                    404,
                    "not_found",
                    "no such endpoint: the management API is under /admin/v1/",
                )
                .body(),
            );
        }
        match self.api(session, &path).await {
            Ok((status, body)) => json(status, &body),
            Err(e) => json(e.status, &e.body()),
        }
    }
}
