//! Configuration: one YAML file holding Pingora's server settings (top-level keys, as Pingora reads
//! them) and the gateway's (under `switchyard:`), turned once at start into a validated runtime
//! [`Settings`].
//!
//! Loading reports every problem it can find, each with its key path: unknown keys anywhere,
//! unset `${ENV}` variables, bad URLs, models pointing at unknown providers or families, model
//! capability overrides the family cannot take, unreadable key and CA files, targets past their
//! provider's shutdown (`config/lifecycle.rs`, which also collects the warnings of targets near
//! it). `switchyard -t -c FILE` prints them and exits non-zero.

mod budgets;
pub mod cache;
pub mod env;
pub mod file;
pub mod ledger;
mod lifecycle;
mod prices;
pub mod tls;
mod tracing;
pub mod voice_map;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use pingora::server::configuration::ServerConf;
use serde_yaml::Value;

use crate::api::adapter::Registry;
use crate::api::models::Listing;
use crate::auth::Authenticator;
use crate::caps::lifecycle::Clock;
use crate::caps::{self, Caps};
use crate::catalog::{Catalog, Model, Target, MAX_WEIGHT};
use crate::common::Operation;
use crate::providers::external::{builtin_kinds, ProviderKinds};
use crate::providers::registry;
use crate::store::redis_conn::RedisConn;
#[cfg(feature = "redis")]
use crate::store::redis_conn::RedisSettings;
#[cfg(feature = "redis")]
use crate::store::redis_conn::Topology;
use crate::upstream::endpoint::{Endpoint, Timeouts};
use crate::upstream::guard::DownloadPolicy;
use crate::upstream::health::EjectionPolicy;
use crate::upstream::provider::Account;
use crate::upstream::provider::Provider;
use crate::upstream::retry::RetryPolicy;
use crate::upstream::trust::CaFile;
use file::GatewayFile;

/// The configuration compiled into the binary (`conf/switchyard.yaml`), used when no `-c` is given.
pub const DEFAULT_CONFIG: &str = include_str!("../../conf/switchyard.yaml");

/// One entry point.
#[derive(Debug, Clone)]
pub struct Listener {
    /// The entry point's name, unique among the listeners.
    pub name: String,
    /// Which of the providers' `region_base_urls` this entry point's requests use.
    pub region: String,
    /// The socket address it listens on.
    pub address: SocketAddr,
    /// Open client connections it serves; past it, `503 overloaded`.
    pub max_connections: usize,
    /// Requests it handles at once; past it, `503 overloaded`.
    pub max_in_flight: usize,
    /// TLS on this entry point (`None`: plain TCP).
    pub tls: Option<ListenerTls>,
}

/// Deadlines on what clients send (`clients:` in the file; see `file::ClientsFile`).
#[derive(Debug, Clone, Copy)]
pub struct ClientLimits {
    /// Time a request head has to arrive whole (HTTP/1.x).
    pub head_timeout: Duration,
    /// Time a request body gets, plus one second for each `body_min_rate` bytes received.
    pub body_timeout: Duration,
    /// Bytes per second; never 0.
    pub body_min_rate: u64,
    /// An idle client connection is closed after this long.
    pub idle_timeout: Duration,
    /// A client that takes no answer bytes for this long is cut off.
    pub write_timeout: Duration,
}

/// A listener's certificate files and the certificate read from them at load.
#[derive(Clone)]
pub struct ListenerTls {
    /// Path of the PEM certificate chain.
    pub cert_file: String,
    /// Path of the PEM private key.
    pub key_file: String,
    /// How often the files are checked for a replacement (`None`: never).
    pub reload_interval: Option<Duration>,
    /// The chain and key the files held when the configuration was loaded, checked.
    pub certified: Arc<rustls::sign::CertifiedKey>,
}

impl std::fmt::Debug for ListenerTls {
    // The paths only: never anything of the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerTls")
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .field("reload_interval", &self.reload_interval)
            .finish_non_exhaustive()
    }
}

/// Request body limits per operation.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest speech request body, in bytes.
    pub speech: usize,
    /// Largest image request body, in bytes.
    pub images: usize,
    /// Largest rerank request body, in bytes.
    pub rerank: usize,
}

impl Limits {
    /// The largest request body `op` takes, in bytes (413 past it).
    pub fn body_limit(&self, op: Operation) -> usize {
        match op {
            Operation::Speech => self.speech,
            Operation::Images => self.images,
            Operation::Rerank => self.rerank,
        }
    }
}

/// Image inputs the gateway downloads and images it hosts (see `config::file::ImagesFile`).
#[derive(Debug, Clone)]
pub struct ImageSettings {
    /// What may be downloaded on a caller's behalf (reference images given as URLs).
    pub download: DownloadPolicy,
    /// How long a hosted image stays available.
    pub file_ttl: Duration,
    /// Most bytes of hosted images kept in memory without Redis (the oldest go first).
    pub file_store_bytes: usize,
    /// Most bytes of tasks (and synchronous answers) kept in memory without Redis.
    pub task_store_bytes: usize,
    /// How long a finished asynchronous task can be read.
    pub task_ttl: Duration,
    /// Without a trailing `/`.
    pub public_base_url: Option<String>,
    /// Natively asynchronous providers: time between polls of one task.
    pub poll_interval: Duration,
    /// Natively asynchronous providers: longest a synchronous request waits.
    pub sync_wait: Duration,
    /// Longest an asynchronous task runs, from its creation.
    pub task_wait: Duration,
    /// Time between a running task's heartbeats.
    pub task_heartbeat: Duration,
    /// Heartbeat silence after which another instance takes a task over.
    pub task_lost_after: Duration,
}

/// The gateway's validated runtime settings.
pub struct GatewaySettings {
    pub(crate) listeners: Vec<Listener>,
    pub(crate) limits: Limits,
    pub(crate) retry: RetryPolicy,
    pub(crate) auth: Authenticator,
    pub(crate) catalog: Catalog,
    /// The catalog as `GET /api/v1/models` answers it, rendered with it (so the two always agree).
    pub(crate) models: Listing,
    /// Every provider account's adapters, indexed by the account's id.
    pub(crate) adapters: Registry,
    pub(crate) dns_ttl: Duration,
    pub(crate) images: ImageSettings,
    /// Shared state in Redis (`None`: in memory, one instance). One connection, shared by the
    /// hosted-file and task stores.
    pub(crate) redis: Option<RedisConn>,
    pub(crate) clients: ClientLimits,
    /// Where Prometheus metrics are served (`None`: no metrics listener, nothing recorded).
    pub(crate) metrics: Option<SocketAddr>,
    /// The usage ledger's database and bounds (`None`: no ledger). Read once at start, like the
    /// metrics listener: a reload does not move it.
    pub(crate) ledger: Option<ledger::LedgerSettings>,
    /// The response cache's store (`cache`): read once at start, like the ledger.
    pub(crate) cache: crate::cache::CacheSettings,
    /// Where spans are exported (`None`: nowhere). Read once at start, like the ledger.
    pub(crate) tracing: Option<crate::telemetry::TracingSettings>,
    pub(crate) access_log: AccessLogFormat,
    /// When failing targets are ejected (`routing.ejection`).
    pub(crate) ejection: EjectionPolicy,
    /// What the operator should act on soon, found at load (models near or past their shutdown):
    /// printed by `switchyard -t`, logged at start and on reload.
    pub(crate) warnings: Vec<String>,
    /// The configured models with a target that has no price (none built in, none configured,
    /// or declared `unpriced`), one line each: printed by `switchyard -t`. Their cost is unknown,
    /// never 0.
    pub(crate) unpriced: Vec<String>,
    /// The provider kinds registered from outside the crate that this was loaded with
    /// ([`load_str_with`]); a reload reads the configuration with the same ones.
    pub(crate) kinds: ProviderKinds,
    /// `currency_rates`: how costs in one currency are counted against a budget in another.
    pub(crate) rates: crate::money::Rates,
    /// What time it is for the per-caller limits' windows (the system's; a test may set one:
    /// [`Loader::limits_clock`]). Read once, when the gateway's state is made.
    pub(crate) limits_clock: Clock,
}

impl GatewaySettings {
    /// What the operator should act on soon, found at load (models near or past their
    /// shutdown): the binary prints them for `-t` and logs them at start and on reload.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The configured models with a target that has no price, one line each (their cost is
    /// unknown, never 0): the binary prints them for `-t`.
    pub fn unpriced(&self) -> &[String] {
        &self.unpriced
    }

    // For the crate's own tests and benchmarks (not part of the API).
    #[doc(hidden)]
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    #[doc(hidden)]
    pub fn adapters(&self) -> &Registry {
        &self.adapters
    }

    #[doc(hidden)]
    pub fn auth(&self) -> &Authenticator {
        &self.auth
    }
}

/// The shape of access lines (`access_log.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessLogFormat {
    /// One `key=value` line.
    Text,
    /// One JSON object per line.
    Json,
}

/// Everything the file configures.
pub struct Settings {
    /// Pingora's server settings (the file's top-level keys).
    pub server: ServerConf,
    /// The gateway's settings (the `switchyard:` section), validated.
    pub gateway: GatewaySettings,
}

/// Who owns the sockets the gateway is reached on, which decides whether `switchyard.listeners`
/// may be empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sockets {
    /// The gateway's own listeners (the binary, `server::build`): at least one entry point is
    /// required.
    Own,
    /// A Pingora server the gateway is embedded in owns them (the `embed` module): `listeners`
    /// may be absent or empty.
    Host,
}

/// How a configuration is loaded: the clock that judges models' lifecycles, the provider kinds a
/// host registered besides the built-in ones, and who owns the sockets. `Loader::new()` is what
/// [`load_file`] and [`load_str`] use: the system clock, the built-in kinds, the gateway's own
/// listeners.
#[derive(Clone, Copy)]
pub struct Loader<'a> {
    clock: &'a Clock,
    limits_clock: Option<&'a Clock>,
    kinds: Option<&'a ProviderKinds>,
    sockets: Sockets,
}

impl Default for Loader<'_> {
    fn default() -> Self {
        Loader {
            clock: &Clock::System,
            limits_clock: None,
            kinds: None,
            sockets: Sockets::Own,
        }
    }
}

impl<'a> Loader<'a> {
    /// The system clock, the built-in provider kinds, the gateway's own listeners.
    pub fn new() -> Self {
        Self::default()
    }

    /// Judge models' lifecycles by `clock` now (a model past its shutdown is refused, one near it
    /// warned of) and, in the catalog, on every request.
    pub fn clock(mut self, clock: &'a Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Count the per-caller limits' windows (minutes, days, months) by `clock` rather than the
    /// system's, so that a test can move a day's budget past midnight.
    #[doc(hidden)]
    pub fn limits_clock(mut self, clock: &'a Clock) -> Self {
        self.limits_clock = Some(clock);
        self
    }

    /// Know the provider kinds a host registered: `providers:` accounts may name them as their
    /// `kind:` (see `provider_api`).
    pub fn kinds(mut self, kinds: &'a ProviderKinds) -> Self {
        self.kinds = Some(kinds);
        self
    }

    /// For a gateway embedded in another Pingora server, which owns the sockets:
    /// `switchyard.listeners` may be absent.
    pub fn hosted(mut self) -> Self {
        self.sockets = Sockets::Host;
        self
    }

    /// Who owns the sockets (the default: the gateway's own listeners).
    pub fn sockets(mut self, sockets: Sockets) -> Self {
        self.sockets = sockets;
        self
    }

    /// Load and validate a configuration file, reading `${VAR}` from the process environment.
    pub fn file(self, path: &str) -> Result<Settings, Vec<String>> {
        let text = std::fs::read_to_string(path).map_err(|e| vec![format!("{path}: {e}")])?;
        self.text(&text, &|name| std::env::var(name).ok())
    }

    /// Load and validate configuration text; `lookup` reads variables.
    pub fn text(
        self,
        text: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Settings, Vec<String>> {
        let none = ProviderKinds::new();
        let mut settings = load(
            text,
            lookup,
            self.clock,
            self.kinds.unwrap_or(&none),
            self.sockets,
        )?;
        if let Some(clock) = self.limits_clock {
            settings.gateway.limits_clock = clock.clone();
        }
        Ok(settings)
    }
}

/// Load and validate a configuration file, reading `${VAR}` from the process environment.
pub fn load_file(path: &str) -> Result<Settings, Vec<String>> {
    Loader::new().file(path)
}

/// [`load_file`], with models' lifecycles judged (and later served) by `clock`.
pub fn load_file_at(path: &str, clock: &Clock) -> Result<Settings, Vec<String>> {
    Loader::new().clock(clock).file(path)
}

/// [`load_file`], knowing the provider kinds a host registered besides the built-in ones.
pub fn load_file_with(path: &str, kinds: &ProviderKinds) -> Result<Settings, Vec<String>> {
    Loader::new().kinds(kinds).file(path)
}

/// [`load_file`] for a gateway embedded in another Pingora server: `switchyard.listeners` may be
/// absent (the host owns the sockets).
pub fn load_hosted_file(path: &str) -> Result<Settings, Vec<String>> {
    Loader::new().hosted().file(path)
}

/// Load and validate configuration text; `lookup` reads variables.
pub fn load_str(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, Vec<String>> {
    Loader::new().text(text, lookup)
}

/// [`load_str`], with models' lifecycles judged by `clock`.
pub fn load_str_at(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    clock: &Clock,
) -> Result<Settings, Vec<String>> {
    Loader::new().clock(clock).text(text, lookup)
}

/// [`load_str`], knowing the provider kinds a host registered besides the built-in ones.
pub fn load_str_with(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    kinds: &ProviderKinds,
) -> Result<Settings, Vec<String>> {
    Loader::new().kinds(kinds).text(text, lookup)
}

/// [`load_str`] for a gateway embedded in another Pingora server: `switchyard.listeners` may be
/// absent (the host owns the sockets).
pub fn load_hosted_str(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, Vec<String>> {
    Loader::new().hosted().text(text, lookup)
}

/// The one loader behind every entry point above.
fn load(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    clock: &Clock,
    kinds: &ProviderKinds,
    sockets: Sockets,
) -> Result<Settings, Vec<String>> {
    let mut doc: Value =
        serde_yaml::from_str(text).map_err(|e| vec![format!("not valid YAML: {e}")])?;
    let mut errors = Vec::new();
    env::interpolate(&mut doc, "", lookup, &mut errors);
    let Value::Mapping(mut top) = doc else {
        return Err(vec!["the file must be a YAML mapping".into()]);
    };
    let gateway_value = top.remove("switchyard");

    let server = server_conf(top, &mut errors).unwrap_or_default();
    let Some(gateway_value) = gateway_value else {
        errors.push("switchyard: missing (the gateway's settings)".into());
        return Err(errors);
    };
    let mut unknown = Vec::new();
    let parsed: Result<GatewayFile, _> = serde_path_to_error::deserialize(
        serde_ignored::Deserializer::new(gateway_value, &mut |path| {
            unknown.push(format!("switchyard{}: unknown key", key_path(&path)))
        }),
    );
    errors.extend(unknown);
    let file = match parsed {
        Ok(f) => f,
        Err(e) => {
            errors.push(format!("switchyard.{}: {}", e.path(), e.inner()));
            return Err(errors);
        }
    };
    let gateway = build(file, clock, kinds, sockets, &mut errors);
    match gateway {
        Some(g) if errors.is_empty() => Ok(Settings { server, gateway: g }),
        _ => Err(errors),
    }
}

/// A key's path as the other errors write it (`.listeners[1].tls.reload`): serde_ignored's own
/// display writes a sequence index as `.1` and an optional section as `.?`.
fn key_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", key_path(parent)),
        Path::Map { parent, key } => format!("{}.{key}", key_path(parent)),
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => key_path(parent),
    }
}

/// Pingora's own settings: every top-level key other than `switchyard`. Pingora ignores keys it
/// does not know, so they are checked here against the keys `ServerConf` itself serializes.
fn server_conf(top: serde_yaml::Mapping, errors: &mut Vec<String>) -> Option<ServerConf> {
    let known: Vec<String> = match serde_yaml::to_value(ServerConf::default()) {
        Ok(Value::Mapping(m)) => m
            .keys()
            .filter_map(|k| k.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    for key in top.keys() {
        let name = key.as_str().unwrap_or("?");
        if !known.iter().any(|k| k == name) {
            errors.push(format!(
                "{name}: unknown key (not a Pingora server setting)"
            ));
        }
    }
    match serde_path_to_error::deserialize::<_, ServerConf>(Value::Mapping(top)) {
        Ok(conf) => match conf.validate() {
            Ok(c) => Some(c),
            Err(e) => {
                errors.push(format!("server settings: {e}"));
                None
            }
        },
        Err(e) => {
            errors.push(format!("{}: {}", e.path(), e.inner()));
            None
        }
    }
}

fn build(
    file: GatewayFile,
    clock: &Clock,
    kinds: &ProviderKinds,
    sockets: Sockets,
    errors: &mut Vec<String>,
) -> Option<GatewaySettings> {
    keep_secrets_out_of_logs(&file);
    let mut listeners = Vec::new();
    if file.listeners.is_empty() && sockets == Sockets::Own {
        errors.push("switchyard.listeners: at least one entry point is required".into());
    }
    for (i, l) in file.listeners.iter().enumerate() {
        for (key, v) in [
            ("max_connections", l.max_connections),
            ("max_in_flight", l.max_in_flight),
        ] {
            if v == 0 {
                errors.push(format!(
                    "switchyard.listeners[{i}].{key}: must be greater than 0"
                ));
            }
        }
        if listeners.iter().any(|x: &Listener| x.name == l.name) {
            errors.push(format!(
                "switchyard.listeners[{i}].name: `{}` is used twice",
                l.name
            ));
        }
        let tls = l.tls.as_ref().and_then(|t| listener_tls(i, t, errors));
        match l.address.parse::<SocketAddr>() {
            Ok(address) => listeners.push(Listener {
                name: l.name.clone(),
                region: l.region.clone(),
                address,
                max_connections: l.max_connections,
                max_in_flight: l.max_in_flight,
                tls,
            }),
            Err(_) => errors.push(format!(
                "switchyard.listeners[{i}].address: `{}` is not an IP:port address",
                l.address
            )),
        }
    }

    let lim = &file.limits;
    for (key, v) in [
        ("speech_body_bytes", lim.speech_body_bytes),
        ("images_body_bytes", lim.images_body_bytes),
        ("rerank_body_bytes", lim.rerank_body_bytes),
    ] {
        if v == 0 {
            errors.push(format!("switchyard.limits.{key}: must be greater than 0"));
        }
    }
    let limits = Limits {
        speech: lim.speech_body_bytes,
        images: lim.images_body_bytes,
        rerank: lim.rerank_body_bytes,
    };
    let r = &file.retries;
    let retry = RetryPolicy {
        max_retries: r.max,
        initial_backoff: Duration::from_millis(r.initial_backoff_ms),
        max_backoff: Duration::from_millis(r.max_backoff_ms),
        max_retry_after: Duration::from_millis(r.max_retry_after_ms),
    };

    let auth = match Authenticator::from_settings(&file.auth) {
        Ok(a) => Some(a),
        Err(problems) => {
            errors.extend(problems.into_iter().map(|p| format!("switchyard.{p}")));
            None
        }
    };

    let mut providers: HashMap<String, Arc<Provider>> = HashMap::new();
    let mut adapters = Registry::default();
    for (name, p) in &file.providers {
        let at = format!("switchyard.providers.{name}");
        let key = p.api_key.trim();
        let (kind, discovery) = match provider_kind(&p.kind, name, key, kinds) {
            Ok(built) => built,
            Err(m) => {
                errors.push(format!("{at}{m}"));
                continue;
            }
        };
        let t = &p.timeouts;
        let timeouts = Timeouts {
            connect: Duration::from_millis(t.connect_ms),
            total_connect: Duration::from_millis(t.total_connect_ms),
            read: Duration::from_millis(t.read_ms),
            write: Duration::from_millis(t.write_ms),
            idle: Duration::from_millis(t.idle_ms),
        };
        let ca = match (&p.tls.ca_file, kind.remote) {
            (Some(path), true) => match CaFile::load(path) {
                Ok(ca) => Some(ca),
                Err(m) => {
                    errors.push(format!("{at}.tls.ca_file: {m}"));
                    continue;
                }
            },
            (Some(_), false) => {
                errors.push(format!(
                    "{at}.tls.ca_file: this kind runs in-process and connects to nothing"
                ));
                continue;
            }
            (None, _) => None,
        };
        let trusting = |e: Endpoint| match &ca {
            Some(ca) => e.trusting(ca),
            None => e,
        };
        let default_ep = match (&p.base_url, kind.remote) {
            (Some(url), true) => match Endpoint::parse(url, timeouts) {
                Ok(e) => Some(trusting(e)),
                Err(m) => {
                    errors.push(format!("{at}.base_url: {m}"));
                    continue;
                }
            },
            (None, true) => {
                errors.push(format!("{at}.base_url: required for this kind"));
                continue;
            }
            (Some(_), false) => {
                errors.push(format!(
                    "{at}.base_url: this kind runs in-process and takes none"
                ));
                continue;
            }
            (None, false) => None,
        };
        let mut regional = HashMap::new();
        for (region, url) in &p.region_base_urls {
            match Endpoint::parse(url, timeouts) {
                Ok(e) => {
                    regional.insert(region.clone(), trusting(e));
                }
                Err(m) => errors.push(format!("{at}.region_base_urls.{region}: {m}")),
            }
        }
        let account = Account {
            name: name.clone(),
            // `provider_config` read it, so it is there and a string.
            kind: p
                .kind
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            key: key.to_string(),
            default_endpoint: default_ep,
            region_endpoints: regional,
            max_response_bytes: p.max_response_bytes,
            result_hosts: p
                .result_hosts
                .clone()
                .unwrap_or_else(|| kind.result_hosts.iter().map(|h| h.to_string()).collect()),
        };
        let id = adapters.push(kind.adapters);
        adapters.discover(id, discovery);
        let mut provider = Provider::new(account, id, kind.auth, kind.errors);
        provider.send_trace_context = p.trace_context;
        if !provider.enabled() {
            log::warn!("provider {name} has no api_key: its models will answer 503");
        }
        providers.insert(name.clone(), Arc::new(provider));
    }

    let mut warnings = Vec::new();
    let mut unpriced = Vec::new();
    let catalog = build_catalog(
        &file.models,
        &file.providers,
        &providers,
        &adapters,
        clock,
        errors,
        (&mut warnings, &mut unpriced),
    );
    let models = Listing::build(&catalog, crate::api::images::now()).unwrap_or_else(|m| {
        errors.push(m);
        Listing::default()
    });
    let rates = crate::money::Rates::read(&file.currency_rates, errors);
    budgets::check(&file.auth, &catalog, &rates, errors, &mut warnings);
    let images = image_settings(&file.images, errors);
    let redis = redis_settings(&file.store, errors);
    let clients = client_limits(&file.clients, errors);
    let metrics = metrics_address(file.metrics.as_ref(), &listeners, errors);
    let ledger = ledger::ledger_settings(file.ledger.as_ref(), errors);
    let cache = cache::settings(&file.cache, redis.as_ref(), errors);
    let tracing = tracing::tracing_settings(file.tracing.as_ref(), errors);
    let ejection = ejection_policy(&file.routing.ejection, errors);
    let access_log = match file.access_log.format.as_str() {
        "text" => AccessLogFormat::Text,
        "json" => AccessLogFormat::Json,
        other => {
            errors.push(format!(
                "switchyard.access_log.format: `{other}` is not one of text, json"
            ));
            AccessLogFormat::Text
        }
    };
    Some(GatewaySettings {
        listeners,
        limits,
        retry,
        auth: auth?,
        catalog,
        models,
        adapters,
        dns_ttl: Duration::from_secs(file.dns_ttl_seconds),
        images,
        redis,
        clients,
        metrics,
        ledger,
        cache,
        tracing,
        access_log,
        ejection,
        warnings,
        unpriced,
        kinds: kinds.clone(),
        rates,
        limits_clock: Clock::System,
    })
}

/// `routing.ejection`, checked: at least one failure, a cooldown, a maximum no shorter, and a
/// retired model's cooldown no shorter than that.
fn ejection_policy(f: &file::EjectionFile, errors: &mut Vec<String>) -> EjectionPolicy {
    let at = "switchyard.routing.ejection";
    if f.consecutive_failures == 0 {
        errors.push(format!("{at}.consecutive_failures: must be at least 1"));
    }
    if f.base_cooldown_ms == 0 {
        errors.push(format!("{at}.base_cooldown_ms: must be greater than 0"));
    }
    if f.max_cooldown_ms < f.base_cooldown_ms {
        errors.push(format!(
            "{at}.max_cooldown_ms: {} is less than base_cooldown_ms ({})",
            f.max_cooldown_ms, f.base_cooldown_ms
        ));
    }
    // A retired model is out for longer than a failing one: a shorter cooldown would probe a dead
    // model more often than a merely failing one.
    if f.retired_cooldown_ms < f.max_cooldown_ms {
        errors.push(format!(
            "{at}.retired_cooldown_ms: {} is less than max_cooldown_ms ({})",
            f.retired_cooldown_ms, f.max_cooldown_ms
        ));
    }
    EjectionPolicy {
        consecutive_failures: f.consecutive_failures.max(1),
        base_cooldown: Duration::from_millis(f.base_cooldown_ms),
        max_cooldown: Duration::from_millis(f.max_cooldown_ms),
        retired_cooldown: Duration::from_millis(f.retired_cooldown_ms),
    }
}

/// The metrics listener's address: an `IP:port` that no entry point uses (metrics are never
/// served to the public).
fn metrics_address(
    f: Option<&file::MetricsFile>,
    listeners: &[Listener],
    errors: &mut Vec<String>,
) -> Option<SocketAddr> {
    let f = f?;
    if !cfg!(feature = "metrics") {
        errors.push(format!(
            "switchyard.metrics: {}; remove the section, or build with `--features metrics`",
            crate::metrics::NO_METRICS
        ));
        return None;
    }
    let Ok(address) = f.address.parse::<SocketAddr>() else {
        errors.push(format!(
            "switchyard.metrics.address: `{}` is not an IP:port address",
            f.address
        ));
        return None;
    };
    if let Some(l) = listeners.iter().find(|l| l.address == address) {
        errors.push(format!(
            "switchyard.metrics.address: {address} is entry point {}'s address; metrics need a \
             listener of their own",
            l.name
        ));
        return None;
    }
    Some(address)
}

fn client_limits(f: &file::ClientsFile, errors: &mut Vec<String>) -> ClientLimits {
    for (key, v) in [
        ("head_timeout_ms", f.head_timeout_ms),
        ("body_timeout_ms", f.body_timeout_ms),
        ("body_min_rate_bytes", f.body_min_rate_bytes),
        ("idle_timeout_ms", f.idle_timeout_ms),
        ("write_timeout_ms", f.write_timeout_ms),
    ] {
        if v == 0 {
            errors.push(format!("switchyard.clients.{key}: must be greater than 0"));
        }
    }
    ClientLimits {
        head_timeout: Duration::from_millis(f.head_timeout_ms),
        body_timeout: Duration::from_millis(f.body_timeout_ms),
        body_min_rate: f.body_min_rate_bytes.max(1),
        idle_timeout: Duration::from_millis(f.idle_timeout_ms),
        write_timeout: Duration::from_millis(f.write_timeout_ms),
    }
}

/// A listener's `tls:`: its files are read and checked now, so a bad one stops the start (and
/// `switchyard -t`) with the file named, instead of a panic in Pingora's listener.
fn listener_tls(
    i: usize,
    t: &file::ListenerTlsFile,
    errors: &mut Vec<String>,
) -> Option<ListenerTls> {
    let at = format!("switchyard.listeners[{i}].tls");
    let mut ok = true;
    for (key, path) in [("cert_file", &t.cert_file), ("key_file", &t.key_file)] {
        if path.trim().is_empty() {
            errors.push(format!("{at}.{key}: required (a PEM file)"));
            ok = false;
        }
    }
    if !ok {
        return None;
    }
    match tls::load(&t.cert_file, &t.key_file) {
        Ok(certified) => Some(ListenerTls {
            cert_file: t.cert_file.clone(),
            key_file: t.key_file.clone(),
            reload_interval: (t.reload_interval_ms > 0)
                .then(|| Duration::from_millis(t.reload_interval_ms)),
            certified,
        }),
        Err(m) => {
            errors.push(format!("{at}: {m}"));
            None
        }
    }
}

/// Register every credential the file holds with the logger's filter, so none is ever printed
/// in full, whatever text carries it (a provider echoing its key, a URL in an error).
fn keep_secrets_out_of_logs(file: &GatewayFile) {
    for p in file.providers.values() {
        crate::logging::redact_also(&p.api_key);
        // Kind-specific credentials (Kling's `secret_key`, …).
        for (k, v) in &p.kind {
            if let (Some(k), Some(v)) = (k.as_str(), v.as_str()) {
                if crate::logging::sensitive_name(k) {
                    crate::logging::redact_also(v);
                }
            }
        }
    }
    for k in &file.auth.api_keys {
        crate::logging::redact_also(k.key.as_deref().unwrap_or_default());
    }
    if let Some(jwt) = &file.auth.jwt {
        crate::logging::redact_also(jwt.hs256_secret.as_deref().unwrap_or_default());
    }
    // `redis://user:password@host`: the password, of every Redis URL; the data nodes' password
    // under Sentinel.
    let store = &file.store;
    let sentinel = store.redis_sentinel.as_ref();
    let urls = store
        .redis_url
        .iter()
        .chain(store.redis_cluster.iter().flatten())
        .chain(sentinel.map(|s| s.urls.iter()).into_iter().flatten());
    for url in urls {
        let userinfo = url
            .split_once("://")
            .and_then(|(_, rest)| rest.split_once('@'))
            .map(|(userinfo, _)| userinfo);
        if let Some((_, password)) = userinfo.and_then(|u| u.split_once(':')) {
            crate::logging::redact_also(password);
        }
    }
    if let Some(password) = sentinel.and_then(|s| s.password.as_deref()) {
        crate::logging::redact_also(password);
    }
}

/// Without the `redis` feature a store naming Redis is refused: state in memory would silently
/// not be shared between the instances the operator meant to share it.
#[cfg(not(feature = "redis"))]
fn redis_settings(f: &file::StoreFile, errors: &mut Vec<String>) -> Option<RedisConn> {
    let named = [
        // Empty is none: the default config's `${SWITCHYARD_REDIS_URL:-}` when unset.
        (
            "redis_url",
            f.redis_url.as_deref().is_some_and(|u| !u.trim().is_empty()),
        ),
        ("redis_cluster", f.redis_cluster.is_some()),
        ("redis_sentinel", f.redis_sentinel.is_some()),
    ];
    if let Some((key, _)) = named.iter().find(|(_, set)| *set) {
        errors.push(format!(
            "switchyard.store.{key}: this build of Switchyard has no Redis support (built \
             without the `redis` cargo feature); remove the store's Redis settings to keep state \
             in memory, or build with `--features redis`"
        ));
    }
    None
}

#[cfg(feature = "redis")]
fn redis_settings(f: &file::StoreFile, errors: &mut Vec<String>) -> Option<RedisConn> {
    let at = "switchyard.store";
    let problems = errors.len();
    let url = f
        .redis_url
        .as_deref()
        .map(str::trim)
        .filter(|u| !u.is_empty());
    let mut topologies = Vec::new();
    if let Some(url) = url {
        topologies.push(Topology::Single { url: url.into() });
    }
    if let Some(nodes) = &f.redis_cluster {
        if nodes.is_empty() {
            errors.push(format!("{at}.redis_cluster: list at least one node URL"));
        }
        topologies.push(Topology::Cluster {
            nodes: nodes.iter().map(|n| n.trim().to_string()).collect(),
        });
    }
    if let Some(s) = &f.redis_sentinel {
        if s.urls.is_empty() {
            errors.push(format!(
                "{at}.redis_sentinel.urls: list at least one sentinel URL"
            ));
        }
        if s.master.trim().is_empty() {
            errors.push(format!(
                "{at}.redis_sentinel.master: name the primary the sentinels monitor"
            ));
        }
        topologies.push(Topology::Sentinel {
            sentinels: s.urls.iter().map(|u| u.trim().to_string()).collect(),
            master: s.master.trim().to_string(),
            username: s.username.clone(),
            password: s.password.clone(),
            db: s.db,
            min_replicas_acked: s.min_replicas_acked,
        });
    }
    if topologies.len() > 1 {
        errors.push(format!(
            "{at}: set only one of redis_url, redis_cluster, redis_sentinel"
        ));
        return None;
    }
    let topology = topologies.pop()?;
    if errors.len() > problems {
        return None;
    }
    let mut s = RedisSettings::with_topology(topology);
    if let Some(prefix) = &f.key_prefix {
        s.key_prefix = prefix.clone();
    }
    if let Some(ms) = f.timeout_ms {
        s.timeout = Duration::from_millis(ms);
    }
    // Built here (no I/O yet) so a bad URL is a config error at start, not a 503 on the first
    // request.
    match RedisConn::new(&s) {
        Ok(conn) => Some(conn),
        Err(e) => {
            errors.push(format!("{at}: {e}"));
            None
        }
    }
}

fn image_settings(f: &file::ImagesFile, errors: &mut Vec<String>) -> ImageSettings {
    let at = "switchyard.images";
    for (key, zero) in [
        ("max_download_bytes", f.max_download_bytes == 0),
        ("download_timeout_ms", f.download_timeout_ms == 0),
        ("file_ttl_seconds", f.file_ttl_seconds == 0),
        ("file_store_bytes", f.file_store_bytes == 0),
        ("task_store_bytes", f.task_store_bytes == 0),
        ("task_ttl_seconds", f.task_ttl_seconds == 0),
        ("poll_interval_ms", f.poll_interval_ms == 0),
        ("sync_wait_seconds", f.sync_wait_seconds == 0),
        ("task_wait_seconds", f.task_wait_seconds == 0),
        ("task_heartbeat_ms", f.task_heartbeat_ms == 0),
    ] {
        if zero {
            errors.push(format!("{at}.{key}: must be greater than 0"));
        }
    }
    // Two heartbeats may be missed (a slow store, a busy instance) before a live task is taken
    // over by another instance.
    if f.task_lost_after_ms < 3 * f.task_heartbeat_ms {
        errors.push(format!(
            "{at}.task_lost_after_ms: must be at least three times task_heartbeat_ms ({})",
            3 * f.task_heartbeat_ms
        ));
    }
    let public_base_url = f.public_base_url.as_deref().and_then(|u| {
        let u = u.trim().trim_end_matches('/');
        match u.parse::<http::Uri>() {
            Ok(uri)
                if matches!(uri.scheme_str(), Some("http" | "https"))
                    && uri.host().is_some()
                    && uri.query().is_none() =>
            {
                Some(u.to_string())
            }
            _ => {
                errors.push(format!(
                    "{at}.public_base_url: `{u}` is not an http(s) URL such as https://ai.example.com"
                ));
                None
            }
        }
    });
    ImageSettings {
        download: DownloadPolicy {
            allow_private_urls: f.allow_private_urls,
            max_download_bytes: f.max_download_bytes,
            download_timeout: Duration::from_millis(f.download_timeout_ms),
        },
        file_ttl: Duration::from_secs(f.file_ttl_seconds),
        file_store_bytes: f.file_store_bytes,
        task_store_bytes: f.task_store_bytes,
        task_ttl: Duration::from_secs(f.task_ttl_seconds),
        public_base_url,
        poll_interval: Duration::from_millis(f.poll_interval_ms),
        sync_wait: Duration::from_secs(f.sync_wait_seconds),
        task_wait: Duration::from_secs(f.task_wait_seconds),
        task_heartbeat: Duration::from_millis(f.task_heartbeat_ms),
        task_lost_after: Duration::from_millis(f.task_lost_after_ms),
    }
}

/// An account's kind, built in or registered by the host, with its list endpoints (a registered
/// kind has none); an error starts with the key at fault (`.kind: …`, `.api_key: …`) or, from a
/// registered kind's own build, with `: `.
fn provider_kind(
    raw: &serde_yaml::Mapping,
    account: &str,
    key: &str,
    kinds: &ProviderKinds,
) -> Result<(registry::Kind, crate::api::discovery::Discovery), String> {
    let name = raw.get("kind").and_then(Value::as_str).unwrap_or_default();
    let mut own = raw.clone();
    own.remove("kind");
    if let Some(built) = kinds.build(name, account, key, &own) {
        return built
            .map(|k| (k, Default::default()))
            .map_err(|m| format!(": {m}"));
    }
    if raw.contains_key("kind") && !builtin_kinds().contains(&name) {
        return Err(format!(".kind: {}", kinds.unknown(name)));
    }
    let config = provider_config(raw).map_err(|(field, m)| format!(".{field}: {m}"))?;
    let kind = registry::build(&config, key).map_err(|m| format!(".api_key: {m}"))?;
    Ok((kind, registry::discovery(&config)))
}

/// A provider's typed config from its `kind` and the keys only that kind takes; an error names
/// the key at fault.
fn provider_config(
    raw: &serde_yaml::Mapping,
) -> Result<registry::ProviderConfig, (String, String)> {
    serde_yaml::from_value(Value::Mapping(raw.clone())).map_err(|e| {
        let m = e.to_string();
        // serde names an unknown key as "unknown field `x`, expected …".
        let key = m
            .strip_prefix("unknown field `")
            .and_then(|rest| rest.split('`').next())
            .map(str::to_string);
        match key {
            Some(key) => (key, "not a setting of this provider kind".to_string()),
            None => ("kind".to_string(), m),
        }
    })
}

fn build_catalog(
    models: &BTreeMap<String, file::ModelFile>,
    declared: &BTreeMap<String, file::ProviderFile>,
    providers: &HashMap<String, Arc<Provider>>,
    adapters: &Registry,
    clock: &Clock,
    errors: &mut Vec<String>,
    (warnings, unpriced): (&mut Vec<String>, &mut Vec<String>),
) -> Catalog {
    let catalog = Catalog::with_clock(clock.clone());
    let mut built = Vec::with_capacity(models.len());
    let table = match caps::builtin() {
        Ok(t) => t,
        Err(problems) => {
            // Never reached in a tested build (a unit test loads the table).
            errors.extend(
                problems
                    .iter()
                    .map(|p| format!("built-in capability table: {p}")),
            );
            return catalog;
        }
    };
    for (name, m) in models {
        let at = format!("switchyard.models.{name}");
        let Some(family) = table.get(&m.family) else {
            errors.push(match table.retired(&m.family) {
                Some(why) => format!("{at}.family: family `{}` was retired: {why}", m.family),
                None => format!(
                    "{at}.family: unknown family `{}`; families: {}",
                    m.family,
                    table.names().join(", ")
                ),
            });
            continue;
        };
        let overrides = overrides(m, family, &at, errors);
        let caps = table
            .with_overrides(&m.family, &overrides, &format!("{at}.capabilities"))
            .unwrap_or_else(|problems| {
                errors.extend(problems);
                // Only to check the targets below; the errors keep the gateway from starting.
                family
            });
        let op = caps.operation();
        if m.targets.is_empty() {
            errors.push(format!("{at}.targets: at least one target is required"));
        }
        let model_price = prices::of_model(m.price.as_ref(), &at, errors);
        let mut targets = Vec::new();
        for (i, t) in m.targets.iter().enumerate() {
            match providers.get(&t.provider) {
                Some(p) if adapters.get(p).is_some_and(|a| a.serves(op)) => {
                    if t.weight > MAX_WEIGHT {
                        errors.push(format!(
                            "{at}.targets[{i}].weight: {} is more than {MAX_WEIGHT}",
                            t.weight
                        ));
                    }
                    let mut target = Target::new(p.clone(), t.model.clone(), t.weight);
                    target.lifecycle = lifecycle::of_target(m, (i, t), &p.kind, &at, errors);
                    target.price = prices::of_target(
                        name,
                        model_price.as_ref(),
                        (i, t),
                        &p.kind,
                        &at,
                        errors,
                        unpriced,
                    );
                    targets.push(target);
                }
                Some(_) => errors.push(format!(
                    "{at}.targets[{i}].provider: {} does not serve {}",
                    t.provider,
                    op.as_str()
                )),
                // A provider that failed its own validation is already reported.
                None if declared.contains_key(&t.provider) => {}
                None => errors.push(format!(
                    "{at}.targets[{i}].provider: no provider named `{}`",
                    t.provider
                )),
            }
        }
        default_voice_named(name, caps, &targets, &at, warnings);
        let voice_map = voice_map::check(&m.voice_map, caps, &at, errors);
        let cached = cache::policy(m.cache.as_ref(), &at, errors);
        built.push(
            Model::new(name.clone(), caps, targets)
                .with_voice_map(voice_map)
                .with_cache(cached),
        );
    }
    lifecycle::finish(built, models, clock, errors, warnings)
}

/// A speech model whose family has no default voice (ElevenLabs': no voice serves every account
/// after 2026-12-31) should name one: without it, a request that names no `voice` is the
/// caller's 400 asking for one. Said loudly at load, once per model, but not refused: the
/// model's requests that name a voice (every OpenAI SDK call does) serve as before, and one
/// missing setting does not stop the whole gateway.
fn default_voice_named(
    name: &str,
    caps: Caps,
    targets: &[Target],
    at: &str,
    warnings: &mut Vec<String>,
) {
    let Caps::Speech(c) = caps else { return };
    if c.default_voice.is_some() || !targets.iter().any(|t| t.provider.enabled()) {
        return;
    }
    warnings.push(format!(
        "{at}.default_voice: not set, and family `{}` has none (no voice serves every account \
         of its provider): requests that name no `voice` are refused with a 400; set \
         `default_voice:` to a voice of this account (`GET /api/v1/audio/voices?model={name}` \
         lists them)",
        c.family
    ));
}

/// A model's `capabilities`, with the older per-model keys (`default_voice`, `max_input_chars`,
/// `max_documents`, still valid) folded in as the capability keys they stand for. A key given both
/// ways is an error rather than one silently winning. Where an older key does not apply to the
/// family's operation it is ignored, as it always was, with a warning.
fn overrides(m: &file::ModelFile, family: Caps, at: &str, errors: &mut Vec<String>) -> Value {
    let mut map = match &m.capabilities {
        None | Some(Value::Null) => serde_yaml::Mapping::new(),
        Some(Value::Mapping(map)) => map.clone(),
        // Not a mapping: `caps` reports it with its path.
        Some(other) => return other.clone(),
    };
    let mut put = |legacy: &str, key: &str, value: Value| {
        if map.contains_key(key) {
            errors.push(format!(
                "{at}.{legacy}: also given as capabilities.{key}; keep one"
            ));
        } else {
            map.insert(key.into(), value);
        }
    };
    let chars = |n: usize| {
        let mut limit = serde_yaml::Mapping::new();
        limit.insert("max".into(), Value::Number((n as u64).into()));
        limit.insert("unit".into(), "characters".into());
        Value::Mapping(limit)
    };
    let mut ignored = Vec::new();
    match family {
        Caps::Speech(_) => {
            // Empty, as `${VAR:-}` leaves it when the variable is unset, is not given.
            if let Some(v) = m.default_voice.as_deref().filter(|v| !v.trim().is_empty()) {
                put("default_voice", "default_voice", v.into());
            }
            if let Some(n) = m.max_input_chars {
                put("max_input_chars", "input_limit", chars(n));
            }
            if m.max_documents.is_some() {
                ignored.push("max_documents");
            }
        }
        Caps::Rerank(_) => {
            if let Some(n) = m.max_input_chars {
                put("max_input_chars", "query_limit", chars(n));
            }
            if let Some(n) = m.max_documents {
                put(
                    "max_documents",
                    "max_documents",
                    Value::Number((n as u64).into()),
                );
            }
            if m.default_voice.is_some() {
                ignored.push("default_voice");
            }
        }
        Caps::Images(_) => {
            for (key, set) in [
                ("default_voice", m.default_voice.is_some()),
                ("max_input_chars", m.max_input_chars.is_some()),
                ("max_documents", m.max_documents.is_some()),
            ] {
                if set {
                    ignored.push(key);
                }
            }
        }
    }
    for key in ignored {
        log::warn!(
            "{at}.{key}: ignored for a {} model (see capabilities in the README)",
            family.operation().as_str()
        );
    }
    Value::Mapping(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn listeners_are_required_unless_a_host_owns_the_sockets() {
        let models = "  providers: {builtin: {kind: local}}\n  models:\n    bm25: {family: local-rerank, targets: [{provider: builtin, model: bm25}]}\n";
        for listeners in ["", "  listeners: []\n"] {
            let yaml = format!("version: 1\nswitchyard:\n{listeners}{models}");
            let problems = load_str(&yaml, &no_env).err().expect("refused");
            assert_eq!(
                problems,
                ["switchyard.listeners: at least one entry point is required"],
                "{yaml}"
            );
            let hosted = load_hosted_str(&yaml, &no_env).expect("a host's configuration");
            assert!(hosted.gateway.listeners.is_empty());
            assert!(hosted.gateway.catalog.get("bm25").is_some());
        }
        // Listeners a host's configuration does declare are still checked.
        let yaml = format!(
            "version: 1\nswitchyard:\n  listeners: [{{name: a, address: nowhere}}]\n{models}"
        );
        assert!(load_hosted_str(&yaml, &no_env).is_err());
    }

    #[test]
    fn embedded_default_loads_without_environment() {
        let s = load_str(DEFAULT_CONFIG, &no_env).unwrap_or_else(|e| panic!("{e:#?}"));
        assert_eq!(s.gateway.listeners.len(), 2);
        assert!(s
            .gateway
            .listeners
            .iter()
            .all(|l| l.address.ip().is_loopback()));
        assert!(s.gateway.catalog.get("tts-1").is_some());
    }

    /// The default configuration offers the dated gpt-4o-mini-tts snapshot (instructions, SSE).
    /// ElevenLabs has no voice every account can use after 2026-12-31, so its models take the
    /// operator's (`ELEVENLABS_VOICE_ID`), and none without it.
    #[test]
    fn the_default_speech_models_and_voices_are_current() {
        use crate::caps::Caps;
        let s = load_str(DEFAULT_CONFIG, &no_env).unwrap_or_else(|e| panic!("{e:#?}"));
        let snapshot = s
            .gateway
            .catalog
            .get("gpt-4o-mini-tts-2025-12-15")
            .expect("the dated snapshot is offered");
        assert_eq!(
            snapshot.targets[0].native_model,
            "gpt-4o-mini-tts-2025-12-15"
        );
        let Caps::Speech(c) = snapshot.caps else {
            panic!("not a speech model");
        };
        assert_eq!(c.family, "openai-tts-instruct");
        assert!(c.instructions && !c.sse_formats.is_empty());
        let voice = |env: &dyn Fn(&str) -> Option<String>, name: &str| {
            let s = load_str(DEFAULT_CONFIG, env).unwrap_or_else(|e| panic!("{e:#?}"));
            let model = s.gateway.catalog.get(name).expect(name);
            let Caps::Speech(c) = model.caps else {
                panic!("{name} is not a speech model");
            };
            c.default_voice.map(str::to_string)
        };
        let operators = |k: &str| (k == "ELEVENLABS_VOICE_ID").then(|| "my-voice-id".to_string());
        for name in ["eleven-multilingual-v2", "eleven-flash-v2.5", "eleven-v3"] {
            assert_eq!(voice(&no_env, name), None, "{name}");
            assert_eq!(
                voice(&operators, name).as_deref(),
                Some("my-voice-id"),
                "{name}"
            );
        }
    }

    /// An ElevenLabs model whose account has a key and no default voice is warned of at load,
    /// naming what to set (no voice serves every account after 2026-12-31); it still loads.
    #[test]
    fn an_elevenlabs_model_with_a_key_and_no_voice_is_warned_of() {
        let keyed = |k: &str| (k == "ELEVENLABS_API_KEY").then(|| "xi-key".to_string());
        let s = load_str(DEFAULT_CONFIG, &keyed).unwrap_or_else(|e| panic!("{e:#?}"));
        let voiceless = |s: &Settings| {
            let warnings = s.gateway.warnings();
            ["eleven-multilingual-v2", "eleven-flash-v2.5", "eleven-v3"]
                .into_iter()
                .filter(|name| {
                    let at = format!("switchyard.models.{name}.default_voice: not set");
                    warnings.iter().any(|w| {
                        w.starts_with(&at) && w.contains("`GET /api/v1/audio/voices?model=")
                    })
                })
                .count()
        };
        assert_eq!(voiceless(&s), 3, "{:#?}", s.gateway.warnings());
        let both = |k: &str| match k {
            "ELEVENLABS_API_KEY" => Some("xi-key".to_string()),
            "ELEVENLABS_VOICE_ID" => Some("my-voice-id".to_string()),
            _ => None,
        };
        let s = load_str(DEFAULT_CONFIG, &both).unwrap_or_else(|e| panic!("{e:#?}"));
        assert_eq!(voiceless(&s), 0, "{:#?}", s.gateway.warnings());
    }

    fn fast_or_bge(successor: &str) -> &'static str {
        if successor.ends_with("4-fast") {
            "cohere-rerank-4-fast"
        } else {
            "bge-reranker-v2-m3"
        }
    }

    /// Pinecone's retired models (pinecone-rerank-v0, and cohere-rerank-3.5, served by Cohere
    /// Rerank 4 Fast since 2026-08-01) hand their requests to successors, and 4 Fast is offered
    /// under its own name.
    #[test]
    fn pinecone_defaults_name_what_serves_them() {
        let s = load_str(DEFAULT_CONFIG, &no_env).unwrap_or_else(|e| panic!("{e:#?}"));
        let fast = s
            .gateway
            .catalog
            .get("pinecone-cohere-rerank-4-fast")
            .expect("4 Fast is offered");
        assert_eq!(fast.targets[0].native_model, "cohere-rerank-4-fast");
        for (name, successor) in [
            ("pinecone-rerank-v0", "pinecone-bge-reranker-v2-m3"),
            (
                "pinecone-cohere-rerank-3.5",
                "pinecone-cohere-rerank-4-fast",
            ),
        ] {
            let model = s.gateway.catalog.get(name).expect(name);
            let lifecycle = model.targets[0].lifecycle.as_ref().expect(name);
            assert!(lifecycle.gone(crate::api::images::now()), "{name}");
            assert_eq!(
                model.lifecycle.successor.as_deref(),
                Some(successor),
                "{name}"
            );
            let serving = s.gateway.catalog.serving(name).expect(name);
            assert_eq!(serving.targets[0].native_model, fast_or_bge(successor));
        }
    }

    #[test]
    fn every_credential_the_file_holds_is_kept_out_of_logs() {
        let yaml = r#"
version: 1
switchyard:
  listeners: [{name: a, address: "127.0.0.1:1"}]
  store: {redis_url: "redis://user:redis-pass-CFGTEST@127.0.0.1:6379"}
  auth:
    api_keys: [{name: c, key: "client-key-CFGTEST"}]
    jwt: {hs256_secret: "jwt-secret-CFGTEST-at-least-32-bytes-long"}
  providers:
    openai: {kind: openai, api_key: "provider-key-CFGTEST", base_url: "https://api.openai.com/v1"}
    kling: {kind: kling, api_key: "kling-access-CFGTEST", secret_key: "kling-secret-CFGTEST", base_url: "https://api.klingai.com"}
  models: {}
"#;
        let loaded = load_str(yaml, &no_env);
        if cfg!(feature = "redis") {
            loaded.unwrap_or_else(|e| panic!("{e:#?}"));
        } else {
            // Refused (no Redis in this build), and the secrets are still kept out of logs.
            assert!(loaded.is_err());
        }
        for secret in [
            "redis-pass-CFGTEST",
            "client-key-CFGTEST",
            "jwt-secret-CFGTEST-at-least-32-bytes-long",
            "provider-key-CFGTEST",
            "kling-access-CFGTEST",
            "kling-secret-CFGTEST",
        ] {
            let line = format!("a provider said: {secret}.");
            assert_eq!(
                crate::logging::redact(&line),
                "a provider said: [redacted].",
                "{secret}"
            );
        }
    }

    #[cfg(not(feature = "redis"))]
    #[test]
    fn without_the_redis_feature_a_store_naming_redis_is_refused_at_load() {
        for (store, key) in [
            (r#"{redis_url: "redis://127.0.0.1"}"#, "redis_url"),
            (
                r#"{redis_cluster: ["redis://127.0.0.1:7000"]}"#,
                "redis_cluster",
            ),
            (
                r#"{redis_sentinel: {urls: ["redis://127.0.0.1:26379"], master: m}}"#,
                "redis_sentinel",
            ),
        ] {
            let yaml = format!(
                "version: 1\nswitchyard:\n  listeners: [{{name: a, address: \"127.0.0.1:1\"}}]\n  \
                 store: {store}\n  models: {{}}\n"
            );
            let errors = load_str(&yaml, &no_env).err().unwrap_or_default();
            assert_eq!(errors.len(), 1, "{store}: {errors:#?}");
            assert!(
                errors[0].starts_with(&format!(
                    "switchyard.store.{key}: this build of Switchyard has no Redis support"
                )) && errors[0].contains("--features redis"),
                "{errors:#?}"
            );
        }
        let yaml =
            "version: 1\nswitchyard:\n  listeners: [{name: a, address: \"127.0.0.1:1\"}]\n  \
                    store: {redis_url: \" \", key_prefix: \"p:\"}\n  models: {}\n";
        let s = load_str(yaml, &no_env).unwrap_or_else(|e| panic!("{e:#?}"));
        assert!(s.gateway.redis.is_none());
    }

    #[test]
    fn a_metrics_listener_needs_the_metrics_feature() {
        let yaml =
            "version: 1\nswitchyard:\n  listeners: [{name: a, address: \"127.0.0.1:1\"}]\n  \
                    metrics: {address: \"127.0.0.1:2\"}\n  models: {}\n";
        let loaded = load_str(yaml, &no_env);
        if cfg!(feature = "metrics") {
            let s = loaded.unwrap_or_else(|e| panic!("{e:#?}"));
            assert_eq!(s.gateway.metrics, Some("127.0.0.1:2".parse().unwrap()));
        } else {
            let errors = loaded.err().unwrap_or_default();
            assert_eq!(
                errors,
                ["switchyard.metrics: this build of Switchyard has no metrics (built without the \
                  `metrics` cargo feature); remove the section, or build with `--features metrics`"]
            );
        }
    }

    #[cfg(feature = "redis")]
    #[test]
    fn redis_is_one_server_a_cluster_or_sentinel_and_its_passwords_stay_out_of_logs() {
        let with_store = |store: &str| {
            format!(
                "version: 1\nswitchyard:\n  listeners: [{{name: a, address: \"127.0.0.1:1\"}}]\n  \
                 store: {store}\n  models: {{}}\n"
            )
        };
        let ok = |store: &str| {
            load_str(&with_store(store), &no_env)
                .unwrap_or_else(|e| panic!("{store}: {e:#?}"))
                .gateway
                .redis
                .expect("redis configured")
        };
        let cluster = ok(
            r#"{redis_cluster: ["redis://:cl-pass-CFGTEST@127.0.0.1:7000", "redis://:cl-pass-CFGTEST@127.0.0.1:7001"]}"#,
        );
        assert_eq!(cluster.min_replicas_acked(), 0);
        let sentinel = ok(
            r#"{redis_sentinel: {urls: ["redis://:snt-pass-CFGTEST@127.0.0.1:26379"], master: mymaster, password: "node-pass-CFGTEST", min_replicas_acked: 1}, key_prefix: "p:"}"#,
        );
        assert_eq!(sentinel.min_replicas_acked(), 1);
        assert_eq!(sentinel.tag("tasks"), "{p:tasks}");
        for secret in ["cl-pass-CFGTEST", "snt-pass-CFGTEST", "node-pass-CFGTEST"] {
            assert_eq!(
                crate::logging::redact(&format!("x {secret} y")),
                "x [redacted] y",
                "{secret}"
            );
        }

        for (store, problem) in [
            (
                r#"{redis_url: "redis://127.0.0.1", redis_cluster: ["redis://127.0.0.1:7000"]}"#,
                "switchyard.store: set only one of redis_url, redis_cluster, redis_sentinel",
            ),
            (
                "{redis_cluster: []}",
                "switchyard.store.redis_cluster: list at least one node URL",
            ),
            (
                "{redis_sentinel: {urls: [], master: m}}",
                "switchyard.store.redis_sentinel.urls: list at least one sentinel URL",
            ),
            (
                r#"{redis_sentinel: {urls: ["redis://127.0.0.1:26379"]}}"#,
                "switchyard.store.redis_sentinel.master: name the primary the sentinels monitor",
            ),
        ] {
            let errors = load_str(&with_store(store), &no_env)
                .err()
                .unwrap_or_default();
            assert!(errors.iter().any(|e| e == problem), "{store}: {errors:#?}");
            assert_eq!(errors.len(), 1, "{store}: {errors:#?}");
        }
        let errors = load_str(
            &with_store(
                r#"{redis_sentinel: {urls: ["redis://127.0.0.1:26379"], master: m, replicas: 1}}"#,
            ),
            &no_env,
        )
        .err()
        .unwrap_or_default();
        assert!(
            errors.iter().any(|e| e.contains("replicas")),
            "unknown key accepted: {errors:#?}"
        );
    }

    #[test]
    fn every_problem_is_listed_with_its_path() {
        let yaml = r#"
version: 1
thraeds: 2
switchyard:
  listeners:
    - {name: a, address: "nope"}
  retries: {max: 2, bogus: 1}
  providers:
    openai: {kind: openai, api_key: "${MISSING}", base_url: "https://api.openai.com/v1"}
    other: {kind: martian, base_url: "https://x"}
  models:
    m1: {family: no-such, targets: [{provider: openai, model: x}]}
    m2: {family: cohere-rerank, targets: [{provider: openai, model: x}]}
    m3: {family: openai-tts, targets: [{provider: ghost, model: x}]}
"#;
        let errors = load_str(yaml, &no_env).err().unwrap();
        let all = errors.join("\n");
        for needle in [
            "thraeds: unknown key",
            "switchyard.retries.bogus: unknown key",
            "switchyard.providers.openai.api_key: environment variable MISSING is not set",
            "switchyard.listeners[0].address",
            "switchyard.providers.other.kind",
            "switchyard.models.m1.family",
            "switchyard.models.m2.targets[0].provider",
            "switchyard.models.m3.targets[0].provider: no provider named `ghost`",
        ] {
            assert!(all.contains(needle), "missing `{needle}` in:\n{all}");
        }
    }

    #[test]
    fn routing_problems_are_listed_with_their_path() {
        let yaml = r#"
version: 1
switchyard:
  listeners:
    - {name: a, address: "127.0.0.1:1"}
  routing:
    ejection: {consecutive_failures: 0, base_cooldown_ms: 0, max_cooldown_ms: 0, bogus: 1}
  providers:
    cohere: {kind: cohere, api_key: "k", base_url: "https://api.cohere.com"}
  models:
    m: {family: cohere-rerank, targets: [{provider: cohere, model: x, weight: 101}, {provider: cohere, model: y, wieght: 2}]}
"#;
        let errors = load_str(yaml, &no_env).err().unwrap();
        let all = errors.join("\n");
        for needle in [
            "switchyard.routing.ejection.consecutive_failures: must be at least 1",
            "switchyard.routing.ejection.base_cooldown_ms: must be greater than 0",
            "switchyard.routing.ejection.bogus: unknown key",
            "switchyard.models.m.targets[0].weight: 101 is more than 100",
            "switchyard.models.m.targets[1].wieght: unknown key",
        ] {
            assert!(all.contains(needle), "missing `{needle}` in:\n{all}");
        }
        let yaml = yaml
            .replace(
                "consecutive_failures: 0, base_cooldown_ms: 0, max_cooldown_ms: 0, bogus: 1",
                "base_cooldown_ms: 10, max_cooldown_ms: 5",
            )
            .replace("weight: 101", "weight: 0")
            .replace(", wieght: 2", "");
        let errors = load_str(&yaml, &no_env).err().unwrap();
        assert_eq!(
            errors,
            vec![
                "switchyard.routing.ejection.max_cooldown_ms: 5 is less than base_cooldown_ms (10)"
            ]
        );
        let yaml = yaml.replace(
            "base_cooldown_ms: 10, max_cooldown_ms: 5",
            "base_cooldown_ms: 10, max_cooldown_ms: 2000, retired_cooldown_ms: 1000",
        );
        let errors = load_str(&yaml, &no_env).err().unwrap();
        assert_eq!(
            errors,
            vec![
                "switchyard.routing.ejection.retired_cooldown_ms: 1000 is less than \
                 max_cooldown_ms (2000)"
            ]
        );
    }

    #[test]
    fn a_tls_listener_is_loaded_and_its_bad_files_named_with_their_key() {
        let dir = tls::tests::Dir::new();
        let (cert, key) = tls::tests::self_signed("localhost");
        let (cert, key) = (dir.file("c.pem", &cert), dir.file("k.pem", &key));
        let yaml = format!(
            r#"
switchyard:
  listeners:
    - {{name: a, address: "127.0.0.1:9998", tls: {{cert_file: "{cert}", key_file: "{key}"}}}}
    - {{name: b, address: "127.0.0.1:9999", tls: {{cert_file: "{cert}", key_file: "{key}", reload_interval_ms: 0}}}}
"#
        );
        let s = load_str(&yaml, &no_env).unwrap_or_else(|e| panic!("{e:#?}"));
        let a = s.gateway.listeners[0].tls.as_ref().unwrap();
        assert_eq!(
            (a.cert_file.as_str(), a.key_file.as_str()),
            (cert.as_str(), key.as_str())
        );
        assert_eq!(a.reload_interval, Some(Duration::from_secs(10)));
        assert_eq!(
            s.gateway.listeners[1].tls.as_ref().unwrap().reload_interval,
            None
        );
        // Debug output (which a log could show) names the files, nothing of the key.
        assert!(!format!("{a:?}").contains("PRIVATE"));

        let yaml = format!(
            r#"
switchyard:
  listeners:
    - {{name: a, address: "127.0.0.1:9998", tls: {{cert_file: "{key}", key_file: "{key}"}}}}
    - {{name: b, address: "127.0.0.1:9999", tls: {{cert_file: "", key_file: "{key}", reload: 1}}}}
"#
        );
        let errors = load_str(&yaml, &no_env).err().unwrap();
        assert_eq!(
            errors,
            vec![
                "switchyard.listeners[1].tls.reload: unknown key".to_string(),
                format!("switchyard.listeners[0].tls: {key}: no PEM certificate in it"),
                "switchyard.listeners[1].tls.cert_file: required (a PEM file)".to_string(),
            ]
        );
    }

    #[test]
    fn a_key_another_kind_takes_is_refused_by_name() {
        let yaml = r#"
switchyard:
  listeners:
    - {name: a, address: "127.0.0.1:9999"}
  providers:
    oa: {kind: openai, api_key: k, base_url: "https://api.openai.com/v1", app_id: x}
    co: {kind: cohere, api_key: k, base_url: "https://api.cohere.com", secret_key: y}
    vo: {kind: volcengine, api_key: k, base_url: "https://openspeech.bytedance.com", app_id: x}
"#;
        let errors = load_str(yaml, &no_env).err().unwrap();
        assert_eq!(
            errors,
            vec![
                "switchyard.providers.co.secret_key: not a setting of this provider kind",
                "switchyard.providers.oa.app_id: not a setting of this provider kind",
            ]
        );
    }

    /// A config with one provider of each operation and `models` as given.
    fn with_models(models: &str) -> String {
        format!(
            r#"
switchyard:
  listeners: [{{name: a, address: "127.0.0.1:1"}}]
  providers:
    openai: {{kind: openai, api_key: k, base_url: "https://api.openai.com/v1"}}
    bfl: {{kind: bfl, api_key: k, base_url: "https://api.bfl.ai"}}
    cohere: {{kind: cohere, api_key: k, base_url: "https://api.cohere.com"}}
  models:
{models}"#
        )
    }

    fn caps_of(s: &Settings, model: &str) -> Caps {
        s.gateway.catalog.get(model).unwrap().caps
    }

    #[test]
    fn capabilities_override_the_family_and_older_keys_still_work() {
        let yaml = with_models(
            r#"
    flux-pro:
      family: flux
      capabilities: { sizes: { min_side: 256, max_side: 1440, multiple_of: 32 }, max_n: 2 }
      targets: [{provider: bfl, model: flux-pro}]
    flux-plain: {family: flux, targets: [{provider: bfl, model: flux-pro}]}
    tts: {family: openai-tts, default_voice: echo, max_input_chars: 100, targets: [{provider: openai, model: tts-1}]}
    tts-bytes:
      family: openai-tts
      capabilities: {input_limit: {max: 300, unit: bytes}, voices: [alloy, echo]}
      targets: [{provider: openai, model: tts-1}]
    rr: {family: cohere-rerank, max_documents: 5, max_input_chars: 50, targets: [{provider: cohere, model: r}]}
"#,
        );
        let s = load_str(&yaml, &no_env).unwrap_or_else(|e| panic!("{e:#?}"));
        let Caps::Images(flux) = caps_of(&s, "flux-pro") else {
            panic!("not images")
        };
        assert_eq!(flux.family, "flux");
        assert_eq!(flux.max_n, 2);
        assert_eq!(flux.per_call_n, 1, "the family's");
        assert_eq!(flux.sizes.len(), 8, "the family's list stays");
        assert!(flux.accepts_size("1440x256") && !flux.accepts_size("1440x250"));
        let Caps::Images(plain) = caps_of(&s, "flux-plain") else {
            panic!("not images")
        };
        assert!(plain.size_rule.is_none(), "one model's override is its own");
        let Caps::Speech(tts) = caps_of(&s, "tts") else {
            panic!("not speech")
        };
        assert_eq!(tts.default_voice, Some("echo"));
        assert_eq!(
            tts.input_limit,
            caps::Limit {
                max: 100,
                unit: caps::Unit::Characters
            }
        );
        let Caps::Speech(bytes) = caps_of(&s, "tts-bytes") else {
            panic!("not speech")
        };
        assert_eq!(bytes.input_limit.unit, caps::Unit::Bytes);
        assert_eq!(bytes.voices, ["alloy", "echo"]);
        let Caps::Rerank(rr) = caps_of(&s, "rr") else {
            panic!("not rerank")
        };
        assert_eq!(rr.max_documents, 5);
        assert_eq!(rr.query_limit.max, 50);
    }

    #[test]
    fn bad_capability_overrides_are_named_by_path() {
        let yaml = with_models(
            r#"
    flux-pro:
      family: flux
      capabilities: { sizes: { min_side: 256, max_side: 1440, multiple_of: 32 }, max_n: 40, colour: red }
      targets: [{provider: bfl, model: flux-pro}]
    flux-small:
      family: flux
      capabilities: { sizes: { list: [], max_side: 512 } }
      targets: [{provider: bfl, model: flux-pro}]
    tts:
      family: openai-tts
      max_input_chars: 10
      capabilities: {input_limit: {max: 20}, voices: [nova]}
      targets: [{provider: openai, model: tts-1}]
    rr: {family: cohere-rerank, capabilities: [1], targets: [{provider: cohere, model: r}]}
"#,
        );
        let all = load_str(&yaml, &no_env).err().unwrap().join("\n");
        for needle in [
            "switchyard.models.flux-pro.capabilities.colour: unknown key",
            "switchyard.models.flux-small.capabilities.default_size: `1024x1024` is not a size the family accepts (any WxH with sides of at most 512 px)",
            "switchyard.models.flux-small.capabilities.aspect_ratios.16:9: `1344x768` is not a size",
            "switchyard.models.tts.max_input_chars: also given as capabilities.input_limit; keep one",
            "switchyard.models.tts.capabilities.default_voice: `alloy` is not one of the voices (nova)",
            "switchyard.models.rr.capabilities: invalid type: sequence",
            "switchyard.models.flux-pro.capabilities.max_n: must be from 1 to 10",
        ] {
            assert!(all.contains(needle), "missing `{needle}` in:\n{all}");
        }
    }
}
