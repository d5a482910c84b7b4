//! A [`FileStore`] in Redis, so a link minted by one gateway instance is served by every instance
//! that shares the Redis: the first piece of state the instances share.
//!
//! Each file is one hash at `{key_prefix}file:{id}` with the fields `content_type` and `bytes`,
//! one key per file: every command and `MULTI` here touches that key alone, so one slot in a Redis
//! Cluster without a hash tag (the name stays as older gateways wrote it, so hosted links survive
//! an upgrade). A write is durable ([`RedisConn::run_durable`]): under Sentinel with
//! `min_replicas_acked`, a link is handed out only once replicas hold its file.
//! written together with its expiry in one `MULTI` (`DEL`, `HSET`, `PEXPIRE`), so no reader ever
//! sees a file without its expiry or half of one; Redis itself deletes it when the time is up.
//! A read is one `MULTI` too (`HMGET` and `PTTL`), so the time left belongs to the bytes read.
//!
//! Redis being down costs a failed hosted-image request, never the gateway's startup or its other
//! traffic: the connection ([`RedisConn`]) is opened on first use, every call is bounded by
//! [`RedisSettings::timeout`] and fails with [`StoreError::Unavailable`], and a broken connection
//! is replaced by the next call.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::store::redis_conn::RedisConn;
// Re-exported: the settings were first defined here, and the configuration names them here.
use crate::store::files::FileStore;
use crate::store::files::StoreError;
use crate::store::files::StoredFile;
pub use crate::store::redis_conn::InvalidRedisSettings;
pub use crate::store::redis_conn::RedisSettings;

/// The hash field holding the file's content type.
const CONTENT_TYPE: &str = "content_type";
/// The hash field holding the file's bytes.
const BYTES: &str = "bytes";
/// Longest expiry sent to Redis: it rejects one that overflows when added to the current time,
/// and no hosted file needs more than this (thousands of years) anyway.
const MAX_TTL_MS: u128 = (i64::MAX / 2) as u128;

/// Hosted files in a Redis shared by the gateway's instances.
pub struct RedisFileStore {
    conn: RedisConn,
}

impl RedisFileStore {
    /// A store for `settings`. No I/O: only the URL is checked here, and Redis need not be up.
    pub fn new(settings: RedisSettings) -> Result<RedisFileStore, InvalidRedisSettings> {
        Ok(RedisFileStore::with_conn(RedisConn::new(&settings)?))
    }

    /// A store on `conn`, which other stores may share.
    pub fn with_conn(conn: RedisConn) -> RedisFileStore {
        RedisFileStore { conn }
    }

    /// The Redis key of file `id`.
    pub fn key(&self, id: &str) -> String {
        format!("{}file:{id}", self.conn.key_prefix())
    }

    /// Whether Redis answers `PING` in time (for a startup log line or a health check; the store
    /// works without it).
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.conn.ping().await
    }
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
        self.conn
            .run_durable(|mut conn| async move {
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
            .conn
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
