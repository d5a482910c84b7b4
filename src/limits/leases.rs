//! The concurrent slots this instance holds in Redis, and the one task that keeps them alive.
//!
//! A slot is a lease that expires unless renewed ([`LEASE`]). Rather than a task
//! and a timer per request (spawned, then aborted as nearly every request ends long before its
//! first renewal), the instance lists the leases it holds, and one task renews them every third
//! of a lease, one script call per caller. A lease id is this instance's random part and a
//! counter: unique across instances without a random number per request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use super::window::Now;
use crate::store::redis_conn::{RedisConn, StoreConn};

/// How long a concurrent slot lives without being renewed.
pub(crate) const LEASE: Duration = Duration::from_secs(30);

/// Run `script` with the keys and arguments `args` adds: by its SHA1 (`EVALSHA`: 40 bytes on the
/// wire instead of the script's kilobyte, and no hashing of it on Redis's side per call), and
/// with its text (`EVAL`, which also makes Redis keep it) when this Redis does not know it yet:
/// after a restart, a `SCRIPT FLUSH`, or on a Cluster node that has not run it.
async fn eval<T: redis::FromRedisValue>(
    conn: &mut StoreConn,
    (text, script): (&str, &redis::Script),
    args: impl Fn(&mut redis::Cmd),
) -> redis::RedisResult<T> {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash());
    args(&mut cmd);
    match cmd.query_async(conn).await {
        Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            let mut cmd = redis::cmd("EVAL");
            cmd.arg(text);
            args(&mut cmd);
            cmd.query_async(conn).await
        }
        answer => answer,
    }
}

/// Renews a caller's leases: each only if it is still there (an expired one is not taken back,
/// since its slot may be someone else's by now), and keeps the set alive as long as its newest
/// lease. KEYS: the set. ARGV: the new expiry (ms), then the lease ids.
const RENEW: &str = r"
local renewed = 0
for i = 2, #ARGV do
  renewed = renewed + redis.call('ZADD', KEYS[1], 'XX', 'CH', ARGV[1], ARGV[i])
end
if renewed > 0 then
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[1], newest[2])
end
return renewed
";

static RENEWAL: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(RENEW));

/// The leases held, by their number: the caller's key tag each belongs to.
pub(crate) struct Leases {
    /// This instance's part of every lease id.
    instance: String,
    next: AtomicU64,
    held: Mutex<HashMap<u64, String>>,
    renewer: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Leases {
    pub(crate) fn new() -> Leases {
        Leases {
            instance: uuid::Uuid::new_v4().simple().to_string(),
            next: AtomicU64::new(0),
            held: Mutex::default(),
            renewer: Mutex::default(),
        }
    }

    /// The id lease number `n` has in Redis.
    fn id(&self, n: u64) -> String {
        format!("{}-{n}", self.instance)
    }

    /// A new lease: its number and id, not yet held (the check that takes it may fail).
    pub(crate) fn mint(&self) -> (u64, String) {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        (n, self.id(n))
    }

    /// Lease `n` of the caller `tag` is held: renewed from now until [`Leases::release`]. The
    /// renewing task is started on the current runtime when none runs (the first lease, or its
    /// runtime gone: a test's).
    pub(crate) fn hold(self: &Arc<Self>, n: u64, tag: &str, conn: &RedisConn) {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(n, tag.to_string());
        let mut renewer = self.renewer.lock().unwrap_or_else(PoisonError::into_inner);
        if renewer.as_ref().is_some_and(|r| !r.is_finished()) {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            *renewer = Some(rt.spawn(renew(Arc::downgrade(self), conn.clone())));
        }
    }

    /// Lease `n` is no longer held (given back, or about to be).
    pub(crate) fn release(&self, n: u64) {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&n);
    }

    /// The leases held, grouped by their caller's tag.
    fn by_tag(&self) -> HashMap<String, Vec<String>> {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let mut by_tag: HashMap<String, Vec<String>> = HashMap::new();
        for (n, tag) in held.iter() {
            by_tag.entry(tag.clone()).or_default().push(self.id(*n));
        }
        by_tag
    }
}

/// Every third of a lease, renew every lease still held; stops when the leases are dropped
/// with their limiter.
async fn renew(leases: Weak<Leases>, conn: RedisConn) {
    loop {
        tokio::time::sleep(LEASE / 3).await;
        let Some(leases) = leases.upgrade() else {
            return;
        };
        leases.renew_all(&conn).await;
    }
}

impl Leases {
    /// Push every held lease's expiry a [`LEASE`] from now: one call per caller, side by side.
    async fn renew_all(&self, conn: &RedisConn) {
        let lease_ms = u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX);
        let expires = Now::current().millis.saturating_add(lease_ms);
        let held = self.by_tag();
        let calls = held.iter().map(|(tag, ids)| async move {
            let set = &format!("{tag}:concurrent");
            // Setting a lease's expiry is idempotent.
            conn.run(|mut c| async move {
                eval::<i64>(&mut c, (RENEW, &RENEWAL), |cmd| {
                    cmd.arg(1).arg(set).arg(expires).arg(ids);
                })
                .await
            })
            .await
        });
        for renewed in futures_util::future::join_all(calls).await {
            if let Err(e) = renewed {
                log::debug!("limits: concurrent slots not renewed: {e}");
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::redis_conn::RedisSettings;

    #[test]
    fn lease_ids_are_unique_and_held_ones_are_listed_by_caller() {
        let (a, b) = (Arc::new(Leases::new()), Leases::new());
        let (n1, id1) = a.mint();
        let (n2, id2) = a.mint();
        assert_ne!(id1, id2);
        // Another instance's ids differ by its own part.
        assert_ne!(b.mint().1, id1);
        a.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(n1, "{x}".into());
        a.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(n2, "{y}".into());
        a.release(n1);
        let by_tag = a.by_tag();
        assert_eq!(by_tag.len(), 1);
        assert_eq!(by_tag["{y}"], vec![id2]);
    }

    /// Needs the test Redis (`SWITCHYARD_TEST_REDIS_URL`, default `redis://127.0.0.1:6379`;
    /// `scripts/test` starts one), as the shared-state tests do.
    #[tokio::test]
    async fn held_leases_are_renewed_and_expired_ones_are_not_taken_back() {
        let url = std::env::var("SWITCHYARD_TEST_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
        let conn = RedisConn::new(&RedisSettings::new(url)).unwrap();
        let tag = format!("{{switchyard-test:{}:limits:key:a}}", uuid::Uuid::new_v4());
        let set = format!("{tag}:concurrent");
        let leases = Leases::new();
        let (held, gone) = (leases.mint(), leases.mint());
        // Both leases about to expire; the second already removed (expired, or given back).
        let soon = Now::current().millis + 1_000;
        let zadd = |id: String| {
            let set = set.clone();
            conn.run(move |mut c| {
                let (set, id) = (set.clone(), id.clone());
                async move {
                    redis::cmd("ZADD")
                        .arg(&set)
                        .arg(soon)
                        .arg(&id)
                        .query_async::<i64>(&mut c)
                        .await
                }
            })
        };
        zadd(held.1.clone()).await.unwrap();
        for (n, _) in [&held, &gone] {
            leases.held.lock().unwrap().insert(*n, tag.clone());
        }
        leases.renew_all(&conn).await;
        let score = |id: String| {
            let set = set.clone();
            conn.run(move |mut c| {
                let (set, id) = (set.clone(), id.clone());
                async move {
                    redis::cmd("ZSCORE")
                        .arg(&set)
                        .arg(&id)
                        .query_async::<Option<u64>>(&mut c)
                        .await
                }
            })
        };
        let renewed = score(held.1.clone()).await.unwrap().unwrap();
        assert!(renewed >= soon + 25_000, "{renewed} vs {soon}");
        assert_eq!(score(gone.1.clone()).await.unwrap(), None);
        // The set lives as long as its newest lease.
        let ttl = conn
            .run(|mut c| {
                let set = set.clone();
                async move {
                    redis::cmd("PTTL")
                        .arg(&set)
                        .query_async::<i64>(&mut c)
                        .await
                }
            })
            .await
            .unwrap();
        assert!(ttl > 25_000, "{ttl}");
    }
}
