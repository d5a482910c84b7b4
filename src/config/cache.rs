//! The response cache's configuration: `switchyard.cache` (the store: memory or Redis, its
//! bounds, whether hits count against callers' limits) and each model's `cache:` (off unless
//! given: how long its answers are kept and whether callers share them). Speech and rerank
//! models are cached when given one; an image model only when the operator opts it in with its
//! own `cache:` (and then only answers whose images are inline: links expire).

use std::time::Duration;

use serde::Deserialize;

use crate::cache::{CacheSettings, Policy, StoreKind};
use crate::store::redis_conn::RedisConn;

/// `switchyard.cache` as written.
#[derive(Debug, Deserialize)]
#[serde(default)]
pub(crate) struct CacheFile {
    /// `memory` (this process, bounded by `max_bytes`) or `redis` (`switchyard.store`'s Redis,
    /// shared by instances).
    pub(crate) store: String,
    /// The memory store's bound, in bytes.
    pub(crate) max_bytes: u64,
    /// The largest answer kept, in bytes (larger ones are served, not kept).
    pub(crate) max_entry_bytes: u64,
    /// Whether an answer served from the cache is charged to its caller's limits (usage and
    /// money budgets) as if the provider had made it.
    pub(crate) hits_count_against_limits: bool,
}

impl Default for CacheFile {
    fn default() -> Self {
        let d = CacheSettings::default();
        CacheFile {
            store: "memory".into(),
            max_bytes: d.max_bytes as u64,
            max_entry_bytes: d.max_entry_bytes as u64,
            hits_count_against_limits: d.hits_count,
        }
    }
}

/// A model's `cache:` as written.
#[derive(Debug, Deserialize)]
pub(crate) struct ModelCacheFile {
    /// How long an answer is served after it was made, in seconds (at least 1).
    pub(crate) ttl_seconds: u64,
    /// Entries shared by every caller; by default each caller has its own.
    #[serde(default)]
    pub(crate) shared: bool,
}

/// The largest entry the memory store can weigh (TinyUFO's `u16` weights of 1 KiB).
const MAX_ENTRY: u64 = 64 << 20;

/// `switchyard.cache`, checked.
pub(crate) fn settings(
    f: &CacheFile,
    redis: Option<&RedisConn>,
    errors: &mut Vec<String>,
) -> CacheSettings {
    let at = "switchyard.cache";
    let store = match f.store.as_str() {
        "memory" => StoreKind::Memory,
        "redis" => {
            if redis.is_none() {
                errors.push(format!(
                    "{at}.store: `redis` needs a Redis in switchyard.store (redis_url, \
                     redis_cluster or redis_sentinel)"
                ));
            }
            StoreKind::Redis
        }
        other => {
            errors.push(format!("{at}.store: `{other}` is not one of memory, redis"));
            StoreKind::Memory
        }
    };
    if f.max_entry_bytes == 0 || f.max_entry_bytes > MAX_ENTRY {
        errors.push(format!(
            "{at}.max_entry_bytes: must be between 1 and {MAX_ENTRY}"
        ));
    }
    if store == StoreKind::Memory && f.max_bytes < f.max_entry_bytes {
        errors.push(format!(
            "{at}.max_bytes: {} is less than max_entry_bytes ({})",
            f.max_bytes, f.max_entry_bytes
        ));
    }
    CacheSettings {
        store,
        max_bytes: usize::try_from(f.max_bytes).unwrap_or(usize::MAX),
        max_entry_bytes: usize::try_from(f.max_entry_bytes.min(MAX_ENTRY)).unwrap_or(0),
        hits_count: f.hits_count_against_limits,
    }
}

/// A model's `cache:`, checked (`at` names the model).
pub(crate) fn policy(
    f: Option<&ModelCacheFile>,
    at: &str,
    errors: &mut Vec<String>,
) -> Option<Policy> {
    let f = f?;
    if f.ttl_seconds == 0 {
        errors.push(format!("{at}.cache.ttl_seconds: must be at least 1"));
        return None;
    }
    Some(Policy {
        ttl: Duration::from_secs(f.ttl_seconds),
        shared: f.shared,
    })
}
