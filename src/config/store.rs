//! Where shared state lives (`store:`): one Redis (a single node, a Cluster or behind Sentinel),
//! or memory when none is named; refused when this build has no Redis support.

#[cfg(feature = "redis")]
use std::time::Duration;

use super::file::StoreFile;
use crate::store::redis_conn::RedisConn;
#[cfg(feature = "redis")]
use crate::store::redis_conn::{RedisSettings, Topology};

/// Without the `redis` feature a store naming Redis is refused: state in memory would silently
/// not be shared between the instances the operator meant to share it.
#[cfg(not(feature = "redis"))]
pub(super) fn redis_settings(f: &StoreFile, errors: &mut Vec<String>) -> Option<RedisConn> {
    let named = [
        // Empty is none: the default config's `${SWITCHYARD_REDIS_URL:-}` when unset.
        (
            "redis_url",
            f.redis_url.as_deref().is_some_and(|u| !u.trim().is_empty()),
        ),
        ("redis_cluster", f.redis_cluster.is_some()),
        ("redis_sentinel", f.redis_sentinel.is_some()),
    ];
    if let Some((key, _)) = named.iter().find(|(_, set)| *set) {
        errors.push(format!(
            "switchyard.store.{key}: this build of Switchyard has no Redis support (built \
             without the `redis` cargo feature); remove the store's Redis settings to keep state \
             in memory, or build with `--features redis`"
        ));
    }
    None
}

/// `store:`, checked, as the one Redis connection the stores share (`None`: state in memory).
#[cfg(feature = "redis")]
pub(super) fn redis_settings(f: &StoreFile, errors: &mut Vec<String>) -> Option<RedisConn> {
    let at = "switchyard.store";
    let problems = errors.len();
    let url = f
        .redis_url
        .as_deref()
        .map(str::trim)
        .filter(|u| !u.is_empty());
    let mut topologies = Vec::new();
    if let Some(url) = url {
        topologies.push(Topology::Single { url: url.into() });
    }
    if let Some(nodes) = &f.redis_cluster {
        if nodes.is_empty() {
            errors.push(format!("{at}.redis_cluster: list at least one node URL"));
        }
        topologies.push(Topology::Cluster {
            nodes: nodes.iter().map(|n| n.trim().to_string()).collect(),
        });
    }
    if let Some(s) = &f.redis_sentinel {
        if s.urls.is_empty() {
            errors.push(format!(
                "{at}.redis_sentinel.urls: list at least one sentinel URL"
            ));
        }
        if s.master.trim().is_empty() {
            errors.push(format!(
                "{at}.redis_sentinel.master: name the primary the sentinels monitor"
            ));
        }
        topologies.push(Topology::Sentinel {
            sentinels: s.urls.iter().map(|u| u.trim().to_string()).collect(),
            master: s.master.trim().to_string(),
            username: s.username.clone(),
            password: s.password.clone(),
            db: s.db,
            min_replicas_acked: s.min_replicas_acked,
        });
    }
    if topologies.len() > 1 {
        errors.push(format!(
            "{at}: set only one of redis_url, redis_cluster, redis_sentinel"
        ));
        return None;
    }
    let topology = topologies.pop()?;
    if errors.len() > problems {
        return None;
    }
    let mut s = RedisSettings::with_topology(topology);
    if let Some(prefix) = &f.key_prefix {
        s.key_prefix = prefix.clone();
    }
    if let Some(ms) = f.timeout_ms {
        s.timeout = Duration::from_millis(ms);
    }
    // Built here (no I/O yet) so a bad URL is a config error at start, not a 503 on the first
    // request.
    match RedisConn::new(&s) {
        Ok(conn) => Some(conn),
        Err(e) => {
            errors.push(format!("{at}: {e}"));
            None
        }
    }
}
