//! Building the Pingora server: one HTTP service per entry point, all sharing one gateway state.

#[cfg(feature = "ledger")]
pub(crate) mod admin;
#[cfg(feature = "ledger")]
mod admin_auth;
#[cfg(feature = "ledger")]
mod admin_error;
#[cfg(feature = "ledger")]
mod admin_handlers;
#[cfg(feature = "ledger")]
pub(crate) mod admin_routes;
#[cfg(feature = "ledger")]
mod admin_spend;
#[cfg(feature = "ledger")]
mod console;
pub(crate) mod edge;
pub(crate) mod metrics;
pub(crate) mod reload;
pub(crate) mod tls;

use std::sync::Arc;

use pingora::listeners::{L4BufferSettings, ListenerConfig};
use pingora::proxy::{http_proxy, HttpProxy, ProxyHttp};
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::Server;
use pingora::services::background::background_service;
use pingora::services::listening::Service;
use pingora::services::ServiceWithDependents;
use std::time::Duration;

use crate::config::{Listener, Settings};
use crate::gateway::admission::Admission;
#[cfg(feature = "redis")]
use crate::gateway::health_sync::HealthSync;
use crate::gateway::task_supervisor::{TaskSupervisor, PINGORA_DEFAULT_GRACE};
use crate::gateway::{Gateway, GatewayState};
use edge::EdgeApp;

/// Write buffer of each client connection. Pingora's default (1,460 bytes, one segment) sends an
/// answer's head and a body longer than that in two writes, hence two segments and two wake-ups
/// of the client; 16 KiB takes a rerank or image answer out in one. Streamed answers (chunked) are
/// flushed chunk by chunk whatever the size, so audio and SSE are not held back by it.
const ANSWER_WRITE_BUFFER: usize = 16 * 1024;

/// Read buffer of each client connection. Pingora's default is 64 KiB, allocated for every
/// connection, idle or not: most of the memory an idle or slow client costs. Request heads and
/// bodies are read through it in pieces of this size, which a 16 KiB buffer serves as well.
const REQUEST_READ_BUFFER: usize = 16 * 1024;

/// A server ready to `run`, with one listening service per configured entry point.
pub fn build(opt: Option<Opt>, settings: Settings) -> Server {
    build_with_reload(opt, settings, None)
}

/// [`build`], and when `source` is given, a service that reloads the gateway's configuration
/// from it on `SIGHUP` (`reload::SighupService`). The binary's, reached through `internals`
/// (not public API); a host reloads with `GatewayState::reload` or `embed::Builder::reload_from`.
#[doc(hidden)]
pub fn build_with_reload(
    opt: Option<Opt>,
    settings: Settings,
    source: Option<reload::ConfigSource>,
) -> Server {
    let server_conf = source.as_ref().map(|_| clone_conf(&settings.server));
    let mut server = Server::new_with_opt_and_conf(opt, settings.server);
    server.bootstrap();
    let state = GatewayState::new(settings.gateway);
    add_services(&mut server, &state);
    if let (Some(source), Some(server_conf)) = (source, server_conf) {
        let reloader = reload::Reloader {
            state: state.clone(),
            source,
            server: server_conf,
        };
        server.add_service(background_service(
            "switchyard reload",
            reload::SighupService(reloader),
        ));
    }
    server
}

/// A copy of Pingora's settings (`ServerConf` is not `Clone`), to compare a reloaded file's with.
pub(crate) fn clone_conf(conf: &ServerConf) -> ServerConf {
    serde_yaml::to_string(conf)
        .ok()
        .and_then(|s| serde_yaml::from_str(&s).ok())
        .unwrap_or_default()
}

/// Add the gateway's entry points to an existing Pingora server, and its background services
/// (asynchronous image tasks, shared target health with Redis, the `metrics:` listener, the
/// ledger's writer, the trace exporter). To share a listener with routes of your own instead, see the
/// crate's `embed` module.
pub fn add_services(server: &mut Server, state: &Arc<GatewayState>) {
    server.add_services(background_services(&server.configuration, state));
    // Listeners are read once here: a reload does not move them.
    let settings = state.settings();
    let edge_tls = tls::EdgeTls::new(&settings.listeners);
    if let Some(reloader) = edge_tls.reload_service() {
        server.add_service(reloader);
    }
    for listener in &settings.listeners {
        let mut service = entry_point(server, state, listener);
        let endpoint = listener_config(&listener.address.to_string());
        if let Some(endpoint) = edge_tls.endpoint(listener, endpoint) {
            service.add_listener(endpoint);
        }
        server.add_service(service);
    }
}

/// The gateway's background services, for the server that hosts it: the one that looks after
/// asynchronous tasks (takeover of tasks whose instance died, hand-over of unfinished ones within
/// the server's `grace_period_seconds` on graceful shutdown); with Redis, the one that shares
/// targets' ejections between instances; with `metrics:`, the metrics listener (its address is
/// read once here: a reload does not move it).
pub(crate) fn background_services(
    conf: &ServerConf,
    state: &Arc<GatewayState>,
) -> Vec<Box<dyn ServiceWithDependents>> {
    let grace = conf
        .grace_period_seconds
        .map(Duration::from_secs)
        .unwrap_or(PINGORA_DEFAULT_GRACE);
    let mut services: Vec<Box<dyn ServiceWithDependents>> = vec![Box::new(background_service(
        "switchyard tasks",
        TaskSupervisor {
            state: state.clone(),
            grace,
        },
    ))];
    let settings = state.settings();
    #[cfg(feature = "redis")]
    if settings.redis.is_some() {
        services.push(Box::new(background_service(
            "switchyard target health",
            HealthSync {
                state: state.clone(),
            },
        )));
    }
    if let (Some(address), Some(registry)) = (settings.metrics, state.metrics.registry()) {
        services.push(Box::new(metrics::service(
            address,
            registry.clone(),
            state.clone(),
        )));
    }
    #[cfg(feature = "ledger")]
    if let Some(ledger) = &state.ledger {
        services.push(Box::new(ledger.writer().service()));
    }
    #[cfg(feature = "ledger")]
    services.extend(tenants_services(state));
    #[cfg(feature = "otel")]
    if let Some(exporter) = state.tracer.exporter(&state.instance) {
        services.push(Box::new(background_service("switchyard traces", exporter)));
    }
    services
}

/// With `tenants:`, the service keeping the database keys' snapshot; with `admin:`, the
/// management listener (its address read once here).
#[cfg(feature = "ledger")]
fn tenants_services(state: &Arc<GatewayState>) -> Vec<Box<dyn ServiceWithDependents>> {
    let settings = state.settings();
    let (Some(tenants), Some(handle)) = (&settings.tenants, &state.db_keys) else {
        return Vec::new();
    };
    let live = state.clone();
    let sync = crate::tenants::sync::TenantsSync {
        settings: tenants.clone(),
        handle: handle.clone(),
        metrics: state.metrics.clone(),
        yaml: Arc::new(move || live.settings().auth.key_principals()),
    };
    let mut services: Vec<Box<dyn ServiceWithDependents>> =
        vec![Box::new(background_service("switchyard tenants", sync))];
    if let Some(admin) = &settings.admin {
        services.push(Box::new(admin::service(
            admin.address,
            state.clone(),
            tenants.clone(),
        )));
    }
    services
}

/// One entry point's service: the gateway as Pingora's HTTP app, inside the connection handling of
/// [`EdgeApp`] (connection cap, client deadlines).
fn entry_point(
    server: &Server,
    state: &Arc<GatewayState>,
    listener: &Listener,
) -> Service<EdgeApp<Gateway>> {
    let admission = Admission::new(listener.max_connections, listener.max_in_flight);
    let gateway = Gateway::new(state.clone(), listener, admission.clone());
    let http = http_proxy(&server.configuration, gateway);
    let app = edge_app(state, &listener.name, admission, http);
    Service::new(format!("switchyard {}", listener.name), app)
}

/// `http` inside the edge ([`EdgeApp`]): connections counted against `admission`'s connection
/// cap, HTTP/1.x clients held to the head and idle deadlines of the gateway's `clients:`
/// settings, HTTP/2 connections closed after the idle timeout; expiries counted for the entry
/// point `name`. `http` is the gateway's own proxy or a host's that delegates to it.
pub(crate) fn edge_app<SV>(
    state: &Arc<GatewayState>,
    name: &str,
    admission: Arc<Admission>,
    mut http: HttpProxy<SV>,
) -> EdgeApp<SV>
where
    SV: ProxyHttp,
{
    let clients = state.settings().clients;
    let mut options = http.server_options.take().unwrap_or_default();
    options.h2_idle_timeout = Some(clients.idle_timeout);
    http.server_options = Some(options);
    let expired = ["head", "idle"].map(|phase| {
        let mut counter = None;
        state.metrics.with(|f| {
            counter = f
                .client_timeouts
                .get_metric_with_label_values(&[name, phase])
                .ok();
        });
        counter
    });
    EdgeApp {
        http: Arc::new(http),
        admission,
        clients,
        listener: name.to_string(),
        state: state.clone(),
        expired,
    }
}

/// A listening address with the buffer sizes the gateway's entry points use, for a host that
/// adds its own listener to the service of its proxy inside `Embedded::edge`
/// (`service.add_listener(...)`).
pub fn listener_config(address: &str) -> ListenerConfig {
    ListenerConfig::tcp(address.to_string()).l4_buffer(L4BufferSettings {
        read: Some(REQUEST_READ_BUFFER),
        write: Some(ANSWER_WRITE_BUFFER),
    })
}
