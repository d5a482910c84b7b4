//! The Redis the shared-state tests use: `SWITCHYARD_TEST_REDIS_URL`, default
//! `redis://127.0.0.1:6379` (`.ci/run` starts one). Tests fail, never skip, without it.

use std::time::Duration;

use super::fake::FakeProvider;
use super::TestGateway;

pub fn redis_url() -> String {
    std::env::var("SWITCHYARD_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A key prefix no other test or run uses.
pub fn run_prefix() -> String {
    format!("switchyard-test:{}:", uuid::Uuid::new_v4())
}

/// A direct connection to the test Redis, to look at what the store wrote. Fails the test, with
/// what to do, when there is no Redis.
pub async fn raw() -> redis::aio::MultiplexedConnection {
    let url = redis_url();
    let client = redis::Client::open(url.as_str()).unwrap();
    let conn = tokio::time::timeout(
        Duration::from_secs(5),
        client.get_multiplexed_async_connection(),
    )
    .await;
    match conn {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => panic!(
            "no Redis at {url} ({e}): start one (redis-server, as .ci/run does) or set \
             SWITCHYARD_TEST_REDIS_URL"
        ),
        Err(_) => panic!("Redis at {url} did not answer within 5 s"),
    }
}

/// The keys matching `pattern`, found with `SCAN`, never `KEYS`: the test Redis is shared, and on
/// one a benchmark has just filled (a peer run keeps its image answers for an hour: millions of
/// keys) a `KEYS` blocks it for a second, long enough for every other test's gateway to time out.
pub async fn keys(conn: &mut redis::aio::MultiplexedConnection, pattern: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, mut keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(10_000)
            .query_async(conn)
            .await
            .unwrap();
        found.append(&mut keys);
        if next == 0 {
            return found;
        }
        cursor = next;
    }
}

/// A gateway (standard test config) keeping hosted images and tasks in the test Redis under
/// `prefix`; instances with the same prefix share them.
pub fn gateway(fake: &FakeProvider, prefix: &str) -> TestGateway {
    gateway_at(fake, &redis_url(), prefix, 2000)
}

/// The same with any Redis URL (an unreachable one, say) and store timeout.
pub fn gateway_at(fake: &FakeProvider, url: &str, prefix: &str, timeout_ms: u64) -> TestGateway {
    TestGateway::start_with(|ports| {
        super::config(&fake.base_url(), ports).replace(
            "  images: {",
            &format!(
                "  store: {{redis_url: \"{url}\", key_prefix: \"{prefix}\", timeout_ms: {timeout_ms}}}\n  images: {{"
            ),
        )
    })
}

/// Paces a loop that waits for Redis to act on its own clock (key expiry): each [`Expiry::again`]
/// fails the test past the limit, else waits for the next 50 ms re-check.
pub struct Expiry {
    deadline: std::time::Instant,
    every: tokio::time::Interval,
}

impl Expiry {
    pub fn within(limit: Duration) -> Expiry {
        Expiry {
            deadline: std::time::Instant::now() + limit,
            every: tokio::time::interval(Duration::from_millis(50)),
        }
    }

    pub async fn again(&mut self, what: &str) {
        assert!(std::time::Instant::now() < self.deadline, "{what}");
        self.every.tick().await;
    }
}
