//! A [`FileStore`] in Redis, so a link minted by one gateway instance is served by every instance
//! that shares the Redis: the first piece of state the instances share.
//!
//! Each file is one hash at `{key_prefix}file:{id}` with the fields `content_type` and `bytes`,
//! written together with its expiry in one `MULTI` (`DEL`, `HSET`, `PEXPIRE`), so no reader ever
//! sees a file without its expiry or half of one; Redis itself deletes it when the time is up.
//! A read is one `MULTI` too (`HMGET` and `PTTL`), so the time left belongs to the bytes read.
//!
//! Redis being down must cost the gateway a failed hosted-image request, never its startup or its
//! other traffic. So:
//! - constructing the store does no I/O and needs no async runtime (the gateway builds its state
//!   before Pingora starts its runtimes); the connection is opened on first use;
//! - every call is bounded by [`RedisSettings::timeout`], connecting included, and fails with
//!   [`StoreError::Unavailable`] when the time is up or Redis refuses;
//! - after a failure that may have broken the connection, the next call starts from a fresh one,
//!   and the failing call itself tries once more on a fresh connection while its time lasts (a
//!   Redis restart then costs no request at all). No background loop keeps dialing a Redis that
//!   is down: the calls themselves are the retries, so the store recovers by itself as soon as
//!   Redis answers again.

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::RedisError;
use tokio::time::Instant;

use super::store::{FileStore, StoreError, StoredFile};

/// The hash field holding the file's content type.
const CONTENT_TYPE: &str = "content_type";
/// The hash field holding the file's bytes.
const BYTES: &str = "bytes";
/// Longest expiry sent to Redis: it rejects one that overflows when added to the current time,
/// and no hosted file needs more than this (thousands of years) anyway.
const MAX_TTL_MS: u128 = (i64::MAX / 2) as u128;

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

/// Hosted files in a Redis shared by the gateway's instances.
pub struct RedisFileStore {
    client: redis::Client,
    config: ConnectionManagerConfig,
    key_prefix: String,
    timeout: Duration,
    current: Mutex<Current>,
}

impl RedisFileStore {
    /// A store for `settings`. No I/O: only the URL is checked here, and Redis need not be up.
    pub fn new(settings: RedisSettings) -> Result<RedisFileStore, InvalidRedisSettings> {
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
        Ok(RedisFileStore {
            client,
            config,
            key_prefix: settings.key_prefix,
            timeout: settings.timeout,
            current: Mutex::new(Current {
                generation: 0,
                manager: None,
            }),
        })
    }

    /// The Redis key of file `id`.
    pub fn key(&self, id: &str) -> String {
        format!("{}file:{id}", self.key_prefix)
    }

    /// Whether Redis answers `PING` in time (for a startup log line or a health check; the store
    /// works without it).
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
        self.current
            .lock()
            .map_err(|_| StoreError::Unavailable("redis store lock poisoned".into()))
    }

    /// The connection to use and its generation, made now if there is none. Lazy, because
    /// making one spawns its tasks on the caller's runtime, and the store is built before any
    /// runtime runs.
    fn connection(&self) -> Result<(u64, ConnectionManager), StoreError> {
        let mut current = self.lock()?;
        if let Some(manager) = &current.manager {
            return Ok((current.generation, manager.clone()));
        }
        let manager =
            ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone())
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

    /// Run `op` on a connection within the store's time, once more on a fresh connection if the
    /// first failed in a way that may be the connection's fault.
    async fn run<T, F, Fut>(&self, op: F) -> Result<T, StoreError>
    where
        F: Fn(ConnectionManager) -> Fut,
        Fut: std::future::Future<Output = Result<T, RedisError>>,
    {
        let deadline = Instant::now() + self.timeout;
        let mut last = String::new();
        for _attempt in 0..2 {
            let (generation, conn) = self.connection()?;
            match tokio::time::timeout_at(deadline, op(conn)).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) if !connection_fault(&e) => return Err(unavailable(e)),
                Ok(Err(e)) => {
                    log::debug!("redis file store: {e}; next call on a fresh connection");
                    self.discard(generation);
                    last = if e.is_timeout() {
                        format!("redis did not answer within {:?}", self.timeout)
                    } else {
                        format!("redis: {e}")
                    };
                }
                Err(_) => {
                    // A connection that let a call run out of time may be stuck on a peer that
                    // vanished (no reset ever comes): never reuse it.
                    self.discard(generation);
                    return Err(StoreError::Unavailable(format!(
                        "redis did not answer within {:?}",
                        self.timeout
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

#[async_trait]
impl FileStore for RedisFileStore {
    async fn put(&self, id: &str, file: StoredFile, ttl: Duration) -> Result<(), StoreError> {
        let key = self.key(id);
        // A zero expiry makes PEXPIRE delete the key at once: the same as a file that has already
        // expired, as in the memory store.
        let ttl_ms = ttl.as_millis().min(MAX_TTL_MS) as u64;
        let file = &file;
        let key = &key;
        self.run(|mut conn| async move {
            redis::pipe()
                .atomic()
                .cmd("DEL")
                .arg(key)
                .ignore()
                .cmd("HSET")
                .arg(key)
                .arg(CONTENT_TYPE)
                .arg(file.content_type.as_str())
                .arg(BYTES)
                .arg(file.bytes.as_ref())
                .ignore()
                .cmd("PEXPIRE")
                .arg(key)
                .arg(ttl_ms)
                .ignore()
                .exec_async(&mut conn)
                .await
        })
        .await
    }

    async fn get(&self, id: &str) -> Result<Option<(StoredFile, Duration)>, StoreError> {
        let key = self.key(id);
        let key = &key;
        let (fields, pttl) = self
            .run(|mut conn| async move {
                redis::pipe()
                    .atomic()
                    .cmd("HMGET")
                    .arg(key)
                    .arg(CONTENT_TYPE)
                    .arg(BYTES)
                    .cmd("PTTL")
                    .arg(key)
                    .query_async::<((Option<String>, Option<Vec<u8>>), i64)>(&mut conn)
                    .await
            })
            .await?;
        let (Some(content_type), Some(bytes)) = fields else {
            return Ok(None);
        };
        // -2: gone; -1: no expiry, so not written by this store (its files always expire, and a
        // link that never stops working would outlive its promise): not served.
        if pttl < 0 {
            if pttl == -1 {
                // Not the key: the id in it is the link's capability, and logs are read widely.
                log::warn!("redis file store: a file key has no expiry; not serving it");
            }
            return Ok(None);
        }
        Ok(Some((
            StoredFile {
                content_type,
                bytes: Bytes::from(bytes),
            },
            Duration::from_millis(pttl as u64),
        )))
    }
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
    fn bad_settings_fail_at_construction_without_io() {
        let bad = RedisFileStore::new(RedisSettings::new("http://:pw@nope"));
        match bad {
            Err(InvalidRedisSettings::Url { url, .. }) => assert!(!url.contains("pw"), "{url}"),
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("accepted a non-redis url"),
        }
        let mut zero = RedisSettings::new("redis://127.0.0.1:6379");
        zero.timeout = Duration::ZERO;
        assert!(matches!(
            RedisFileStore::new(zero),
            Err(InvalidRedisSettings::ZeroTimeout)
        ));
        // Outside any async runtime, as the gateway builds its state: must not need one.
        let mut s = RedisSettings::new("redis://127.0.0.1:6379");
        s.key_prefix = "t:".into();
        let store = RedisFileStore::new(s).unwrap();
        assert_eq!(store.key("abc"), "t:file:abc");
    }
}
