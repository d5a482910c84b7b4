//! Entries in the gateway's Redis (`switchyard.store`), shared by every instance using it and
//! surviving an instance's restart: one string per entry at `{<prefix>cache:<model>}:<digest>`,
//! written with `SET … PX` (Redis drops it when its time is up). A model's keys share one hash
//! tag, so they sit in one slot of a Redis Cluster and a purge finds them with one `SCAN` of the
//! node serving that slot.
//!
//! Redis being away costs the cache, never the request: a failed read is a miss, a failed write
//! is an answer not kept (both counted in `switchyard_store_errors_total{during="cache"}`).

use bytes::Bytes;

use super::{codec, now_secs, Entry, Key};
use crate::metrics::Metrics;
use crate::store::redis_conn::{RedisConn, StoreConn};
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};

pub(super) struct RedisStore {
    conn: RedisConn,
    metrics: Metrics,
}

impl RedisStore {
    pub(super) fn new(conn: RedisConn, metrics: Metrics) -> RedisStore {
        RedisStore { conn, metrics }
    }

    fn tag(&self, model: &str) -> String {
        self.conn.tag(&format!("cache:{model}"))
    }

    fn key(&self, key: &Key) -> String {
        format!("{}:{}", self.tag(&key.model), key.hex())
    }

    pub(super) async fn get(&self, key: &Key) -> Option<Entry> {
        let k = self.key(key);
        let k = &k;
        match self
            .conn
            .run(|mut conn| async move {
                redis::cmd("GET")
                    .arg(k)
                    .query_async::<Option<Vec<u8>>>(&mut conn)
                    .await
            })
            .await
        {
            Ok(found) => codec::decode(Bytes::from(found?)),
            Err(e) => {
                log::warn!("response cache: reading an entry: {e}");
                self.metrics.store_error("cache");
                None
            }
        }
    }

    pub(super) async fn put(&self, key: &Key, entry: Entry) -> bool {
        let ttl_ms = entry
            .meta
            .expires_at
            .saturating_sub(now_secs())
            .saturating_mul(1000);
        if ttl_ms == 0 {
            return false;
        }
        let k = self.key(key);
        let (k, value) = (&k, &codec::encode(&entry));
        match self
            .conn
            .run(|mut conn| async move {
                redis::cmd("SET")
                    .arg(k)
                    .arg(value.as_slice())
                    .arg("PX")
                    .arg(ttl_ms)
                    .query_async::<()>(&mut conn)
                    .await
            })
            .await
        {
            Ok(()) => true,
            Err(e) => {
                log::warn!("response cache: storing an entry: {e}");
                self.metrics.store_error("cache");
                false
            }
        }
    }

    pub(super) async fn remove(&self, key: &Key) -> Result<bool, String> {
        let k = self.key(key);
        let k = &k;
        self.conn
            .run(|mut conn| async move {
                redis::cmd("DEL").arg(k).query_async::<u64>(&mut conn).await
            })
            .await
            .map(|n| n > 0)
            .map_err(|e| e.to_string())
    }

    /// Every key under the model's tag, found with `SCAN` and unlinked a page at a time.
    pub(super) async fn purge_model(&self, model: &str) -> Result<u64, String> {
        let tag = self.tag(model);
        let pattern = format!("{}:*", escape_glob(&tag));
        let (pattern, tag) = (&pattern, &tag);
        let mut cursor: u64 = 0;
        let mut dropped = 0;
        loop {
            let (next, keys) = self
                .conn
                .run(|conn| async move {
                    let mut scan = redis::cmd("SCAN");
                    scan.arg(cursor)
                        .arg("MATCH")
                        .arg(pattern)
                        .arg("COUNT")
                        .arg(500);
                    match conn {
                        // A Cluster routes a keyless `SCAN` to no node in particular: it goes to
                        // the node serving the model's hash tag, where all its keys are.
                        StoreConn::Cluster(mut c) => {
                            let route =
                                RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                                    Route::with_key(tag.as_bytes(), SlotAddr::Master),
                                ));
                            let v = c.route_command(scan, route).await?;
                            Ok(redis::from_redis_value::<(u64, Vec<String>)>(v)?)
                        }
                        mut conn => scan.query_async::<(u64, Vec<String>)>(&mut conn).await,
                    }
                })
                .await
                .map_err(|e| e.to_string())?;
            if !keys.is_empty() {
                let keys = &keys;
                dropped += self
                    .conn
                    .run(|mut conn| async move {
                        redis::cmd("UNLINK")
                            .arg(keys)
                            .query_async::<u64>(&mut conn)
                            .await
                    })
                    .await
                    .map_err(|e| e.to_string())?;
            }
            if next == 0 {
                return Ok(dropped);
            }
            cursor = next;
        }
    }
}

/// `s` with the characters `SCAN MATCH` reads as a pattern escaped.
fn escape_glob(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
