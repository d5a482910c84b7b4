//! [`GatewayState`]: what every entry point of one gateway shares — the configuration in force
//! (swapped whole by a reload), the upstream pool, the stores, the limits, the metrics.

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::{lifecycle, task_job};
use crate::config::GatewaySettings;
use crate::engine::deliver::HostedFiles;
use crate::limits::Limiter;
use crate::metrics::Metrics;
use crate::store::files::FileStore;
use crate::store::files::MemoryStore;
#[cfg(feature = "redis")]
use crate::store::redis_files::RedisFileStore;
use crate::store::tasks::MemoryTaskStore;
#[cfg(feature = "redis")]
use crate::store::tasks::RedisTaskStore;
use crate::store::tasks::TaskStore;
use crate::upstream::exchange::Upstream;

/// What every entry point shares: settings, model catalog, and the upstream connection pool.
///
/// The settings are swapped whole by a reload ([`GatewayState::reload`]); everything else here is
/// runtime state that outlives any one configuration.
pub struct GatewayState {
    /// The configuration in force. A request takes one snapshot ([`GatewayState::settings`]) when
    /// it starts and keeps it to its end, so a reload never changes a request half-way.
    pub(super) live: ArcSwap<GatewaySettings>,
    /// Talking to providers: connection pool, DNS cache, retry policy and targets' health.
    pub(crate) upstream: Upstream,
    /// Images the gateway hosts for `response_format: url`.
    pub(crate) files: HostedFiles,
    /// Asynchronous image tasks.
    pub(crate) tasks: Box<dyn TaskStore>,
    /// This process's id in task records (which instance runs a task).
    pub(crate) instance: String,
    /// The task jobs running on this instance.
    pub(crate) jobs: task_job::Jobs,
    /// This gateway's metrics (empty without a `metrics:` listener).
    pub(crate) metrics: Metrics,
    /// The Redis connection made at start (`None`: no Redis), shared by the stores and by what
    /// else shares state between instances (limits, ejections). A reload does not replace it: a
    /// changed `store:` needs a restart.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) redis: Option<crate::store::redis_conn::RedisConn>,
    /// Per-caller limits: budgets and concurrent slots, by principal id (in Redis when one is
    /// configured).
    pub(crate) limits: Limiter,
    /// Providers' voice lists, kept a while (`GET /api/v1/audio/voices`).
    pub(crate) voices: crate::engine::discovery::VoiceCache,
    /// Where spans go (off without `tracing:`); built at start, like the ledger.
    pub(crate) tracer: crate::telemetry::Tracer,
    /// The usage ledger, when `ledger:` names a database: one record per finished request
    /// (`gateway/record.rs`), written by its background service (`server::background_services`).
    /// Made at start; a reload does not move it.
    #[cfg(feature = "ledger")]
    pub(crate) ledger: Option<crate::ledger::Ledger>,
    /// The response cache (`switchyard.cache`), made on first use by a cache-enabled model.
    pub(crate) cache: std::sync::OnceLock<Arc<crate::cache::Cache>>,
    /// The database keys' snapshot (`tenants:`), handed to every settings snapshot's
    /// authenticator and filled by the tenants' sync task (`None`: no `tenants:`).
    pub(crate) db_keys: Option<crate::auth::db_keys::DbKeyHandle>,
}

impl GatewayState {
    /// The state for `settings` at start: metrics, stores (in Redis or memory), limits and
    /// targets' health.
    pub fn new(settings: GatewaySettings) -> Arc<GatewayState> {
        let recorded = settings.metrics.is_some();
        GatewayState::recording(settings, recorded)
    }

    /// [`GatewayState::new`], its metrics recorded when `metrics` (with a `metrics:` listener,
    /// or for a host's own registry, `embed::Builder::metrics_registry`) and the build has them.
    pub(crate) fn recording(mut settings: GatewaySettings, metrics: bool) -> Arc<GatewayState> {
        let db_keys = settings
            .tenants
            .as_ref()
            .map(|_| crate::auth::db_keys::DbKeyHandle::default());
        if let Some(handle) = &db_keys {
            settings.auth.attach_db(handle.clone());
        }
        let metrics = if metrics {
            Metrics::on().unwrap_or_else(|e| {
                log::error!("{e}: metrics are off");
                Metrics::off()
            })
        } else {
            Metrics::off()
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
        // The mode is read at start, like the store: a reload keeps the limiter it finds.
        let limits = Limiter::with_mode(
            settings.redis.as_ref(),
            metrics.clone(),
            settings.limits_clock.clone(),
            settings.auth.approximate(),
        );
        let files = HostedFiles {
            store,
            ttl: settings.images.file_ttl,
        };
        let redis = settings.redis.clone();
        #[cfg(feature = "ledger")]
        let ledger = settings
            .ledger
            .as_ref()
            .map(|l| crate::ledger::Ledger::new(l, metrics.clone()));
        let tracer = crate::telemetry::Tracer::new(settings.tracing.as_ref(), metrics.clone());
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
            tracer,
            #[cfg(feature = "ledger")]
            ledger,
            cache: std::sync::OnceLock::new(),
            db_keys,
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

    /// The response cache, made on first use from the settings in force then (its store is read
    /// once: a reload that changes `cache:` names it for a restart).
    pub(crate) fn cache(&self) -> &Arc<crate::cache::Cache> {
        self.cache.get_or_init(|| {
            let s = self.settings();
            Arc::new(crate::cache::Cache::new(
                &s.cache,
                self.redis.as_ref(),
                self.metrics.clone(),
            ))
        })
    }

    /// What the image generation engine uses of this state, under the settings `s` (a snapshot).
    // Public (hidden) only because the engine's `Images` and the upstream pool it names are
    // `pub` in files of their own; not part of the API.
    #[doc(hidden)]
    pub fn images<'a>(&'a self, s: &'a GatewaySettings) -> crate::engine::images::Images<'a> {
        crate::engine::images::Images {
            upstream: &self.upstream,
            adapters: &s.adapters,
            files: &self.files,
            settings: &s.images,
        }
    }
}

impl GatewayState {
    // For the crate's own tests (not part of the API): the retry back-off in force.
    #[doc(hidden)]
    pub fn max_backoff(&self) -> std::time::Duration {
        self.upstream.retry.load().max_backoff
    }
}
