//! The Pingora service: [`Gateway`] implements `ProxyHttp` and answers every request itself from
//! `request_filter` (routing, authentication, bounded body, validation, the upstream exchange and
//! the translated answer), so Pingora's own proxy path is never used (docs/architecture.md, "The upstream exchange").
//!
//! One [`GatewayState`] is shared by every entry point; each entry point gets its own [`Gateway`]
//! carrying its region, which picks providers' regional base URLs.

pub mod admission;
pub mod body;
pub mod client_conn;
pub mod image_tasks;
pub mod models;
pub mod openapi;
pub mod operations;
pub mod respond;
pub mod route;
pub mod task_job;
pub mod task_supervisor;

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use pingora::upstreams::peer::HttpPeer;
use pingora::{Error as PError, ErrorType};

use crate::api::compat::Surface;
use crate::auth::Principal;
use crate::catalog::Model;
use crate::common::error::GatewayError;
use crate::config::{GatewaySettings, Listener};
use crate::engine::deliver::HostedFiles;
use crate::store::files::valid_id;
use crate::store::files::FileStore;
use crate::store::files::MemoryStore;
use crate::store::redis_files::RedisFileStore;
use crate::store::tasks::MemoryTaskStore;
use crate::store::tasks::RedisTaskStore;
use crate::store::tasks::TaskStore;
use crate::upstream::exchange::Upstream;
use admission::{Admission, InFlight};
use client_conn::Clocked;
use operations::Failure;
use route::Route;

/// What every entry point shares: settings, model catalog, and the upstream connection pool.
pub struct GatewayState {
    pub settings: GatewaySettings,
    pub upstream: Upstream,
    /// Images the gateway hosts for `response_format: url`.
    pub files: HostedFiles,
    /// Asynchronous image tasks.
    pub tasks: Box<dyn TaskStore>,
    /// This process's id in task records (which instance runs a task).
    pub instance: String,
    /// The task jobs running on this instance.
    pub jobs: task_job::Jobs,
}

impl GatewayState {
    pub fn new(settings: GatewaySettings) -> Arc<GatewayState> {
        let upstream = Upstream::new(settings.retry, settings.dns_ttl);
        let (store, tasks): (Box<dyn FileStore>, Box<dyn TaskStore>) = match &settings.redis {
            Some(conn) => (
                Box::new(RedisFileStore::with_conn(conn.clone())),
                Box::new(RedisTaskStore::with_conn(conn.clone())),
            ),
            None => (
                Box::new(MemoryStore::new(settings.images.file_store_bytes)),
                Box::new(MemoryTaskStore::new()),
            ),
        };
        let files = HostedFiles {
            store,
            ttl: settings.images.file_ttl,
        };
        Arc::new(GatewayState {
            settings,
            upstream,
            files,
            tasks,
            instance: uuid::Uuid::new_v4().to_string(),
            jobs: task_job::Jobs::default(),
        })
    }
}

impl GatewayState {
    /// What the image generation engine uses of this state.
    pub fn images(&self) -> crate::engine::images::Images<'_> {
        crate::engine::images::Images {
            upstream: &self.upstream,
            adapters: &self.settings.adapters,
            files: &self.files,
            settings: &self.settings.images,
        }
    }
}

/// The gateway as a Pingora `ProxyHttp` service for one entry point.
pub struct Gateway {
    state: Arc<GatewayState>,
    listener: String,
    region: String,
    admission: Arc<Admission>,
}

impl Gateway {
    /// `admission` holds the entry point's caps; its connections are counted by whoever accepts
    /// them (`server::add_services`).
    pub fn new(
        state: Arc<GatewayState>,
        listener: &Listener,
        admission: Arc<Admission>,
    ) -> Gateway {
        Gateway {
            state,
            listener: listener.name.clone(),
            region: listener.region.clone(),
            admission,
        }
    }
}

/// Per-request state, for the access log.
pub struct Ctx {
    start: Instant,
    status: u16,
    code: Option<&'static str>,
    principal: Option<Principal>,
    model: Option<Arc<Model>>,
    /// Set when an answer had begun and had to be abandoned.
    aborted: Option<String>,
    /// The client went away before its answer was complete: said once, in the access log.
    client_gone: bool,
    /// The API shape the request speaks, and so its answers and errors.
    surface: Surface,
    /// This request's slot under the entry point's in-flight cap, given back as the context drops.
    _in_flight: Option<InFlight>,
}

/// An answer that cannot be finished. The access log says why ([`Gateway::logging`]), and the
/// error returned makes Pingora drop the connection without finishing the body, which the client
/// sees as a truncated answer.
fn abandon(session: &mut Session, ctx: &mut Ctx, failure: Failure) -> Box<PError> {
    session.set_keepalive(None);
    let why = match failure {
        Failure::ClientGone => {
            ctx.client_gone = true;
            "client went away".to_string()
        }
        Failure::Abort(why) => why,
        Failure::Answer(err) => err.message(),
    };
    ctx.aborted = Some(why.clone());
    PError::explain(ErrorType::Custom("answer abandoned"), why)
}

impl Gateway {
    async fn handle(&self, session: &mut Session, ctx: &mut Ctx) -> Result<(), Failure> {
        let header = session.req_header();
        let route = route::route(&header.method, header.uri.path())?;
        if let Route::Compat(surface) = route {
            // From here on, errors are answered in the surface's shape too.
            ctx.surface = surface;
        }
        // A load balancer's health check is answered even at capacity: the gateway is alive.
        if route != Route::Health {
            ctx._in_flight = Some(
                self.admission
                    .admit(session.client_addr().and_then(|a| a.as_inet()))?,
            );
        }
        let op = match route {
            Route::Health => {
                ctx.status = 200;
                return respond::json(
                    session,
                    200,
                    bytes::Bytes::from_static(b"{\"status\":\"ok\"}"),
                    &[],
                )
                .await
                .map_err(|e| Failure::written("writing answer", e));
            }
            Route::OpenApi => {
                ctx.status = 200;
                return respond::json(session, 200, openapi::document(), &[])
                    .await
                    .map_err(|e| Failure::written("writing answer", e));
            }
            Route::File => return self.file(session, ctx).await,
            Route::Task => return self.task(session, ctx).await,
            Route::Models | Route::Model => {
                return models::serve(&self.state, route, session, ctx).await
            }
            Route::Operation(op) => op,
            Route::ImageEdit => crate::common::Operation::Images,
            Route::Compat(_) => crate::common::Operation::Rerank,
        };
        let settings = &self.state.settings;
        let principal = settings
            .auth
            .authenticate(&session.req_header().headers)
            .map_err(GatewayError::Unauthorized)?;
        ctx.principal = Some(principal);
        let body = body::read(session, settings.limits.body_limit(op), &settings.clients).await?;
        let body = if route == Route::ImageEdit {
            let content_type = session
                .req_header()
                .headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok());
            crate::api::image_edit::generation_body(content_type, body).await?
        } else {
            body
        };
        let state = &self.state;
        match op {
            crate::common::Operation::Speech => {
                operations::speech(state, &self.region, session, ctx, &body).await
            }
            crate::common::Operation::Images => {
                operations::images(state, &self.region, session, ctx, body).await
            }
            crate::common::Operation::Rerank => {
                operations::rerank(state, &self.region, session, ctx, &body, ctx.surface).await
            }
        }
    }
}

impl Gateway {
    /// `GET /api/v1/images/{task_id}`: the caller's own task.
    async fn task(&self, session: &mut Session, ctx: &mut Ctx) -> Result<(), Failure> {
        let principal = self
            .state
            .settings
            .auth
            .authenticate(&session.req_header().headers)
            .map_err(GatewayError::Unauthorized)?;
        let id = session
            .req_header()
            .uri
            .path()
            .strip_prefix(route::TASKS_PREFIX)
            .unwrap_or_default()
            .to_string();
        let result = image_tasks::get(&self.state, &principal.id, &id).await;
        ctx.principal = Some(principal);
        let out = serde_json::to_vec(&result?)
            .map_err(|e| GatewayError::Internal(format!("serializing task: {e}")))?;
        ctx.status = 200;
        respond::json(session, 200, out.into(), &[])
            .await
            .map_err(|e| Failure::written("writing answer", e))
    }

    /// Serve a hosted image. No credentials: the unguessable, expiring link is the capability
    /// (like a provider's signed URL), so it works in a browser or another service.
    async fn file(&self, session: &mut Session, ctx: &mut Ctx) -> Result<(), Failure> {
        let header = session.req_header();
        let head_only = header.method == http::Method::HEAD;
        let id = header
            .uri
            .path()
            .strip_prefix(route::FILES_PREFIX)
            .unwrap_or_default();
        let found = if valid_id(id) {
            self.state
                .files
                .store
                .get(id)
                .await
                .map_err(GatewayError::from)?
        } else {
            None
        };
        let Some((file, left)) = found else {
            return Err(GatewayError::FileNotFound.into());
        };
        ctx.status = 200;
        respond::file(
            session,
            &file.content_type,
            file.bytes,
            left.as_secs(),
            head_only,
        )
        .await
        .map_err(|e| Failure::written("writing file", e))
    }
}

#[async_trait]
impl ProxyHttp for Gateway {
    type CTX = Ctx;

    fn new_ctx(&self) -> Ctx {
        Ctx {
            start: Instant::now(),
            status: 0,
            code: None,
            principal: None,
            model: None,
            aborted: None,
            client_gone: false,
            surface: Surface::Native,
            _in_flight: None,
        }
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut Ctx) -> pingora::Result<bool> {
        if let Some(clock) = session.stream().and_then(Clocked::clock_of) {
            clock.serving();
        }
        // A client that stops taking an answer's bytes is cut off; one that reads slowly is not.
        session.set_write_timeout(Some(self.state.settings.clients.write_timeout));
        match self.handle(session, ctx).await {
            Ok(()) => Ok(true),
            Err(Failure::Answer(err)) => {
                if matches!(err, GatewayError::Overloaded(_)) {
                    // Shedding load includes the connection: the client comes back on a new one.
                    session.set_keepalive(None);
                }
                ctx.status = err.status();
                ctx.code = Some(err.code());
                match &err {
                    GatewayError::Internal(m) => log::error!("internal error: {m}"),
                    // The caller is told only that the store is unavailable; the why is ours.
                    GatewayError::Store(m) => log::warn!("store unavailable: {m}"),
                    _ => {}
                }
                match respond::error_as(session, &err, ctx.surface).await {
                    Ok(()) => Ok(true),
                    Err(e) => Err(abandon(session, ctx, Failure::written("writing error", e))),
                }
            }
            Err(failure) => Err(abandon(session, ctx, failure)),
        }
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        _ctx: &mut Ctx,
    ) -> pingora::Result<Box<HttpPeer>> {
        // Every request is answered in request_filter; reaching here is a bug, not a route.
        Err(PError::explain(
            ErrorType::InternalError,
            "no upstream peer: the gateway answers every request itself",
        ))
    }

    async fn fail_to_proxy(&self, session: &mut Session, e: &PError, ctx: &mut Ctx) -> FailToProxy {
        if ctx.aborted.is_some() || session.response_written().is_some() {
            return FailToProxy {
                error_code: 0,
                can_reuse_downstream: false,
            };
        }
        let err = GatewayError::Internal(e.to_string());
        ctx.status = err.status();
        if let Err(write) = respond::error(session, &err).await {
            log::debug!("could not write error answer: {write}");
        }
        FailToProxy {
            error_code: err.status(),
            can_reuse_downstream: false,
        }
    }

    /// A client that went away is the access log's `aborted="client went away"`, not an error:
    /// it is the client's doing, and at the end of a load test there are hundreds. Every other
    /// failure keeps Pingora's error line.
    fn suppress_error_log(&self, _session: &Session, ctx: &Ctx, _error: &PError) -> bool {
        ctx.client_gone
    }

    async fn logging(&self, session: &mut Session, _e: Option<&PError>, ctx: &mut Ctx) {
        if let Some(clock) = session.stream().and_then(Clocked::clock_of) {
            clock.served();
        }
        if !log::log_enabled!(target: "access", log::Level::Info) {
            return;
        }
        let h = session.req_header();
        log::info!(
            target: "access",
            "{} {} {} status={} code={} model={} caller={} ms={:.1}{}",
            self.listener,
            h.method,
            h.uri.path(),
            ctx.status,
            ctx.code.unwrap_or("-"),
            ctx.model.as_ref().map(|m| m.name.as_str()).unwrap_or("-"),
            ctx.principal.as_ref().map(|p| p.id.as_str()).unwrap_or("-"),
            ctx.start.elapsed().as_secs_f64() * 1000.0,
            ctx.aborted.as_ref().map(|a| format!(" aborted=\"{a}\"")).unwrap_or_default(),
        );
    }
}
