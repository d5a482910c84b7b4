//! The Redis file store against a real Redis: the one at `SWITCHYARD_TEST_REDIS_URL` (default
//! `redis://127.0.0.1:6379`; `.ci/run` starts one). No Redis there fails these tests rather than
//! skipping them, so a CI that lost its Redis cannot pass unnoticed.
//!
//! Every run uses its own key prefix, so runs sharing a Redis never see each other's files, and
//! every key it writes expires by itself.

use std::time::{Duration, Instant};

use crate::support;
use bytes::Bytes;
use support::redis::{raw, redis_url, run_prefix, Expiry};
use switchyard::internals::store::files::new_id;
use switchyard::internals::store::files::FileStore;
use switchyard::internals::store::files::StoreError;
use switchyard::internals::store::files::StoredFile;
use switchyard::internals::store::redis_files::RedisFileStore;
use switchyard::internals::store::redis_files::RedisSettings;

fn store(prefix: &str) -> RedisFileStore {
    let mut s = RedisSettings::new(redis_url());
    s.key_prefix = prefix.to_string();
    RedisFileStore::new(s).unwrap()
}

fn file(content_type: &str, bytes: Vec<u8>) -> StoredFile {
    StoredFile {
        content_type: content_type.into(),
        bytes: Bytes::from(bytes),
    }
}

#[tokio::test]
async fn a_file_put_by_one_instance_is_served_by_another() {
    let mut conn = raw().await;
    let prefix = run_prefix();
    let (a, b) = (store(&prefix), store(&prefix));

    // Every byte value, and more than a MB: the store must be binary-safe and not truncate.
    let png: Vec<u8> = (0..1_200_000u32).map(|i| (i % 256) as u8).collect();
    let id = new_id();
    a.put(&id, file("image/png", png.clone()), Duration::from_secs(60))
        .await
        .unwrap();
    let (got, left) = b.get(&id).await.unwrap().expect("file put by a, read by b");
    assert_eq!(got, file("image/png", png));
    assert!(
        left > Duration::from_secs(50) && left <= Duration::from_secs(60),
        "{left:?}"
    );

    // The other way round, and a second put under the same id replaces the first.
    b.put(
        &id,
        file("image/webp", vec![1, 2, 3]),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let (got, left) = a.get(&id).await.unwrap().unwrap();
    assert_eq!(got, file("image/webp", vec![1, 2, 3]));
    assert!(left <= Duration::from_secs(30), "{left:?}");

    // The documented layout, which another implementation (or an operator) relies on.
    let key = format!("{prefix}file:{id}");
    assert_eq!(a.key(&id), key);
    let (ct, bytes, pttl): (String, Vec<u8>, i64) = redis::pipe()
        .hget(&key, "content_type")
        .hget(&key, "bytes")
        .pttl(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        (ct.as_str(), bytes.as_slice()),
        ("image/webp", &[1u8, 2, 3][..])
    );
    assert!(pttl > 0 && pttl <= 30_000, "{pttl}");
    let _: () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
}

#[tokio::test]
async fn files_are_gone_when_their_time_is_up() {
    let mut conn = raw().await;
    let s = store(&run_prefix());
    let id = new_id();
    s.put(&id, file("image/png", vec![9; 100]), Duration::from_secs(1))
        .await
        .unwrap();
    let (_, left) = s.get(&id).await.unwrap().expect("served before expiry");
    assert!(
        left <= Duration::from_secs(1) && !left.is_zero(),
        "{left:?}"
    );

    // Redis expires keys on its own clock; wait for that, but not forever.
    let mut wait = Expiry::within(Duration::from_secs(5));
    loop {
        if s.get(&id).await.unwrap().is_none() {
            break;
        }
        wait.again("file still served 5 s after a 1 s ttl").await;
    }
    let exists: i64 = redis::cmd("EXISTS")
        .arg(s.key(&id))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0, "expired file still in Redis");

    // A zero ttl is expired at once, as in the memory store.
    let id = new_id();
    s.put(&id, file("image/png", vec![1]), Duration::ZERO)
        .await
        .unwrap();
    assert!(s.get(&id).await.unwrap().is_none());
}

#[tokio::test]
async fn unknown_ids_and_other_prefixes_are_not_found() {
    let _ = raw().await;
    let prefix = run_prefix();
    let s = store(&prefix);
    assert!(s.get(&new_id()).await.unwrap().is_none());

    let id = new_id();
    s.put(&id, file("image/png", vec![5; 10]), Duration::from_secs(10))
        .await
        .unwrap();
    let elsewhere = store(&run_prefix());
    assert!(
        elsewhere.get(&id).await.unwrap().is_none(),
        "a store saw a file under another prefix"
    );
    s.ping().await.unwrap();
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

#[tokio::test]
async fn an_unreachable_redis_fails_fast() {
    let mut settings = RedisSettings::new("redis://127.0.0.1:1");
    settings.timeout = Duration::from_secs(1);
    let s = RedisFileStore::new(settings).unwrap();
    let id = new_id();
    for _ in 0..2 {
        let (r, took) = timed(s.put(&id, file("image/png", vec![1]), Duration::from_secs(5))).await;
        assert_unavailable(r);
        assert!(took < Duration::from_secs(3), "put took {took:?}");
        let (r, took) = timed(s.get(&id)).await;
        assert_unavailable(r);
        assert!(took < Duration::from_secs(3), "get took {took:?}");
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
    let s = RedisFileStore::new(settings).unwrap();

    let (r, took) = timed(s.get(&new_id())).await;
    assert_unavailable(r);
    assert!(took < Duration::from_secs(2), "get took {took:?}");
    let (r, took) = timed(s.put(
        &new_id(),
        file("image/png", vec![1]),
        Duration::from_secs(5),
    ))
    .await;
    assert_unavailable(r);
    assert!(took < Duration::from_secs(2), "put took {took:?}");
    drop(silent);
}
