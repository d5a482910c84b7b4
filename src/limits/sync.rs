//! The approximate mode's reconciliation with Redis (`approx`): one task per limiter, off every
//! request's path, which every `auth.limits_sync_ms` — or at once, when a caller has used half
//! of its share — sends what this instance used since for every caller it served lately, and
//! reads back the totals of every instance.
//!
//! One round trip for all those callers: one script call per caller (a caller's keys share one
//! hash tag, so one call touches one Redis Cluster slot), all in one pipeline (in a Redis
//! Cluster, sent side by side, each to its node). Each call adds this instance's use to the
//! window counters the exact mode keeps (the same keys: a counter is a counter, whichever mode
//! charged it) and answers their totals; for a caller with `concurrent`, it also records the
//! slots held here (`{…}:concurrent:approximate`, a hash of instance → expiry and count) and
//! answers what the other instances hold. A report expires [`LEASE`] after it was made, so an
//! instance that dies frees its slots within it, as the exact mode's leases do.
//!
//! A reconciliation that fails (Redis slow past `store.timeout_ms`, or down) is counted in
//! `switchyard_store_errors_total{during="limits"}`; what it carried is sent again with the
//! next one, and until one succeeds the limiter is `failing` (`auth.limits_on_store_error`
//! decides: `open` keeps admitting from this instance's counts, `closed` refuses). A call that
//! Redis applied but whose reply was lost is sent again: that use is counted twice, erring
//! toward refusing early, as the exact mode's retry does.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::RedisResult;
use tokio::sync::Notify;

use super::approx::{Outgoing, Shared};
use super::leases::LEASE;
use super::window::Now;
use crate::store::files::StoreError;
use crate::store::redis_conn::{RedisConn, StoreConn};

/// KEYS: the caller's counters, then its slot reports (when it has `concurrent`).
/// ARGV: the number of counters k; per counter what to add and its TTL (seconds); then, with
/// slots, this instance's name, the slots it holds, now and the report's expiry (ms).
/// Returns each counter's total, then (with slots) the slots the other instances hold.
const SCRIPT: &str = r"
local k = tonumber(ARGV[1])
local out = {}
for i = 1, k do
  local add = tonumber(ARGV[2 * i])
  if add > 0 then
    out[i] = redis.call('INCRBY', KEYS[i], add)
    if out[i] == add then redis.call('EXPIRE', KEYS[i], ARGV[2 * i + 1]) end
  else
    out[i] = tonumber(redis.call('GET', KEYS[i]) or '0')
  end
end
if #KEYS > k then
  local set, s = KEYS[k + 1], 2 * k + 2
  local me, held, now = ARGV[s], tonumber(ARGV[s + 1]), tonumber(ARGV[s + 2])
  if held > 0 then
    redis.call('HSET', set, me, ARGV[s + 3] .. ':' .. held)
    redis.call('PEXPIREAT', set, ARGV[s + 3])
  else
    redis.call('HDEL', set, me)
  end
  local others, all = 0, redis.call('HGETALL', set)
  for j = 1, #all, 2 do
    local expires, n = string.match(all[j + 1], '(%d+):(%d+)')
    if tonumber(expires) <= now then
      redis.call('HDEL', set, all[j])
    elseif all[j] ~= me then
      others = others + tonumber(n)
    end
  end
  out[k + 1] = others
end
return out
";

/// Start `shared`'s reconciling task, once, on the runtime of the first check (none at all
/// while there is no runtime: a later check starts it).
pub(super) fn start(shared: &Arc<Shared>) {
    if shared.started.load(Ordering::Relaxed) {
        if !stalled(shared) {
            return;
        }
    } else if shared.started.swap(true, Ordering::AcqRel) {
        return;
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        shared.started.store(false, Ordering::Release);
        return;
    };
    shared
        .last_tick
        .store(Now::current().millis, Ordering::Relaxed);
    let every = shared.settings.sync;
    rt.spawn(run(Arc::downgrade(shared), shared.wake.clone(), every));
}

/// Whether the reconciling task has not gone round for far longer than an interval and the
/// longest a reconciliation may take (its runtime is gone): true for the one caller that is to
/// start another.
fn stalled(shared: &Shared) -> bool {
    let last = shared.last_tick.load(Ordering::Relaxed);
    let now = Now::current().millis;
    let longest = shared.settings.sync.saturating_mul(4) + shared.conn.timeout().saturating_mul(4);
    let longest = u64::try_from(longest.as_millis()).unwrap_or(u64::MAX);
    now.saturating_sub(last) > longest.saturating_add(1_000)
        && shared
            .last_tick
            .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
}

/// Reconcile every `every`, or when woken; end once the limiter is gone.
async fn run(shared: Weak<Shared>, wake: Arc<Notify>, every: Duration) {
    loop {
        if let Some(s) = shared.upgrade() {
            s.last_tick.store(Now::current().millis, Ordering::Relaxed);
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = wake.notified() => {}
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let n = shared.begun.fetch_add(1, Ordering::AcqRel) + 1;
        sync_once(&shared).await;
        // Admissions waiting past their share decide again now (`approx::Counts::reconciled`).
        shared.done.store(n, Ordering::Release);
        shared.landed.notify_waiters();
    }
}

/// One reconciliation: what every caller served lately used, sent; their totals, read back.
pub(super) async fn sync_once(shared: &Shared) {
    let now = Now::by(&shared.clock);
    let batch: Vec<(String, Outgoing)> = shared
        .lock()
        .iter_mut()
        .filter_map(|(scope, s)| s.take(now).map(|o| (scope.clone(), o)))
        .collect();
    if batch.is_empty() {
        return;
    }
    // Slot reports expire by the wall clock (Redis's), whatever clock the windows are read from.
    let wall = Now::current().millis;
    let lease_ms = u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX);
    let expires = wall.saturating_add(lease_ms);
    let cmds: Vec<redis::Cmd> = batch
        .iter()
        .map(|(scope, o)| call(shared, scope, o, (wall, expires)))
        .collect();
    let replies = send(&shared.conn, &cmds).await;
    let failed = match &replies {
        Ok(r) => r.iter().filter(|r| r.is_err()).count(),
        Err(_) => batch.len(),
    };
    {
        let mut scopes = shared.lock();
        for (i, (scope, sent)) in batch.iter().enumerate() {
            let reply = match &replies {
                Ok(r) => r.get(i).and_then(|r| r.as_ref().ok()),
                Err(_) => None,
            };
            if let Some(s) = scopes.get_mut(scope) {
                s.settle(sent, reply.map(Vec::as_slice), now);
            }
        }
        scopes.retain(|_, s| !s.idle());
    }
    #[cfg(test)]
    shared.syncs.fetch_add(1, Ordering::Relaxed);
    let was_failing = shared.failing.swap(failed > 0, Ordering::Relaxed);
    if failed == 0 {
        if was_failing {
            log::info!("limits: reconciled with Redis again");
        }
        return;
    }
    shared.metrics.store_error("limits");
    // Logged as it starts failing, not at every interval while it goes on (the metric counts).
    if !was_failing {
        let why = match &replies {
            Err(e) => e.to_string(),
            Ok(r) => r
                .iter()
                .find_map(|r| r.as_ref().err().cloned())
                .unwrap_or_default(),
        };
        log::warn!("limits: reconciliation of {failed} caller(s) with Redis failed: {why}");
    }
}

/// The script's call for caller `scope` with what it sends (`now` and the slot report's expiry,
/// in ms).
fn call(shared: &Shared, scope: &str, o: &Outgoing, (now, expires): (u64, u64)) -> redis::Cmd {
    // The exact mode's tag and keys (`redis`): the same counters.
    let tag = format!("{{{}limits:{scope}}}", shared.conn.key_prefix());
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(SCRIPT);
    let slots = usize::from(o.slots.is_some());
    cmd.arg(o.counters.len() + slots);
    for (name, window, _, _) in &o.counters {
        cmd.arg(format!("{tag}:{name}:{window}"));
    }
    if o.slots.is_some() {
        cmd.arg(format!("{tag}:concurrent:approximate"));
    }
    cmd.arg(o.counters.len());
    for (_, _, add, ttl) in &o.counters {
        cmd.arg(*add).arg(*ttl);
    }
    if let Some(held) = o.slots {
        cmd.arg(&shared.instance).arg(held).arg(now).arg(expires);
    }
    cmd
}

/// Send `cmds` in one pipeline (a Redis Cluster: side by side, each to its slot's node): each
/// call's reply, or why the whole could not be sent.
async fn send(
    conn: &RedisConn,
    cmds: &[redis::Cmd],
) -> Result<Vec<Result<Vec<u64>, String>>, StoreError> {
    let replies: Vec<RedisResult<Vec<u64>>> = conn
        .run(|c| async move {
            if let StoreConn::Cluster(_) = &c {
                let calls = cmds.iter().map(|cmd| {
                    let mut c = c.clone();
                    async move { cmd.query_async::<Vec<u64>>(&mut c).await }
                });
                return Ok(futures_util::future::join_all(calls).await);
            }
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for cmd in cmds {
                pipe.add_command(cmd.clone());
            }
            let mut c = c;
            pipe.query_async(&mut c).await
        })
        .await?;
    Ok(replies
        .into_iter()
        .map(|r| r.map_err(|e| format!("redis: {e}")))
        .collect())
}
