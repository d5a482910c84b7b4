//! The gateway's Prometheus metrics: every metric family in one table (`families!` below), and
//! [`Metrics`], the cheap handle the rest of the gateway records through.
//!
//! Each gateway state has its own registry (not the `prometheus` crate's process-wide default), so
//! several gateways in one process (embedding, the test suite) each count their own traffic, and
//! `server::metrics` serves exactly this gateway's. Without a `metrics:` listener in the config the
//! handle is empty and every recording call returns at its first instruction.
//!
//! Label values are bounded by the configuration (entry points, models, provider accounts, API-key
//! names) or by the code (operations, status codes, error codes, outcomes): never a key, a path, a
//! JWT subject or anything else a client chooses.
//!
//! Adding a metric: one line in the `families!` table, then record it where it happens (through
//! a method here when it is recorded in more than one place).

//!
//! Without the `metrics` cargo feature the `prometheus` crate is not built: the same names stand
//! for inert types (`inert`), [`Metrics::on`] fails, the configuration refuses a `metrics:`
//! section, and the handle is always off.

use std::sync::Arc;

#[cfg(feature = "metrics")]
use prometheus::core::{Collector, MetricVec, MetricVecBuilder};
#[cfg(feature = "metrics")]
use prometheus::{HistogramOpts, Opts};
#[cfg(feature = "metrics")]
pub(crate) use prometheus::{
    HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry,
};

#[cfg(not(feature = "metrics"))]
pub(crate) use inert::{HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};

/// Stand-ins for the `prometheus` types when the `metrics` feature is off: they type-check the
/// recording code, which never runs (the handle is always off), and record nothing.
#[cfg(not(feature = "metrics"))]
pub(crate) mod inert {
    /// Stands for `prometheus::Registry`; never holds anything.
    #[derive(Clone, Debug, Default)]
    pub struct Registry;
    /// Stands for `prometheus::IntCounterVec`.
    #[derive(Clone, Debug)]
    pub struct IntCounterVec;
    /// Stands for `prometheus::IntGaugeVec`.
    #[derive(Clone, Debug)]
    pub struct IntGaugeVec;
    /// Stands for `prometheus::HistogramVec`.
    #[derive(Clone, Debug)]
    pub struct HistogramVec;
    /// Stands for `prometheus::IntCounter`.
    #[derive(Clone, Debug)]
    pub struct IntCounter;
    /// Stands for `prometheus::IntGauge`.
    #[derive(Clone, Debug)]
    pub struct IntGauge;

    /// Why a series cannot be had: this build has no metrics.
    #[derive(Debug)]
    pub struct NoMetrics;

    impl IntCounterVec {
        /// Never a series: nothing is recorded in this build.
        pub fn get_metric_with_label_values(&self, _: &[&str]) -> Result<IntCounter, NoMetrics> {
            Err(NoMetrics)
        }
    }
    impl IntGaugeVec {
        /// Never a series: nothing is recorded in this build.
        pub fn get_metric_with_label_values(&self, _: &[&str]) -> Result<IntGauge, NoMetrics> {
            Err(NoMetrics)
        }
        /// Does nothing.
        pub fn reset(&self) {}
    }
    impl IntCounter {
        /// Does nothing.
        pub fn inc(&self) {}
    }
    impl IntGauge {
        /// Does nothing.
        pub fn inc(&self) {}
        /// Does nothing.
        pub fn dec(&self) {}
        /// Does nothing.
        pub fn set(&self, _value: i64) {}
    }
}

/// Request and attempt durations, in seconds: from a cached rerank (milliseconds) to an image
/// generation or a long speech stream (minutes).
#[cfg(feature = "metrics")]
const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// Time to a speech answer's first byte, in seconds.
#[cfg(feature = "metrics")]
const FIRST_BYTE_BUCKETS: &[f64] = &[
    0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0,
];

/// A metric family that can be built from a name, help, labels and (for histograms) buckets.
#[cfg(feature = "metrics")]
trait Family: Collector + Clone + Sized + 'static {
    fn make(name: &str, help: &str, labels: &[&str], buckets: &[f64]) -> prometheus::Result<Self>;
}

#[cfg(feature = "metrics")]
impl Family for IntCounterVec {
    fn make(name: &str, help: &str, labels: &[&str], _: &[f64]) -> prometheus::Result<Self> {
        IntCounterVec::new(Opts::new(name, help), labels)
    }
}

#[cfg(feature = "metrics")]
impl Family for IntGaugeVec {
    fn make(name: &str, help: &str, labels: &[&str], _: &[f64]) -> prometheus::Result<Self> {
        IntGaugeVec::new(Opts::new(name, help), labels)
    }
}

#[cfg(feature = "metrics")]
impl Family for HistogramVec {
    fn make(name: &str, help: &str, labels: &[&str], buckets: &[f64]) -> prometheus::Result<Self> {
        HistogramVec::new(
            HistogramOpts::new(name, help).buckets(buckets.to_vec()),
            labels,
        )
    }
}

/// The table of metric families: `field: Type = "name", "help", [labels] (, buckets)?;` — one
/// line per metric. docs/guide/metrics.md lists the same.
macro_rules! families {
    ($($field:ident: $ty:ty = $name:literal, $help:literal, [$($label:literal),*] $(, $buckets:expr)?;)*) => {
        /// Every metric family of the gateway, registered in one registry.
        pub struct Families {
            $(pub $field: $ty,)*
        }

        #[cfg(feature = "metrics")]
        impl Families {
            fn register(registry: &Registry) -> prometheus::Result<Families> {
                Ok(Families {
                    $($field: {
                        let family = <$ty as Family>::make(
                            $name,
                            $help,
                            &[$($label),*],
                            families!(@buckets $($buckets)?),
                        )?;
                        registry.register(Box::new(family.clone()))?;
                        family
                    },)*
                })
            }

            /// Register every family in `registry` too (a host's own): the same series,
            /// gathered by both registries.
            fn register_also(&self, registry: &Registry) -> prometheus::Result<()> {
                $(registry.register(Box::new(self.$field.clone()))?;)*
                Ok(())
            }
        }
    };
    (@buckets) => { &[] };
    (@buckets $buckets:expr) => { $buckets };
}

families! {
    requests: IntCounterVec = "switchyard_requests_total",
        "Requests answered, by entry point, operation, public model, HTTP status and error code",
        ["entry_point", "operation", "model", "status", "code"];
    request_duration: HistogramVec = "switchyard_request_duration_seconds",
        "Time from a request's arrival to the end of its answer",
        ["entry_point", "operation", "model"], DURATION_BUCKETS;
    speech_first_byte: HistogramVec = "switchyard_speech_first_byte_seconds",
        "Time from a speech request's arrival to its answer's first byte (the head goes out with the first audio)",
        ["entry_point", "model"], FIRST_BYTE_BUCKETS;
    response_bytes: IntCounterVec = "switchyard_response_body_bytes_total",
        "Answer body bytes sent to clients (audio streams included)",
        ["entry_point", "operation", "model"];
    in_flight: IntGaugeVec = "switchyard_requests_in_flight",
        "Requests being served now, by entry point",
        ["entry_point"];
    upstream_attempts: IntCounterVec = "switchyard_upstream_attempts_total",
        "Attempts sent to providers, by provider account, native model and outcome (success or the error class)",
        ["provider", "native_model", "outcome"];
    upstream_retries: IntCounterVec = "switchyard_upstream_retries_total",
        "Failed attempts that were tried again, by provider account, native model and error class",
        ["provider", "native_model", "error"];
    upstream_duration: HistogramVec = "switchyard_upstream_duration_seconds",
        "Time of one attempt: sending, the answer's head and reading it (speech: up to its first audio)",
        ["provider", "native_model"], DURATION_BUCKETS;
    rerank_tokens: IntCounterVec = "switchyard_rerank_tokens_total",
        "Rerank tokens billed, by public model and API-key name",
        ["model", "key"];
    speech_characters: IntCounterVec = "switchyard_speech_input_characters_total",
        "Speech input characters of answered requests, by public model and API-key name",
        ["model", "key"];
    images_generated: IntCounterVec = "switchyard_images_generated_total",
        "Images delivered, by public model and API-key name",
        ["model", "key"];
    cost_nanos: IntCounterVec = "switchyard_cost_nanos_total",
        "What answered requests cost at their targets' prices, in billionths of the currency's unit, by public model, API-key name and currency",
        ["model", "key", "currency"];
    image_tasks: IntCounterVec = "switchyard_image_tasks_total",
        "Asynchronous image tasks reaching a state (accepted, succeeded, failed), by public model",
        ["model", "state"];
    task_takeovers: IntCounterVec = "switchyard_image_task_takeovers_total",
        "Tasks of a lost instance taken over here, by what was done (resumed, rerun, failed)",
        ["action"];
    store_errors: IntCounterVec = "switchyard_store_errors_total",
        "Shared-store (Redis) calls that failed, by what needed them (request, task, sweep, health, limits)",
        ["during"];
    shed: IntCounterVec = "switchyard_requests_shed_total",
        "Requests answered 503 overloaded, by entry point and cap (connections, in_flight)",
        ["entry_point", "cause"];
    client_timeouts: IntCounterVec = "switchyard_client_timeouts_total",
        "Clients too slow to send: head and idle deadlines (connection dropped) and body deadlines (408)",
        ["entry_point", "phase"];
    rate_limited: IntCounterVec = "switchyard_rate_limited_total",
        "Requests refused 429 rate_limited by a per-key limit, by API-key name and limit",
        ["key", "limit"];
    targets_ejected: IntCounterVec = "switchyard_targets_ejected_total",
        "Times a target (provider account and native model) was ejected for failing",
        ["provider", "native_model"];
    target_ejected_now: IntGaugeVec = "switchyard_target_ejected",
        "Whether a target (provider account and native model) is ejected now (1) or not (0)",
        ["provider", "native_model"];
    target_retired_now: IntGaugeVec = "switchyard_target_retired",
        "Whether a target (provider account and native model) is held out because its provider said the model is gone or refused (1) or not (0)",
        ["provider", "native_model"];
    config_reloads: IntCounterVec = "switchyard_config_reloads_total",
        "Configuration reloads (SIGHUP or the library's reload), by result (success, failure)",
        ["result"];
    config_last_reload_success: IntGaugeVec = "switchyard_config_last_reload_success_timestamp_seconds",
        "When the configuration in force was loaded successfully last, in Unix seconds (the start counts)",
        [];
    ledger_records: IntCounterVec = "switchyard_ledger_records_total",
        "Usage-ledger records by outcome: written to the database, or dropped (the queue was full, or the server stopped before they were written)",
        ["outcome"];
    trace_spans: IntCounterVec = "switchyard_trace_spans_total",
        "Trace spans by outcome: exported to the collector, dropped (the export queue was full), or failed (the collector refused them or could not be reached in time)",
        ["outcome"];
    ledger_held: IntGaugeVec = "switchyard_ledger_records_held",
        "Usage-ledger records in memory not yet written to the database",
        [];
    cache_requests: IntCounterVec = "switchyard_cache_requests_total",
        "Requests to a cache-enabled model by what the response cache did (hit, miss, collapsed onto a request in flight, bypass), by operation and public model",
        ["operation", "model", "result"];
    cache_writes: IntCounterVec = "switchyard_cache_writes_total",
        "Complete answers handed to the response cache, by outcome (stored, too_large, error)",
        ["outcome"];
    cache_bytes: IntGaugeVec = "switchyard_cache_bytes",
        "Bytes the in-memory response cache holds (answers and their overhead, as weighed against cache.max_bytes)",
        [];
    cache_evictions: IntCounterVec = "switchyard_cache_evictions_total",
        "Entries the in-memory response cache evicted to stay within cache.max_bytes",
        [];
    cache_saved_nanos: IntCounterVec = "switchyard_cache_saved_nanos_total",
        "What answers served by the response cache (hits and collapsed requests) cost when the provider made them, in billionths of the currency's unit: money not spent upstream, by public model and currency",
        ["model", "currency"];
    tenants_sync_age: IntGaugeVec = "switchyard_tenants_sync_age_seconds",
        "Seconds since this instance last read the database keys and tenants in full (tenants:); grows while the database is lost",
        [];
    tenants_stale: IntGaugeVec = "switchyard_tenants_stale",
        "Whether this instance serves database keys from a snapshot it cannot refresh (1: the database is lost; 2: lost past tenants.serve_stale_seconds, database keys refused) or not (0)",
        [];
    model_shutdown: IntGaugeVec = "switchyard_model_shutdown_timestamp_seconds",
        "When a model's target (provider account and native model) is shut down by its provider, in Unix seconds (00:00 UTC of the shutdown date); only targets with a known date",
        ["model", "provider", "native_model"];
}

/// What a build without the `metrics` feature says when metrics are asked for.
pub(crate) const NO_METRICS: &str =
    "this build of Switchyard has no metrics (built without the `metrics` \
     cargo feature)";

/// The handle every part of the gateway records through; empty (and free) without a metrics
/// listener. Cloning shares the registry.
#[derive(Clone, Default)]
pub struct Metrics(Option<Arc<Inner>>);

struct Inner {
    registry: Registry,
    families: Families,
}

/// One of a family's series, resolved once and kept (an entry point's in-flight gauge).
pub(crate) type Gauge = Option<IntGauge>;

impl Metrics {
    /// Metrics that record nothing.
    pub fn off() -> Metrics {
        Metrics(None)
    }

    /// A fresh registry with every family of the table.
    #[cfg(feature = "metrics")]
    pub fn on() -> Result<Metrics, String> {
        let registry = Registry::new();
        let families =
            Families::register(&registry).map_err(|e| format!("registering metrics: {e}"))?;
        Ok(Metrics(Some(Arc::new(Inner { registry, families }))))
    }

    /// This build has no metrics (the `metrics` cargo feature is off).
    #[cfg(not(feature = "metrics"))]
    pub fn on() -> Result<Metrics, String> {
        Err(NO_METRICS.into())
    }

    /// Register every family in a host's own `registry` as well, so that what the host's
    /// registry gathers (its own `/metrics`) includes Switchyard's series. An error when the
    /// metrics are off, or a family's name is taken in `registry` already.
    #[cfg(feature = "metrics")]
    pub(crate) fn share_with(&self, registry: &Registry) -> Result<(), String> {
        let inner = self
            .0
            .as_ref()
            .ok_or("the gateway's metrics are off: there are no families to register")?;
        inner
            .families
            .register_also(registry)
            .map_err(|e| format!("registering Switchyard's metrics in the host's registry: {e}"))
    }

    /// Whether anything is recorded (a `metrics:` listener is configured and the build has them).
    pub fn enabled(&self) -> bool {
        self.0.is_some()
    }

    /// The registry to expose (`None` when off).
    pub fn registry(&self) -> Option<&Registry> {
        self.0.as_ref().map(|i| &i.registry)
    }

    /// Record with the families, when on: `metrics.with(|f| ...)`.
    #[inline]
    pub fn with(&self, record: impl FnOnce(&Families)) {
        if let Some(inner) = &self.0 {
            record(&inner.families);
        }
    }

    /// An entry point's in-flight gauge, resolved once for the entry point's life.
    pub fn in_flight(&self, entry_point: &str) -> Gauge {
        let inner = self.0.as_ref()?;
        series(&inner.families.in_flight, &[entry_point])
    }

    /// Hook for per-key limits: a request refused `429 rate_limited` by `key`'s `limit`
    /// (`requests`, `concurrency`, `tokens`, ...).
    pub fn rate_limited(&self, key: &str, limit: &str) {
        self.with(|f| inc(&f.rate_limited, &[key, limit], 1));
    }

    /// Hook for health-aware routing: a target was ejected for failing.
    pub fn target_ejected(&self, provider: &str, native_model: &str) {
        self.with(|f| inc(&f.targets_ejected, &[provider, native_model], 1));
    }

    /// Whether a target is ejected now (1) or not (0).
    pub fn set_target_ejected(&self, provider: &str, native_model: &str, value: i64) {
        self.with(|f| {
            if let Some(g) = series(&f.target_ejected_now, &[provider, native_model]) {
                g.set(value);
            }
        });
    }

    /// Whether a target is held out as retired by its provider now (1) or not (0).
    pub(crate) fn set_target_retired(&self, provider: &str, native_model: &str, value: i64) {
        self.with(|f| {
            if let Some(g) = series(&f.target_retired_now, &[provider, native_model]) {
                g.set(value);
            }
        });
    }

    /// The database keys' snapshot: its age in seconds, and whether it is stale (0 fresh, 1
    /// served stale, 2 refused: stale past its bound).
    #[cfg_attr(not(feature = "ledger"), allow(dead_code))]
    pub(crate) fn tenants_sync(&self, age_seconds: u64, stale: i64) {
        self.with(|f| {
            if let Some(g) = series(&f.tenants_sync_age, &[]) {
                g.set(i64::try_from(age_seconds).unwrap_or(i64::MAX));
            }
            if let Some(g) = series(&f.tenants_stale, &[]) {
                g.set(stale);
            }
        });
    }

    /// The bytes the in-memory response cache holds.
    pub(crate) fn cache_bytes(&self, bytes: u64) {
        self.with(|f| {
            if let Some(g) = series(&f.cache_bytes, &[]) {
                g.set(i64::try_from(bytes).unwrap_or(i64::MAX));
            }
        });
    }

    /// A shared-store call failed while serving `during` (`request`, `task`, `sweep`, `health`, `limits`).
    pub fn store_error(&self, during: &'static str) {
        self.with(|f| inc(&f.store_errors, &[during], 1));
    }

    /// Count a configuration reload; a success (or the first load, `counted: false`) also sets
    /// the last-success time to now.
    pub fn config_loaded(&self, success: bool, counted: bool) {
        self.with(|f| {
            if counted {
                let result = if success { "success" } else { "failure" };
                inc(&f.config_reloads, &[result], 1);
            }
            if success {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64);
                if let Some(g) = series(&f.config_last_reload_success, &[]) {
                    g.set(now);
                }
            }
        });
    }
}

impl Metrics {
    /// Replace the shutdown-time series with `series` (public model, provider account, native
    /// model, Unix seconds): at start and on every reload, so removed models leave no series.
    pub fn set_model_shutdowns<'a>(
        &self,
        series_list: impl IntoIterator<Item = (&'a str, &'a str, &'a str, i64)>,
    ) {
        self.with(|f| {
            f.model_shutdown.reset();
            for (model, provider, native, secs) in series_list {
                if let Some(g) = series(&f.model_shutdown, &[model, provider, native]) {
                    g.set(secs);
                }
            }
        });
    }
}

/// The series of `family` with `labels`. The label count is fixed by the table, so the lookup
/// fails only on a programming error, logged rather than panicking.
#[cfg(feature = "metrics")]
fn series<B: MetricVecBuilder>(family: &MetricVec<B>, labels: &[&str]) -> Option<B::M> {
    match family.get_metric_with_label_values(labels) {
        Ok(m) => Some(m),
        Err(e) => {
            log::debug!("metric series {labels:?}: {e}");
            None
        }
    }
}

/// No series without the `metrics` feature.
#[cfg(not(feature = "metrics"))]
fn series(family: &IntGaugeVec, labels: &[&str]) -> Option<IntGauge> {
    family.get_metric_with_label_values(labels).ok()
}

/// Add `by` to a counter series.
#[cfg(feature = "metrics")]
pub(crate) fn inc(family: &IntCounterVec, labels: &[&str], by: u64) {
    if let Some(c) = series(family, labels) {
        c.inc_by(by);
    }
}

/// Records nothing: this build has no metrics.
#[cfg(not(feature = "metrics"))]
pub(crate) fn inc(_family: &IntCounterVec, _labels: &[&str], _by: u64) {}

/// Records nothing: this build has no metrics.
#[cfg(not(feature = "metrics"))]
pub(crate) fn observe(_family: &HistogramVec, _labels: &[&str], _value: f64) {}

/// Observe `value` in a histogram series.
#[cfg(feature = "metrics")]
pub(crate) fn observe(family: &HistogramVec, labels: &[&str], value: f64) {
    if let Some(h) = series(family, labels) {
        h.observe(value);
    }
}

/// The label for a principal in usage metrics: an API key's configured name; every JWT subject
/// counts as `jwt` (subjects are unbounded and chosen by the token's issuer).
pub(crate) fn key_label(principal_id: &str) -> &str {
    principal_id.strip_prefix("key:").unwrap_or("jwt")
}

/// Nothing to expose: this build has no metrics.
#[cfg(not(feature = "metrics"))]
pub fn encode(_registry: &Registry) -> Result<Vec<u8>, String> {
    Err(NO_METRICS.into())
}

/// The text exposition of `registry`.
#[cfg(feature = "metrics")]
pub fn encode(registry: &Registry) -> Result<Vec<u8>, String> {
    use prometheus::Encoder;
    let mut out = Vec::with_capacity(16 * 1024);
    prometheus::TextEncoder::new()
        .encode(&registry.gather(), &mut out)
        .map_err(|e| format!("encoding metrics: {e}"))?;
    Ok(out)
}

#[cfg(all(test, feature = "metrics"))]
mod tests {
    use super::*;

    #[test]
    fn every_family_registers_and_encodes() {
        let m = Metrics::on().unwrap();
        m.with(|f| inc(&f.requests, &["a", "rerank", "m", "200", ""], 2));
        m.rate_limited("k", "requests");
        let text = String::from_utf8(encode(m.registry().unwrap()).unwrap()).unwrap();
        assert!(text.contains(
            "switchyard_requests_total{code=\"\",entry_point=\"a\",model=\"m\",operation=\"rerank\",status=\"200\"} 2"
        ));
        assert!(text.contains("switchyard_rate_limited_total{key=\"k\",limit=\"requests\"} 1"));
    }

    #[test]
    fn a_host_registry_gathers_the_families() {
        let m = Metrics::on().unwrap();
        let host = Registry::new();
        m.share_with(&host).unwrap();
        m.rate_limited("k", "requests");
        let text = String::from_utf8(encode(&host).unwrap()).unwrap();
        assert!(text.contains("switchyard_rate_limited_total{key=\"k\",limit=\"requests\"} 1"));
        // Twice in one registry: the names are taken.
        assert!(m.share_with(&host).unwrap_err().contains("host's registry"));
        assert!(Metrics::off().share_with(&Registry::new()).is_err());
    }

    #[test]
    fn off_records_nothing_and_has_no_registry() {
        let m = Metrics::off();
        m.rate_limited("k", "requests");
        assert!(m.registry().is_none());
        assert!(m.in_flight("a").is_none());
    }

    #[test]
    fn jwt_subjects_are_not_labels() {
        assert_eq!(key_label("key:alice"), "alice");
        assert_eq!(key_label("jwt:someone@example.com"), "jwt");
    }
}
