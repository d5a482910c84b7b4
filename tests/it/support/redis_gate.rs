//! A TCP proxy in front of the test Redis that counts the limits checks sent through it and
//! holds those past an allowance, so a test can tell how many a request needed before its
//! answer (issue 32: at most one round trip on a request's path).
//!
//! A limits check is recognised by its Lua script's SHA1, which names it in every `EVALSHA`
//! (`src/limits/redis.rs`, read here so the gate follows the script; the lease renewal is
//! another script and is not counted). A check Redis answers `NOSCRIPT` is sent again as `EVAL`
//! with its text, after it has passed the gate: it is counted once. Bytes from
//! the gateway are forwarded as they arrive, except a read holding a check past the allowance:
//! that read, and everything after it on its connection, waits until the allowance grows, so
//! commands stay in the order sent. Counting `MONITOR`-free and per proxy keeps tests running
//! side by side on one Redis out of each other's counts.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The limits check script's SHA1 in hex, as `EVALSHA` names it.
fn marker() -> &'static [u8] {
    static SHA: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SHA.get_or_init(|| {
        const SOURCE: &str = include_str!("../../../src/limits/redis.rs");
        const START: &str = "const SCRIPT: &str = r\"";
        let from = SOURCE.find(START).expect("the limits script in its source") + START.len();
        let to = from + SOURCE[from..].find("\";").expect("the script's end");
        ::redis::Script::new(&SOURCE[from..to])
            .get_hash()
            .to_string()
    })
    .as_bytes()
}

#[derive(Default)]
struct Counts {
    /// Checks forwarded to Redis.
    passed: u64,
    /// Checks waiting for the allowance.
    held: u64,
    /// How many checks may pass in all.
    allowed: u64,
}

#[derive(Default)]
struct Shared {
    counts: Mutex<Counts>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The proxy: `url()` for the gateway's `store.redis_url`.
pub struct RedisGate {
    port: u16,
    shared: Arc<Shared>,
}

impl RedisGate {
    /// A proxy to the Redis at `127.0.0.1:6379`-style `target` (`host:port`), letting no check
    /// through until [`RedisGate::allow`].
    pub fn start(target: &str) -> RedisGate {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared::default());
        let (target, accepting) = (target.to_string(), shared.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || copy(s2, c2));
                let shared = accepting.clone();
                std::thread::spawn(move || forward(client, server, &shared));
            }
        });
        RedisGate { port, shared }
    }

    /// The gate in front of the test Redis.
    pub fn in_front_of_test_redis() -> RedisGate {
        let url = super::redis::redis_url();
        let target = url
            .trim_start_matches("redis://")
            .trim_end_matches('/')
            .to_string();
        RedisGate::start(&target)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Let `n` more checks through (held ones first).
    pub fn allow(&self, n: u64) {
        self.shared.lock().allowed += n;
        self.shared.changed.notify_all();
    }

    /// Wait until `passed` checks have been forwarded to Redis and `held` wait for
    /// [`RedisGate::allow`] (the gateway's calls run on tasks of their own); fails the test
    /// after 10 s.
    pub fn wait_for(&self, passed: u64, held: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut counts = self.shared.lock();
        while (counts.passed, counts.held) != (passed, held) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "limits checks: wanted {passed} passed and {held} held, have {} and {}",
                counts.passed,
                counts.held
            );
            counts = self
                .shared
                .changed
                .wait_timeout(counts, left.min(Duration::from_millis(50)))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for RedisGate {
    /// Lets every held check go, so no forwarding thread waits past its test.
    fn drop(&mut self) {
        self.allow(u64::MAX / 2);
    }
}

/// Redis's replies, back to the gateway as they come.
fn copy(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = vec![0u8; 64 << 10];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// The gateway's commands, on to Redis: a read with checks in it waits for each to be allowed.
fn forward(mut from: TcpStream, mut to: TcpStream, shared: &Shared) {
    let mut buf = vec![0u8; 64 << 10];
    // The end of the previous read, so a marker split across two reads is still found.
    let mut tail: Vec<u8> = Vec::new();
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        let mut seen = tail.clone();
        seen.extend_from_slice(&buf[..n]);
        let marker = marker();
        let checks = seen.windows(marker.len()).filter(|w| *w == marker).count() as u64;
        let keep = seen.len().min(marker.len() - 1);
        tail = seen[seen.len() - keep..].to_vec();
        if checks > 0 {
            let mut counts = shared.lock();
            counts.held += checks;
            shared.changed.notify_all();
            while counts.passed + checks > counts.allowed {
                counts = shared
                    .changed
                    .wait(counts)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            counts.held -= checks;
            counts.passed += checks;
            shared.changed.notify_all();
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
