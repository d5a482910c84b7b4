//! Per-caller limits over real sockets: a request budget shared by two instances on one Redis,
//! concurrent slots held by stalling streams (across instances, and given back after the
//! answer), a usage budget (speech characters) in process memory, Redis unreachable failing open
//! and closed, and JWT subjects limited by a claim.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::json;

use crate::support::client::{self, Response};
use crate::support::fake::{FakeProvider, Reply};
#[cfg(feature = "redis")]
use crate::support::redis;
use crate::support::{config, free_port, TestGateway, JWT_SECRET};

const LIMITED: &str = "limited-key";

/// The standard config with an API key `limited` carrying `limits`, its state in the Redis at
/// `store` (`url`, prefix) if given, and `auth_extra` lines added to `auth:`.
fn limited(
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

fn rerank(addr: SocketAddr, key: &str) -> Response {
    client::post_json(
        addr,
        "/api/v1/rerank",
        &[("Service-API-Key", key)],
        &json!({"model": "local-bm25", "query": "a cat", "documents": ["a cat sat", "dogs"]}),
    )
}

#[cfg(any(feature = "redis", feature = "metrics"))]
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
fn early_in_a_minute() {
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
            let mut conn = redis::raw().await;
            ::redis::cmd("KEYS")
                .arg(format!("{{{prefix}*"))
                .query_async(&mut conn)
                .await
                .unwrap()
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
