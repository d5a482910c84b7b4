//! Money budgets over real sockets: a day's budget in USD shared by two instances on one Redis, a
//! request whose known cost does not fit refused before the provider is called, a spent budget
//! refused at once, and a new UTC day starting from nothing (the limits' clock moved by hand).
//!
//! `tts-1` is priced at $15 per million characters (the built-in table): 15,000 nano-dollars a
//! character.

use std::time::{Duration, Instant};

use serde_json::json;
use switchyard::internals::caps::lifecycle::{Clock, Date};

use crate::support::client::{self, Response};
use crate::support::fake::{FakeProvider, Reply};
#[cfg(feature = "redis")]
use crate::support::redis;
use crate::support::{config, TestGateway};

const LIMITED: &str = "budget-key";

/// 2026-11-27 23:00:00 UTC: an hour before the day's budget starts again.
fn late_evening() -> i64 {
    Date::parse("2026-11-27").unwrap().unix() + 23 * 3600
}

/// The standard config with an API key `limited` carrying `limits`, its state in the Redis at
/// `store` (`url`, prefix) if given.
fn budgeted(
    fake: &FakeProvider,
    ports: (u16, u16),
    limits: &str,
    store: Option<(&str, &str)>,
) -> String {
    let mut yaml = config(&fake.base_url(), ports);
    let hashed = "      - {name: hashed,";
    assert!(yaml.contains(hashed));
    yaml = yaml.replace(
        hashed,
        &format!("      - {{name: limited, key: \"{LIMITED}\", limits: {limits}}}\n{hashed}"),
    );
    // The standard config has models priced in yuan (Zhipu, DashScope): a budget in dollars
    // must be able to count them, so the rate is stated (a missing one is a load error).
    yaml = yaml.replace(
        "  images: {",
        "  currency_rates: {CNY: {USD: \"0.14\"}}\n  images: {",
    );
    if let Some((url, prefix)) = store {
        yaml = yaml.replace(
            "  images: {",
            &format!(
                "  store: {{redis_url: \"{url}\", key_prefix: \"{prefix}\", timeout_ms: 500}}\n  images: {{"
            ),
        );
    }
    yaml
}

fn speech(gw: &TestGateway, input: &str) -> Response {
    client::post_json(
        gw.addr,
        "/api/v1/audio/speech",
        &[("Service-API-Key", LIMITED)],
        &json!({"model": "tts-1", "input": input, "voice": "nova"}),
    )
}

fn audio(fake: &FakeProvider) {
    fake.set_default(Reply::bytes(
        200,
        "application/octet-stream",
        vec![7u8; 256],
    ));
}

/// A `429 rate_limited` naming `limit`, whose message says `says`, with `Retry-After` of
/// `retry` seconds and the RateLimit fields in nano-dollars.
fn assert_over_budget(resp: &Response, limit: &str, quota: u64, says: &str, retry: u64) {
    assert_eq!(resp.status, 429, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "rate_limited", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains(says), "{message}");
    assert_eq!(resp.header("retry-after"), Some(retry.to_string().as_str()));
    assert_eq!(
        resp.header("ratelimit-policy"),
        Some(format!("\"{limit}\";q={quota};w=86400;qu=\"nano-USD\"").as_str())
    );
    let state = resp.header("ratelimit").unwrap();
    assert!(state.starts_with(&format!("\"{limit}\";r=")), "{state}");
    assert!(state.ends_with(&format!(";t={retry}")), "{state}");
}

#[test]
fn a_known_cost_that_does_not_fit_is_refused_before_the_provider_and_a_new_day_resets_it() {
    let fake = FakeProvider::start();
    audio(&fake);
    let clock = Clock::manual(late_evening());
    // $0.0002 a day: 13 characters of tts-1 (195,000 nano-dollars) fit, 14 do not.
    let gw = TestGateway::start_with_limits_clock(
        |ports| {
            budgeted(
                &fake,
                ports,
                "{budget: {currency: USD, per_day: \"0.0002\"}}",
                None,
            )
        },
        &clock,
    );
    let resp = speech(&gw, "Hello there, you!");
    assert_over_budget(
        &resp,
        "budget_per_day",
        200_000,
        "this request is known to cost 0.000255 USD of budget_per_day (0.0002 USD), and \
         0.0002 USD is left; retry in 3600 s",
        3_600,
    );
    assert!(
        fake.requests().is_empty(),
        "the refused request reached the provider"
    );
    // 13 characters fit; 195,000 nano-dollars are charged as the answer ends.
    let resp = speech(&gw, "Hello, there!");
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests().len(), 1);
    // 5,000 nano-dollars are left: even one character (15,000) is refused, once the charge is
    // in (just after the client has its answer).
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let resp = speech(&gw, "x");
        if resp.status == 429 {
            break resp;
        }
        assert_eq!(resp.status, 200, "{}", resp.text());
        assert!(Instant::now() < deadline, "the cost was never charged");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Refused by the known-cost check, or — when one `x` slipped in before the charge landed
    // and was charged too — as a budget already spent: either way for the day's budget.
    let message = refused.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("known to cost 0.000015 USD of budget_per_day")
            || message.contains("budget_per_day is 0.0002 USD for this caller, and it is spent"),
        "{message}"
    );
    let served = fake.requests().len();
    // Midnight UTC: the day's budget starts from nothing.
    clock.set(late_evening() + 3_600);
    let resp = speech(&gw, "Hello, there!");
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests().len(), served + 1);
}

#[test]
fn a_spent_month_is_refused_at_once_for_every_operation() {
    let fake = FakeProvider::start();
    audio(&fake);
    let clock = Clock::manual(late_evening());
    let gw = TestGateway::start_with_limits_clock(
        |ports| {
            budgeted(
                &fake,
                ports,
                "{budget: {currency: USD, per_day: \"1\", per_month: \"0.00003\"}}",
                None,
            )
        },
        &clock,
    );
    // Two characters spend the month's 30,000 nano-dollars.
    assert_eq!(speech(&gw, "hi").status, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    let resp = loop {
        let resp = client::post_json(
            gw.addr,
            "/api/v1/rerank",
            &[("Service-API-Key", LIMITED)],
            &json!({"model": "local-bm25", "query": "a cat", "documents": ["a cat sat"]}),
        );
        if resp.status == 429 {
            break resp;
        }
        assert!(Instant::now() < deadline, "the cost was never charged");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Refused at admission: nothing left, whatever the request costs, until December.
    assert_eq!(resp.json()["code"], "rate_limited");
    assert_eq!(
        resp.json()["message"],
        "budget reached: budget_per_month is 0.00003 USD for this caller, and it is spent; \
         retry in 262800 s"
    );
    assert_eq!(
        resp.header("ratelimit-policy"),
        Some("\"budget_per_month\";q=30000;w=2592000;qu=\"nano-USD\"")
    );
}

#[cfg(feature = "redis")]
#[test]
fn two_instances_on_one_redis_share_a_money_budget() {
    let fake = FakeProvider::start();
    audio(&fake);
    let clock = Clock::manual(late_evening());
    let prefix = redis::run_prefix();
    let url = redis::redis_url();
    // $0.0003 a day: 20 characters.
    let limits = "{budget: {currency: USD, per_day: \"0.0003\"}}";
    let make = |ports| budgeted(&fake, ports, limits, Some((&url, &prefix)));
    let a = TestGateway::start_with_limits_clock(make, &clock);
    let b = TestGateway::start_with_limits_clock(make, &clock);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut conn = rt.block_on(redis::raw());
    let day = late_evening() / 86_400;
    let key = format!("{{{prefix}limits:key:limited}}:budget_per_day:{day}");
    let spent = |conn: &mut ::redis::aio::MultiplexedConnection, want: u64| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got: Option<u64> = rt
                .block_on(::redis::cmd("GET").arg(&key).query_async(conn))
                .unwrap();
            if got == Some(want) {
                return;
            }
            assert!(Instant::now() < deadline, "{key} is {got:?}, never {want}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Ten characters through each instance: 150,000 nano-dollars each, in one shared counter.
    assert_eq!(speech(&a, "ten chars!").status, 200);
    spent(&mut conn, 150_000);
    assert_eq!(speech(&b, "ten chars!").status, 200);
    spent(&mut conn, 300_000);
    // Spent through both: each refuses, at admission.
    for gw in [&a, &b] {
        let resp = speech(gw, "x");
        assert_over_budget(
            &resp,
            "budget_per_day",
            300_000,
            "budget_per_day is 0.0003 USD for this caller, and it is spent",
            3_600,
        );
    }
    assert_eq!(fake.requests().len(), 2);
}

#[test]
fn images_are_known_to_cost_their_number_size_and_quality_before_the_call() {
    let fake = FakeProvider::start();
    // As OpenAI answers: as many images as the request's `n`.
    fake.set_handler(|r| {
        let n = r.json()["n"].as_u64().unwrap_or(1) as usize;
        let data = vec![json!({"b64_json": "iVBORw0KGgo="}); n];
        Some(Reply::json(200, json!({"created": 9, "data": data})))
    });
    let clock = Clock::manual(late_evening());
    let gw = TestGateway::start_with_limits_clock(
        |ports| {
            budgeted(
                &fake,
                ports,
                "{budget: {currency: USD, per_day: \"0.4\"}}",
                None,
            )
        },
        &clock,
    );
    let generate = |n: u64, quality: &str| {
        client::post_json(
            gw.addr,
            "/api/v1/images/generations",
            &[("Service-API-Key", LIMITED)],
            &json!({"model": "gpt-image-2", "prompt": "a fox", "n": n, "size": "1024x1024",
                    "quality": quality, "response_format": "b64_json"}),
        )
    };
    // gpt-image-2 at high quality, 1024x1024: $0.211 an image (the built-in table).
    let resp = generate(2, "high");
    assert_over_budget(
        &resp,
        "budget_per_day",
        400_000_000,
        "known to cost 0.422 USD of budget_per_day (0.4 USD), and 0.4 USD is left",
        3_600,
    );
    assert!(
        fake.requests().is_empty(),
        "the refused request reached the provider"
    );
    // Two at low quality are $0.012: they fit.
    let resp = generate(2, "low");
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(!fake.requests().is_empty());
}

/// An asynchronous image task outlives its request: the budget is charged, when it is accepted,
/// the cost it was checked against. Two tasks of one high-quality image ($0.211 each) fit a
/// $0.3 day's budget one at a time only: the second is refused, its known cost no longer
/// fitting what the first left.
#[test]
fn an_accepted_image_task_is_charged_its_known_cost() {
    let fake = FakeProvider::start();
    fake.set_default(Reply::json(
        200,
        json!({"created": 9, "data": [{"b64_json": "iVBORw0KGgo="}]}),
    ));
    let clock = Clock::manual(late_evening());
    let gw = TestGateway::start_with_limits_clock(
        |ports| {
            budgeted(
                &fake,
                ports,
                "{budget: {currency: USD, per_day: \"0.3\"}}",
                None,
            )
        },
        &clock,
    );
    let task = || {
        client::post_json(
            gw.addr,
            "/api/v1/images/generations",
            &[("Service-API-Key", LIMITED)],
            &json!({"model": "gpt-image-2", "prompt": "a fox", "size": "1024x1024",
                    "quality": "high", "async": true}),
        )
    };
    let first = task();
    assert_eq!(first.status, 200, "{}", first.text());
    assert!(first.json()["task_id"].is_string(), "{}", first.text());
    assert_over_budget(
        &task(),
        "budget_per_day",
        300_000_000,
        "known to cost 0.211 USD of budget_per_day (0.3 USD), and 0.089 USD is left",
        3_600,
    );
}
