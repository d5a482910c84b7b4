//! The Redis task store against a real Redis: the one at `SWITCHYARD_TEST_REDIS_URL` (default
//! `redis://127.0.0.1:6379`; `.ci/run` starts one). No Redis there fails these tests rather than
//! skipping them, so a CI that lost its Redis cannot pass unnoticed.
//!
//! Every test uses its own key prefix, so runs sharing a Redis never see each other's tasks, and
//! every key it writes expires by itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support;
use support::redis::{raw, redis_url, run_prefix, Expiry};
use switchyard::internals::common::images::NativeTask;
use switchyard::internals::store::files::StoreError;
use switchyard::internals::store::redis_conn::RedisSettings;
use switchyard::internals::store::tasks::RedisTaskStore;
use switchyard::internals::store::tasks::TaskError;
use switchyard::internals::store::tasks::TaskRecord;
use switchyard::internals::store::tasks::TaskStatus;
use switchyard::internals::store::tasks::TaskStore;

fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A store of its own (its own connection), as another gateway instance would have.
fn store(prefix: &str) -> RedisTaskStore {
    let mut s = RedisSettings::new(redis_url());
    s.key_prefix = prefix.to_string();
    RedisTaskStore::new(s).unwrap()
}

fn task(status: TaskStatus, updated_ms: i64, instance: &str) -> TaskRecord {
    TaskRecord {
        status,
        request: Some(r#"{"model":"img-1","prompt":"a fox"}"#.into()),
        ..TaskRecord::started(
            "key-a".into(),
            "img-1".into(),
            instance.into(),
            1_700_000_000,
            updated_ms,
        )
    }
}

const MIN: Duration = Duration::from_secs(60);

async fn active(conn: &mut redis::aio::MultiplexedConnection, prefix: &str) -> Vec<(String, f64)> {
    redis::cmd("ZRANGE")
        .arg(format!("{{{prefix}tasks}}:active"))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_task_put_by_one_instance_is_read_by_another() {
    let mut conn = raw().await;
    let prefix = run_prefix();
    let (a, b) = (store(&prefix), store(&prefix));
    let id = new_id();

    let mut running = task(TaskStatus::Running, 1_700_000_000_123, "inst-a");
    running.native = vec![
        Some(NativeTask {
            provider: "bfl".into(),
            id: "cgt-2025".into(),
            polling_url: Some("https://api.us1.bfl.ai/v1/get_result?id=cgt-2025".into()),
        }),
        None,
    ];
    a.put(&id, &running, MIN).await.unwrap();
    assert_eq!(b.get(&id).await.unwrap(), Some(running.clone()));
    assert_eq!(
        active(&mut conn, &prefix).await,
        vec![(id.clone(), 1_700_000_000_123.0)]
    );

    // Finished, written by the other instance: read back exactly (empty arrays, big numbers and
    // all), and out of the active set.
    let mut done = running.clone();
    done.status = TaskStatus::Succeed;
    done.updated_ms += 1;
    done.data = vec![
        serde_json::json!({"url": "https://gw/api/v1/files/x", "revised_prompt": "a red fox"}),
        serde_json::json!({"b64_json": "iVBORw0KGgo=", "n": 9_007_199_254_740_993u64}),
    ];
    b.put(&id, &done, MIN).await.unwrap();
    assert_eq!(a.get(&id).await.unwrap(), Some(done));
    assert!(active(&mut conn, &prefix).await.is_empty());

    let mut failed = running;
    failed.status = TaskStatus::Failed;
    failed.error = Some(TaskError {
        code: "content_policy".into(),
        message: "refused".into(),
        details: Default::default(),
    });
    a.put(&id, &failed, MIN).await.unwrap();
    assert_eq!(b.get(&id).await.unwrap(), Some(failed.clone()));

    // The documented layout: the record's JSON with an expiry; the active set expires too. All
    // under one hash tag (one slot in a Redis Cluster).
    let key = format!("{{{prefix}tasks}}:task:{id}");
    assert_eq!(a.key(&id), key);
    assert_eq!(a.active_key(), format!("{{{prefix}tasks}}:active"));
    let (json, pttl): (String, i64) = redis::pipe()
        .get(&key)
        .pttl(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<TaskRecord>(&json).unwrap(),
        failed,
        "{json}"
    );
    assert!(json.contains(r#""status":"failed""#), "{json}");
    assert!(pttl > 50_000 && pttl <= 60_000, "{pttl}");

    a.put(&new_id(), &task(TaskStatus::Pending, 1, "inst-a"), MIN)
        .await
        .unwrap();
    let set_ttl: i64 = redis::cmd("PTTL")
        .arg(a.active_key())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(set_ttl > 50_000 && set_ttl <= 60_000, "{set_ttl}");

    // Unknown ids, other prefixes and keys that do not hold a task are not found.
    assert_eq!(a.get(&new_id()).await.unwrap(), None);
    assert_eq!(store(&run_prefix()).get(&id).await.unwrap(), None);
    let junk = new_id();
    let _: () = redis::cmd("SET")
        .arg(a.key(&junk))
        .arg("not json")
        .arg("PX")
        .arg(60_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(a.get(&junk).await.unwrap(), None);
    assert!(!a.claim(&junk, 1, "inst-a", 2, MIN).await.unwrap());
    a.ping().await.unwrap();
}

#[tokio::test]
async fn tasks_are_gone_when_their_time_is_up() {
    let mut conn = raw().await;
    let prefix = run_prefix();
    let s = store(&prefix);
    // A task that outlives the one expiring, so the active set (which expires no sooner than
    // its longest-lived member) outlives it too.
    let live = new_id();
    s.put(&live, &task(TaskStatus::Pending, 20, "inst-a"), MIN)
        .await
        .unwrap();
    let id = new_id();
    s.put(
        &id,
        &task(TaskStatus::Running, 10, "inst-a"),
        Duration::from_secs(1),
    )
    .await
    .unwrap();
    assert!(s.get(&id).await.unwrap().is_some(), "gone before expiry");
    assert_eq!(
        s.stale(100, 10).await.unwrap(),
        vec![id.clone(), live.clone()]
    );

    // Redis expires keys on its own clock; wait for that, but not forever.
    let mut wait = Expiry::within(Duration::from_secs(5));
    loop {
        if s.get(&id).await.unwrap().is_none() {
            break;
        }
        wait.again("task still served 5 s after a 1 s ttl").await;
    }
    let exists: i64 = redis::cmd("EXISTS")
        .arg(s.key(&id))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0, "expired task still in Redis");

    // An unfinished task that expired is no longer stale, and its id leaves the active set
    // once `stale` meets it.
    assert_eq!(active(&mut conn, &prefix).await.len(), 2);
    assert_eq!(s.stale(100, 10).await.unwrap(), vec![live.clone()]);
    assert_eq!(active(&mut conn, &prefix).await, vec![(live, 20.0)]);

    // A zero ttl is expired at once, as in the memory store, and leaves nothing active.
    let id = new_id();
    s.put(&id, &task(TaskStatus::Running, 5, "inst-a"), Duration::ZERO)
        .await
        .unwrap();
    assert!(s.get(&id).await.unwrap().is_none());
    assert_eq!(active(&mut conn, &prefix).await.len(), 1);

    // With only short-lived tasks, the active set goes with them: nothing is left behind.
    let prefix = run_prefix();
    let s = store(&prefix);
    s.put(
        &new_id(),
        &task(TaskStatus::Running, 10, "inst-a"),
        Duration::from_secs(1),
    )
    .await
    .unwrap();
    let mut wait = Expiry::within(Duration::from_secs(5));
    loop {
        let exists: i64 = redis::cmd("EXISTS")
            .arg(s.active_key())
            .query_async(&mut conn)
            .await
            .unwrap();
        if exists == 0 {
            break;
        }
        wait.again("active set still there 5 s after its only task's 1 s ttl")
            .await;
    }
}

#[tokio::test]
async fn stale_cleans_expired_ids_in_bounded_steps() {
    let mut conn = raw().await;
    let prefix = run_prefix();
    let s = store(&prefix);
    let live = new_id();
    s.put(&live, &task(TaskStatus::Running, 5000, "inst-a"), MIN)
        .await
        .unwrap();
    // 1005 ids of tasks that expired unfinished (as if their keys had gone), older than it.
    let mut zadd = redis::cmd("ZADD");
    zadd.arg(s.active_key());
    for i in 0..1005 {
        zadd.arg(i).arg(format!("gone-{i:04}"));
    }
    let _: i64 = zadd.query_async(&mut conn).await.unwrap();

    // One call cleans at most 1000 and may then return fewer than asked; the next finishes.
    assert!(s.stale(i64::MAX, 10).await.unwrap().is_empty());
    assert_eq!(active(&mut conn, &prefix).await.len(), 6);
    assert_eq!(s.stale(i64::MAX, 10).await.unwrap(), vec![live.clone()]);
    assert_eq!(active(&mut conn, &prefix).await, vec![(live, 5000.0)]);
}

#[tokio::test]
async fn stale_lists_old_unfinished_tasks_oldest_first() {
    let _ = raw().await;
    let prefix = run_prefix();
    let (a, b) = (store(&prefix), store(&prefix));
    let put = |id: &'static str, status, updated_ms| {
        let a = &a;
        async move {
            a.put(id, &task(status, updated_ms, "inst-a"), MIN)
                .await
                .unwrap()
        }
    };
    put("old", TaskStatus::Running, 100).await;
    put("older", TaskStatus::Pending, 50).await;
    put("fresh", TaskStatus::Running, 1000).await;
    put("done", TaskStatus::Succeed, 10).await;
    put("failed", TaskStatus::Failed, 10).await;
    // Was stale, then finished: must leave the listing.
    put("finished-later", TaskStatus::Running, 10).await;
    put("finished-later", TaskStatus::Succeed, 11).await;
    // Was stale, then beat again: the heartbeat takes it out of the listing.
    put("beating", TaskStatus::Running, 30).await;
    put("beating", TaskStatus::Running, 2000).await;

    assert_eq!(b.stale(500, 10).await.unwrap(), vec!["older", "old"]);
    assert_eq!(b.stale(500, 1).await.unwrap(), vec!["older"]);
    assert_eq!(
        b.stale(100, 10).await.unwrap(),
        vec!["older"],
        "a task exactly at the bound is not stale"
    );
    assert_eq!(
        b.stale(i64::MAX, 10).await.unwrap(),
        vec!["older", "old", "fresh", "beating"]
    );
    assert!(b.stale(500, 0).await.unwrap().is_empty());
    assert!(b.stale(i64::MIN, 10).await.unwrap().is_empty());
    assert!(store(&run_prefix())
        .stale(500, 10)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_claiming_the_same_task_one_wins() {
    let _ = raw().await;
    let prefix = run_prefix();
    let a = Arc::new(store(&prefix));
    let b = Arc::new(store(&prefix));
    // Warm both connections, so the race is between claims and not between connects.
    a.ping().await.unwrap();
    b.ping().await.unwrap();

    for round in 0..30 {
        let id = new_id();
        a.put(&id, &task(TaskStatus::Running, 100, "dead"), MIN)
            .await
            .unwrap();
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let claim = |s: Arc<RedisTaskStore>, instance: &'static str, now_ms: i64| {
            let (id, barrier) = (id.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                s.claim(&id, 100, instance, now_ms, MIN).await.unwrap()
            })
        };
        let ta = claim(a.clone(), "inst-a", 5000);
        let tb = claim(b.clone(), "inst-b", 5001);
        let (wa, wb) = (ta.await.unwrap(), tb.await.unwrap());
        assert!(wa ^ wb, "round {round}: a won {wa}, b won {wb}");

        let got = a.get(&id).await.unwrap().unwrap();
        let (winner, at) = if wa {
            ("inst-a", 5000)
        } else {
            ("inst-b", 5001)
        };
        assert_eq!((got.instance.as_str(), got.updated_ms), (winner, at));
        assert_eq!(got.request, task(TaskStatus::Running, 100, "dead").request);
        assert!(
            a.stale(at, 10).await.unwrap().is_empty(),
            "claim is a heartbeat"
        );
        assert_eq!(a.stale(at + 1, 10).await.unwrap(), vec![id.clone()]);

        // Late claims on the old heartbeat lose; on the new one, they win.
        assert!(!b.claim(&id, 100, "inst-c", 6000, MIN).await.unwrap());
        assert!(b.claim(&id, at, "inst-c", 6000, MIN).await.unwrap());
        assert_eq!(a.get(&id).await.unwrap().unwrap().instance, "inst-c");
    }

    // Gone and finished tasks are not claimed.
    assert!(!a.claim(&new_id(), 100, "inst-a", 5000, MIN).await.unwrap());
    let id = new_id();
    a.put(&id, &task(TaskStatus::Succeed, 100, "dead"), MIN)
        .await
        .unwrap();
    assert!(!b.claim(&id, 100, "inst-b", 5000, MIN).await.unwrap());
}

/// The store's answer to `call`, and how long it took.
async fn timed<T>(call: impl std::future::Future<Output = T>) -> (T, Duration) {
    let start = Instant::now();
    let out = call.await;
    (out, start.elapsed())
}

fn assert_unavailable<T: std::fmt::Debug>(r: Result<T, StoreError>) {
    match r {
        Err(StoreError::Unavailable(why)) => assert!(!why.is_empty()),
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

async fn all_calls_fail_within(s: &RedisTaskStore, bound: Duration) {
    let id = new_id();
    let (r, took) = timed(s.put(&id, &task(TaskStatus::Running, 1, "i"), MIN)).await;
    assert_unavailable(r);
    assert!(took < bound, "put took {took:?}");
    let (r, took) = timed(s.get(&id)).await;
    assert_unavailable(r);
    assert!(took < bound, "get took {took:?}");
    let (r, took) = timed(s.stale(100, 10)).await;
    assert_unavailable(r);
    assert!(took < bound, "stale took {took:?}");
    let (r, took) = timed(s.claim(&id, 1, "i", 2, MIN)).await;
    assert_unavailable(r);
    assert!(took < bound, "claim took {took:?}");
}

#[tokio::test]
async fn an_unreachable_redis_fails_fast() {
    let mut settings = RedisSettings::new("redis://127.0.0.1:1");
    settings.timeout = Duration::from_secs(1);
    let s = RedisTaskStore::new(settings).unwrap();
    for _ in 0..2 {
        all_calls_fail_within(&s, Duration::from_secs(3)).await;
    }
    assert_unavailable(s.ping().await);
}

#[tokio::test]
async fn a_redis_that_never_answers_fails_within_the_timeout() {
    // Accepts connections (the kernel completes them) but never says a word: the case that would
    // hang a store without a bound. Kept open until the test ends.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let mut settings = RedisSettings::new(format!("redis://127.0.0.1:{port}"));
    settings.timeout = Duration::from_millis(500);
    let s = RedisTaskStore::new(settings).unwrap();
    all_calls_fail_within(&s, Duration::from_secs(2)).await;
    drop(silent);
}

#[tokio::test]
async fn only_the_owning_instance_updates_a_task() {
    let mut conn = raw().await;
    let prefix = run_prefix();
    let (a, b) = (store(&prefix), store(&prefix));
    let id = new_id();
    a.put(&id, &task(TaskStatus::Running, 100, "inst-a"), MIN)
        .await
        .unwrap();

    // Its owner's heartbeat is written (and moves it in the active set).
    let beat = task(TaskStatus::Pending, 200, "inst-a");
    assert!(a.update(&id, &beat, MIN).await.unwrap());
    assert_eq!(b.get(&id).await.unwrap(), Some(beat.clone()));
    assert_eq!(active(&mut conn, &prefix).await, vec![(id.clone(), 200.0)]);

    // Claimed by B: A's next write is refused and changes nothing.
    assert!(b.claim(&id, 200, "inst-b", 300, MIN).await.unwrap());
    assert!(!a
        .update(&id, &task(TaskStatus::Running, 400, "inst-a"), MIN)
        .await
        .unwrap());
    let now = a.get(&id).await.unwrap().unwrap();
    assert_eq!((now.instance.as_str(), now.updated_ms), ("inst-b", 300));

    // B finishes it; after that nobody updates it, not even B.
    let done = task(TaskStatus::Succeed, 500, "inst-b");
    assert!(b.update(&id, &done, MIN).await.unwrap());
    assert!(active(&mut conn, &prefix).await.is_empty());
    assert!(!b
        .update(&id, &task(TaskStatus::Running, 600, "inst-b"), MIN)
        .await
        .unwrap());
    assert_eq!(a.get(&id).await.unwrap(), Some(done));

    // A task that is gone is not recreated by an update.
    let gone = new_id();
    assert!(!a
        .update(&gone, &task(TaskStatus::Running, 700, "inst-a"), MIN)
        .await
        .unwrap());
    assert_eq!(a.get(&gone).await.unwrap(), None);
}

#[tokio::test]
async fn a_task_an_older_gateway_wrote_is_still_read() {
    // Gateways before hash-tagged keys kept a task at `{prefix}task:{id}`: during a rolling
    // upgrade its poll may reach this one.
    let prefix = run_prefix();
    let s = store(&prefix);
    let id = new_id();
    let mut done = task(TaskStatus::Succeed, 5, "old-instance");
    done.data = vec![serde_json::json!({"url": "https://x/y.png"})];
    let mut conn = raw().await;
    let _: () = redis::cmd("SET")
        .arg(format!("{prefix}task:{id}"))
        .arg(serde_json::to_string(&done).unwrap())
        .arg("PX")
        .arg(60_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(s.get(&id).await.unwrap(), Some(done));
    // The current key wins when both exist.
    let current = task(TaskStatus::Running, 6, "new-instance");
    s.put(&id, &current, MIN).await.unwrap();
    assert_eq!(s.get(&id).await.unwrap(), Some(current));
}
