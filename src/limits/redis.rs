//! Limits counted in Redis, shared by every instance on it: one script call per check. A speech
//! or image request's check carries what it is known to use too (`check::Check::known`), so its
//! admission and its known cost are one round trip on its path.
//!
//! Keys (Redis Cluster: every key of one caller carries the hash tag `{<prefix>limits:<id>}`,
//! so the script touches one slot):
//! - `{switchyard:limits:key:alice}:requests_per_minute:28333333` — a window's counter (a
//!   string holding an integer), expiring a minute after its window ends;
//! - `{switchyard:limits:key:alice}:concurrent` — the caller's slots in use: a sorted set of
//!   lease ids scored by when they expire (milliseconds since the epoch).
//!
//! A slot is a lease of [`LEASE`]: the instance holding it renews it every third of that while
//! its request runs, and removes it when the request ends. An instance that dies (or is cut off
//! from Redis) stops renewing, and its slots are free again within [`LEASE`] of their last
//! renewal, since every check first removes the expired ones. The bound on a leak is thus
//! [`LEASE`] (30 s), and it costs one small write per running request every 10 s.
//!
//! [`RedisConn::run`] may apply the script twice (a reply lost after Redis applied it): a lease
//! already present is taken as granted (its id is unique), so a retry never refuses its own slot;
//! a counter may be charged twice, which errs toward refusing a little early and only happens
//! when a reply is lost.

use std::sync::LazyLock;
use std::time::Duration;

use super::check::{Check, Outcome};
use super::window::Now;
use crate::store::files::StoreError;
use crate::store::redis_conn::{RedisConn, StoreConn};

/// How long a concurrent slot lives without being renewed.
pub(crate) const LEASE: Duration = Duration::from_secs(30);

/// KEYS: the counters, then the known counters, then the slot set when a slot is asked for or
/// given back.
/// ARGV: the number of counters n; per counter its quota, need, add and TTL (seconds); then the
/// slot's quota (0: none), now, the lease's expiry (ms) and its id; then the id of a lease to
/// give back ("" for none: a request's end gives back its slot in the call that charges it);
/// then the number of known counters m, and per known counter its quota and need.
/// Returns {0, 0} when everything fit (and was applied), else {i, used}: the 1-based position,
/// in the order checked, of what did not fit (n + 1: the slots; n + 1 + j: the j-th known
/// counter), and what was used of it. Nothing is applied then — except that a known counter's
/// refusal comes after the counters were charged (the request admitted, its known use not
/// fitting; `check::Check`), with no slot taken.
const SCRIPT: &str = r"
local n = tonumber(ARGV[1])
for i = 1, n do
  local b = 1 + (i - 1) * 4
  local quota, need = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
  local used = tonumber(redis.call('GET', KEYS[i]) or '0')
  if need > 0 and used + need > quota then return {i, used} end
end
local s = 2 + n * 4
local m = tonumber(ARGV[s + 5])
local set = KEYS[n + m + 1]
local slots = tonumber(ARGV[s])
if slots > 0 then
  redis.call('ZREMRANGEBYSCORE', set, '-inf', ARGV[s + 1])
  if not redis.call('ZSCORE', set, ARGV[s + 3]) then
    local active = redis.call('ZCARD', set)
    if active >= slots then return {n + 1, active} end
  end
end
for i = 1, n do
  local b = 1 + (i - 1) * 4
  local add = tonumber(ARGV[b + 3])
  if add > 0 then
    redis.call('INCRBY', KEYS[i], add)
    redis.call('EXPIRE', KEYS[i], ARGV[b + 4])
  end
end
for j = 1, m do
  local b = s + 4 + j * 2
  local quota, need = tonumber(ARGV[b]), tonumber(ARGV[b + 1])
  local used = tonumber(redis.call('GET', KEYS[n + j]) or '0')
  if need > 0 and used + need > quota then return {n + 1 + j, used} end
end
if slots > 0 then
  redis.call('ZADD', set, ARGV[s + 2], ARGV[s + 3])
  redis.call('PEXPIREAT', set, ARGV[s + 2])
end
if ARGV[s + 4] ~= '' then
  redis.call('ZREM', set, ARGV[s + 4])
end
return {0, 0}
";

/// Renews a lease: only if it is still there (an expired one is not taken back, since its
/// slot may be someone else's by now), and keeps the set alive as long as its newest lease.
const RENEW: &str = r"
if redis.call('ZADD', KEYS[1], 'XX', 'CH', ARGV[1], ARGV[2]) == 1 then
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[1], newest[2])
end
return 0
";

/// The scripts as Redis knows them by their SHA1 (hashed once).
static LIMITS: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(SCRIPT));
static RENEWAL: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(RENEW));

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

/// The counters of every caller, in one Redis (a handle: clones share the connection).
#[derive(Clone)]
pub(crate) struct Counts {
    conn: RedisConn,
}

/// A concurrent slot held in Redis: renewed while held, removed when dropped.
pub(crate) struct Slot {
    renew: tokio::task::JoinHandle<()>,
    release: Option<(RedisConn, String, String)>,
}

impl Slot {
    /// The lease's id, for a call that gives it back itself; the slot then no longer renews it
    /// nor removes it when dropped.
    fn hand_back(mut self) -> Option<String> {
        self.renew.abort();
        self.release.take().map(|(_, _, id)| id)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.renew.abort();
        let Some((conn, set, id)) = self.release.take() else {
            return;
        };
        // Dropped in a request's context, on the runtime; without one (shutting down) the lease
        // simply expires.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                // ZREM is idempotent: applying it twice is harmless.
                let (set, id) = (&set, &id);
                let removed = conn
                    .run(|mut c| async move {
                        redis::cmd("ZREM")
                            .arg(set)
                            .arg(id)
                            .query_async::<i64>(&mut c)
                            .await
                    })
                    .await;
                if let Err(e) = removed {
                    log::debug!("limits: a concurrent slot not given back (it expires): {e}");
                }
            });
        }
    }
}

impl Counts {
    pub(crate) fn new(conn: RedisConn) -> Counts {
        Counts { conn }
    }

    /// `{<prefix>limits:<scope>}`: every key of one caller in one hash slot.
    fn tag(&self, scope: &str) -> String {
        format!("{{{}limits:{scope}}}", self.conn.key_prefix())
    }

    /// Apply `check` for `scope` in one script call: `Ok(Ok(slot))` when it fit, `Ok(Err(..))`
    /// refused (with nothing applied, or as [`Check`] says for its `known` part), `Err` when
    /// Redis could not be asked.
    pub(crate) async fn apply(
        &self,
        scope: &str,
        check: &Check,
        now: Now,
    ) -> Result<Result<Option<Slot>, Outcome>, StoreError> {
        self.call(scope, check, now, None).await
    }

    /// Apply a check that asks for no slot (a charge at a request's end) and give back
    /// `returned`, the request's slot, in the same call. When Redis cannot be asked, the slot is
    /// given back as a dropped one is (or expires).
    pub(crate) async fn apply_and_return(
        &self,
        scope: &str,
        check: &Check,
        now: Now,
        returned: Slot,
    ) -> Result<Outcome, StoreError> {
        let result = self.call(scope, check, now, Some(&returned)).await;
        if result.is_ok() {
            let _ = returned.hand_back();
        }
        result.map(|r| match r {
            Ok(_) => Outcome::Passed,
            Err(outcome) => outcome,
        })
    }

    async fn call(
        &self,
        scope: &str,
        check: &Check,
        now: Now,
        returned: Option<&Slot>,
    ) -> Result<Result<Option<Slot>, Outcome>, StoreError> {
        let tag = self.tag(scope);
        let mut keys: Vec<String> = check
            .counters
            .iter()
            .chain(&check.known)
            .map(|c| format!("{tag}:{}:{}", c.limit.name, c.window))
            .collect();
        let set = format!("{tag}:concurrent");
        let lease_ms = u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX);
        let expires = now.millis.saturating_add(lease_ms);
        let id = if check.slot.is_some() {
            uuid::Uuid::new_v4().to_string()
        } else {
            String::new()
        };
        let returned = returned
            .and_then(|slot| slot.release.as_ref())
            .map_or("", |(_, _, id)| id.as_str());
        if check.slot.is_some() || !returned.is_empty() {
            keys.push(set.clone());
        }
        let (keys, id) = (&keys, &id);
        let args = |cmd: &mut redis::Cmd| {
            cmd.arg(keys.len()).arg(keys);
            cmd.arg(check.counters.len());
            for c in &check.counters {
                cmd.arg(c.limit.quota).arg(c.need).arg(c.add).arg(c.ttl);
            }
            cmd.arg(check.slot.unwrap_or(0))
                .arg(now.millis)
                .arg(expires)
                .arg(id)
                .arg(returned);
            cmd.arg(check.known.len());
            for c in &check.known {
                cmd.arg(c.limit.quota).arg(c.need);
            }
        };
        // Boxed: the Redis client's futures are large, and this one would otherwise be inlined
        // into every request's future (and copied with it) whether or not it has limits.
        let reply: Vec<u64> = Box::pin(
            self.conn
                .run(|mut conn| async move { eval(&mut conn, (SCRIPT, &LIMITS), args).await }),
        )
        .await?;
        match reply.as_slice() {
            [0, _] => {}
            [at, used] => {
                let at = usize::try_from(*at).unwrap_or(usize::MAX).saturating_sub(1);
                return Ok(Err(Outcome::Refused { at, used: *used }));
            }
            _ => {
                return Err(StoreError::Unavailable(format!(
                    "limits script answered {reply:?}"
                )))
            }
        }
        if check.slot.is_none() {
            return Ok(Ok(None));
        }
        let renew = tokio::spawn(renew(self.conn.clone(), set.clone(), id.clone()));
        Ok(Ok(Some(Slot {
            renew,
            release: Some((self.conn.clone(), set, id.clone())),
        })))
    }
}

/// Keep a lease alive while its request runs (aborted when the slot drops).
async fn renew(conn: RedisConn, set: String, id: String) {
    let every = LEASE / 3;
    let lease_ms = u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX);
    let (set, id) = (&set, &id);
    loop {
        tokio::time::sleep(every).await;
        let expires = Now::current().millis.saturating_add(lease_ms);
        // Setting a lease's expiry is idempotent.
        let renewed = conn
            .run(|mut c| async move {
                eval::<i64>(&mut c, (RENEW, &RENEWAL), |cmd| {
                    cmd.arg(1).arg(set).arg(expires).arg(id);
                })
                .await
            })
            .await;
        if let Err(e) = renewed {
            log::debug!("limits: a concurrent slot not renewed: {e}");
        }
    }
}
