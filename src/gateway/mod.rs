//! The Pingora service: [`Gateway`] implements `ProxyHttp` and answers every request itself from
//! `request_filter` (routing, authentication, bounded body, validation, the upstream exchange and
//! the translated answer), so Pingora's own proxy path is never used (docs/architecture.md, "The upstream exchange").
//!
//! One [`GatewayState`] is shared by every entry point; each entry point gets its own [`Gateway`]
//! carrying its region, which picks providers' regional base URLs.

pub mod access_log;
pub mod admission;
pub mod body;
pub mod client_conn;
#[cfg(feature = "redis")]
pub mod health_sync;
pub mod image_tasks;
pub mod lifecycle;
pub mod limited;
pub mod models;
pub mod mount;
pub mod openapi;
pub mod operations;
pub mod reload;
pub mod respond;
pub mod route;
pub mod task_job;
pub mod task_supervisor;
pub mod voices;

use std::sync::Arc;

use arc_swap::ArcSwap;
use std::time::{Instant, SystemTime};

use async_trait::async_trait;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use pingora::upstreams::peer::HttpPeer;
use pingora::{Error as PError, ErrorType};

use crate::api::compat::Surface;
use crate::auth::Principal;
use crate::catalog::Model;
use crate::common::error::GatewayError;
use crate::common::Operation;
use crate::config::{GatewaySettings, Listener};
use crate::engine::deliver::HostedFiles;
use crate::engine::trace::{self, Trace};
use crate::limits::{Lease, Limiter};
use crate::metrics::{self, Metrics};
use crate::store::files::valid_id;
use crate::store::files::FileStore;
use crate::store::files::MemoryStore;
#[cfg(feature = "redis")]
use crate::store::redis_files::RedisFileStore;
use crate::store::tasks::MemoryTaskStore;
#[cfg(feature = "redis")]
use crate::store::tasks::RedisTaskStore;
use crate::store::tasks::TaskStore;
use crate::upstream::exchange::Upstream;
use admission::{Admission, InFlight};
use client_conn::Clocked;
use operations::Failure;
use route::Route;

/// What every entry point shares: settings, model catalog, and the upstream connection pool.
///
/// The settings are swapped whole by a reload ([`GatewayState::reload`]); everything else here is
/// runtime state that outlives any one configuration.
pub struct GatewayState {
    /// The configuration in force. A request takes one snapshot ([`GatewayState::settings`]) when
    /// it starts and keeps it to its end, so a reload never changes a request half-way.
    live: ArcSwap<GatewaySettings>,
    pub upstream: Upstream,
    /// Images the gateway hosts for `response_format: url`.
    pub files: HostedFiles,
    /// Asynchronous image tasks.
    pub tasks: Box<dyn TaskStore>,
    /// This process's id in task records (which instance runs a task).
    pub instance: String,
    /// The task jobs running on this instance.
    pub jobs: task_job::Jobs,
    /// This gateway's metrics (empty without a `metrics:` listener).
    pub metrics: Metrics,
    /// The Redis connection made at start (`None`: no Redis), shared by the stores and by what
    /// else shares state between instances (limits, ejections). A reload does not replace it: a
    /// changed `store:` needs a restart.
    pub redis: Option<crate::store::redis_conn::RedisConn>,
    /// Per-caller limits: budgets and concurrent slots, by principal id (in Redis when one is
    /// configured).
    pub limits: Limiter,
    /// Providers' voice lists, kept a while (`GET /api/v1/audio/voices`).
    pub voices: crate::engine::discovery::VoiceCache,
}

impl GatewayState {
    pub fn new(settings: GatewaySettings) -> Arc<GatewayState> {
        let metrics = match settings.metrics {
            Some(_) => Metrics::on().unwrap_or_else(|e| {
                log::error!("{e}: metrics are off");
                Metrics::off()
            }),
            None => Metrics::off(),
        };
        metrics.config_loaded(true, false);
        let upstream = Upstream::new(
            settings.retry,
            settings.dns_ttl,
            settings.ejection,
            metrics.clone(),
        );
        make_health_cells(&settings, &upstream);
        lifecycle::record_shutdowns(&metrics, &settings);
        let (store, tasks): (Box<dyn FileStore>, Box<dyn TaskStore>) = match &settings.redis {
            #[cfg(not(feature = "redis"))]
            Some(conn) => match *conn {},
            #[cfg(feature = "redis")]
            Some(conn) => (
                Box::new(RedisFileStore::with_conn(conn.clone())),
                Box::new(RedisTaskStore::with_conn(conn.clone())),
            ),
            None => (
                Box::new(MemoryStore::new(settings.images.file_store_bytes)),
                Box::new(MemoryTaskStore::new(settings.images.task_store_bytes)),
            ),
        };
        let limits = Limiter::new(settings.redis.as_ref(), metrics.clone());
        let files = HostedFiles {
            store,
            ttl: settings.images.file_ttl,
        };
        let redis = settings.redis.clone();
        Arc::new(GatewayState {
            live: ArcSwap::from_pointee(settings),
            upstream,
            files,
            tasks,
            instance: uuid::Uuid::new_v4().to_string(),
            jobs: task_job::Jobs::default(),
            metrics,
            redis,
            limits,
            voices: Default::default(),
        })
    }
}

/// Every target's health cell made now, so a rejected key ejects all of its account's targets,
/// also those no request has reached yet (at start, and for the targets a reload brings).
pub(crate) fn make_health_cells(settings: &GatewaySettings, upstream: &Upstream) {
    for model in settings.catalog.models() {
        for target in &model.targets {
            target.health(&upstream.health);
        }
    }
}

impl GatewayState {
    /// The configuration in force now: one atomic load and a reference count, no copy. Keep the
    /// snapshot for the whole of a request or job.
    pub fn settings(&self) -> Arc<GatewaySettings> {
        self.live.load_full()
    }

    /// What the image generation engine uses of this state, under the settings `s` (a snapshot).
    pub fn images<'a>(&'a self, s: &'a GatewaySettings) -> crate::engine::images::Images<'a> {
        crate::engine::images::Images {
            upstream: &self.upstream,
            adapters: &s.adapters,
            files: &self.files,
            settings: &s.images,
        }
    }
}

/// The gateway as a Pingora `ProxyHttp` service for one entry point.
pub struct Gateway {
    state: Arc<GatewayState>,
    listener: String,
    region: String,
    admission: Arc<Admission>,
    /// This entry point's in-flight gauge, resolved once.
    in_flight: metrics::Gauge,
    /// Where its routes sit in the server's paths (the binary: the root, every path its own).
    mount: mount::Mount,
}

impl Gateway {
    /// `admission` holds the entry point's caps; its connections are counted by whoever accepts
    /// them (`server::add_services`).
    pub fn new(
        state: Arc<GatewayState>,
        listener: &Listener,
        admission: Arc<Admission>,
    ) -> Gateway {
        Gateway::mounted(
            state,
            &listener.name,
            &listener.region,
            admission,
            mount::Mount::root(),
        )
    }

    /// A gateway at `mount` in its server's paths, for the entry point named `name` (metrics and
    /// access lines) in `region` (providers' regional base URLs).
    pub fn mounted(
        state: Arc<GatewayState>,
        name: &str,
        region: &str,
        admission: Arc<Admission>,
        mount: mount::Mount,
    ) -> Gateway {
        let in_flight = state.metrics.in_flight(name);
        Gateway {
            state,
            listener: name.to_string(),
            region: region.to_string(),
            admission,
            in_flight,
            mount,
        }
    }

    /// Where its routes sit.
    pub fn mount(&self) -> &mount::Mount {
        &self.mount
    }

    /// The entry point's name in metrics and access lines.
    pub fn entry_point(&self) -> &str {
        &self.listener
    }

    /// The state it serves from.
    pub fn state(&self) -> &Arc<GatewayState> {
        &self.state
    }

    /// A context for a request under `prefix` (`None`: at the root), as [`ProxyHttp::new_ctx`]
    /// makes one at the root.
    pub fn ctx_under(&self, prefix: Option<Arc<str>>) -> Ctx {
        let mut ctx = self.new_ctx();
        ctx.prefix = prefix;
        ctx
    }
}

/// Per-request state, for the access log.
pub struct Ctx {
    /// The configuration this request runs under from start to end, whatever a reload does.
    settings: Arc<GatewaySettings>,
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
    /// This request in the entry point's in-flight gauge, taken out as the context drops.
    _gauge: Option<GaugeSlot>,
    /// The operation, once routed.
    operation: Option<Operation>,
    /// What the attempt loop noted: attempts, and the target that answered or failed last.
    trace: Trace,
    /// When a speech answer's head (sent with its first audio) went out.
    ttfb: Option<std::time::Duration>,
    /// What the answer used.
    usage: access_log::Usage,
    /// The caller's concurrent slot, given back as the context drops (after the answer).
    lease: Option<Lease>,
    /// Whether its usage has been charged to its caller's limits (once only).
    charged: bool,
    /// The mount prefix the request came under (`None`: at the root); its route is the path
    /// after it, and its links carry it.
    prefix: Option<Arc<str>>,
}

impl Ctx {
    /// The mount prefix the request came under (`None`: at the root).
    pub(crate) fn prefix(&self) -> Option<&str> {
        self.prefix.as_deref()
    }

    /// The request's path as the router sees it (its mount prefix taken off).
    pub(crate) fn routed<'a>(&self, session: &'a Session) -> &'a str {
        mount::routed(session.req_header().uri.path(), self.prefix())
    }
}

/// An HTTP status as its three digits, without allocating (`000` when none was set).
fn status_digits(status: u16) -> [u8; 3] {
    let s = status.min(999);
    [
        b'0' + (s / 100) as u8,
        b'0' + (s / 10 % 10) as u8,
        b'0' + (s % 10) as u8,
    ]
}

/// A request counted in an in-flight gauge until dropped.
struct GaugeSlot(metrics::IntGauge);

impl GaugeSlot {
    fn new(gauge: &metrics::Gauge) -> Option<GaugeSlot> {
        let gauge = gauge.as_ref()?;
        gauge.inc();
        Some(GaugeSlot(gauge.clone()))
    }
}

impl Drop for GaugeSlot {
    fn drop(&mut self) {
        self.0.dec();
    }
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
        let route = route::route(&session.req_header().method, ctx.routed(session))?;
        if let Route::Compat(surface) = route {
            // From here on, errors are answered in the surface's shape too.
            ctx.surface = surface;
        }
        // A load balancer's health check is answered even at capacity: the gateway is alive.
        if route != Route::Health {
            let admitted = self
                .admission
                .admit(|| session.client_addr().and_then(|a| a.as_inet().copied()));
            ctx._in_flight = Some(admitted.inspect_err(|e| self.count_shed(e))?);
            ctx._gauge = GaugeSlot::new(&self.in_flight);
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
                return respond::json(session, 200, self.mount.openapi(), &[])
                    .await
                    .map_err(|e| Failure::written("writing answer", e));
            }
            Route::File => return self.file(session, ctx).await,
            Route::Task => return self.task(session, ctx).await,
            Route::Models | Route::Model => return models::serve(route, session, ctx).await,
            Route::Voices => return voices::serve(&self.state, &self.region, session, ctx).await,
            Route::Operation(op) => op,
            Route::ImageEdit => crate::common::Operation::Images,
            Route::Compat(_) => crate::common::Operation::Rerank,
        };
        ctx.operation = Some(op);
        let settings = &Arc::clone(&ctx.settings);
        let principal = settings
            .auth
            .authenticate(&session.req_header().headers)
            .map_err(GatewayError::Unauthorized)?;
        ctx.principal = Some(principal);
        limited::admit(&self.state, ctx, op).await?;
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
                operations::speech(state, settings, &self.region, session, ctx, &body).await
            }
            crate::common::Operation::Images => {
                operations::images(state, settings, &self.region, session, ctx, body).await
            }
            crate::common::Operation::Rerank => {
                let surface = ctx.surface;
                operations::rerank(state, settings, &self.region, session, ctx, &body, surface)
                    .await
            }
        }
    }
}

impl Gateway {
    /// Count a request refused by load shedding, by the cap it hit.
    fn count_shed(&self, e: &GatewayError) {
        let GatewayError::Overloaded(why) = e else {
            return;
        };
        let cause = if *why == admission::TOO_MANY_CONNECTIONS {
            "connections"
        } else {
            "in_flight"
        };
        self.state
            .metrics
            .with(|f| metrics::inc(&f.shed, &[&self.listener, cause], 1));
    }

    /// Count the finished request in the metrics.
    fn count(&self, ctx: &Ctx, bytes_out: u64) {
        self.state.metrics.with(|f| {
            let operation = ctx.operation.map_or("-", Operation::as_str);
            let model = ctx.model.as_ref().map_or("-", |m| m.name.as_str());
            let digits = status_digits(ctx.status);
            let status = std::str::from_utf8(&digits).unwrap_or("0");
            let entry = self.listener.as_str();
            let code = ctx.code.unwrap_or("");
            metrics::inc(&f.requests, &[entry, operation, model, status, code], 1);
            metrics::observe(
                &f.request_duration,
                &[entry, operation, model],
                ctx.start.elapsed().as_secs_f64(),
            );
            if bytes_out > 0 {
                metrics::inc(&f.response_bytes, &[entry, operation, model], bytes_out);
            }
            if let Some(ttfb) = ctx.ttfb {
                metrics::observe(&f.speech_first_byte, &[entry, model], ttfb.as_secs_f64());
            }
            if ctx.code == Some("request_timeout") {
                metrics::inc(&f.client_timeouts, &[entry, "body"], 1);
            }
            let u = ctx.usage;
            if let Some(p) = &ctx.principal {
                let key = metrics::key_label(&p.id);
                for (family, n) in [
                    (&f.rerank_tokens, u.tokens),
                    (&f.speech_characters, u.characters),
                    (&f.images_generated, u.images),
                ] {
                    if n > 0 {
                        metrics::inc(family, &[model, key], n);
                    }
                }
            }
        });
    }

    /// `GET /api/v1/images/{task_id}`: the caller's own task.
    async fn task(&self, session: &mut Session, ctx: &mut Ctx) -> Result<(), Failure> {
        let principal = ctx
            .settings
            .auth
            .authenticate(&session.req_header().headers)
            .map_err(GatewayError::Unauthorized)?;
        let id = ctx
            .routed(session)
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
        let head_only = session.req_header().method == http::Method::HEAD;
        let id = ctx
            .routed(session)
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
            settings: self.state.settings(),
            start: Instant::now(),
            status: 0,
            code: None,
            principal: None,
            model: None,
            aborted: None,
            client_gone: false,
            surface: Surface::Native,
            _in_flight: None,
            _gauge: None,
            operation: None,
            trace: Trace::default(),
            ttfb: None,
            usage: access_log::Usage::default(),
            lease: None,
            charged: false,
            prefix: None,
        }
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut Ctx) -> pingora::Result<bool> {
        if let Some(clock) = session.stream().and_then(Clocked::clock_of) {
            clock.serving();
        }
        // A client that stops taking an answer's bytes is cut off; one that reads slowly is not.
        session.set_write_timeout(Some(ctx.settings.clients.write_timeout));
        let (handled, noted) = {
            let mut traced = std::pin::pin!(trace::traced(self.handle(session, ctx)));
            let handled = traced.as_mut().await;
            (handled, trace::noted(traced))
        };
        ctx.trace = noted;
        // The answer is out (or is an error about to be written): its usage is charged and its
        // concurrent slot given back now, not after Pingora's own end of request, so that a
        // client sending its next request the moment it has this answer finds the slot free
        // (short of a Redis round trip, when the limits live there).
        limited::charge(&self.state, ctx).await;
        match handled {
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
                    GatewayError::Store(m) => {
                        self.state.metrics.store_error("request");
                        log::warn!("store unavailable: {m}")
                    }
                    _ => {}
                }
                // An error about a deprecated model says so too (the lifecycle headers).
                let extra = ctx
                    .model
                    .as_deref()
                    .map(|m| mount::link_headers(lifecycle::headers(m), ctx.prefix()))
                    .unwrap_or_default();
                match respond::error_with(session, &err, ctx.surface, &extra).await {
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
        let bytes_out = session.as_downstream().body_bytes_sent() as u64;
        // Charged before it is counted (a scrape showing the usage shows it charged too); a
        // request whose `request_filter` did not run to its end is charged here.
        limited::charge(&self.state, ctx).await;
        self.count(ctx, bytes_out);
        // Dropped here, not when Pingora drops the context: the gauge counts requests being served.
        ctx._gauge = None;
        if !log::log_enabled!(target: "access", log::Level::Info) {
            return;
        }
        let h = session.req_header();
        let target = ctx.trace.target(ctx.model.as_deref());
        let record = access_log::Record {
            time: SystemTime::now(),
            entry_point: &self.listener,
            method: h.method.as_str(),
            path: &access_log::logged_path_under(h.uri.path(), ctx.prefix()),
            principal: ctx.principal.as_ref().map(|p| p.id.as_str()),
            operation: ctx.operation.map(Operation::as_str),
            model: ctx.model.as_ref().map(|m| m.name.as_str()),
            provider: target.map(|t| t.provider.name.as_str()),
            native_model: target.map(|t| t.native_model.as_str()),
            status: ctx.status,
            code: ctx.code,
            attempts: ctx.trace.attempts,
            duration_ms: access_log::ms(ctx.start.elapsed()),
            ttfb_ms: ctx.ttfb.map(access_log::ms),
            bytes_in: session.as_downstream().body_bytes_read() as u64,
            bytes_out,
            usage: ctx.usage,
            aborted: ctx.aborted.as_deref(),
        };
        access_log::write(ctx.settings.access_log, &record);
    }
}
