//! A caller's limits as they stand, read without touching them: what `GET /api/v1/usage` shows a
//! caller of its own windows and slots. A peek is no check: nothing is counted (not even against
//! `requests_per_minute`), no slot is taken, nothing owed is sent, and a caller the counts have
//! not seen is not added to them.
//!
//! Each backend answers from where its checks read:
//! - in memory, this process's counters;
//! - in Redis (exact mode), the shared counters and the unexpired leases of the caller's slot set,
//!   in one read-only script call (the caller's keys share one hash tag: one slot of a Cluster).
//!   What this instance's finished requests owe and has not sent yet (one pass of the worker's
//!   scheduler, `owed`) is not in it yet;
//! - in the approximate mode, the same shared counters plus what this instance has used and not
//!   reconciled yet (or this instance's own view, when that is higher: a reconciliation may be
//!   under way), and the slots of the other instances' unexpired reports plus this instance's.

#[cfg(feature = "redis")]
use super::window::Now;
use super::{Backend, Limiter};
use crate::auth::limits::{Limit, LimitSet, Meter};
use crate::store::files::StoreError;

/// One windowed limit of a caller, as it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reading {
    pub(crate) limit: Limit,
    /// Used in the current window (in nano-units of the budget's currency for a money budget).
    pub(crate) used: u64,
    /// When the current window ends and the next starts from nothing (Unix seconds).
    pub(crate) resets_at: u64,
}

/// A caller's limits as they stand.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Peek {
    /// Every windowed limit of the caller's set (money budgets included), in the set's order.
    pub(crate) windows: Vec<Reading>,
    /// `concurrent`: the quota, and the slots held now.
    pub(crate) concurrent: Option<(u64, u64)>,
}

/// Every meter, in the order a set's limits are listed.
const METERS: [Meter; 5] = [
    Meter::Requests,
    Meter::Tokens,
    Meter::Characters,
    Meter::Images,
    Meter::Money,
];

/// KEYS: the counters, then (with `ARGV[2]` `z` or `h`) the caller's slots.
/// ARGV: the number of counters k; `z` (the exact mode's slot set: leases scored by expiry),
/// `h` (the approximate mode's reports: instance → `expiry:count`) or `-` (no slots); now (ms);
/// this instance's name (`h`: its own report is left out, its live count is added locally).
/// Returns each counter's value, then the slots held. Reads only.
#[cfg(feature = "redis")]
const SCRIPT: &str = r"
local k = tonumber(ARGV[1])
local out = {}
for i = 1, k do out[i] = tonumber(redis.call('GET', KEYS[i]) or '0') end
local now = tonumber(ARGV[3])
if ARGV[2] == 'z' then
  out[k + 1] = redis.call('ZCOUNT', KEYS[k + 1], '(' .. ARGV[3], '+inf')
elseif ARGV[2] == 'h' then
  local held, all = 0, redis.call('HGETALL', KEYS[k + 1])
  for j = 1, #all, 2 do
    local expires, n = string.match(all[j + 1], '(%d+):(%d+)')
    if tonumber(expires) > now and all[j] ~= ARGV[4] then held = held + tonumber(n) end
  end
  out[k + 1] = held
end
return out
";

impl Limiter {
    /// The limits of `set` as they stand for `scope` (the principal's id), read without counting
    /// anything or taking a slot. `Err` when Redis could not be read.
    pub(crate) async fn peek(&self, scope: &str, set: &LimitSet) -> Result<Peek, StoreError> {
        let now = self.now();
        let limits: Vec<Limit> = METERS.iter().flat_map(|m| set.limits_of(*m)).collect();
        let counters: Vec<(&str, u64)> = limits
            .iter()
            .map(|l| (l.name, now.window(l.window)))
            .collect();
        let (used, held) = match &self.backend {
            Backend::Memory(counts) => counts.peek(scope, &counters),
            #[cfg(feature = "redis")]
            Backend::Redis(counts) => {
                let tag = counts.tag(scope);
                let slots = set
                    .concurrent
                    .map(|_| (format!("{tag}:concurrent"), "z", ""));
                // Leases expire by the limiter's clock, as its script reads them.
                read(counts.conn(), &tag, &counters, slots, now.millis).await?
            }
            #[cfg(feature = "redis")]
            Backend::Approx(counts) => approx(counts, scope, set, &counters).await?,
        };
        let windows = limits
            .iter()
            .zip(used)
            .map(|(limit, used)| Reading {
                limit: *limit,
                used,
                resets_at: now.ends(limit.window),
            })
            .collect();
        Ok(Peek {
            windows,
            concurrent: set.concurrent.map(|quota| (quota, held)),
        })
    }
}

/// The counters (and slots: their key, `z` or `h`, and this instance's name) of the caller
/// whose keys carry `tag`, in one call; slots expired at `now_ms` are not counted.
#[cfg(feature = "redis")]
async fn read(
    conn: &crate::store::redis_conn::RedisConn,
    tag: &str,
    counters: &[(&str, u64)],
    slots: Option<(String, &str, &str)>,
    now_ms: u64,
) -> Result<(Vec<u64>, u64), StoreError> {
    let mut keys: Vec<String> = counters
        .iter()
        .map(|(name, window)| format!("{tag}:{name}:{window}"))
        .collect();
    let (mode, instance) = match slots {
        Some((key, mode, instance)) => {
            keys.push(key);
            (mode, instance)
        }
        None => ("-", ""),
    };
    let reply: Vec<u64> = conn
        .run(|mut c| {
            let mut cmd = redis::cmd("EVAL");
            cmd.arg(SCRIPT).arg(keys.len()).arg(&keys);
            cmd.arg(counters.len()).arg(mode).arg(now_ms).arg(instance);
            async move { cmd.query_async(&mut c).await }
        })
        .await?;
    let held = reply.get(counters.len()).copied().unwrap_or(0);
    let mut used = reply;
    used.resize(counters.len(), 0);
    Ok((used, held))
}

/// The approximate mode's peek: the shared counters with this instance's unreconciled use, and
/// every instance's slots.
#[cfg(feature = "redis")]
async fn approx(
    counts: &super::approx::Counts,
    scope: &str,
    set: &LimitSet,
    counters: &[(&str, u64)],
) -> Result<(Vec<u64>, u64), StoreError> {
    let shared = &counts.shared;
    let tag = shared.conn.tag(&format!("limits:{scope}"));
    let slots = set.concurrent.map(|_| {
        (
            format!("{tag}:concurrent:approximate"),
            "h",
            shared.instance.as_str(),
        )
    });
    // Slot reports expire by the wall clock, whatever clock the windows are read from (`sync`).
    let wall = Now::current().millis;
    let (mut used, others) = read(&shared.conn, &tag, counters, slots, wall).await?;
    let scopes = shared.lock();
    let Some(local) = scopes.get(scope) else {
        return Ok((used, others));
    };
    for ((name, window), used) in counters.iter().zip(used.iter_mut()) {
        let Some(e) = local
            .entries
            .iter()
            .find(|e| e.name == *name && e.window == *window)
        else {
            continue;
        };
        let view = e
            .global
            .saturating_add(e.pending)
            .saturating_add(e.in_flight);
        *used = used.saturating_add(e.pending).max(view);
    }
    Ok((used, others.saturating_add(local.active)))
}
