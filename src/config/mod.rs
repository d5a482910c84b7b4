//! Configuration: one YAML file holding Pingora's server settings (top-level keys, as Pingora reads
//! them) and the gateway's (under `switchyard:`), turned once at start into a validated runtime
//! [`Settings`].
//!
//! Loading reports every problem it can find, each with its key path: unknown keys anywhere,
//! unset `${ENV}` variables, bad URLs, models pointing at unknown providers or families, model
//! capability overrides the family cannot take, unreadable key and CA files, targets past their
//! provider's shutdown (`config/lifecycle.rs`, which also collects the warnings of targets near
//! it). `switchyard -t -c FILE` prints them and exits non-zero.
//!
//! One file per part of what is built: `load.rs` reads the text and `file.rs` holds its raw
//! serde structs; `build` then calls one builder per section: `listeners.rs` (entry points,
//! the metrics address), `limits.rs` (body limits, client deadlines, retries, ejection),
//! `accounts.rs` (provider accounts), `models.rs` (the catalog, with `prices.rs`,
//! `lifecycle.rs`, `voice_map.rs`, `cache.rs`), `images.rs`, `store.rs` (Redis), `ledger.rs`,
//! `tracing.rs`, `budgets.rs`; `secrets.rs` keeps the file's credentials out of the logs.

mod accounts;
mod budgets;
pub(crate) mod cache;
pub(crate) mod env;
pub(crate) mod file;
mod images;
pub(crate) mod ledger;
mod lifecycle;
mod limits;
mod listeners;
// `pub(crate)`: `internals` re-exports `load_str_at` for the crate's tests.
pub(crate) mod load;
mod models;
mod prices;
mod secrets;
mod store;
pub(crate) mod tenants;
#[cfg(test)]
mod tests;
pub(crate) mod tls;
mod tracing;
pub(crate) mod voice_map;

pub(crate) use images::ImageSettings;
pub(crate) use limits::{ClientLimits, Limits};
pub(crate) use listeners::{Listener, ListenerTls};
pub use load::{
    load_file, load_file_with, load_hosted_file, load_hosted_str, load_str, load_str_with, Loader,
    Sockets,
};

use std::net::SocketAddr;

use pingora::server::configuration::ServerConf;
use std::time::Duration;

use crate::api::adapter::Registry;
use crate::api::models::Listing;
use crate::auth::Authenticator;
use crate::caps::lifecycle::Clock;
use crate::catalog::Catalog;
use crate::providers::external::ProviderKinds;
use crate::store::redis_conn::RedisConn;
use crate::upstream::health::EjectionPolicy;
use crate::upstream::retry::RetryPolicy;
use file::GatewayFile;

/// The configuration compiled into the binary (`conf/switchyard.yaml`), used when no `-c` is given.
pub const DEFAULT_CONFIG: &str = include_str!("../../conf/switchyard.yaml");

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
    /// Keys and tenants as data (`tenants:`, or implied by `admin:`; `None`: none). Read once at
    /// start, like the ledger.
    pub(crate) tenants: Option<tenants::TenantsSettings>,
    /// The management API (`admin:`; `None`: none). Read once at start.
    pub(crate) admin: Option<tenants::AdminSettings>,
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
pub(crate) enum AccessLogFormat {
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

/// The gateway's settings from its section of the file: one builder per section, in the order
/// their errors are reported; `None` only when the auth settings could not be built (every
/// problem is in `errors`).
fn build(
    file: GatewayFile,
    clock: &Clock,
    kinds: &ProviderKinds,
    sockets: Sockets,
    errors: &mut Vec<String>,
) -> Option<GatewaySettings> {
    secrets::keep_secrets_out_of_logs(&file);
    let listeners = listeners::listeners(&file.listeners, sockets, errors);
    let limits = limits::body_limits(&file.limits, errors);
    let retry = limits::retry_policy(&file.retries);
    let auth = match Authenticator::from_settings(&file.auth) {
        Ok(a) => Some(a),
        Err(problems) => {
            errors.extend(problems.into_iter().map(|p| format!("switchyard.{p}")));
            None
        }
    };
    let (providers, adapters) = accounts::providers(&file.providers, kinds, errors);
    let mut warnings = Vec::new();
    let mut unpriced = Vec::new();
    let catalog = models::build_catalog(
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
    let images = images::image_settings(&file.images, errors);
    let redis = store::redis_settings(&file.store, errors);
    let clients = limits::client_limits(&file.clients, errors);
    let metrics = listeners::metrics_address(file.metrics.as_ref(), &listeners, errors);
    let ledger = ledger::ledger_settings(file.ledger.as_ref(), errors);
    let tenants = tenants::tenants_settings(
        file.tenants.as_ref(),
        file.admin.as_ref(),
        ledger.as_ref(),
        errors,
    );
    let admin = tenants::admin_settings(file.admin.as_ref(), &listeners, metrics, errors);
    let cache = cache::settings(&file.cache, redis.as_ref(), errors);
    let tracing = tracing::tracing_settings(file.tracing.as_ref(), errors);
    let ejection = limits::ejection_policy(&file.routing.ejection, errors);
    let access_log = access_log_format(&file.access_log.format, errors);
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
        tenants,
        admin,
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

/// `access_log.format`: `text` or `json`.
fn access_log_format(format: &str, errors: &mut Vec<String>) -> AccessLogFormat {
    match format {
        "text" => AccessLogFormat::Text,
        "json" => AccessLogFormat::Json,
        other => {
            errors.push(format!(
                "switchyard.access_log.format: `{other}` is not one of text, json"
            ));
            AccessLogFormat::Text
        }
    }
}
