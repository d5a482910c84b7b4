//! The `switchyard:` section of the configuration file, as written (after `${ENV}` interpolation).
//!
//! Every key has a default here and is documented in `conf/switchyard.yaml`. Unknown keys are not
//! silently ignored: the loader reports each one with its path (see `config::load`).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::auth::{AuthSettings, JwtSettings};

/// The `switchyard:` section as written: the gateway's own settings (Pingora's keys sit beside
/// it, at the top level of the file).
#[derive(Debug, Deserialize)]
pub(crate) struct GatewayFile {
    /// Required by the binary; a gateway hosted in another Pingora server may have none
    /// (`config::Sockets::Host`).
    #[serde(default)]
    pub(crate) listeners: Vec<ListenerFile>,
    /// `limits:` — the largest request body per operation.
    #[serde(default)]
    pub(crate) limits: LimitsFile,
    /// `retries:` — how many retries a request may ask for, and how they are spaced.
    #[serde(default)]
    pub(crate) retries: RetriesFile,
    /// `auth:` — who may call: API keys, JWT verification and per-caller limits.
    #[serde(default)]
    pub(crate) auth: AuthSettings,
    /// `providers:` — provider accounts by name: kind, key, endpoints, timeouts.
    #[serde(default)]
    pub(crate) providers: BTreeMap<String, ProviderFile>,
    /// `models:` — the public model names clients send, each served by provider targets.
    #[serde(default)]
    pub(crate) models: BTreeMap<String, ModelFile>,
    /// Seconds a resolved provider address is reused.
    #[serde(default = "d_dns_ttl")]
    pub(crate) dns_ttl_seconds: u64,
    /// `images:` — image downloads, hosted images and asynchronous image tasks.
    #[serde(default)]
    pub(crate) images: ImagesFile,
    /// `store:` — where state shared between instances lives (Redis, else this process's memory).
    #[serde(default)]
    pub(crate) store: StoreFile,
    /// `clients:` — how long the gateway waits for what clients send.
    #[serde(default)]
    pub(crate) clients: ClientsFile,
    /// Prometheus metrics on their own listener; absent: no listener, and nothing is recorded.
    #[serde(default)]
    pub(crate) metrics: Option<MetricsFile>,
    /// `access_log:` — the shape of the access line.
    #[serde(default)]
    pub(crate) access_log: AccessLogFile,
    /// How requests are spread over a model's targets and when failing targets are ejected.
    #[serde(default)]
    pub(crate) routing: RoutingFile,
    /// The usage ledger in PostgreSQL; absent (or an empty `database_url`): none.
    #[serde(default)]
    pub(crate) ledger: Option<LedgerFile>,
    /// What one unit of a currency is worth in another, for money budgets in a currency some
    /// prices are not in: `CNY: {USD: "0.14"}` (1 CNY = 0.14 USD). Only the direction stated
    /// is used.
    #[serde(default)]
    pub(crate) currency_rates: BTreeMap<String, BTreeMap<String, serde_yaml::Value>>,
    /// `cache:` — the response cache's store (models opt in with their own `cache:`).
    #[serde(default)]
    pub(crate) cache: super::cache::CacheFile,
    /// OpenTelemetry traces over OTLP/HTTP; absent (or an empty `endpoint`): none exported.
    #[serde(default)]
    pub(crate) tracing: Option<TracingFile>,
    /// Keys and tenants as data, in the ledger's PostgreSQL; absent: none (unless `admin:`).
    #[serde(default)]
    pub(crate) tenants: Option<TenantsFile>,
    /// The management API's listener; absent: none.
    #[serde(default)]
    pub(crate) admin: Option<AdminFile>,
}

/// `tenants:` as written.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct TenantsFile {
    /// The schema of the tenants' tables (default: the ledger's).
    pub(crate) schema: Option<String>,
    /// Seconds between two full refreshes, the safety net beside LISTEN/NOTIFY (default 30).
    pub(crate) refresh_seconds: u64,
    /// Seconds the keys loaded last keep being served while the database is lost (default 3600).
    pub(crate) serve_stale_seconds: u64,
}

impl Default for TenantsFile {
    fn default() -> Self {
        TenantsFile {
            schema: None,
            refresh_seconds: 30,
            serve_stale_seconds: 3600,
        }
    }
}

/// One administrator's key as written: a name and exactly one of `key` or `sha256`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AdminKeyFile {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) key: Option<String>,
    #[serde(default)]
    pub(crate) sha256: Option<String>,
}

/// `admin:` as written.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct AdminFile {
    /// `IP:port` of the management listener.
    pub(crate) address: String,
    /// The administrators' keys (never caller keys).
    pub(crate) keys: Vec<AdminKeyFile>,
    /// Administrators' JWTs (the `scope` claim must hold `switchyard:admin`).
    pub(crate) jwt: Option<JwtSettings>,
    /// Failed logins per client IP per minute before `429 too_many_failed_logins` (default 10).
    pub(crate) failed_logins_per_minute: u64,
}

impl Default for AdminFile {
    fn default() -> Self {
        AdminFile {
            address: String::new(),
            keys: Vec::new(),
            jwt: None,
            failed_logins_per_minute: 10,
        }
    }
}

/// `tracing:` — spans exported to an OpenTelemetry collector off the request path.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct TracingFile {
    /// The collector's OTLP/HTTP traces URL (`http://host:4318`; `/v1/traces` when no path).
    pub(crate) endpoint: String,
    /// The OTLP transport: `http/protobuf`.
    pub(crate) protocol: String,
    /// Headers sent with each export (a collector's API key).
    pub(crate) headers: BTreeMap<String, String>,
    /// The share of new traces sampled, 0 to 1 (default 1); a caller's `sampled` flag is followed.
    pub(crate) sample_ratio: f64,
    /// Most spans held waiting for export (default 8192); beyond, spans are dropped and counted.
    pub(crate) queue_spans: usize,
    /// Most spans per export request (default 512).
    pub(crate) batch_spans: usize,
    /// Longest a span waits for its batch, in milliseconds (default 1000).
    pub(crate) flush_interval_ms: u64,
    /// Longest one export may take, in milliseconds (default 5000).
    pub(crate) timeout_ms: u64,
    /// The resource's `service.name` (default `switchyard`).
    pub(crate) service_name: String,
}

impl Default for TracingFile {
    fn default() -> Self {
        TracingFile {
            endpoint: String::new(),
            protocol: "http/protobuf".into(),
            headers: BTreeMap::new(),
            sample_ratio: 1.0,
            queue_spans: 8192,
            batch_spans: 512,
            flush_interval_ms: 1000,
            timeout_ms: 5000,
            service_name: "switchyard".into(),
        }
    }
}

/// `ledger:` — one record per finished request, written in batches to PostgreSQL off the
/// request path (the `ledger` module).
#[derive(Debug, Deserialize)]
#[serde(default)]
pub(crate) struct LedgerFile {
    /// A libpq-style URL or `key=value` string (`postgresql://user:pass@host:5432/db`), normally
    /// `${SWITCHYARD_LEDGER_DATABASE_URL:-}`; empty: no ledger.
    pub(crate) database_url: String,
    /// The PostgreSQL schema holding the `usage_records` table (created when absent).
    pub(crate) schema: String,
    /// Most records held in memory waiting to be written (while the database is slow or down);
    /// past it new records are dropped and counted.
    pub(crate) queue_records: usize,
    /// Most records written by one statement.
    pub(crate) batch_records: usize,
    /// A record waits at most this long before its batch is written.
    pub(crate) flush_interval_ms: u64,
    /// Longest one connection attempt or one batch's write may take before it is abandoned and
    /// retried.
    pub(crate) write_timeout_ms: u64,
    /// Longest one read on a request's behalf (`GET /api/v1/usage`) may take, connecting
    /// included, before it is answered `503 ledger_unavailable`.
    pub(crate) read_timeout_ms: u64,
}

impl Default for LedgerFile {
    fn default() -> Self {
        LedgerFile {
            database_url: String::new(),
            schema: "public".into(),
            queue_records: 100_000,
            batch_records: 500,
            flush_interval_ms: 1_000,
            write_timeout_ms: 10_000,
            read_timeout_ms: 2_000,
        }
    }
}

/// `routing:` — health-aware routing.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub(crate) struct RoutingFile {
    /// `routing.ejection:` — when a failing target is ejected, and for how long.
    pub(crate) ejection: EjectionFile,
}

/// `routing.ejection:` — outlier detection per target (provider account + native model).
#[derive(Debug, Deserialize)]
#[serde(default)]
pub(crate) struct EjectionFile {
    /// Failures in a row (connect errors, timeouts, 5xx, wrong answers) that eject a target.
    pub(crate) consecutive_failures: u32,
    /// The first ejection's length; each further one in a row doubles it.
    pub(crate) base_cooldown_ms: u64,
    /// The longest an ejection lasts.
    pub(crate) max_cooldown_ms: u64,
    /// How long a target whose provider says its model is gone (retired, not enabled for the
    /// account) is kept out before one request probes it again.
    pub(crate) retired_cooldown_ms: u64,
}

impl Default for EjectionFile {
    fn default() -> Self {
        EjectionFile {
            consecutive_failures: 3,
            base_cooldown_ms: 5_000,
            max_cooldown_ms: 300_000,
            retired_cooldown_ms: 21_600_000,
        }
    }
}

/// `metrics:` — where `GET /metrics` is served (never on an entry point).
#[derive(Debug, Deserialize)]
pub(crate) struct MetricsFile {
    /// `IP:port` of the metrics listener, e.g. `127.0.0.1:9090`; it must differ from every
    /// entry point's.
    pub(crate) address: String,
}

/// `access_log:` — the shape of each access line (target `access`).
#[derive(Debug, Deserialize)]
#[serde(default)]
pub(crate) struct AccessLogFile {
    /// `text` (one `key=value` line, the default) or `json` (one JSON object per line).
    pub(crate) format: String,
}

impl Default for AccessLogFile {
    fn default() -> Self {
        AccessLogFile {
            format: "text".into(),
        }
    }
}

/// How long the gateway waits for what a client sends (never for how long an answer streams).
#[derive(Debug, Deserialize)]
#[serde(default)]
pub(crate) struct ClientsFile {
    /// A request head must arrive whole within this time of its first byte (the first request's:
    /// of the connection being accepted). HTTP/1.x.
    pub(crate) head_timeout_ms: u64,
    /// A request body may take this long, plus one second per `body_min_rate_bytes` received.
    pub(crate) body_timeout_ms: u64,
    /// The slowest average rate a request body may arrive at, once `body_timeout_ms` is spent.
    pub(crate) body_min_rate_bytes: u64,
    /// An idle connection (between HTTP/1.1 requests, or an HTTP/2 connection with no stream)
    /// is closed after this long.
    pub(crate) idle_timeout_ms: u64,
    /// A client that takes none of an answer's bytes for this long is cut off.
    pub(crate) write_timeout_ms: u64,
}

impl Default for ClientsFile {
    fn default() -> Self {
        ClientsFile {
            head_timeout_ms: 10_000,
            body_timeout_ms: 10_000,
            body_min_rate_bytes: 8_192,
            idle_timeout_ms: 60_000,
            write_timeout_ms: 60_000,
        }
    }
}

/// Where state shared between instances lives (hosted images, tasks): Redis when one of
/// `redis_url` (one server), `redis_cluster` (a Redis Cluster's seed nodes) or `redis_sentinel`
/// is set, else this process's memory.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub(crate) struct StoreFile {
    /// One Redis server: a `redis://` or `rediss://` (TLS) URL; empty or blank counts as unset.
    pub(crate) redis_url: Option<String>,
    /// Seed node URLs of a Redis Cluster.
    pub(crate) redis_cluster: Option<Vec<String>>,
    /// A primary found through Sentinel.
    pub(crate) redis_sentinel: Option<SentinelFile>,
    /// Prepended to every Redis key, so gateways can share one Redis (default `switchyard:`).
    pub(crate) key_prefix: Option<String>,
    /// Longest a store call may take (connecting included) before it fails with 503.
    pub(crate) timeout_ms: Option<u64>,
}

/// `store.redis_sentinel`: the sentinels, the name they know the primary by, and how to log in
/// to the data nodes.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub(crate) struct SentinelFile {
    /// The sentinels' URLs (`redis://[user:password@]host:port`: their own credentials).
    pub(crate) urls: Vec<String>,
    /// The monitored primary's name (`sentinel monitor <name> ...`).
    pub(crate) master: String,
    /// Credentials and database on the primary.
    pub(crate) username: Option<String>,
    /// Password on the data nodes (the sentinels' own goes in their URLs).
    pub(crate) password: Option<String>,
    /// Database number on the data nodes (default 0).
    pub(crate) db: i64,
    /// Tasks and hosted files are acknowledged only once this many replicas hold them (`WAIT`).
    pub(crate) min_replicas_acked: u32,
}

/// Image inputs the gateway downloads, and images it hosts.
#[derive(Debug, Deserialize)]
#[serde(default)]
pub(crate) struct ImagesFile {
    /// Let `image`/`mask` URLs reach loopback, private and link-local addresses (off: SSRF guard).
    pub(crate) allow_private_urls: bool,
    /// Largest `image`/`mask` the gateway downloads.
    pub(crate) max_download_bytes: usize,
    /// Time allowed to connect to and read an `image`/`mask` URL.
    pub(crate) download_timeout_ms: u64,
    /// Seconds a hosted image (`GET /api/v1/files/{id}`) stays available.
    pub(crate) file_ttl_seconds: u64,
    /// Most bytes of hosted images kept in memory (oldest go first).
    pub(crate) file_store_bytes: usize,
    /// Without Redis: most bytes of tasks and synchronous answers kept in memory (the oldest
    /// finished ones go first; running tasks are always kept).
    pub(crate) task_store_bytes: usize,
    /// Seconds a finished asynchronous task can be read (404 after).
    pub(crate) task_ttl_seconds: u64,
    /// Scheme and host the links to hosted images start with (e.g. `https://ai.example.com`);
    /// unset: the request's own `Host`.
    pub(crate) public_base_url: Option<String>,
    /// How often a natively asynchronous provider's task is polled.
    pub(crate) poll_interval_ms: u64,
    /// Longest a synchronous request to a natively asynchronous model waits (then 504).
    pub(crate) sync_wait_seconds: u64,
    /// Longest an asynchronous task may run, from its creation (then `failed`, `upstream_timeout`).
    pub(crate) task_wait_seconds: u64,
    /// How often the instance running a task proves it is alive.
    pub(crate) task_heartbeat_ms: u64,
    /// Silence after which a running task's instance is taken for dead and another takes over.
    pub(crate) task_lost_after_ms: u64,
}

impl Default for ImagesFile {
    fn default() -> Self {
        ImagesFile {
            allow_private_urls: false,
            max_download_bytes: 20 << 20,
            download_timeout_ms: 15_000,
            file_ttl_seconds: 3_600,
            file_store_bytes: 512 << 20,
            task_store_bytes: 8 << 20,
            task_ttl_seconds: 86_400,
            public_base_url: None,
            poll_interval_ms: 2_000,
            sync_wait_seconds: 300,
            task_wait_seconds: 3_600,
            task_heartbeat_ms: 10_000,
            task_lost_after_ms: 45_000,
        }
    }
}

/// One entry point under `listeners:`: where it listens and how much it takes on.
#[derive(Debug, Deserialize)]
pub(crate) struct ListenerFile {
    /// The entry point's name, unique among `listeners` (logs and access lines carry it).
    pub(crate) name: String,
    /// Which providers' `region_base_urls` this entry point's requests use (default `default`).
    #[serde(default = "d_region")]
    pub(crate) region: String,
    /// `IP:port` to listen on, e.g. `127.0.0.1:8080`.
    pub(crate) address: String,
    /// Open client connections this entry point serves; requests on connections past it are
    /// answered `503 overloaded` and the connection is closed.
    #[serde(default = "d_max_connections")]
    pub(crate) max_connections: usize,
    /// Requests this entry point handles at once; past it, `503 overloaded` at once.
    #[serde(default = "d_max_in_flight")]
    pub(crate) max_in_flight: usize,
    /// Serve TLS on this entry point (HTTP/2 by ALPN, HTTP/1.1 alongside); unset: plain TCP.
    #[serde(default)]
    pub(crate) tls: Option<ListenerTlsFile>,
}

fn d_max_connections() -> usize {
    8_192
}

fn d_max_in_flight() -> usize {
    2_048
}

/// A listener's certificate: PEM files, checked at load and re-read when they change.
#[derive(Debug, Deserialize)]
pub(crate) struct ListenerTlsFile {
    /// The certificate chain, the server's own certificate first.
    pub(crate) cert_file: String,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub(crate) key_file: String,
    /// How often the two files are checked for a replacement (0: never, only at start).
    #[serde(default = "d_tls_reload_interval_ms")]
    pub(crate) reload_interval_ms: u64,
}

/// `limits:` — the largest request body per operation, in bytes (413 past it).
#[derive(Debug, Deserialize)]
#[serde(default)]
pub(crate) struct LimitsFile {
    /// Largest speech request body (default 1 MiB).
    pub(crate) speech_body_bytes: usize,
    /// Largest image request body, base64 reference images included (default 32 MiB).
    pub(crate) images_body_bytes: usize,
    /// Largest rerank request body (default 16 MiB).
    pub(crate) rerank_body_bytes: usize,
}

impl Default for LimitsFile {
    fn default() -> Self {
        LimitsFile {
            speech_body_bytes: 1 << 20,
            images_body_bytes: 32 << 20,
            rerank_body_bytes: 16 << 20,
        }
    }
}

/// `retries:` — the most retries a request may ask for, and the backoff between attempts.
#[derive(Debug, Deserialize)]
#[serde(default)]
pub(crate) struct RetriesFile {
    /// The largest `retries` a request may ask for (default 5).
    pub(crate) max: u32,
    /// The first backoff, in ms; it doubles on each retry, with jitter (default 200).
    pub(crate) initial_backoff_ms: u64,
    /// The longest backoff, in ms (default 5000).
    pub(crate) max_backoff_ms: u64,
    /// A provider's `Retry-After` is waited at most this long, in ms (default 20000).
    pub(crate) max_retry_after_ms: u64,
}

impl Default for RetriesFile {
    fn default() -> Self {
        RetriesFile {
            max: 5,
            initial_backoff_ms: 200,
            max_backoff_ms: 5_000,
            max_retry_after_ms: 20_000,
        }
    }
}

/// One provider account under `providers:`.
#[derive(Debug, Deserialize)]
pub(crate) struct ProviderFile {
    /// The provider's kind (`kind: openai`, …) and the settings only that kind takes, read into
    /// the kind's typed config by the loader (so a bad kind is one problem among the others).
    #[serde(flatten)]
    pub(crate) kind: serde_yaml::Mapping,
    /// Empty disables the provider (its models answer 503 `model_unavailable`).
    #[serde(default)]
    pub(crate) api_key: String,
    /// Required for every kind but `local`.
    #[serde(default)]
    pub(crate) base_url: Option<String>,
    /// Region name → base URL, for entry points whose `region` matches.
    #[serde(default)]
    pub(crate) region_base_urls: BTreeMap<String, String>,
    /// `timeouts:` — connect, read, write and idle deadlines towards this provider.
    #[serde(default)]
    pub(crate) timeouts: TimeoutsFile,
    /// Largest non-streamed answer read from the provider, in bytes (default 64 MiB).
    #[serde(default = "d_max_response")]
    pub(crate) max_response_bytes: usize,
    /// Hosts result URLs may be downloaded from (absent: the kind's default, see docs/guide/providers.md).
    #[serde(default)]
    pub(crate) result_hosts: Option<Vec<String>>,
    /// `tls:` — which certificate authorities this provider's certificates must chain to.
    #[serde(default)]
    pub(crate) tls: ProviderTlsFile,
    /// Whether each attempt sends the provider a W3C `traceparent` (default on; off for a
    /// provider that refuses unknown headers or should not learn the caller's trace).
    #[serde(default = "d_true")]
    pub(crate) trace_context: bool,
}

/// How the provider's TLS certificates are verified.
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub(crate) struct ProviderTlsFile {
    /// PEM file of the certificate authorities this provider's certificates must chain to,
    /// trusted instead of the system roots for every host reached for the provider (its
    /// `base_url`, `region_base_urls`, result and polling URLs). Unset: the system roots.
    pub(crate) ca_file: Option<String>,
}

/// A provider's `timeouts:`, in milliseconds.
#[derive(Debug, Deserialize)]
#[serde(default)]
pub(crate) struct TimeoutsFile {
    /// Time to open the TCP connection (default 5000).
    pub(crate) connect_ms: u64,
    /// Time to connect, TLS handshake included (default 10000).
    pub(crate) total_connect_ms: u64,
    /// Longest wait for one read of the answer (default 120000).
    pub(crate) read_ms: u64,
    /// Longest wait for one write of the request (default 30000).
    pub(crate) write_ms: u64,
    /// How long a pooled connection may sit unused before it is closed (default 60000).
    pub(crate) idle_ms: u64,
}

impl Default for TimeoutsFile {
    fn default() -> Self {
        TimeoutsFile {
            connect_ms: 5_000,
            total_connect_ms: 10_000,
            read_ms: 120_000,
            write_ms: 30_000,
            idle_ms: 60_000,
        }
    }
}

/// One public model under `models:`: its capability family and the targets that serve it.
#[derive(Debug, Deserialize)]
pub(crate) struct ModelFile {
    /// Capability family from the built-in table (see docs/guide/families.md).
    pub(crate) family: String,
    /// The provider accounts and native models that serve it (retries move between them).
    pub(crate) targets: Vec<TargetFile>,
    /// Any of the family's capabilities, changed for this model (keys as in
    /// `src/caps/families.yaml`). Kept as YAML here: which keys exist depends on the family's
    /// operation, so `crate::caps` reads and checks it (unknown keys included) once the family is
    /// known.
    #[serde(default)]
    pub(crate) capabilities: Option<serde_yaml::Value>,
    /// Speech: voice used when the request names none (default: the family's). Shorthand for
    /// `capabilities.default_voice`.
    #[serde(default)]
    pub(crate) default_voice: Option<String>,
    /// Speech: longest `input`; rerank: longest `query` (characters). Default: the family's.
    /// Shorthand for `capabilities.input_limit` / `capabilities.query_limit` in characters.
    #[serde(default)]
    pub(crate) max_input_chars: Option<usize>,
    /// Rerank: most documents per request. Default: the family's. Shorthand for
    /// `capabilities.max_documents`.
    #[serde(default)]
    pub(crate) max_documents: Option<usize>,
    /// Speech: voice names clients send (`alloy`, `nova`, …) → the provider's voice sent instead
    /// (checked by `config::voice_map`).
    #[serde(default)]
    pub(crate) voice_map: BTreeMap<String, String>,
    /// Lifecycle overrides for every target of the model (a target's own `lifecycle:` wins key by
    /// key): dates, replacement, `still_available` (see `caps::lifecycle::Override`).
    #[serde(default)]
    pub(crate) lifecycle: Option<crate::caps::lifecycle::Override>,
    /// The price of every target of the model, over the built-in `src/caps/prices.yaml` entry
    /// (a target's own `price:` wins key by key), or `unpriced`. Kept as YAML: `config::prices`
    /// reads it with `caps::prices`, which names every problem by its path.
    #[serde(default)]
    pub(crate) price: Option<serde_yaml::Value>,
    /// The public model that serves this one's requests once every target of it is past its
    /// shutdown.
    #[serde(default)]
    pub(crate) successor: Option<String>,
    /// Its answers kept in the response cache (speech and rerank; absent: not cached).
    #[serde(default)]
    pub(crate) cache: Option<super::cache::ModelCacheFile>,
}

/// One target of a model: a provider account and its native model.
#[derive(Debug, Deserialize)]
pub(crate) struct TargetFile {
    /// The account's name under `providers:`.
    pub(crate) provider: String,
    /// The provider's own model name.
    pub(crate) model: String,
    /// Share of first attempts among the model's healthy targets (0 to 100; 0: standby, used
    /// only when every other target is ejected).
    #[serde(default = "d_weight")]
    pub(crate) weight: u32,
    /// This target's lifecycle overrides (over the model's `lifecycle:`).
    #[serde(default)]
    pub(crate) lifecycle: Option<crate::caps::lifecycle::Override>,
    /// This target's price (over the model's `price:`), or `unpriced`.
    #[serde(default)]
    pub(crate) price: Option<serde_yaml::Value>,
}

fn d_weight() -> u32 {
    1
}

fn d_region() -> String {
    "default".into()
}
fn d_tls_reload_interval_ms() -> u64 {
    10_000
}
fn d_dns_ttl() -> u64 {
    30
}
fn d_max_response() -> usize {
    64 << 20
}

fn d_true() -> bool {
    true
}
