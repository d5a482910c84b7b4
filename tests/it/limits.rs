//! Per-caller limits over real sockets: a request budget shared by two instances on one Redis,
//! concurrent slots held by stalling streams (across instances, and given back after the
//! answer), a usage budget (speech characters) in process memory, Redis unreachable failing open
//! and closed, and JWT subjects limited by a claim. Speech and images are admitted with their
//! known cost once the body is validated: one Redis round trip on a request's path (issue 32),
//! refusals as before.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::json;

use crate::support::client::{self, Response};
use crate::support::fake::{FakeProvider, Reply};
#[cfg(feature = "redis")]
use crate::support::redis;
#[cfg(feature = "redis")]
use crate::support::redis_gate::RedisGate;
#[cfg(feature = "redis")]
use crate::support::redis_procs::RedisProc;
use crate::support::{config, free_port, TestGateway, JWT_SECRET};

pub(crate) const LIMITED: &str = "limited-key";

/// The standard config with an API key `limited` carrying `limits`, its state in the Redis at
/// `store` (`url`, prefix) if given, and `auth_extra` lines added to `auth:`.
pub(crate) fn limited(
    fake: &FakeProvider,
    ports: (u16, u16),
    limits: &str,
    store: Option<(&str, &str)>,
    auth_extra: &str,
) -> String {
    let mut yaml = config(&fake.base_url(), ports);
    let hashed = "      - {name: hashed,";
    assert!(yaml.contains(hashed));
    yaml = yaml.replace(
        hashed,
        &format!("      - {{name: limited, key: \"{LIMITED}\", limits: {limits}}}\n{hashed}"),
    );
    if let Some((url, prefix)) = store {
        yaml = yaml.replace(
            "  images: {",
            &format!(
                "  store: {{redis_url: \"{url}\", key_prefix: \"{prefix}\", timeout_ms: 500}}\n  images: {{"
            ),
        );
    }
    yaml.replace("  auth:\n", &format!("  auth:\n{auth_extra}"))
}

pub(crate) fn rerank(addr: SocketAddr, key: &str) -> Response {
    client::post_json(
        addr,
        "/api/v1/rerank",
        &[("Service-API-Key", key)],
        &json!({"model": "local-bm25", "query": "a cat", "documents": ["a cat sat", "dogs"]}),
    )
}

fn speech(addr: SocketAddr, input: &str) -> Response {
    client::post_json(
        addr,
        "/api/v1/audio/speech",
        &[("Service-API-Key", LIMITED)],
        &json!({"model": "tts-1", "input": input, "voice": "nova"}),
    )
}

#[cfg(feature = "redis")]
/// Two gateways sharing one Redis (a prefix of this run's own), the limited key given `limits`.
fn two_instances_on_one_redis(fake: &FakeProvider, limits: &str) -> (TestGateway, TestGateway) {
    let prefix = redis::run_prefix();
    let url = redis::redis_url();
    let make = |ports| limited(fake, ports, limits, Some((&url, &prefix)), "");
    (TestGateway::start_with(make), TestGateway::start_with(make))
}

/// Request counts restart with each UTC minute: a test counting requests starts early in one,
/// so that its requests all fall in the same window even on a slow machine. (Waiting for the
/// clock itself, the one thing that cannot be polled for.)
pub(crate) fn early_in_a_minute() {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let into = now.as_millis() % 60_000;
    if into > 40_000 {
        std::thread::sleep(Duration::from_millis((60_000 - into) as u64 + 50));
    }
}

/// A `429 rate_limited` naming `limit`, with `Retry-After` and the RateLimit fields.
fn assert_refused(resp: &Response, limit: &str, policy: &str) {
    assert_eq!(resp.status, 429, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "rate_limited", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains(limit), "{message}");
    let retry: u64 = resp.header("retry-after").unwrap().parse().unwrap();
    assert_eq!(resp.header("ratelimit-policy"), Some(policy));
    let state = resp.header("ratelimit").unwrap();
    assert!(state.starts_with(&format!("\"{limit}\";r=")), "{state}");
    let t: u64 = state.rsplit_once(";t=").unwrap().1.parse().unwrap();
    assert!(
        (1..=86_400).contains(&retry) && t <= retry.max(1),
        "{retry} {t}"
    );
}

#[cfg(feature = "redis")]
#[test]
fn a_redis_that_forgot_the_limits_script_still_counts_every_request() {
    // The gateway names its limits script by its SHA1 (`EVALSHA`); a Redis that restarted or had
    // its scripts flushed does not know it, and the gateway must send it again, not fail open
    // or refuse. A Redis of its own: flushing is server-wide.
    let fake = FakeProvider::start();
    let redis = RedisProc::start(&[]);
    let (url, prefix) = (redis.url(), redis::run_prefix());
    let make = |ports| {
        limited(
            &fake,
            ports,
            "{requests_per_minute: 3}",
            Some((&url, &prefix)),
            "",
        )
    };
    let (a, b) = (TestGateway::start_with(make), TestGateway::start_with(make));
    early_in_a_minute();
    assert_eq!(rerank(a.addr, LIMITED).status, 200);
    let flush = || redis.must::<()>(&["SCRIPT", "FLUSH"]);
    flush();
    assert_eq!(rerank(b.addr, LIMITED).status, 200);
    flush();
    assert_eq!(rerank(a.addr, LIMITED).status, 200);
    flush();
    assert_refused(
        &rerank(b.addr, LIMITED),
        "requests_per_minute",
        "\"requests_per_minute\";q=3;w=60",
    );
}

#[cfg(feature = "redis")]
#[test]
fn a_request_budget_spent_through_one_instance_is_refused_through_the_other() {
    let fake = FakeProvider::start();
    let (a, b) = two_instances_on_one_redis(&fake, "{requests_per_minute: 3}");
    early_in_a_minute();
    for gw in [&a, &b, &a] {
        let resp = rerank(gw.addr, LIMITED);
        assert_eq!(resp.status, 200, "{}", resp.text());
    }
    for gw in [&b, &a] {
        let resp = rerank(gw.addr, LIMITED);
        assert_refused(
            &resp,
            "requests_per_minute",
            "\"requests_per_minute\";q=3;w=60",
        );
        assert!(resp.json()["message"].as_str().unwrap().contains("is 3"));
        assert_eq!(
            resp.header("ratelimit")
                .map(|v| v.starts_with("\"requests_per_minute\";r=0;")),
            Some(true)
        );
    }
    // Another key is not limited by it.
    assert_eq!(rerank(b.addr, crate::support::KEY).status, 200);
}

#[cfg(feature = "redis")]
#[test]
fn a_third_concurrent_stream_is_refused_and_a_slot_comes_back_after_the_answer() {
    let fake = FakeProvider::start();
    // Each stream lasts about 2 s: audio at once (the head goes out with it), then more, each
    // chunk within the provider's read timeout (1.5 s).
    fake.set_default(Reply::chunked(
        200,
        "application/octet-stream",
        vec![
            (Duration::ZERO, vec![1u8; 512]),
            (Duration::from_millis(1000), vec![2u8; 512]),
            (Duration::from_millis(1000), vec![3u8; 512]),
        ],
        false,
    ));
    let (a, b) = two_instances_on_one_redis(&fake, "{concurrent: 2, characters_per_day: 1000000}");
    let (addr_a, addr_b) = (a.addr, b.addr);
    let first = std::thread::spawn(move || speech(addr_a, "one"));
    let second = std::thread::spawn(move || speech(addr_b, "two"));
    // Both are at the provider, so both hold their slots.
    fake.wait_requests(2, Duration::from_secs(10));
    let third = speech(a.addr, "three");
    assert_refused(
        &third,
        "concurrent",
        "\"concurrent\";q=2;qu=\"concurrent-requests\"",
    );
    assert_eq!(
        fake.requests().len(),
        2,
        "the refused request reached the provider"
    );
    for stream in [first, second] {
        let resp = stream.join().unwrap();
        assert_eq!(resp.status, 200, "{}", resp.text());
        assert!(resp.complete);
    }
    // The slots are given back once each answer has been sent (just after the client has it).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let resp = speech(b.addr, "four");
        if resp.status == 200 {
            break;
        }
        assert_refused(
            &resp,
            "concurrent",
            "\"concurrent\";q=2;qu=\"concurrent-requests\"",
        );
        assert!(Instant::now() < deadline, "no slot came back");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(feature = "metrics")]
#[test]
fn speech_characters_are_limited_per_process_without_redis() {
    let fake = FakeProvider::start();
    fake.set_default(Reply::bytes(
        200,
        "application/octet-stream",
        vec![7u8; 256],
    ));
    let metrics_port = free_port();
    let gw = TestGateway::start_with(|ports| {
        limited(&fake, ports, "{characters_per_day: 10}", None, "").replace(
            "switchyard:\n",
            &format!("switchyard:\n  metrics: {{address: \"127.0.0.1:{metrics_port}\"}}\n"),
        )
    });
    // A known cost past the budget is refused before it reaches the provider.
    let resp = speech(gw.addr, "Hello there!");
    assert_refused(
        &resp,
        "characters_per_day",
        "\"characters_per_day\";q=10;w=86400",
    );
    assert!(resp.json()["message"]
        .as_str()
        .unwrap()
        .contains("needs 12 of characters_per_day (10), and 10 is left"));
    assert!(fake.requests().is_empty());
    let resp = speech(gw.addr, "Hello, you");
    assert_eq!(resp.status, 200, "{}", resp.text());
    // The usage is charged as the request ends, before it is counted in the metrics.
    let metrics: SocketAddr = format!("127.0.0.1:{metrics_port}").parse().unwrap();
    // The metrics listener starts beside the gateway's, not before it answers.
    crate::support::wait_listening(metrics);
    let charged = "switchyard_speech_input_characters_total{key=\"limited\",model=\"tts-1\"} 10";
    let deadline = Instant::now() + Duration::from_secs(10);
    while !client::request(metrics, "GET", "/metrics", &[], b"")
        .text()
        .contains(charged)
    {
        assert!(Instant::now() < deadline, "usage never counted");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Spent: even a one-character request is refused, at once.
    let resp = speech(gw.addr, "x");
    assert_refused(
        &resp,
        "characters_per_day",
        "\"characters_per_day\";q=10;w=86400",
    );
    assert_eq!(fake.requests().len(), 1);
    let scrape = client::request(metrics, "GET", "/metrics", &[], b"").text();
    assert!(
        scrape.contains(
            "switchyard_rate_limited_total{key=\"limited\",limit=\"characters_per_day\"} 2"
        ),
        "{scrape}"
    );
}

#[cfg(feature = "redis")]
#[test]
fn redis_unreachable_fails_open_by_default_and_closed_when_configured() {
    let fake = FakeProvider::start();
    let dead = format!("redis://127.0.0.1:{}", free_port());
    let prefix = redis::run_prefix();
    let metrics_port = free_port();
    let open = TestGateway::start_with(|ports| {
        limited(
            &fake,
            ports,
            "{requests_per_minute: 1}",
            Some((&dead, &prefix)),
            "",
        )
        .replace(
            "switchyard:\n",
            &format!("switchyard:\n  metrics: {{address: \"127.0.0.1:{metrics_port}\"}}\n"),
        )
    });
    for _ in 0..2 {
        let resp = rerank(open.addr, LIMITED);
        assert_eq!(resp.status, 200, "{}", resp.text());
    }
    // Allowed, and counted: the refusal was decided while the request was served.
    let metrics: SocketAddr = format!("127.0.0.1:{metrics_port}").parse().unwrap();
    crate::support::wait_listening(metrics);
    let scrape = client::request(metrics, "GET", "/metrics", &[], b"").text();
    assert!(
        scrape.contains("switchyard_store_errors_total{during=\"limits\"} 2"),
        "{scrape}"
    );
    let closed = TestGateway::start_with(|ports| {
        limited(
            &fake,
            ports,
            "{requests_per_minute: 1}",
            Some((&dead, &prefix)),
            "    limits_on_store_error: closed\n",
        )
    });
    let resp = rerank(closed.addr, LIMITED);
    assert_eq!(resp.status, 503, "{}", resp.text());
    assert_eq!(resp.json()["code"], "store_unavailable");
    // A key without limits never needs the store.
    assert_eq!(rerank(closed.addr, crate::support::KEY).status, 200);
}

fn token(sub: &str, plan: &str) -> String {
    let exp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    encode(
        &Header::new(Algorithm::HS256),
        &json!({"sub": sub, "iss": "switchyard-tests", "exp": exp, "plan": plan}),
        &EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .unwrap()
}

#[test]
fn jwt_subjects_are_limited_by_their_plan_claim_each_on_its_own_budget() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start_with(|ports| {
        config(&fake.base_url(), ports).replace(
            "      leeway_seconds: 5\n",
            "      leeway_seconds: 5\n      limits:\n        claim: plan\n        by_value:\n          free: {requests_per_minute: 1}\n          pro: {requests_per_minute: 100}\n",
        )
    });
    let call = |token: &str| {
        client::post_json(
            gw.addr,
            "/api/v1/rerank",
            &[("Authorization", &format!("Bearer {token}"))],
            &json!({"model": "local-bm25", "query": "a cat", "documents": ["a cat sat"]}),
        )
    };
    early_in_a_minute();
    let free = token("ann", "free");
    assert_eq!(call(&free).status, 200);
    assert_refused(
        &call(&free),
        "requests_per_minute",
        "\"requests_per_minute\";q=1;w=60",
    );
    // Another subject on the same plan has its own budget; another plan its own limits.
    assert_eq!(call(&token("bob", "free")).status, 200);
    let pro = token("ann-pro", "pro");
    for _ in 0..3 {
        assert_eq!(call(&pro).status, 200);
    }
    // No default: a plan not listed is not limited.
    let other = token("cyd", "trial");
    for _ in 0..3 {
        assert_eq!(call(&other).status, 200);
    }
}

#[test]
fn limit_problems_are_reported_together_with_their_paths() {
    let fake = FakeProvider::start();
    let load = |limits: &str, auth_extra: &str| {
        let yaml = limited(&fake, (free_port(), free_port()), limits, None, auth_extra);
        switchyard::config::load_str(&yaml, &|_| None)
            .err()
            .unwrap_or_default()
    };
    let unknown = load("{requests_per_minute: 5, rpm: 5}", "");
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert!(
        unknown[0].starts_with(
            "switchyard.auth.api_keys[1].limits.rpm: unknown field `rpm`, expected one of \
             `requests_per_minute`"
        ),
        "{unknown:?}"
    );
    assert_eq!(
        load(
            "{requests_per_minute: 5}",
            "    limits_on_store_error: maybe\n"
        ),
        vec![
            "switchyard.auth.limits_on_store_error: unknown variant `maybe`, expected `open` or \
             `closed`"
        ]
    );

    let yaml = limited(
        &fake,
        (free_port(), free_port()),
        "{requests_per_minute: 0, concurrent: 0}",
        None,
        "",
    );
    let errors = switchyard::config::load_str(&yaml, &|_| None)
        .err()
        .unwrap_or_default();
    assert_eq!(
        errors,
        vec![
            "switchyard.auth.api_keys[1].limits.requests_per_minute: must be greater than 0",
            "switchyard.auth.api_keys[1].limits.concurrent: must be greater than 0",
        ]
    );
}

#[cfg(feature = "redis")]
#[test]
fn a_caller_s_keys_share_one_hash_slot() {
    let fake = FakeProvider::start();
    let prefix = redis::run_prefix();
    let url = redis::redis_url();
    let gw = TestGateway::start_with(|ports| {
        limited(
            &fake,
            ports,
            "{requests_per_minute: 5, tokens_per_day: 1000}",
            Some((&url, &prefix)),
            "",
        )
    });
    assert_eq!(rerank(gw.addr, LIMITED).status, 200);
    let tag = format!("{{{prefix}limits:key:limited}}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The tokens are charged as the request ends: poll for them.
    let deadline = Instant::now() + Duration::from_secs(10);
    let keys = loop {
        let keys: Vec<String> = rt.block_on(async {
            redis::keys(&mut redis::raw().await, &format!("{{{prefix}*")).await
        });
        if keys.len() == 2 || Instant::now() > deadline {
            break keys;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(keys.len(), 2, "{keys:?}");
    for key in &keys {
        assert!(key.starts_with(&format!("{tag}:")), "{key} outside {tag}");
    }
    assert!(
        keys.iter().any(|k| k.contains(":requests_per_minute:")),
        "{keys:?}"
    );
    assert!(
        keys.iter().any(|k| k.contains(":tokens_per_day:")),
        "{keys:?}"
    );
}

#[test]
fn an_async_image_task_is_charged_its_images_when_accepted() {
    let fake = FakeProvider::start();
    fake.set_default(Reply::json(
        200,
        json!({"created": 9, "data": [{"b64_json": "iVBORw0KGgo="}, {"b64_json": "iVBORw0KGgo="}]}),
    ));
    let gw =
        TestGateway::start_with(|ports| limited(&fake, ports, "{images_per_day: 3}", None, ""));
    let generate = |n: u64| {
        client::post_json(
            gw.addr,
            "/api/v1/images/generations",
            &[("Service-API-Key", LIMITED)],
            &json!({"model": "gpt-image-2", "prompt": "a fox", "n": n, "async": true,
                    "response_format": "b64_json"}),
        )
    };
    let resp = generate(2);
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["task_status"], "running");
    // Charged as the task was accepted: 1 of 3 is left, so 2 more do not fit.
    let resp = generate(2);
    assert_refused(&resp, "images_per_day", "\"images_per_day\";q=3;w=86400");
    assert!(resp.json()["message"]
        .as_str()
        .unwrap()
        .contains("needs 2 of images_per_day (3), and 1 is left"));
    assert_eq!(generate(1).status, 200);
}

/// A refusal by the caller's own limit on the rerank compatibility surfaces: the surface's error
/// shape (Cohere's `message`, Jina's `detail`), with the same `Retry-After` and RateLimit fields.
#[test]
fn compat_surfaces_answer_a_caller_s_limit_in_their_own_shape_with_the_headers() {
    let fake = FakeProvider::start();
    let gw =
        TestGateway::start_with(|ports| limited(&fake, ports, "{tokens_per_minute: 1}", None, ""));
    let body = json!({"model": "local-bm25", "query": "a cat", "documents": ["a cat sat", "dogs"]});
    let bearer = format!("Bearer {LIMITED}");
    let post = |path: &str| client::post_json(gw.addr, path, &[("Authorization", &bearer)], &body);
    early_in_a_minute();
    // The first request spends the minute's one token (and more). Usage is charged as its answer
    // goes out, so the client may already have the answer a moment before: wait for the charge.
    assert_eq!(post("/compat/cohere/v2/rerank").status, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    while rerank(gw.addr, LIMITED).status != 429 {
        assert!(
            Instant::now() < deadline,
            "the first request was never charged"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for (path, field) in [
        ("/compat/cohere/v2/rerank", "message"),
        ("/compat/cohere/v1/rerank", "message"),
        ("/compat/jina/v1/rerank", "detail"),
    ] {
        let resp = post(path);
        assert_eq!(resp.status, 429, "{path}: {}", resp.text());
        let text = resp.json()[field].as_str().unwrap_or_default().to_string();
        assert!(text.contains("tokens_per_minute"), "{path}: {text}");
        assert!(resp.header("retry-after").is_some(), "{path}");
        assert_eq!(
            resp.header("ratelimit-policy"),
            Some("\"tokens_per_minute\";q=1;w=60"),
            "{path}"
        );
        assert!(
            resp.header("ratelimit")
                .is_some_and(|v| v.starts_with("\"tokens_per_minute\";r=0;")),
            "{path}"
        );
    }
}

/// A speech request without its `input`: refused for its body.
fn bad_speech(addr: SocketAddr) -> Response {
    client::post_json(
        addr,
        "/api/v1/audio/speech",
        &[("Service-API-Key", LIMITED)],
        &json!({"model": "tts-1", "voice": "nova"}),
    )
}

/// The limits [`refused_as_before`] runs against.
const AS_BEFORE: &str = "{requests_per_minute: 3, concurrent: 1, characters_per_day: 10}";

/// Speech under [`AS_BEFORE`], in one minute: a request over its characters and one over its
/// requests per minute are answered the `429`s they were answered when they met their limits in
/// two calls, and count as they counted then. `after_characters` runs once the characters'
/// refusal is answered (a look at the store). The body is read first now: a bad body is answered
/// `400` even past the rate limit, and is counted against it (where it fits) at its end.
fn refused_as_before(gw: &TestGateway, fake: &FakeProvider, after_characters: impl FnOnce()) {
    fake.set_default(Reply::bytes(
        200,
        "application/octet-stream",
        vec![7u8; 256],
    ));
    early_in_a_minute();
    // 1 of 3.
    assert_eq!(bad_speech(gw.addr).status, 400);
    // 2 of 3: admitted, and then 12 characters do not fit.
    let resp = speech(gw.addr, "Hello there!");
    assert_refused(
        &resp,
        "characters_per_day",
        "\"characters_per_day\";q=10;w=86400",
    );
    assert!(resp.json()["message"]
        .as_str()
        .unwrap()
        .contains("needs 12 of characters_per_day (10), and 10 is left"));
    assert_eq!(
        resp.header("ratelimit")
            .map(|v| v.starts_with("\"characters_per_day\";r=10;")),
        Some(true)
    );
    after_characters();
    // 3 of 3: the refused request held no slot.
    let resp = speech(gw.addr, "Hello");
    assert_eq!(resp.status, 200, "{}", resp.text());
    let resp = speech(gw.addr, "x");
    assert_refused(
        &resp,
        "requests_per_minute",
        "\"requests_per_minute\";q=3;w=60",
    );
    assert!(resp.json()["message"].as_str().unwrap().contains("is 3"));
    assert_eq!(
        resp.header("ratelimit")
            .map(|v| v.starts_with("\"requests_per_minute\";r=0;")),
        Some(true)
    );
    // Past the rate limit, a bad body is still answered for its body.
    assert_eq!(bad_speech(gw.addr).status, 400);
    assert_eq!(
        fake.requests().len(),
        1,
        "only the 200 reached the provider"
    );
}

#[test]
fn speech_over_its_characters_or_its_requests_is_refused_as_before_in_process() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start_with(|ports| limited(&fake, ports, AS_BEFORE, None, ""));
    refused_as_before(&gw, &fake, || {});
}

#[cfg(feature = "redis")]
#[test]
fn speech_over_its_characters_or_its_requests_is_refused_as_before_in_redis() {
    let fake = FakeProvider::start();
    let prefix = redis::run_prefix();
    let url = redis::redis_url();
    let gw = TestGateway::start_with(|ports| {
        limited(&fake, ports, AS_BEFORE, Some((&url, &prefix)), "")
    });
    let tag = format!("{{{prefix}limits:key:limited}}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    refused_as_before(&gw, &fake, || {
        rt.block_on(async {
            let mut conn = redis::raw().await;
            // The bad body (at its end, so sent just after its answer: poll) and the refused
            // request (by its admission) are counted, nothing of the characters is charged, and
            // no slot is held.
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                let now = (
                    windows(&mut conn, &tag, "requests_per_minute").await,
                    windows(&mut conn, &tag, "characters_per_day").await,
                    slots_held(&mut conn, &tag).await,
                );
                if now == (vec![2], vec![], 0) {
                    break;
                }
                assert!(Instant::now() < deadline, "{now:?}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    });
}

/// Issue 32: on its path a request meets Redis once at most — speech and images with their known
/// cost in the one check of their admission, rerank at its admission, a bad body not at all — and
/// its charge after its answer. A gate in front of Redis lets one limits check through per
/// request and holds the next: a second check on the path would wait there until the store's
/// timeout and be answered `503` (`limits_on_store_error: closed`).
#[cfg(feature = "redis")]
#[test]
fn a_request_meets_redis_once_on_its_path_and_its_charge_after_its_answer() {
    let fake = FakeProvider::start();
    let gate = RedisGate::in_front_of_test_redis();
    let prefix = redis::run_prefix();
    let gate_url = gate.url();
    let limits = "{requests_per_minute: 100, concurrent: 2, characters_per_day: 1000, \
                  images_per_day: 10, tokens_per_day: 100000, \
                  budget: {currency: USD, per_day: \"10\"}}";
    let gw = TestGateway::start_with(|ports| {
        limited(
            &fake,
            ports,
            limits,
            Some((&gate_url, &prefix)),
            "    limits_on_store_error: closed\n",
        )
        .replace("timeout_ms: 500", "timeout_ms: 3000")
        // The budget must be able to count the standard config's models priced in yuan.
        .replace(
            "  images: {",
            "  currency_rates: {CNY: {USD: \"0.14\"}}\n  images: {",
        )
    });
    early_in_a_minute();
    // Each request: one check allowed; the answer complete while its charge is held.
    let mut checks = 0;
    let mut one = |name: &str, send: &dyn Fn() -> Response, on_path: u64| {
        gate.allow(on_path);
        let resp = send();
        let want = if on_path == 0 { 400 } else { 200 };
        assert_eq!(resp.status, want, "{name}: {}", resp.text());
        assert!(resp.complete, "{name}");
        checks += on_path;
        gate.wait_for(checks, 1);
        gate.allow(1);
        checks += 1;
        gate.wait_for(checks, 0);
    };
    fake.set_default(Reply::bytes(
        200,
        "application/octet-stream",
        vec![7u8; 256],
    ));
    one("speech", &|| speech(gw.addr, "Hello there"), 1);
    fake.set_default(Reply::json(
        200,
        json!({"created": 9, "data": [{"b64_json": "iVBORw0KGgo="}]}),
    ));
    let image = || {
        client::post_json(
            gw.addr,
            "/api/v1/images/generations",
            &[("Service-API-Key", LIMITED)],
            &json!({"model": "gpt-image-2", "prompt": "a fox", "response_format": "b64_json"}),
        )
    };
    one("images", &image, 1);
    one("rerank", &|| rerank(gw.addr, LIMITED), 1);
    // A bad body: no check on its path; counted against requests_per_minute at its end.
    one("bad speech", &|| bad_speech(gw.addr), 0);
    // Each was charged as it asked: the store holds what the requests used.
    let tag = format!("{{{prefix}limits:key:limited}}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The gate counts the last charge as it lets it through, a moment before Redis has it: poll.
    rt.block_on(async {
        let mut conn = redis::raw().await;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let held = (
                windows(&mut conn, &tag, "requests_per_minute").await,
                windows(&mut conn, &tag, "characters_per_day").await,
                windows(&mut conn, &tag, "images_per_day").await,
                slots_held(&mut conn, &tag).await,
            );
            // Every slot given back with its charge.
            if held == (vec![4], vec![11], vec![1], 0) {
                break;
            }
            assert!(Instant::now() < deadline, "{held:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

/// What each window of the limit `name` holds for the caller whose keys carry `tag` (one entry
/// per window counted; none when nothing was ever charged to it).
#[cfg(feature = "redis")]
async fn windows(
    conn: &mut ::redis::aio::MultiplexedConnection,
    tag: &str,
    name: &str,
) -> Vec<u64> {
    let mut counts = Vec::new();
    for key in redis::keys(conn, &format!("{tag}:{name}:*")).await {
        counts.push(
            ::redis::cmd("GET")
                .arg(&key)
                .query_async::<u64>(conn)
                .await
                .unwrap(),
        );
    }
    counts
}

/// The caller's concurrent slots in use.
#[cfg(feature = "redis")]
async fn slots_held(conn: &mut ::redis::aio::MultiplexedConnection, tag: &str) -> u64 {
    ::redis::cmd("ZCARD")
        .arg(format!("{tag}:concurrent"))
        .query_async(conn)
        .await
        .unwrap()
}
