//! Hosting Switchyard in your own Pingora server: [`Embedded`], the one entry point.
//!
//! The gateway is a Pingora application that answers its requests itself, in `request_filter`,
//! with its own exchange with the providers (docs/architecture.md). Embedded, it answers the
//! requests under its mount prefix (say `/ai`) from *your* `ProxyHttp`'s `request_filter` and
//! says "not mine" (`Ok(false)`, Pingora's "continue") for the rest, which your proxy then sends
//! through Pingora's ordinary path:
//!
//! ```text
//! your ProxyHttp::request_filter ─► Embedded::request_filter ─► Ok(true): Switchyard answered
//!                                                            └► Ok(false): yours — upstream_peer, ...
//! ```
//!
//! Its per-request state is a [`RequestCtx`] kept in an `Option` field of your `CTX`; its
//! `logging` (metrics, access line) records only the requests it answered. Your server owns the
//! sockets: the configuration needs no `listeners:` ([`crate::config::load_hosted_file`]). It
//! hands you its background services ([`Embedded::background_services`]) and can put its client
//! deadlines and connection cap around your service ([`Embedded::edge`]).
//!
//! Under a prefix every route is the prefix plus the standalone path (`/ai/api/v1/rerank`), and
//! what it links to carries it: hosted-image URLs (`/ai/api/v1/files/{id}`), lifecycle `Link`
//! headers, and the OpenAPI document (served at `/ai/api/v1/openapi.json`, its `servers` naming
//! `/ai`). Without a prefix, Switchyard takes the paths it routes and leaves the rest to you. The
//! root-level routes (`/healthz`, LiteLLM's `/v1/rerank`) are served only under the prefix
//! unless [`Builder::root_routes`] asks for them at the root too.
//!
//! Reusable on your own routes: authentication with per-caller limits as a Pingora `HttpModule`
//! ([`AuthModule`]), and request validation against a catalog built from a `providers:` and
//! `models:` document alone ([`Validator`]).
//!
//! `examples/host_delegation.rs` is the whole set-up on one listener; `examples/auth_module.rs`
//! guards a route of the host with the module.

mod auth;
mod validate;

use std::sync::Arc;

use pingora::apps::ServerApp;
use pingora::proxy::{FailToProxy, HttpProxy, ProxyHttp, Session};
use pingora::server::configuration::ServerConf;
use pingora::services::background::background_service;
use pingora::services::ServiceWithDependents;
use pingora::Error as PError;

use crate::config::GatewaySettings;
use crate::gateway::admission::Admission;
use crate::gateway::client_conn::Clocked;
use crate::gateway::mount::{Claim, Mount};
use crate::gateway::{Ctx, Gateway, GatewayState};
use crate::server::reload::{ConfigSource, Reloader, SighupService};

pub use auth::{AuthModule, Authenticated};
pub use validate::Validator;

/// Switchyard's state for one request it answers, nested in the host's `CTX` as
/// `Option<RequestCtx>` (`None` for the host's own requests).
pub struct RequestCtx(Ctx);

/// Switchyard embedded in a host's Pingora server: call its hooks from your `ProxyHttp`.
///
/// Built with [`Embedded::builder`]; a clone is another handle on the same gateway (`Arc`
/// inside), so one can live in your `ProxyHttp` and another build the services around it.
#[derive(Clone)]
pub struct Embedded(Arc<Inner>);

/// Where a [`Builder`]'s gateway state comes from: made at `build` from settings (so that a
/// host's registry can switch its metrics on), or one that exists already.
enum State {
    Settings(Box<GatewaySettings>),
    Shared(Arc<GatewayState>),
}

struct Inner {
    gateway: Gateway,
    admission: Arc<Admission>,
    reload: Option<ConfigSource>,
}

/// How an [`Embedded`] gateway is mounted: prefix, root-level routes, the name its metrics and
/// access lines give the host's entry point, caps, reloading.
pub struct Builder {
    state: State,
    /// The host's registry that is to gather Switchyard's metric families too.
    #[cfg(feature = "metrics")]
    registry: Option<prometheus::Registry>,
    prefix: String,
    root_routes: bool,
    name: String,
    region: String,
    max_connections: usize,
    max_in_flight: usize,
    reload: Option<ConfigSource>,
}

impl Embedded {
    /// Start building from loaded settings (`config::load_hosted_file(..)?.gateway`).
    pub fn builder(settings: GatewaySettings) -> Builder {
        Embedded::start(State::Settings(Box::new(settings)))
    }

    /// Start building on an existing state (shared with other entry points of the same
    /// gateway, e.g. ones [`crate::server::add_services`] added).
    pub fn builder_with_state(state: Arc<GatewayState>) -> Builder {
        Embedded::start(State::Shared(state))
    }

    fn start(state: State) -> Builder {
        Builder {
            state,
            #[cfg(feature = "metrics")]
            registry: None,
            prefix: String::new(),
            root_routes: false,
            name: "embedded".into(),
            region: "default".into(),
            max_connections: usize::MAX,
            max_in_flight: usize::MAX,
            reload: None,
        }
    }

    /// The gateway's state: settings in force, [`GatewayState::reload`], stores, metrics.
    pub fn state(&self) -> &Arc<GatewayState> {
        self.0.gateway.state()
    }

    /// The mount prefix (`""`: at the root).
    pub fn prefix(&self) -> &str {
        self.0.gateway.mount().prefix()
    }

    /// Call first thing in your `ProxyHttp::request_filter`, for every request, and return its
    /// `Ok(true)` or error as yours: `Ok(true)` means Switchyard answered; `Ok(false)` means the
    /// request is not Switchyard's (outside its mount) and `ctx` stays `None`: go on with yours.
    /// An `Err` is an answer that had to be abandoned; Pingora then calls your `fail_to_proxy`,
    /// which hands it to [`Embedded::fail_to_proxy`].
    pub async fn request_filter(
        &self,
        session: &mut Session,
        ctx: &mut Option<RequestCtx>,
    ) -> pingora::Result<bool> {
        let claim = {
            let h = session.req_header();
            self.0.gateway.mount().claim(&h.method, h.uri.path())
        };
        let Claim::Own { prefix } = claim else {
            // The host's request, served under the edge's deadlines as the gateway's are.
            if let Some(clock) = session.stream().and_then(Clocked::clock_of) {
                clock.serving();
            }
            return Ok(false);
        };
        let ctx = ctx.insert(RequestCtx(self.0.gateway.ctx_under(prefix)));
        ProxyHttp::request_filter(&self.0.gateway, session, &mut ctx.0).await
    }

    /// Call from your `ProxyHttp::fail_to_proxy`: `Some` for Switchyard's requests (it has
    /// answered, or abandoned the connection, already), `None` for yours.
    pub async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &PError,
        ctx: &mut Option<RequestCtx>,
    ) -> Option<FailToProxy> {
        match ctx {
            Some(ctx) => Some(self.0.gateway.fail_to_proxy(session, e, &mut ctx.0).await),
            None => None,
        }
    }

    /// Call from your `ProxyHttp::suppress_error_log`: whether Pingora's error line is noise
    /// for one of Switchyard's requests (a client gone mid-answer, which its access line says);
    /// `false` for yours.
    pub fn suppress_error_log(
        &self,
        session: &Session,
        ctx: &Option<RequestCtx>,
        e: &PError,
    ) -> bool {
        ctx.as_ref()
            .is_some_and(|c| self.0.gateway.suppress_error_log(session, &c.0, e))
    }

    /// Call from your `ProxyHttp::logging`, for every request: Switchyard's requests are
    /// counted (metrics) and get their access line; yours are left to you.
    pub async fn logging(
        &self,
        session: &mut Session,
        e: Option<&PError>,
        ctx: &mut Option<RequestCtx>,
    ) {
        match ctx {
            Some(ctx) => self.0.gateway.logging(session, e, &mut ctx.0).await,
            None => {
                if let Some(clock) = session.stream().and_then(Clocked::clock_of) {
                    clock.served();
                }
            }
        }
    }

    /// The background services to add to your server (`server.add_services(..)`): asynchronous
    /// image tasks (takeover, hand-over on shutdown within `conf.grace_period_seconds`), with
    /// Redis the sharing of targets' health, with `metrics:` the metrics listener, and with
    /// [`Builder::reload_from`] the `SIGHUP` reloader.
    pub fn background_services(&self, conf: &ServerConf) -> Vec<Box<dyn ServiceWithDependents>> {
        let state = self.state();
        let mut services = crate::server::background_services(conf, state);
        if let Some(source) = &self.0.reload {
            let reloader = Reloader {
                state: state.clone(),
                source: source.clone(),
                server: crate::server::clone_conf(conf),
            };
            services.push(Box::new(background_service(
                "switchyard reload",
                SighupService(reloader),
            )));
        }
        services
    }

    /// Your proxy inside Switchyard's edge: each connection counted against the connection cap
    /// ([`Builder::caps`]; over it, Switchyard's requests are shed with `503 overloaded`), and
    /// HTTP/1.x clients held to the head and idle deadlines of the configuration's `clients:`
    /// (a client that never finishes a request head, or idles too long between requests, is
    /// dropped). Give the result to `Service::new(name, app)` and add your listeners
    /// ([`crate::server::listener_config`] sizes the buffers as the binary does).
    ///
    /// The deadlines need every request marked from `request_filter` to `logging`: call
    /// [`Embedded::request_filter`] and [`Embedded::logging`] for every request, yours included.
    pub fn edge<SV>(&self, http: HttpProxy<SV>) -> impl ServerApp + Send + Sync + 'static
    where
        SV: ProxyHttp + Send + Sync + 'static,
        SV::CTX: Send + Sync,
    {
        crate::server::edge_app(
            self.state(),
            self.0.gateway.entry_point(),
            self.0.admission.clone(),
            http,
        )
    }
}

impl Builder {
    /// Mount under `prefix` (`/ai`: a leading `/`, no trailing one). Default: the root, where
    /// Switchyard takes the paths it routes and leaves every other path to the host.
    pub fn prefix(mut self, prefix: &str) -> Builder {
        self.prefix = prefix.to_string();
        self
    }

    /// Also serve `/healthz` and `/v1/rerank` (LiteLLM's Jina path) at the server's root when a
    /// prefix is set. Default: off (they are `{prefix}/healthz` and `{prefix}/v1/rerank`).
    pub fn root_routes(mut self, on: bool) -> Builder {
        self.root_routes = on;
        self
    }

    /// The entry point's name in metrics (`entry_point` label) and access lines, and its region
    /// (which picks providers' `region_base_urls`). Default: `embedded`, `default`.
    pub fn entry_point(mut self, name: &str, region: &str) -> Builder {
        self.name = name.to_string();
        self.region = region.to_string();
        self
    }

    /// Load shedding, as a listener's `max_connections` and `max_in_flight`: connections (counted
    /// by [`Embedded::edge`]) and Switchyard's requests in flight past which its requests are
    /// answered `503 overloaded`. Default: no caps.
    pub fn caps(mut self, max_connections: usize, max_in_flight: usize) -> Builder {
        self.max_connections = max_connections;
        self.max_in_flight = max_in_flight;
        self
    }

    /// Reload the configuration from `path` on `SIGHUP` (a service in
    /// [`Embedded::background_services`]; `listeners:` may be absent there too).
    pub fn reload_from(mut self, path: &str) -> Builder {
        self.reload = Some(ConfigSource::HostedFile(path.to_string()));
        self
    }

    /// Record Switchyard's metrics and register their families in the host's own `registry`
    /// too, so that the host's `/metrics` (whatever gathers `registry`) serves them beside its
    /// own; with or without a `metrics:` listener in the configuration (which, when present,
    /// serves Switchyard's families alone, as before). Families and series are the ones
    /// `docs/` lists for the gateway (`switchyard_requests_total`, ...), labelled with this
    /// entry point's name. [`Builder::build`] fails when a family's name is taken in `registry`,
    /// or on a state given to [`Embedded::builder_with_state`] that records no metrics.
    /// `examples/host_metrics.rs` serves both from one route.
    #[cfg(feature = "metrics")]
    pub fn metrics_registry(mut self, registry: &prometheus::Registry) -> Builder {
        self.registry = Some(registry.clone());
        self
    }

    /// The embedded gateway; an error for a prefix that is not like `/ai`, a cap of 0, or a
    /// registry that cannot take the metric families (`Builder::metrics_registry`, feature
    /// `metrics`).
    pub fn build(self) -> Result<Embedded, String> {
        if self.max_connections == 0 || self.max_in_flight == 0 {
            return Err("caps: max_connections and max_in_flight must be greater than 0".into());
        }
        let mount = Mount::shared(&self.prefix, self.root_routes)?;
        #[cfg(feature = "metrics")]
        let recorded = self.registry.is_some();
        #[cfg(not(feature = "metrics"))]
        let recorded = false;
        let state = match self.state {
            State::Settings(settings) => {
                let listener = settings.metrics.is_some();
                GatewayState::recording(*settings, listener || recorded)
            }
            State::Shared(state) => state,
        };
        #[cfg(feature = "metrics")]
        if let Some(registry) = &self.registry {
            state.metrics.share_with(registry)?;
        }
        let admission = Admission::new(self.max_connections, self.max_in_flight);
        let gateway = Gateway::mounted(state, &self.name, &self.region, admission.clone(), mount);
        Ok(Embedded(Arc::new(Inner {
            gateway,
            admission,
            reload: self.reload,
        })))
    }
}
