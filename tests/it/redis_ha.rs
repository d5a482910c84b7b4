//! The shared store on Redis as operators run it, against local `redis-server` processes these
//! tests start themselves (`support::redis_procs`):
//! - a three-node Redis Cluster: hosted images and asynchronous tasks work through a gateway, the
//!   task scripts (write, claim, the sweep that walks the active set) run without `CROSSSLOT`,
//!   and a task whose instance died is taken over;
//! - Sentinel: a primary, two replicas and a sentinel. A write the replicas do not confirm is not
//!   acknowledged (`min_replicas_acked`); after the primary is killed (SIGKILL) the gateway
//!   carries on with the promoted replica, and everything acknowledged before is still there.

use std::time::{Duration, Instant};

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Reply};
use support::image_conformance::{b64, get_hosted, png};
use support::redis_procs::{eventually, Cluster, RedisProc, PATIENCE};
use support::tasks::{finished, start};
use support::{client, post, redis, TestGateway};
use switchyard::internals::store::redis_conn::{RedisSettings, Topology};
use switchyard::internals::store::tasks::{RedisTaskStore, TaskRecord, TaskStore};

const GENERATIONS: &str = "/api/v1/images/generations";

/// A gateway (standard test config) whose store is `store` (a YAML flow mapping's inside).
fn gateway_with_store(fake: &FakeProvider, store: &str) -> TestGateway {
    TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports)
            .replace(
                "  images: {",
                &format!("  store: {{{store}}}\n  images: {{"),
            )
            .replace(
                "poll_interval_ms: 20",
                "poll_interval_ms: 20, task_heartbeat_ms: 100, task_lost_after_ms: 300",
            )
    })
}

/// Generate one image as a hosted link; its URL.
fn hosted(gw: &TestGateway, fake: &FakeProvider, img: &[u8]) -> client::Response {
    fake.push(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": b64(img)}]}),
    ));
    post(
        gw,
        GENERATIONS,
        &json!({"model": "gpt-image-1", "prompt": "p"}),
    )
}

fn url_of(resp: &client::Response) -> String {
    assert_eq!(resp.status, 200, "{}", resp.text());
    resp.json()["data"][0]["url"].as_str().unwrap().to_string()
}

fn served(gw: &TestGateway, url: &str) -> Vec<u8> {
    let resp = get_hosted(gw, url);
    assert_eq!(resp.status, 200, "{url}: {}", resp.text());
    resp.body
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn hosted_images_and_tasks_work_on_a_redis_cluster() {
    let cluster = Cluster::start();
    let prefix = redis::run_prefix();
    let nodes = cluster
        .urls()
        .iter()
        .map(|u| format!("\"{u}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let fake = FakeProvider::start();
    let gw = gateway_with_store(
        &fake,
        &format!("redis_cluster: [{nodes}], key_prefix: \"{prefix}\""),
    );

    // Hosted images until their keys spread over more than one node (file ids are random: six
    // all land on one of three nodes once in 243 runs, so the test hosts more until they spread,
    // rather than hoping they do).
    let node_of = |url: &str| -> i64 {
        let id = url.rsplit('/').next().unwrap();
        let key = format!("{prefix}file:{id}");
        let slot: i64 = cluster.nodes[0].must(&["CLUSTER", "KEYSLOT", &key]);
        slot * 3 / 16384
    };
    let mut nodes_used = std::collections::BTreeSet::new();
    let mut hosted_files = Vec::new();
    for i in 0..40u8 {
        let img = png(2_000, i);
        let url = url_of(&hosted(&gw, &fake, &img));
        nodes_used.insert(node_of(&url));
        hosted_files.push((url, img));
        if hosted_files.len() >= 6 && nodes_used.len() > 1 {
            break;
        }
    }
    assert!(
        nodes_used.len() > 1,
        "40 files, every one on one node: {nodes_used:?}"
    );
    for (url, img) in &hosted_files {
        assert_eq!(&served(&gw, url), img, "{url}");
    }

    // An asynchronous task runs to the end (scripts on the tasks' one slot).
    let img = png(3_000, 42);
    fake.set_default(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": b64(&img)}]}),
    ));
    let id = start(
        &gw,
        json!({"model": "gpt-image-1", "prompt": "p", "async": true}),
    );
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "succeed", "{done}");
    assert_eq!(served(&gw, done["data"][0]["url"].as_str().unwrap()), img);

    // A task left by a dead instance: the sweep script lists it (it walks the active set and
    // the tasks' keys in one script, so one slot), and the gateway takes it over and runs it
    // again from its request.
    let mut settings = RedisSettings::with_topology(Topology::Cluster {
        nodes: cluster.urls(),
    });
    settings.key_prefix = prefix.clone();
    let store = RedisTaskStore::new(settings).unwrap();
    let lost = uuid::Uuid::new_v4().to_string();
    let record = TaskRecord {
        request: Some(
            json!({"model": "gpt-image-1", "prompt": "a fox", "async": true,
                   "response_format": "b64_json"})
            .to_string(),
        ),
        region: "cn".into(),
        base: "http://gateway.example".into(),
        ..TaskRecord::started(
            "key:tester".into(),
            "gpt-image-1".into(),
            "dead-instance".into(),
            now_ms() / 1000 - 120,
            now_ms() - 120_000,
        )
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(store.put(&lost, &record, Duration::from_secs(600)))
        .unwrap();
    let listed = rt.block_on(store.stale(now_ms() - 60_000, 100));
    // The gateway's own sweep (every few hundred ms here) may have listed it first, with the
    // same script, and taken it over: then it is no longer stale, and no longer the dead one's.
    let taken_over = || {
        rt.block_on(store.get(&lost))
            .ok()
            .flatten()
            .is_some_and(|r| r.instance != "dead-instance")
    };
    assert!(
        matches!(&listed, Ok(ids) if ids.contains(&lost)) || taken_over(),
        "{listed:?}"
    );
    let done = finished(&gw, &lost);
    assert_eq!(done["task_status"], "succeed", "{done}");
    assert_eq!(done["data"], json!([{"b64_json": b64(&img)}]));
    let active: i64 = {
        let key = store.active_key();
        let slot: i64 = cluster.nodes[0].must(&["CLUSTER", "KEYSLOT", &key]);
        let owner = &cluster.nodes[(slot * 3 / 16384) as usize];
        owner.must(&["ZCARD", &key])
    };
    assert_eq!(active, 0, "finished tasks left in the active set");
}

/// A 503 `store_unavailable` in the Error shape.
fn refused(resp: &client::Response) -> bool {
    resp.status == 503 && resp.json()["code"] == "store_unavailable"
}

#[test]
fn under_sentinel_the_gateway_follows_a_failover_and_loses_nothing_acknowledged() {
    let primary = RedisProc::start(&[]);
    let replicas: Vec<RedisProc> = (0..2)
        .map(|_| RedisProc::start(&["--replicaof", "127.0.0.1", &primary.port.to_string()]))
        .collect();
    eventually("the replicas never came online", || {
        primary
            .query::<String>(&["INFO", "replication"])
            .is_ok_and(|i| {
                i.contains("connected_slaves:2") && i.matches("state=online").count() == 2
            })
    });
    let sentinel = RedisProc::sentinel("mymaster", primary.port);
    eventually("the sentinel never saw both replicas", || {
        sentinel
            .query::<Vec<::redis::Value>>(&["SENTINEL", "REPLICAS", "mymaster"])
            .is_ok_and(|r| r.len() == 2)
    });

    let prefix = redis::run_prefix();
    let fake = FakeProvider::start();
    let gw = gateway_with_store(
        &fake,
        &format!(
            "redis_sentinel: {{urls: [\"{}\"], master: mymaster, min_replicas_acked: 1}}, \
             key_prefix: \"{prefix}\", timeout_ms: 1000",
            sentinel.url()
        ),
    );

    // Acknowledged before anything goes wrong: hosted images and a finished task.
    let imgs: Vec<Vec<u8>> = (0..4).map(|i| png(2_000, i)).collect();
    let urls: Vec<String> = imgs
        .iter()
        .map(|i| url_of(&hosted(&gw, &fake, i)))
        .collect();
    let img = png(3_000, 42);
    fake.set_default(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": b64(&img)}]}),
    ));
    let id = start(
        &gw,
        json!({"model": "gpt-image-1", "prompt": "p", "async": true}),
    );
    let task: Value = finished(&gw, &id);
    assert_eq!(task["task_status"], "succeed", "{task}");

    // No replica answering: a write only the primary holds is not acknowledged (a 503, not a
    // link that a failover could break).
    for r in &replicas {
        r.signal("STOP");
    }
    let resp = hosted(&gw, &fake, &png(2_000, 99));
    for r in &replicas {
        r.signal("CONT");
    }
    assert!(refused(&resp), "{} {}", resp.status, resp.text());
    eventually("the replicas never caught up again", || {
        primary
            .query::<i64>(&["WAIT", "2", "100"])
            .is_ok_and(|n| n == 2)
    });

    // The primary dies; the sentinel promotes a replica, and the gateway follows by itself.
    let old = primary.port;
    let mut primary = primary;
    primary.kill();
    let started = Instant::now();
    let mut after = None;
    eventually("the gateway never carried on after the failover", || {
        let resp = hosted(&gw, &fake, &png(2_000, 7));
        if resp.status == 200 {
            after = Some(url_of(&resp));
            return true;
        }
        assert!(refused(&resp), "{} {}", resp.status, resp.text());
        false
    });
    let took = started.elapsed();
    assert!(took < PATIENCE, "{took:?}");
    eprintln!("redis_ha: the gateway carried on {took:?} after the primary was killed");
    let named: Vec<String> = sentinel.must(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]);
    assert_ne!(named[1], old.to_string(), "no failover happened");

    // Everything acknowledged before the kill is there, and new work goes on.
    for (url, img) in urls.iter().zip(&imgs) {
        assert_eq!(&served(&gw, url), img, "{url} lost in the failover");
    }
    assert_eq!(served(&gw, &after.unwrap()), png(2_000, 7));
    let again = support::tasks::task(&gw, &id, support::KEY);
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(again.json(), task, "the task changed in the failover");
    let id = start(
        &gw,
        json!({"model": "gpt-image-1", "prompt": "p", "async": true}),
    );
    assert_eq!(finished(&gw, &id)["task_status"], "succeed");
}

/// The response cache on a Cluster: entries are shared through it, and purging a model finds its
/// keys on the node that serves their slot (a keyless `SCAN` would go to any node).
#[cfg(feature = "metrics")]
#[test]
fn the_response_cache_purges_a_model_on_a_redis_cluster() {
    let cluster = Cluster::start();
    let prefix = redis::run_prefix();
    let nodes = cluster
        .urls()
        .iter()
        .map(|u| format!("\"{u}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let fake = FakeProvider::start();
    fake.set_handler(|_| Some(Reply::bytes(200, "audio/mpeg", vec![9; 300])));
    let m = support::free_port();
    let gw = TestGateway::start_with(|ports| {
        let mut c = support::config(&fake.base_url(), ports)
            .replace(
                "  images: {",
                &format!(
                    "  store: {{redis_cluster: [{nodes}], key_prefix: \"{prefix}\"}}\n  cache: {{store: redis}}\n  images: {{"
                ),
            )
            .replace(
                "switchyard:\n",
                &format!("switchyard:\n  metrics: {{address: \"127.0.0.1:{m}\"}}\n"),
            );
        c.push_str("    tts-cached: {family: openai-tts-instruct, targets: [{provider: openai, model: gpt-4o-mini-tts}], cache: {ttl_seconds: 600}}\n");
        c
    });
    let metrics: std::net::SocketAddr = format!("127.0.0.1:{m}").parse().unwrap();
    support::wait_listening(metrics);
    let speech = |input: &str| {
        let r = post(
            &gw,
            "/api/v1/audio/speech",
            &json!({"model": "tts-cached", "input": input}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        r.header("switchyard-cache").unwrap_or_default().to_string()
    };
    for input in ["one", "two", "three"] {
        assert_eq!(speech(input), "miss");
        assert_eq!(speech(input), "hit");
    }
    // The model's tag is served by one node; the purge is sent from a gateway that may be
    // connected to any of them.
    let r = client::request(metrics, "POST", "/cache/purge?model=tts-cached", &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["purged"], 3, "{}", r.text());
    for input in ["one", "two", "three"] {
        assert_eq!(speech(input), "miss");
    }
}
