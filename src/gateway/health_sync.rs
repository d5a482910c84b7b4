//! Sharing targets' ejections between instances through Redis, so that a target one instance
//! found failing is avoided by all of them (and not probed by each in turn).
//!
//! A background service, about once a second: pushes this instance's new ejections
//! (`Health::take_outbox`) into one sorted set, scored by the time each ends (ms since the epoch),
//! reads back the entries still in force (every instance's) and adopts them
//! (`Health::adopt`), and drops the ended ones. One key, `{<prefix>health}:ejected`, so every
//! call touches one hash slot (Redis Cluster). The request path never calls Redis; with Redis
//! down each instance still ejects on its own, and its unsent ejections are kept for the next
//! round while they last. A target retired because its provider said its model is gone is shared
//! the same way, its member marked `r` (`r5:cohererank-v3.5`), so every instance holds it out as
//! retired (and serves its model's successor); an instance that does not know the mark ignores it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::gateway::GatewayState;
use crate::store::redis_conn::RedisConn;
use crate::upstream::health::Health;

/// How often ejections are exchanged.
const PERIOD: Duration = Duration::from_secs(1);

/// The background service (added by `server` when Redis is configured).
pub(crate) struct HealthSync {
    pub state: Arc<GatewayState>,
}

#[async_trait]
impl BackgroundService for HealthSync {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let Some(conn) = self.state.redis.clone() else {
            return;
        };
        self.state.upstream.health.share();
        let mut tick = tokio::time::interval(PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        break;
                    }
                }
                _ = tick.tick() => {
                    if let Err(e) = exchange(&conn, &self.state.upstream.health).await {
                        log::debug!("sharing target ejections: {e}");
                        self.state.metrics.store_error("health");
                    }
                }
            }
        }
    }
}

/// The sorted set of ejections.
fn key(conn: &RedisConn) -> String {
    format!("{}:ejected", conn.tag("health"))
}

/// A member: the account and native model, the first length-prefixed so any names can be told
/// apart (`5:cohererank-v3.5`).
fn member(account: &str, native_model: &str, retired: bool) -> String {
    let mark = if retired { "r" } else { "" };
    format!("{mark}{}:{account}{native_model}", account.len())
}

/// The account, the native model, and whether the member is a retirement.
fn parse_member(m: &str) -> Option<(&str, &str, bool)> {
    let (m, retired) = match m.strip_prefix('r') {
        Some(rest) => (rest, true),
        None => (m, false),
    };
    let (len, rest) = m.split_once(':')?;
    let len: usize = len.parse().ok()?;
    if !rest.is_char_boundary(len) {
        return None;
    }
    let (account, native) = rest.split_at(len);
    Some((account, native, retired))
}

/// One round: push, pull, adopt, clean. Idempotent (`ZADD GT` keeps the later end; the reads
/// change nothing; removing ended entries twice removes nothing more), so `RedisConn::run` may
/// apply it twice.
async fn exchange(conn: &RedisConn, health: &Health) -> Result<(), String> {
    let outbox = health.take_outbox();
    let key = key(conn);
    let now = health.now_ms();
    let keep = health.longest_ejection_ms();
    let result = conn
        .run(|mut c| {
            let mut pipe = redis::pipe();
            for (account, native, until, retired) in &outbox {
                pipe.cmd("ZADD")
                    .arg(&key)
                    .arg("GT")
                    .arg(*until)
                    .arg(member(account, native, *retired))
                    .ignore();
            }
            pipe.cmd("ZREMRANGEBYSCORE")
                .arg(&key)
                .arg("-inf")
                .arg(now)
                .ignore();
            pipe.cmd("ZRANGE")
                .arg(&key)
                .arg(format!("({now}"))
                .arg("+inf")
                .arg("BYSCORE")
                .arg("WITHSCORES");
            // The set lives as long as its last ejection could (a retirement lasts hours).
            pipe.cmd("PEXPIRE")
                .arg(&key)
                .arg(keep.max(3_600_000))
                .ignore();
            async move { pipe.query_async::<(Vec<(String, u64)>,)>(&mut c).await }
        })
        .await;
    match result {
        Ok((entries,)) => {
            for (m, until) in entries {
                if let Some((account, native, retired)) = parse_member(&m) {
                    health.adopt(account, native, until, retired);
                }
            }
            Ok(())
        }
        Err(e) => {
            // Kept for the next round (the ended ones are of no use to anyone).
            health.requeue(outbox.into_iter().filter(|(_, _, u, _)| *u > now));
            Err(e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_round_trip_whatever_the_names() {
        for (a, m) in [
            ("cohere", "rerank-v3.5"),
            ("a:b", "1:x"),
            ("", "m"),
            ("é", "ü"),
        ] {
            for retired in [false, true] {
                assert_eq!(parse_member(&member(a, m, retired)), Some((a, m, retired)));
            }
        }
        assert_eq!(parse_member("junk"), None);
        assert_eq!(parse_member("99:x"), None);
    }
}
