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
//! its request runs (one task for all its leases, `leases`), and gives it back when the request
//! ends. An instance that dies (or is cut off from Redis) stops renewing, and its slots are free
//! again within [`LEASE`] of their last renewal, since every check first removes the expired
//! ones. The bound on a leak is thus [`LEASE`] (30 s).
//!
//! What a finished request owes — its usage, its slot — is not a call of its own: it is noted
//! (`owed`) as its answer goes out, and sent in one call per caller for all the requests that
//! finished together, as soon as the worker has run the tasks that were ready with it (one pass
//! of its scheduler), or earlier inside the admission of the caller's next request on this
//! instance, whichever comes first. The script applies what is owed before it checks anything,
//! so that next request finds its predecessor's slot free and its usage counted, and another
//! instance finds them so within that pass and one round trip of the answer.
//!
//! Every call of one caller made while the worker runs the tasks that are ready — the
//! admissions of requests that arrived together, what finished ones owe — goes to Redis in one
//! pipeline (`batch`): one write and one read for all, each call applied as if sent alone, in
//! the order made.
//!
//! [`RedisConn::run`] may apply the script twice (a reply lost after Redis applied it): a lease
//! already present is taken as granted (its id is unique), so a retry never refuses its own slot;
//! a counter may be charged twice, which errs toward refusing a little early and only happens
//! when a reply is lost.

use std::sync::{Arc, LazyLock};

use super::batch::{self, Batches};
use super::check::{Check, Outcome};
use super::leases::{Leases, LEASE};
use super::owed::{Debt, Owed};
use super::window::Now;
use crate::metrics::Metrics;
use crate::store::files::StoreError;
use crate::store::redis_conn::RedisConn;

/// KEYS: the counters owed, the check's counters, its known counters, then the slot set (when
/// a slot is asked for or leases are given back).
/// ARGV: the number of counters owed p, per counter owed its quota, need, add and TTL (seconds);
/// the number of leases given back r, and their ids; the number of the check's counters n, per
/// counter its quota, need, add and TTL; the slot's quota (0: none), now, the lease's expiry (ms)
/// and its id; the number of known counters m, and per known counter its quota and need.
///
/// What is owed is applied first, whatever the check decides: each counter owed is charged where
/// its need fits (need 0: always), and the leases given back are removed.
/// Returns {0, 0} when the check fit (and was applied), else {i, used}: the 1-based position, in
/// the order checked, of what did not fit (n + 1: the slots; n + 1 + j: the j-th known counter),
/// and what was used of it. Nothing of the check is applied then — except that a known counter's
/// refusal comes after the counters were charged (the request admitted, its known use not
/// fitting; `check::Check`), with no slot taken.
///
/// Redis runs every call of every instance on one thread, so the script makes few commands: a
/// list of counters is read with one `MGET`, the leases given back are removed with one `ZREM`
/// per thousand (Lua's `unpack` takes at most about 8,000 values), and a counter's expiry is set
/// once, when the counter is made — every call computes the same one (its window's end and a
/// minute), so setting it again changed nothing.
const SCRIPT: &str = r"
local set = KEYS[#KEYS]
local function charge(key, add, ttl)
  if redis.call('INCRBY', key, add) == tonumber(add) then
    redis.call('EXPIRE', key, ttl)
  end
end
local function used(from, count)
  if count == 0 then return {} end
  return redis.call('MGET', unpack(KEYS, from, from + count - 1))
end
local p = tonumber(ARGV[1])
for i = 1, p do
  local b = 1 + (i - 1) * 4
  local quota, need = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
  if need == 0 or tonumber(redis.call('GET', KEYS[i]) or '0') + need <= quota then
    charge(KEYS[i], ARGV[b + 3], ARGV[b + 4])
  end
end
local a = 2 + p * 4
local r = tonumber(ARGV[a])
for from = a + 1, a + r, 1000 do
  redis.call('ZREM', set, unpack(ARGV, from, math.min(from + 999, a + r)))
end
a = a + r + 1
local n = tonumber(ARGV[a])
local counts = used(p + 1, n)
for i = 1, n do
  local b = a + (i - 1) * 4
  local quota, need = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
  local u = tonumber(counts[i] or '0')
  if need > 0 and u + need > quota then return {i, u} end
end
local s = a + n * 4 + 1
local slots = tonumber(ARGV[s])
local m = tonumber(ARGV[s + 4])
if slots > 0 then
  redis.call('ZREMRANGEBYSCORE', set, '-inf', ARGV[s + 1])
  if not redis.call('ZSCORE', set, ARGV[s + 3]) then
    local active = redis.call('ZCARD', set)
    if active >= slots then return {n + 1, active} end
  end
end
for i = 1, n do
  local b = a + (i - 1) * 4
  if tonumber(ARGV[b + 3]) > 0 then
    charge(KEYS[p + i], ARGV[b + 3], ARGV[b + 4])
  end
end
counts = used(p + n + 1, m)
for j = 1, m do
  local b = s + 3 + j * 2
  local quota, need = tonumber(ARGV[b]), tonumber(ARGV[b + 1])
  local u = tonumber(counts[j] or '0')
  if need > 0 and u + need > quota then return {n + 1 + j, u} end
end
if slots > 0 then
  redis.call('ZADD', set, ARGV[s + 2], ARGV[s + 3])
  redis.call('PEXPIREAT', set, ARGV[s + 2])
end
return {0, 0}
";

/// The script as Redis knows it by its SHA1 (hashed once).
static LIMITS: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(SCRIPT));

/// The counters of every caller, in one Redis (a handle: clones share the connection, what is
/// owed and the leases held).
#[derive(Clone)]
pub(crate) struct Counts {
    inner: Arc<Inner>,
}

struct Inner {
    conn: RedisConn,
    owed: Owed,
    batches: Batches,
    leases: Arc<Leases>,
    metrics: Metrics,
    /// Script calls made, for the tests of what costs a call.
    #[cfg(test)]
    calls: std::sync::atomic::AtomicUsize,
}

/// A concurrent slot held in Redis: renewed while held, given back when dropped (noted as owed,
/// sent with what else is owed).
pub(crate) struct Slot {
    counts: Counts,
    tag: String,
    n: u64,
    id: Option<String>,
}

impl Slot {
    /// The lease's id, for what is owed at the request's end; the slot then no longer renews it
    /// nor gives it back when dropped.
    fn hand_back(mut self) -> Option<String> {
        self.counts.inner.leases.release(self.n);
        self.id.take()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.counts.inner.leases.release(self.n);
            self.counts.owe(&self.tag, &[], Some(id));
        }
    }
}

/// A sending asked for (of a caller's batch: `Some(tag)`; of what is owed: `None`), moved into
/// its task: if the task is dropped before it starts (the runtime stopped, even before its first
/// poll), what it was to send is abandoned rather than left to hold every later call.
struct Sending {
    counts: Counts,
    tag: Option<String>,
    started: bool,
}

impl Drop for Sending {
    fn drop(&mut self) {
        if self.started {
            return;
        }
        match &self.tag {
            Some(tag) => self.counts.inner.batches.abandon(tag),
            None => drop(self.counts.inner.owed.take_all()),
        }
    }
}

impl Counts {
    pub(crate) fn new(conn: RedisConn, metrics: Metrics) -> Counts {
        Counts {
            inner: Arc::new(Inner {
                conn,
                owed: Owed::default(),
                batches: Batches::default(),
                leases: Arc::new(Leases::new()),
                metrics,
                #[cfg(test)]
                calls: std::sync::atomic::AtomicUsize::new(0),
            }),
        }
    }

    /// The connection the counts are in (`peek` reads them through it).
    pub(super) fn conn(&self) -> &RedisConn {
        &self.inner.conn
    }

    /// `{<prefix>limits:<scope>}`: every key of one caller in one hash slot.
    pub(super) fn tag(&self, scope: &str) -> String {
        format!("{{{}limits:{scope}}}", self.inner.conn.key_prefix())
    }

    /// Apply `check` for `scope` in one script call, with what the caller owes applied first:
    /// `Ok(Ok(slot))` when it fit, `Ok(Err(..))` refused (with nothing of the check applied, or
    /// as [`Check`] says for its `known` part), `Err` when Redis could not be asked.
    pub(crate) async fn apply(
        &self,
        scope: &str,
        check: &Check,
        now: Now,
    ) -> Result<Result<Option<Slot>, Outcome>, StoreError> {
        let tag = self.tag(scope);
        let owed = self.inner.owed.take(&tag);
        let result = self.call(&tag, owed.as_ref(), check, now).await;
        if let (Err(e), Some(debt)) = (&result, &owed) {
            self.not_counted(debt, e);
        }
        result
    }

    /// What a finished request of `scope` used (`check`'s counters, charged where they fit,
    /// never refused) and its slot, given back: owed, and sent with what else is owed
    /// (module docs). Returns at once.
    pub(crate) fn charge(&self, scope: &str, check: &Check, slot: Option<Slot>) {
        let tag = self.tag(scope);
        let returned = slot.and_then(Slot::hand_back);
        self.owe(&tag, &check.counters, returned);
    }

    /// Note what is owed, and see it sent when it is the first owed since the last sending.
    fn owe(&self, tag: &str, counters: &[super::check::Counter], returned: Option<String>) {
        if !self.inner.owed.note(tag, counters, returned) {
            return;
        }
        // Without a runtime (shutting down) what is owed is lost: the usage of the last requests
        // is not counted and their slots expire.
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            let lost = self.inner.owed.take_all();
            log::debug!(
                "limits: {} caller(s)' usage not counted at shutdown",
                lost.len()
            );
            return;
        };
        let mut sending = Sending {
            counts: self.clone(),
            tag: None,
            started: false,
        };
        rt.spawn(async move {
            // Let the tasks ready now run first: the requests finishing with this one add what
            // they owe, and it all goes in one call per caller.
            tokio::task::yield_now().await;
            sending.started = true;
            sending.counts.send_owed().await;
        });
    }

    /// Send everything owed: one call per caller, side by side.
    async fn send_owed(&self) {
        let owed = self.inner.owed.take_all();
        let now = Now::current();
        let calls = owed.iter().map(|(tag, debt)| async move {
            if let Err(e) = self.call(tag, Some(debt), &Check::default(), now).await {
                self.not_counted(debt, &e);
            }
        });
        futures_util::future::join_all(calls).await;
    }

    fn not_counted(&self, debt: &Debt, e: &StoreError) {
        self.inner.metrics.store_error("limits");
        log::warn!(
            "limits: usage of {} finished request(s) not counted: {e}",
            debt.requests
        );
    }

    async fn call(
        &self,
        tag: &str,
        owed: Option<&Debt>,
        check: &Check,
        now: Now,
    ) -> Result<Result<Option<Slot>, Outcome>, StoreError> {
        let no_debt = Debt::default();
        let owed = owed.unwrap_or(&no_debt);
        let keys = keys(tag, owed, check);
        let lease_ms = u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX);
        let expires = now.millis.saturating_add(lease_ms);
        let lease = check.slot.map(|_| self.inner.leases.mint());
        let id = lease.as_ref().map_or("", |(_, id)| id.as_str());
        #[cfg(test)]
        self.inner
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cmd = limits_cmd(&keys, owed, check, (now.millis, expires, id));
        // Sent with the caller's other calls made while the ready tasks run (`batch`).
        let (answer, first) = self.inner.batches.queue(tag, cmd);
        if first {
            self.send_soon(tag);
        }
        let wait = self.inner.conn.timeout().saturating_mul(2);
        let reply: Vec<u64> = batch::reply(answer, wait).await?;
        if let Some(refused) = refused(&reply)? {
            return Ok(Err(refused));
        }
        let Some((n, id)) = lease else {
            return Ok(Ok(None));
        };
        self.inner.leases.hold(n, tag, &self.inner.conn);
        Ok(Ok(Some(Slot {
            counts: self.clone(),
            tag: tag.to_string(),
            n,
            id: Some(id),
        })))
    }

    /// Send `tag`'s batch once the worker has run the tasks that are ready now (their calls join
    /// it).
    fn send_soon(&self, tag: &str) {
        let mut sending = Sending {
            counts: self.clone(),
            tag: Some(tag.to_string()),
            started: false,
        };
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            sending.started = true;
            let (inner, tag) = (&sending.counts.inner, sending.tag.as_deref().unwrap_or(""));
            inner.batches.send(tag, &inner.conn, SCRIPT).await;
        });
    }
}

/// The script's keys for a call of caller `tag`: the counters owed, then the ones checked and
/// known, then the caller's slots when a slot is asked for or given back.
fn keys(tag: &str, owed: &Debt, check: &Check) -> Vec<String> {
    let mut keys =
        Vec::with_capacity(owed.counters.len() + check.counters.len() + check.known.len() + 1);
    keys.extend(
        owed.counters
            .iter()
            .map(|o| counter_key(tag, o.name, o.window)),
    );
    keys.extend(
        check
            .counters
            .iter()
            .chain(&check.known)
            .map(|c| counter_key(tag, c.limit.name, c.window)),
    );
    if check.slot.is_some() || !owed.returned.is_empty() {
        keys.push(format!("{tag}:concurrent"));
    }
    keys
}

/// `<tag>:<limit>:<window>`, in one allocation of the right size: a request names one key per
/// limit, and `format!` made each through the formatting machinery.
fn counter_key(tag: &str, name: &str, window: u64) -> String {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = window;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let digits = std::str::from_utf8(&digits[at..]).unwrap_or("0");
    let mut key = String::with_capacity(tag.len() + name.len() + digits.len() + 2);
    key.push_str(tag);
    key.push(':');
    key.push_str(name);
    key.push(':');
    key.push_str(digits);
    key
}

/// The script's call (by its SHA1: `EVALSHA`) with `keys` and the arguments `SCRIPT` reads, in
/// its order: what is owed, the checks, the slot asked for (`now`, its expiry, the lease id),
/// the known uses.
fn limits_cmd(
    keys: &[String],
    owed: &Debt,
    check: &Check,
    (now, expires, id): (u64, u64, &str),
) -> redis::Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(LIMITS.get_hash());
    cmd.arg(keys.len()).arg(keys);
    cmd.arg(owed.counters.len());
    for o in &owed.counters {
        cmd.arg(o.quota).arg(o.need).arg(o.add).arg(o.ttl);
    }
    cmd.arg(owed.returned.len()).arg(&owed.returned);
    cmd.arg(check.counters.len());
    for c in &check.counters {
        cmd.arg(c.limit.quota).arg(c.need).arg(c.add).arg(c.ttl);
    }
    cmd.arg(check.slot.unwrap_or(0))
        .arg(now)
        .arg(expires)
        .arg(id);
    cmd.arg(check.known.len());
    for c in &check.known {
        cmd.arg(c.limit.quota).arg(c.need);
    }
    cmd
}

/// The script's answer: `[0, _]` when everything fits; `[at, used]` when check `at` (from 1) is
/// refused with `used` already counted.
fn refused(reply: &[u64]) -> Result<Option<Outcome>, StoreError> {
    match reply {
        [0, _] => Ok(None),
        [at, used] => {
            let at = usize::try_from(*at).unwrap_or(usize::MAX).saturating_sub(1);
            Ok(Some(Outcome::Refused { at, used: *used }))
        }
        _ => Err(StoreError::Unavailable(format!(
            "limits script answered {reply:?}"
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use super::super::{Limiter, Meter};
    use super::*;
    use crate::auth::limits::{LimitSet, OnStoreError};
    use crate::caps::lifecycle::Clock;
    use crate::common::error::GatewayError;
    use crate::store::redis_conn::RedisSettings;

    /// A limiter on the test Redis (`SWITCHYARD_TEST_REDIS_URL`, default
    /// `redis://127.0.0.1:6379`; `scripts/test` starts one) under a prefix of its own, its
    /// windows fixed at the current second; and its counts, to count its calls.
    fn limiter() -> (Limiter, Counts, RedisConn) {
        let url = std::env::var("SWITCHYARD_TEST_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
        let mut settings = RedisSettings::new(url);
        settings.key_prefix = format!("switchyard-test:{}:", uuid::Uuid::new_v4());
        let conn = RedisConn::new(&settings).unwrap();
        let clock = Clock::manual(Clock::System.now());
        let limiter = Limiter::new(Some(&conn), Metrics::off(), clock);
        let super::super::Backend::Redis(counts) = &limiter.backend else {
            panic!("not in Redis");
        };
        let counts = counts.clone();
        (limiter, counts, conn)
    }

    fn set(yaml: &str) -> LimitSet {
        serde_yaml::from_str(yaml).unwrap()
    }

    const OPEN: OnStoreError = OnStoreError::Open;

    #[tokio::test]
    async fn the_next_admission_pays_what_its_predecessors_owe_before_it_is_checked() {
        let (limits, counts, _) = limiter();
        let set = set("{concurrent: 1, tokens_per_minute: 50}");
        let lease = limits
            .admit("key:a", &set, Meter::Tokens, None, OPEN)
            .await
            .unwrap();
        assert!(lease.is_some());
        // The one slot is held.
        let refused = limits.admit("key:a", &set, Meter::Tokens, None, OPEN).await;
        assert!(
            matches!(&refused, Err(GatewayError::RateLimited(r)) if r.limit == "concurrent"),
            "{:?}",
            refused.map(|l| l.is_some())
        );
        // The request ends having used the whole window; what it owes is not sent yet (no
        // yield since), so the next admission carries it: the slot is free, the tokens spent.
        limits
            .charge("key:a", &set, (Meter::Tokens, 50), None, lease, false)
            .await;
        let before = counts.inner.calls.load(Ordering::Relaxed);
        let refused = limits.admit("key:a", &set, Meter::Tokens, None, OPEN).await;
        assert!(
            matches!(&refused, Err(GatewayError::RateLimited(r)) if r.limit == "tokens_per_minute" && r.remaining == 0),
            "{:?}",
            refused.map(|l| l.is_some())
        );
        assert_eq!(counts.inner.calls.load(Ordering::Relaxed), before + 1);
        // Nothing is left owed: no other call follows.
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        assert_eq!(counts.inner.calls.load(Ordering::Relaxed), before + 1);
    }

    #[tokio::test]
    async fn a_sending_dropped_before_it_starts_leaves_nothing_held() {
        let (_limits, counts, _) = limiter();
        // A caller's batch: its calls are answered, and the next call asks for a sending.
        let (answer, first) = counts.inner.batches.queue("{a}", redis::cmd("PING"));
        assert!(first);
        drop(Sending {
            counts: counts.clone(),
            tag: Some("{a}".into()),
            started: false,
        });
        assert!(batch::reply(answer, Duration::from_secs(5)).await.is_err());
        assert!(counts.inner.batches.queue("{a}", redis::cmd("PING")).1);
        // What is owed: the next request that owes something asks for a sending again.
        assert!(counts.inner.owed.note("{a}", &[], Some("lease".into())));
        assert!(!counts.inner.owed.note("{a}", &[], Some("lease-2".into())));
        drop(Sending {
            counts: counts.clone(),
            tag: None,
            started: false,
        });
        assert!(counts.inner.owed.note("{a}", &[], Some("lease-3".into())));
        // A sending that started leaves its work alone.
        let (_answer, _) = counts.inner.batches.queue("{b}", redis::cmd("PING"));
        drop(Sending {
            counts: counts.clone(),
            tag: Some("{b}".into()),
            started: true,
        });
        assert!(!counts.inner.batches.queue("{b}", redis::cmd("PING")).1);
    }

    #[tokio::test]
    async fn admissions_arriving_together_share_one_round_trip_and_keep_their_order() {
        let (limits, counts, _) = limiter();
        let set = set("{concurrent: 3}");
        let before = counts.inner.batches.sent.load(Ordering::Relaxed);
        let admitted = futures_util::future::join_all(
            (0..5).map(|_| limits.admit("key:a", &set, Meter::Tokens, None, OPEN)),
        )
        .await;
        // One pipeline for the five; applied in the order made: three slots, then two refusals.
        assert_eq!(
            counts.inner.batches.sent.load(Ordering::Relaxed),
            before + 1
        );
        let outcomes: Vec<&str> = admitted
            .iter()
            .map(|a| match a {
                Ok(Some(_)) => "slot",
                Err(GatewayError::RateLimited(r)) => r.limit,
                _ => "other",
            })
            .collect();
        assert_eq!(
            outcomes,
            ["slot", "slot", "slot", "concurrent", "concurrent"]
        );
    }

    #[tokio::test]
    async fn requests_finishing_together_cost_one_call_per_caller() {
        let (limits, counts, conn) = limiter();
        let set = set("{concurrent: 10, tokens_per_minute: 1000}");
        let mut leases = Vec::new();
        for scope in [
            "key:a", "key:a", "key:a", "key:a", "key:a", "key:b", "key:b",
        ] {
            let lease = limits
                .admit(scope, &set, Meter::Tokens, None, OPEN)
                .await
                .unwrap();
            leases.push((scope, lease));
        }
        let before = counts.inner.calls.load(Ordering::Relaxed);
        for (scope, lease) in leases {
            limits
                .charge(scope, &set, (Meter::Tokens, 10), None, lease, false)
                .await;
        }
        // Sent once the ready tasks have run: every request's usage counted and every slot
        // given back (polled: the sending is off this task), in two calls, one per caller.
        let window = Now::by(&limits.clock).window(crate::auth::limits::Window::Minute);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let mut held = Vec::new();
            for scope in ["key:a", "key:b"] {
                let tag = counts.tag(scope);
                let (used, slots) = conn
                    .run(|mut c| {
                        let mut pipe = redis::pipe();
                        pipe.cmd("GET")
                            .arg(format!("{tag}:tokens_per_minute:{window}"))
                            .cmd("ZCARD")
                            .arg(format!("{tag}:concurrent"));
                        async move { pipe.query_async::<(Option<u64>, u64)>(&mut c).await }
                    })
                    .await
                    .unwrap();
                held.push((used, slots));
            }
            if held == [(Some(50), 0), (Some(20), 0)] {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{held:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(counts.inner.calls.load(Ordering::Relaxed), before + 2);
    }

    #[tokio::test]
    async fn a_counter_expires_a_minute_after_its_window_whoever_charged_it_last() {
        let (limits, counts, conn) = limiter();
        let set = set("{requests_per_minute: 100, tokens_per_minute: 1000}");
        let now = Now::by(&limits.clock);
        let window = now.window(crate::auth::limits::Window::Minute);
        let tag = counts.tag("key:a");
        let ttls = || async {
            conn.run(|mut c| {
                let mut pipe = redis::pipe();
                for name in ["requests_per_minute", "tokens_per_minute"] {
                    pipe.cmd("GET").arg(format!("{tag}:{name}:{window}"));
                    pipe.cmd("TTL").arg(format!("{tag}:{name}:{window}"));
                }
                async move {
                    pipe.query_async::<(Option<u64>, i64, Option<u64>, i64)>(&mut c)
                        .await
                }
            })
            .await
            .unwrap()
        };
        let expected = i64::try_from(now.counter_ttl(crate::auth::limits::Window::Minute)).unwrap();
        for round in 1..=2u64 {
            let lease = limits
                .admit("key:a", &set, Meter::Tokens, None, OPEN)
                .await
                .unwrap();
            limits
                .charge("key:a", &set, (Meter::Tokens, 7), None, lease, false)
                .await;
            // The charge rides on the next admission, or is sent after this pass: read once both
            // counters show it.
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            let (requests, requests_ttl, _, tokens_ttl) = loop {
                let read = ttls().await;
                if read.2 == Some(7 * round) {
                    break read;
                }
                assert!(std::time::Instant::now() < deadline, "{read:?}");
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            assert_eq!(requests, Some(round));
            // Made with its expiry (the window's end and a minute, from the limiter's clock,
            // which stands still here), and kept at it, not left without one.
            for ttl in [requests_ttl, tokens_ttl] {
                assert!(
                    ttl > 0 && ttl <= expected && ttl >= expected - 2,
                    "{ttl} of {expected}"
                );
            }
        }
    }

    #[tokio::test]
    async fn thousands_of_slots_given_back_together_are_all_freed() {
        // More than Lua's `unpack` takes in one go (8,000): the script frees them in parts.
        const HELD: usize = 8_200;
        let (limits, counts, conn) = limiter();
        let set = set("{concurrent: 10000}");
        let mut leases = Vec::with_capacity(HELD);
        for _ in 0..HELD {
            let lease = limits
                .admit("key:a", &set, Meter::Tokens, None, OPEN)
                .await
                .unwrap();
            leases.push(lease);
        }
        // Given back with no await between them: owed together, sent in one call.
        for lease in leases {
            limits
                .charge("key:a", &set, (Meter::Tokens, 0), None, lease, false)
                .await;
        }
        let key = format!("{}:concurrent", counts.tag("key:a"));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let held: u64 = conn
                .run(|mut c| {
                    let key = key.clone();
                    async move { redis::cmd("ZCARD").arg(key).query_async(&mut c).await }
                })
                .await
                .unwrap();
            if held == 0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{held} slots still held"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[cfg(test)]
mod key_tests {
    #[test]
    fn a_counters_key_is_its_tag_limit_and_window() {
        for window in [0, 7, 10, 28_333_333, u64::MAX] {
            assert_eq!(
                super::counter_key("{p:limits:key:a}", "requests_per_minute", window),
                format!("{{p:limits:key:a}}:requests_per_minute:{window}")
            );
        }
    }
}
