//! The connection to the Redis the gateway's instances share, as every Redis-backed store uses
//! it (the hosted-file store and the task store).
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

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::RedisError;
use tokio::time::Instant;

use crate::store::files::StoreError;

/// Where the Redis is and how long a call may take.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisSettings {
    /// `redis://[user:password@]host[:port][/db]`, or `rediss://` for TLS (server certificates
    /// are checked against the system's roots).
    pub url: String,
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

    /// Settings for the Redis at `url`, with the default prefix and timeout.
    pub fn new(url: impl Into<String>) -> RedisSettings {
        RedisSettings {
            url: url.into(),
            key_prefix: Self::DEFAULT_KEY_PREFIX.to_string(),
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }
}

// By hand, because the URL may carry a password and settings end up in logs.
impl std::fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSettings")
            .field("url", &redact(&self.url))
            .field("key_prefix", &self.key_prefix)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// `url` with any user information (where a password lives) replaced.
fn redact(url: &str) -> String {
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
    #[error("invalid redis url {url}: {reason}")]
    Url { url: String, reason: String },
    #[error("redis timeout must be more than zero")]
    ZeroTimeout,
}

/// The connection in use, numbered so a failed call discards only the one it used.
struct Current {
    generation: u64,
    manager: Option<ConnectionManager>,
}

struct Shared {
    client: redis::Client,
    config: ConnectionManagerConfig,
    key_prefix: String,
    timeout: Duration,
    current: Mutex<Current>,
}

/// A lazily opened, bounded, self-healing connection to one Redis. Clones share the connection,
/// so several stores on the same Redis can use one.
#[derive(Clone)]
pub struct RedisConn {
    shared: Arc<Shared>,
}

impl RedisConn {
    /// A connection for `settings`. No I/O: only the URL is checked here, and Redis need not be
    /// up.
    pub fn new(settings: &RedisSettings) -> Result<RedisConn, InvalidRedisSettings> {
        if settings.timeout.is_zero() {
            return Err(InvalidRedisSettings::ZeroTimeout);
        }
        let client =
            redis::Client::open(settings.url.as_str()).map_err(|e| InvalidRedisSettings::Url {
                url: redact(&settings.url),
                reason: e.to_string(),
            })?;
        // No reconnect retries inside the manager: a retry loop there would hold a call past its
        // time while Redis is down. The calls themselves retry (see the module docs).
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.timeout))
            .set_response_timeout(Some(settings.timeout))
            .set_number_of_retries(0);
        Ok(RedisConn {
            shared: Arc::new(Shared {
                client,
                config,
                key_prefix: settings.key_prefix.clone(),
                timeout: settings.timeout,
                current: Mutex::new(Current {
                    generation: 0,
                    manager: None,
                }),
            }),
        })
    }

    /// The prefix every key of the stores on this connection starts with.
    pub fn key_prefix(&self) -> &str {
        &self.shared.key_prefix
    }

    /// The bound on one call.
    pub fn timeout(&self) -> Duration {
        self.shared.timeout
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

    /// The connection to use and its generation, made now if there is none. Lazy, because
    /// making one spawns its tasks on the caller's runtime, and the stores are built before any
    /// runtime runs.
    fn connection(&self) -> Result<(u64, ConnectionManager), StoreError> {
        let mut current = self.lock()?;
        if let Some(manager) = &current.manager {
            return Ok((current.generation, manager.clone()));
        }
        let manager = ConnectionManager::new_lazy_with_config(
            self.shared.client.clone(),
            self.shared.config.clone(),
        )
        .map_err(unavailable)?;
        current.generation += 1;
        current.manager = Some(manager.clone());
        Ok((current.generation, manager))
    }

    /// Drop connection `generation` so the next call makes a fresh one (unless another call
    /// already has).
    fn discard(&self, generation: u64) {
        if let Ok(mut current) = self.lock() {
            if current.generation == generation {
                current.manager = None;
            }
        }
    }

    /// Run `op` on a connection within the time allowed, once more on a fresh connection if the
    /// first failed in a way that may be the connection's fault. `op` may thus be applied twice:
    /// it must be idempotent.
    pub async fn run<T, F, Fut>(&self, op: F) -> Result<T, StoreError>
    where
        F: Fn(ConnectionManager) -> Fut,
        Fut: std::future::Future<Output = Result<T, RedisError>>,
    {
        let timeout = self.shared.timeout;
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        for _attempt in 0..2 {
            let (generation, conn) = self.connection()?;
            match tokio::time::timeout_at(deadline, op(conn)).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) if !connection_fault(&e) => return Err(unavailable(e)),
                Ok(Err(e)) => {
                    log::debug!("redis: {e}; next call on a fresh connection");
                    self.discard(generation);
                    last = if e.is_timeout() {
                        format!("redis did not answer within {timeout:?}")
                    } else {
                        format!("redis: {e}")
                    };
                }
                Err(_) => {
                    // A connection that let a call run out of time may be stuck on a peer that
                    // vanished (no reset ever comes): never reuse it.
                    self.discard(generation);
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

/// Whether `e` may mean the connection is broken (refused, reset, timed out, garbled), rather
/// than Redis answering an error on a working one (out of memory, wrong type).
fn connection_fault(e: &RedisError) -> bool {
    e.is_io_error() || e.is_timeout() || e.is_unrecoverable_error()
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
