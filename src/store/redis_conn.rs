//! The connection to the Redis the gateway's instances share, as every Redis-backed store uses
//! it (the hosted-file store and the task store).
//!
//! Three ways to reach it ([`Topology`]): one server (`redis_url`), a Redis Cluster (seed nodes;
//! the cluster client follows `MOVED`/`ASK` and reshards), or a primary found through Sentinel
//! (the primary is asked of the sentinels on every fresh connection, so after a failover the
//! next call lands on the new primary). Callers see one connection type, [`StoreConn`], that
//! implements [`redis::aio::ConnectionLike`]: they write `redis::cmd(..).query_async(&mut conn)`
//! whatever the topology. In a cluster every script and multi-key command must touch keys of
//! one hash slot: keys are named `{<key_prefix><scope>}:<rest>`, the braces being the hash tag
//! (<https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#hash-tags>).
//!
//! Redis being down must cost the gateway the requests that need it, never its startup or its
//! other traffic. So:
//! - making a [`RedisConn`] does no I/O and needs no async runtime (the gateway builds its state
//!   before Pingora starts its runtimes); the connection is opened on first use;
//! - every call is bounded by [`RedisSettings::timeout`], connecting included, and fails with
//!   [`StoreError::Unavailable`] when the time is up or Redis refuses;
//! - after a failure that may have broken the connection, the next call starts from a fresh one,
//!   and the failing call itself tries once more on a fresh connection while its time lasts (a
//!   Redis restart then costs no request at all). No background loop keeps dialing a Redis that
//!   is down: the calls themselves are the retries, so a store recovers by itself as soon as
//!   Redis answers again. Because of that retry, an operation given to [`RedisConn::run`] must be
//!   safe to apply twice (its first reply may be lost after Redis applied it).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisError, RedisFuture, Value};
use tokio::time::Instant;

use crate::store::files::StoreError;

/// How the gateway reaches its Redis.
#[derive(Clone, PartialEq, Eq)]
pub enum Topology {
    /// One server: `redis://[user:password@]host[:port][/db]`, or `rediss://` for TLS (server
    /// certificates are checked against the system's roots).
    Single {
        /// The server's URL.
        url: String,
    },
    /// A Redis Cluster, found from these seed nodes' URLs (any reachable one is enough).
    Cluster {
        /// The seed nodes' URLs.
        nodes: Vec<String>,
    },
    /// The primary that the sentinels at `sentinels` (URLs) name `master`.
    Sentinel {
        /// The sentinels' URLs (with their own credentials).
        sentinels: Vec<String>,
        /// The name the sentinels monitor the primary under.
        master: String,
        /// Credentials for the data nodes (the sentinels' own go in their URLs).
        username: Option<String>,
        /// Password on the data nodes.
        password: Option<String>,
        /// Database number on the data nodes.
        db: i64,
        /// Writes that must survive a failover (tasks, hosted files) are acknowledged only once
        /// this many replicas have them (`WAIT`); 0: as soon as the primary has them.
        min_replicas_acked: u32,
    },
}

/// Where the Redis is and how long a call may take.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisSettings {
    /// Which Redis: one server, a cluster, or a primary found through Sentinel.
    pub topology: Topology,
    /// Prepended to every key, so several gateways (or other users) can share one Redis.
    pub key_prefix: String,
    /// The most one store call may take, connecting included; also the bound on each connection
    /// attempt and each Redis reply.
    pub timeout: Duration,
}

impl RedisSettings {
    /// Default key prefix.
    pub const DEFAULT_KEY_PREFIX: &'static str = "switchyard:";
    /// Default bound on one call: a Redis near the gateway answers in milliseconds, and a few-MB
    /// image fits well within this even over TLS.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

    /// Settings for the single Redis at `url`, with the default prefix and timeout.
    pub fn new(url: impl Into<String>) -> RedisSettings {
        RedisSettings::with_topology(Topology::Single { url: url.into() })
    }

    /// Settings for `topology`, with the default prefix and timeout.
    pub fn with_topology(topology: Topology) -> RedisSettings {
        RedisSettings {
            topology,
            key_prefix: Self::DEFAULT_KEY_PREFIX.to_string(),
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }
}

// By hand, because URLs and the data nodes' password may carry secrets and settings end up in
// logs.
impl std::fmt::Debug for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |urls: &[String]| urls.iter().map(|u| redact(u)).collect::<Vec<_>>();
        match self {
            Topology::Single { url } => {
                f.debug_struct("Single").field("url", &redact(url)).finish()
            }
            Topology::Cluster { nodes } => f
                .debug_struct("Cluster")
                .field("nodes", &redacted(nodes))
                .finish(),
            Topology::Sentinel {
                sentinels,
                master,
                username,
                password,
                db,
                min_replicas_acked,
            } => f
                .debug_struct("Sentinel")
                .field("sentinels", &redacted(sentinels))
                .field("master", master)
                .field("username", username)
                .field("password", &password.as_ref().map(|_| "***"))
                .field("db", db)
                .field("min_replicas_acked", min_replicas_acked)
                .finish(),
        }
    }
}

impl std::fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSettings")
            .field("topology", &self.topology)
            .field("key_prefix", &self.key_prefix)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// `url` with any user information (where a password lives) replaced.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// Settings that cannot work whatever Redis does: a configuration error, reported at startup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidRedisSettings {
    /// A URL that does not parse, or that the Redis client refuses.
    #[error("invalid redis url {url}: {reason}")]
    Url {
        /// The URL, with any credentials in it blanked.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// `timeout` is zero (`store.timeout_ms: 0`).
    #[error("redis timeout must be more than zero")]
    ZeroTimeout,
    /// A topology that cannot work (no nodes, no sentinels, no primary's name) or that the Redis
    /// client refuses; the message says which.
    #[error("{0}")]
    Topology(String),
}

/// The connection a store call runs on, whatever the topology. Cheap to clone (each variant is a
/// handle to a multiplexed connection).
#[derive(Clone)]
pub enum StoreConn {
    /// One server, through a connection manager.
    Single(ConnectionManager),
    /// A Redis Cluster: each command goes to its slot's node.
    Cluster(ClusterConnection),
    /// The primary the sentinels named when the connection was opened.
    Sentinel(MultiplexedConnection),
}

impl redis::aio::ConnectionLike for StoreConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            StoreConn::Single(c) => c.req_packed_command(cmd),
            StoreConn::Cluster(c) => c.req_packed_command(cmd),
            StoreConn::Sentinel(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            StoreConn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            StoreConn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            StoreConn::Sentinel(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            StoreConn::Single(c) => c.get_db(),
            StoreConn::Cluster(c) => c.get_db(),
            StoreConn::Sentinel(c) => c.get_db(),
        }
    }
}

/// What makes connections, per topology.
enum Dialer {
    Single {
        client: redis::Client,
        config: ConnectionManagerConfig,
    },
    Cluster(ClusterClient),
    Sentinel {
        /// Behind an async lock: asking the sentinels needs `&mut` (it caches their
        /// connections), and one lookup at a time is enough.
        sentinel: tokio::sync::Mutex<Sentinel>,
        master: String,
        node: SentinelNodeConnectionInfo,
        config: AsyncConnectionConfig,
        min_replicas_acked: u32,
    },
}

/// The connections in use, one per thread that has called, each numbered so a failed call
/// discards only the one it used.
///
/// Why per thread: a connection's I/O task runs on the runtime of the call that opened it. With
/// one connection for the process, opened by whichever came first (usually a background service
/// on a thread of its own), every request's call woke that thread and was woken back by it: two
/// cross-thread wake-ups per call, which doubled a rerank request's CPU with limits in Redis in
/// the throughput bench. A worker thread's calls now go over a connection its own runtime
/// drives. Threads are few and long-lived (Pingora's workers and background services); at most
/// [`MAX_CONNECTIONS`] are kept, the oldest dropped past that.
struct Current {
    generation: u64,
    conns: Vec<(std::thread::ThreadId, u64, StoreConn)>,
}

/// The most connections one [`RedisConn`] keeps open (one per calling thread).
const MAX_CONNECTIONS: usize = 32;

struct Shared {
    dialer: Dialer,
    key_prefix: String,
    timeout: Duration,
    current: Mutex<Current>,
    /// Held while a connection is being made, so concurrent calls make one, not one each.
    dialing: tokio::sync::Mutex<()>,
}

/// A lazily opened, bounded, self-healing connection to the shared Redis (one per calling
/// thread: `Current`). Clones share the connections, so several stores on the same Redis can
/// use them.
#[derive(Clone)]
pub struct RedisConn {
    shared: Arc<Shared>,
}

fn bad_url(url: &str, e: impl std::fmt::Display) -> InvalidRedisSettings {
    InvalidRedisSettings::Url {
        url: redact(url),
        reason: e.to_string(),
    }
}

/// How connections to `topology` are made, its URLs checked (no I/O).
fn dialer(topology: &Topology, timeout: Duration) -> Result<Dialer, InvalidRedisSettings> {
    match topology {
        Topology::Single { url } => {
            let client = redis::Client::open(url.as_str()).map_err(|e| bad_url(url, e))?;
            // No reconnect retries inside the manager: a retry loop there would hold a call
            // past its time while Redis is down. The calls themselves retry (module docs).
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(timeout))
                .set_response_timeout(Some(timeout))
                .set_number_of_retries(0);
            Ok(Dialer::Single { client, config })
        }
        Topology::Cluster { nodes } => {
            if nodes.is_empty() {
                return Err(InvalidRedisSettings::Topology(
                    "redis cluster needs at least one node".into(),
                ));
            }
            for url in nodes {
                redis::Client::open(url.as_str()).map_err(|e| bad_url(url, e))?;
            }
            // The cluster client's own retries follow redirections (`MOVED`, `ASK`) and
            // refresh its slot map; `run`'s deadline still bounds every call.
            let client = ClusterClient::builder(nodes.iter().map(String::as_str))
                .connection_timeout(timeout)
                .response_timeout(timeout)
                .retries(3)
                .build()
                .map_err(|e| InvalidRedisSettings::Topology(format!("redis cluster: {e}")))?;
            Ok(Dialer::Cluster(client))
        }
        Topology::Sentinel {
            sentinels,
            master,
            username,
            password,
            db,
            min_replicas_acked,
        } => sentinel_dialer(
            (sentinels, master),
            (username.as_deref(), password.as_deref()),
            (*db, *min_replicas_acked),
            timeout,
        ),
    }
}

/// [`dialer`] for primary `master` found through `sentinels`: its nodes' credentials and
/// database, and how many replicas must acknowledge a write.
fn sentinel_dialer(
    (sentinels, master): (&[String], &str),
    (username, password): (Option<&str>, Option<&str>),
    (db, min_replicas_acked): (i64, u32),
    timeout: Duration,
) -> Result<Dialer, InvalidRedisSettings> {
    if sentinels.is_empty() {
        return Err(InvalidRedisSettings::Topology(
            "redis sentinel needs at least one sentinel url".into(),
        ));
    }
    if master.is_empty() {
        return Err(InvalidRedisSettings::Topology(
            "redis sentinel needs the master's name".into(),
        ));
    }
    for url in sentinels {
        redis::Client::open(url.as_str()).map_err(|e| bad_url(url, e))?;
    }
    let sentinel = Sentinel::build(sentinels.iter().map(String::as_str).collect())
        .map_err(|e| InvalidRedisSettings::Topology(format!("redis sentinel: {e}")))?;
    let mut info = redis::RedisConnectionInfo::default().set_db(db);
    if let Some(u) = username {
        info = info.set_username(u);
    }
    if let Some(p) = password {
        info = info.set_password(p);
    }
    Ok(Dialer::Sentinel {
        sentinel: tokio::sync::Mutex::new(sentinel),
        master: master.to_string(),
        node: SentinelNodeConnectionInfo::default().set_redis_connection_info(info),
        config: AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout)),
        min_replicas_acked,
    })
}

impl RedisConn {
    /// A connection for `settings`. No I/O: only the URLs are checked here, and Redis need not
    /// be up.
    pub fn new(settings: &RedisSettings) -> Result<RedisConn, InvalidRedisSettings> {
        if settings.timeout.is_zero() {
            return Err(InvalidRedisSettings::ZeroTimeout);
        }
        let timeout = settings.timeout;
        let dialer = dialer(&settings.topology, timeout)?;
        Ok(RedisConn {
            shared: Arc::new(Shared {
                dialer,
                key_prefix: settings.key_prefix.clone(),
                timeout,
                current: Mutex::new(Current {
                    generation: 0,
                    conns: Vec::new(),
                }),
                dialing: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The prefix every key of the stores on this connection starts with.
    pub fn key_prefix(&self) -> &str {
        &self.shared.key_prefix
    }

    /// The hash tag for `scope`: `{<key_prefix><scope>}`. Keys that one script or multi-key
    /// command touches together must share it (one slot in a Redis Cluster).
    pub fn tag(&self, scope: &str) -> String {
        format!("{{{}{scope}}}", self.shared.key_prefix)
    }

    /// The bound on one call.
    pub fn timeout(&self) -> Duration {
        self.shared.timeout
    }

    /// How many replicas must have a durable write before it is acknowledged (0: none asked).
    pub fn min_replicas_acked(&self) -> u32 {
        match &self.shared.dialer {
            Dialer::Sentinel {
                min_replicas_acked, ..
            } => *min_replicas_acked,
            _ => 0,
        }
    }

    /// Whether Redis answers `PING` in time (for a startup log line or a health check; the
    /// stores work without it).
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.run(|mut conn| async move {
            redis::cmd("PING")
                .query_async::<String>(&mut conn)
                .await
                .map(|_| ())
        })
        .await
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Current>, StoreError> {
        self.shared
            .current
            .lock()
            .map_err(|_| StoreError::Unavailable("redis connection lock poisoned".into()))
    }

    fn existing(&self) -> Result<Option<(u64, StoreConn)>, StoreError> {
        let me = std::thread::current().id();
        let current = self.lock()?;
        Ok(current
            .conns
            .iter()
            .find(|(thread, _, _)| *thread == me)
            .map(|(_, generation, c)| (*generation, c.clone())))
    }

    /// The connection to use and its generation, made now if there is none. Lazy, because
    /// making one spawns its tasks on the caller's runtime, and the stores are built before any
    /// runtime runs.
    async fn connection(&self) -> Result<(u64, StoreConn), RedisError> {
        let store_err =
            |e: StoreError| RedisError::from((redis::ErrorKind::Io, "lock", e.to_string()));
        if let Some(found) = self.existing().map_err(store_err)? {
            return Ok(found);
        }
        let _dialing = self.shared.dialing.lock().await;
        // Another call may have made one while this one waited.
        if let Some(found) = self.existing().map_err(store_err)? {
            return Ok(found);
        }
        let conn = match &self.shared.dialer {
            Dialer::Single { client, config } => StoreConn::Single(
                ConnectionManager::new_lazy_with_config(client.clone(), config.clone())?,
            ),
            Dialer::Cluster(client) => StoreConn::Cluster(client.get_async_connection().await?),
            Dialer::Sentinel {
                sentinel,
                master,
                node,
                config,
                ..
            } => {
                // Asked afresh on every new connection: after a failover the sentinels name the
                // new primary (the lookup also checks that the node says it is a primary).
                let client = sentinel
                    .lock()
                    .await
                    .async_master_for(master, Some(node))
                    .await?;
                StoreConn::Sentinel(
                    client
                        .get_multiplexed_async_connection_with_config(config)
                        .await?,
                )
            }
        };
        // The thread now, after the awaits above: the connection serves the thread this call
        // runs on (a task may have moved), as `existing` looks it up.
        let me = std::thread::current().id();
        let mut current = self.lock().map_err(store_err)?;
        current.generation += 1;
        let generation = current.generation;
        current.conns.retain(|(thread, _, _)| *thread != me);
        if current.conns.len() >= MAX_CONNECTIONS {
            current.conns.remove(0);
        }
        current.conns.push((me, generation, conn.clone()));
        Ok((generation, conn))
    }

    /// Drop connection `generation` so the next call makes a fresh one (unless another call
    /// already has).
    fn discard(&self, generation: u64) {
        if let Ok(mut current) = self.lock() {
            current.conns.retain(|(_, g, _)| *g != generation);
        }
    }

    /// Run `op` on a connection within the time allowed, once more on a fresh connection if the
    /// first failed in a way that may be the connection's fault. `op` may thus be applied twice:
    /// it must be idempotent.
    pub async fn run<T, F, Fut>(&self, op: F) -> Result<T, StoreError>
    where
        F: Fn(StoreConn) -> Fut,
        Fut: std::future::Future<Output = Result<T, RedisError>>,
    {
        self.run_inner(op, 0).await
    }

    /// [`RedisConn::run`] for a write that must survive a failover: with
    /// [`RedisConn::min_replicas_acked`] above 0, it succeeds only once that many replicas have
    /// it (`WAIT` on the same connection, after `op`); else it fails with
    /// [`StoreError::Unavailable`] and the caller must not acknowledge it. Redis replication is
    /// asynchronous: without this, a write acknowledged by a primary that dies before its
    /// replicas got it is lost when a replica is promoted. With it, the write is on N replicas
    /// before anyone is told it exists, and Sentinel promotes the available replica with the most
    /// replication progress, so it survives the primary's loss unless the acknowledging replicas
    /// are lost or cut off too. Best effort, not strong consistency: "WAIT does not make Redis a
    /// strongly consistent store" (<https://redis.io/docs/latest/commands/wait/>; replica
    /// selection:
    /// <https://redis.io/docs/latest/operate/oss_and_stack/management/sentinel/#replica-selection-and-priority>).
    pub async fn run_durable<T, F, Fut>(&self, op: F) -> Result<T, StoreError>
    where
        F: Fn(StoreConn) -> Fut,
        Fut: std::future::Future<Output = Result<T, RedisError>>,
    {
        self.run_inner(op, self.min_replicas_acked()).await
    }

    async fn run_inner<T, F, Fut>(&self, op: F, replicas: u32) -> Result<T, StoreError>
    where
        F: Fn(StoreConn) -> Fut,
        Fut: std::future::Future<Output = Result<T, RedisError>>,
    {
        let timeout = self.shared.timeout;
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        for _attempt in 0..2 {
            // The generation this attempt got, for discarding it if the time runs out.
            let used = std::sync::atomic::AtomicU64::new(0);
            let attempt = async {
                let (generation, conn) = self.connection().await.map_err(|e| (None, e))?;
                used.store(generation, std::sync::atomic::Ordering::Relaxed);
                let v = op(conn.clone()).await.map_err(|e| (Some(generation), e))?;
                if replicas > 0 {
                    // Three quarters of the time left: WAIT then answers how far it got before
                    // the call's deadline, and the (healthy) connection is kept.
                    let left = deadline.saturating_duration_since(Instant::now()) * 3 / 4;
                    let acked = wait_for_replicas(conn, replicas, left)
                        .await
                        .map_err(|e| (Some(generation), e))?;
                    if acked < i64::from(replicas) {
                        return Ok(Err(StoreError::Unavailable(format!(
                            "redis: the write reached {acked} of the {replicas} replicas \
                             required in time"
                        ))));
                    }
                }
                Ok(Ok(v))
            };
            match tokio::time::timeout_at(deadline, attempt).await {
                Ok(Ok(done)) => return done,
                Ok(Err((_, e))) if !connection_fault(&e) => return Err(unavailable(e)),
                Ok(Err((generation, e))) => {
                    log::debug!("redis: {e}; next call on a fresh connection");
                    if let Some(generation) = generation {
                        self.discard(generation);
                    }
                    last = if e.is_timeout() {
                        format!("redis did not answer within {timeout:?}")
                    } else {
                        format!("redis: {e}")
                    };
                }
                Err(_) => {
                    // A connection that let a call run out of time may be stuck on a peer that
                    // vanished (no reset ever comes): never reuse it.
                    self.discard(used.load(std::sync::atomic::Ordering::Relaxed));
                    return Err(StoreError::Unavailable(format!(
                        "redis did not answer within {timeout:?}"
                    )));
                }
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        Err(StoreError::Unavailable(last))
    }
}

/// `WAIT replicas timeout` on `conn`: how many replicas have acknowledged every write this
/// connection made so far.
async fn wait_for_replicas(
    mut conn: StoreConn,
    replicas: u32,
    timeout: Duration,
) -> Result<i64, RedisError> {
    redis::cmd("WAIT")
        .arg(replicas)
        .arg(timeout.as_millis().max(1) as u64)
        .query_async::<i64>(&mut conn)
        .await
}

/// Whether `e` may mean the connection is broken or points at the wrong node (refused, reset,
/// timed out, garbled; a primary demoted to a read-only replica; no primary known yet), rather
/// than Redis answering an error on a working one (out of memory, wrong type).
pub(crate) fn connection_fault(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_unrecoverable_error()
        || e.is_connection_refusal()
        || e.is_connection_dropped()
        || matches!(
            e.kind(),
            redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
                | redis::ErrorKind::MasterNameNotFoundBySentinel
                | redis::ErrorKind::ClusterConnectionNotFound
        )
}

fn unavailable(e: RedisError) -> StoreError {
    StoreError::Unavailable(format!("redis: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_never_show_a_password() {
        let s = RedisSettings::new("rediss://user:s3cret@cache.internal:6380/2");
        let shown = format!("{s:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(
            shown.contains("rediss://***@cache.internal:6380/2"),
            "{shown}"
        );
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(redact("redis://h/0?x=a@b"), "redis://h/0?x=a@b");
    }

    #[test]
    fn cluster_and_sentinel_settings_never_show_a_password_and_need_no_io() {
        let cluster = RedisSettings::with_topology(Topology::Cluster {
            nodes: vec![
                "redis://:c1-s3cret@10.0.0.1:7000".into(),
                "redis://:c1-s3cret@10.0.0.2:7000".into(),
            ],
        });
        let sentinel = RedisSettings::with_topology(Topology::Sentinel {
            sentinels: vec!["redis://:snt-s3cret@10.0.0.1:26379".into()],
            master: "mymaster".into(),
            username: Some("app".into()),
            password: Some("node-s3cret".into()),
            db: 0,
            min_replicas_acked: 1,
        });
        for s in [&cluster, &sentinel] {
            let shown = format!("{s:?}");
            assert!(!shown.contains("s3cret"), "{shown}");
        }
        // Outside any async runtime, with nothing listening: no I/O until the first call.
        assert_eq!(RedisConn::new(&cluster).unwrap().min_replicas_acked(), 0);
        let conn = RedisConn::new(&sentinel).unwrap();
        assert_eq!(conn.min_replicas_acked(), 1);
        assert_eq!(conn.tag("limits:alice"), "{switchyard:limits:alice}");
        for bad in [
            Topology::Cluster { nodes: vec![] },
            Topology::Sentinel {
                sentinels: vec![],
                master: "m".into(),
                username: None,
                password: None,
                db: 0,
                min_replicas_acked: 0,
            },
        ] {
            assert!(matches!(
                RedisConn::new(&RedisSettings::with_topology(bad)),
                Err(InvalidRedisSettings::Topology(_))
            ));
        }
        match RedisConn::new(&RedisSettings::with_topology(Topology::Cluster {
            nodes: vec!["http://:pw@nope".into()],
        })) {
            Err(InvalidRedisSettings::Url { url, .. }) => assert!(!url.contains("pw"), "{url}"),
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("accepted a non-redis url"),
        }
    }

    #[test]
    fn bad_settings_fail_without_io() {
        match RedisConn::new(&RedisSettings::new("http://:pw@nope")) {
            Err(InvalidRedisSettings::Url { url, .. }) => assert!(!url.contains("pw"), "{url}"),
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("accepted a non-redis url"),
        }
        let mut zero = RedisSettings::new("redis://127.0.0.1:6379");
        zero.timeout = Duration::ZERO;
        assert!(matches!(
            RedisConn::new(&zero),
            Err(InvalidRedisSettings::ZeroTimeout)
        ));
        // Outside any async runtime, as the gateway builds its state: must not need one.
        let mut s = RedisSettings::new("redis://127.0.0.1:6379");
        s.key_prefix = "t:".into();
        let conn = RedisConn::new(&s).unwrap();
        assert_eq!(conn.key_prefix(), "t:");
        assert_eq!(conn.timeout(), RedisSettings::DEFAULT_TIMEOUT);
    }
}
