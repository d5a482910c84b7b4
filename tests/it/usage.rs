//! `GET /api/v1/usage` against a real PostgreSQL ledger (a schema of each test's own) and real
//! requests: callers' speech requests through a fake provider are recorded by the gateway, more
//! rows of the same and other callers are written straight into the table for other days, and
//! each caller's own key (or token) then reads exactly its own rows, totals, budget and limits —
//! never another's, not even a caller whose name begins the same. Reading it counts against no
//! limit and is not recorded. Two instances on one Redis show the same budget and limits.
//! Without credentials 401, bad dates 400 per field, without a ledger 501, with the database
//! stopped or not answering 503 within the read timeout.
//!
//! `tts-1` is priced at $15 per million characters: "hello world" (11 characters) costs
//! 165,000 nano-dollars.

#[cfg(feature = "ledger")]
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[cfg(feature = "ledger")]
use serde_json::{json, Value};

use crate::support::client::{self, Response};
use crate::support::fake::FakeProvider;
#[cfg(feature = "ledger")]
use crate::support::fake::Reply;
use crate::support::TestGateway;

#[cfg(feature = "ledger")]
use crate::support::postgres::{postgres_url, raw, PgProc, Schema};
#[cfg(feature = "ledger")]
use switchyard::internals::caps::lifecycle::{Clock, Date};

#[cfg(feature = "ledger")]
const ALICE: &str = "alice-key";
#[cfg(feature = "ledger")]
const BOB: &str = "bob-key";

fn usage(addr: std::net::SocketAddr, query: &str, key: &str) -> Response {
    let path = format!("/api/v1/usage{query}");
    client::request(addr, "GET", &path, &[("Service-API-Key", key)], b"")
}

/// The standard config with a ledger at `url` (`ledger` holds its other settings) and two keys
/// with limits: alice with a budget in USD, bob with a request rate only.
#[cfg(feature = "ledger")]
fn with_ledger(fake: &FakeProvider, ports: (u16, u16), url: &str, ledger: &str) -> String {
    let mut yaml = crate::support::config(&fake.base_url(), ports);
    let hashed = "      - {name: hashed,";
    assert!(yaml.contains(hashed));
    let keys = format!(
        "      - {{name: alice, key: \"{ALICE}\", limits: {{requests_per_minute: 10, concurrent: 2, \
         characters_per_day: 100000, budget: {{currency: USD, per_day: \"1\", per_month: \"10\"}}}}}}\n\
         \x20     - {{name: alice2, key: \"alice2-key\"}}\n\
         \x20     - {{name: bob, key: \"{BOB}\", limits: {{requests_per_minute: 5}}}}\n{hashed}"
    );
    yaml = yaml.replace(hashed, &keys);
    // Models priced in yuan are in the standard config: a budget in dollars needs the rate.
    yaml = yaml.replace(
        "  images: {",
        "  currency_rates: {CNY: {USD: \"0.14\"}}\n  images: {",
    );
    yaml.replacen(
        "switchyard:\n",
        &format!("switchyard:\n  ledger: {{database_url: \"{url}\", {ledger}}}\n"),
        1,
    )
}

#[cfg(feature = "ledger")]
fn speech(addr: std::net::SocketAddr, auth: (&str, &str), input: &str) {
    let resp = client::post_json(
        addr,
        "/api/v1/audio/speech",
        &[auth],
        &json!({"model": "tts-1", "input": input, "voice": "alloy"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
}

#[cfg(feature = "ledger")]
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// Poll `cond` until it holds, failing with `what` (and the last value seen) after `limit`.
#[cfg(feature = "ledger")]
fn until<T: std::fmt::Debug>(
    what: &str,
    limit: Duration,
    mut probe: impl FnMut() -> (bool, T),
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let (done, seen) = probe();
        if done {
            return seen;
        }
        assert!(Instant::now() < deadline, "{what}: {seen:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Today (UTC) less `days`.
#[cfg(feature = "ledger")]
fn day(days: i64) -> Date {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    Date::of_unix(now - days * 86_400)
}

/// Rows of other days and other callers, straight into the table: `(days ago, caller, model,
/// characters, images, cost, currency, status)`.
#[cfg(feature = "ledger")]
type Seeded = (
    i64,
    Option<&'static str>,
    &'static str,
    i64,
    i64,
    Option<i64>,
    Option<&'static str>,
    i16,
);

#[cfg(feature = "ledger")]
const SEEDED: [Seeded; 8] = [
    (
        20,
        Some("key:alice"),
        "dall-e-3",
        0,
        1,
        Some(40_000_000),
        Some("USD"),
        200,
    ),
    (
        19,
        Some("key:alice"),
        "tts-1",
        10,
        0,
        Some(700),
        Some("CNY"),
        200,
    ),
    (19, Some("key:alice"), "tts-1", 0, 0, None, None, 502),
    // Outside the window asked for.
    (
        40,
        Some("key:alice"),
        "tts-1",
        5,
        0,
        Some(75_000),
        Some("USD"),
        200,
    ),
    (
        20,
        Some("key:bob"),
        "dall-e-3",
        0,
        2,
        Some(80_000_000),
        Some("USD"),
        200,
    ),
    // Callers whose names are close to alice's, and nobody.
    (
        20,
        Some("key:alice2"),
        "dall-e-3",
        0,
        1,
        Some(40_000_000),
        Some("USD"),
        200,
    ),
    (
        19,
        Some("jwt:alice"),
        "tts-1",
        10,
        0,
        Some(150_000),
        Some("USD"),
        200,
    ),
    (
        20,
        None,
        "dall-e-3",
        0,
        1,
        Some(40_000_000),
        Some("USD"),
        200,
    ),
];

#[cfg(feature = "ledger")]
async fn seed(url: &str, schema: &str) {
    let db = raw(url).await;
    for (ago, caller, model, characters, images, cost, currency, status) in SEEDED {
        let at = format!("{}T12:00:00Z", day(ago));
        db.execute(
            &format!(
                "INSERT INTO {schema}.usage_records (id, finished_at, caller, entry_point, path, \
                 operation, model, tokens, characters, images, cost_nanos, currency, status, \
                 attempts) VALUES (gen_random_uuid(), $1::text::timestamptz, $2, 'public', \
                 '/api/v1/x', 'speech', $3, 0, $4, $5, $6, $7, $8, 1)"
            ),
            &[
                &at,
                &caller,
                &model,
                &characters,
                &images,
                &cost,
                &currency,
                &status,
            ],
        )
        .await
        .unwrap();
    }
}

#[cfg(feature = "ledger")]
async fn count(url: &str, schema: &str, filter: &str) -> i64 {
    raw(url)
        .await
        .query_one(
            &format!("SELECT count(*) FROM {schema}.usage_records WHERE {filter}"),
            &[],
        )
        .await
        .map(|r| r.get(0))
        .unwrap_or(-1)
}

#[cfg(feature = "ledger")]
fn carols_token() -> String {
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
    let exp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    encode(
        &Header::new(Algorithm::HS256),
        &json!({"sub": "carol", "iss": "switchyard-tests", "exp": exp}),
        &EncodingKey::from_secret(crate::support::JWT_SECRET.as_bytes()),
    )
    .unwrap()
}

/// A gateway on the test database with the keys above, its limits' windows standing at this
/// second (a minute that cannot end mid-test); the seeded rows written once its writer has
/// made the table, and each caller's requests answered and recorded.
#[cfg(feature = "ledger")]
fn served(rt: &tokio::runtime::Runtime, schema: &Schema, fake: &FakeProvider) -> TestGateway {
    let url = postgres_url();
    let now = Clock::System.now();
    let clock = Clock::manual(now);
    let ledger = format!("schema: {}, flush_interval_ms: 50", schema.name);
    let gw = TestGateway::start_with_limits_clock(|p| with_ledger(fake, p, &url, &ledger), &clock);
    fake.set_default(Reply::bytes(
        200,
        "audio/mpeg",
        vec![0xFF, 0xF3, 0x44, 0xC4, 1, 2, 3],
    ));
    speech(gw.addr, ("Service-API-Key", ALICE), "hello world");
    speech(gw.addr, ("Service-API-Key", ALICE), "hello world");
    speech(gw.addr, ("Service-API-Key", BOB), "hi bob");
    let token = format!("Bearer {}", carols_token());
    speech(gw.addr, ("Authorization", &token), "hey");
    until(
        "the four requests recorded",
        Duration::from_secs(30),
        || {
            let n = rt.block_on(count(&url, &schema.name, "true"));
            (n == 4, n)
        },
    );
    rt.block_on(seed(&url, &schema.name));
    gw
}

/// The answer's `data` rows.
#[cfg(feature = "ledger")]
fn rows(doc: &Value) -> Vec<Value> {
    doc["data"].as_array().unwrap().clone()
}

#[cfg(feature = "ledger")]
#[test]
fn each_caller_reads_exactly_its_own_rows_totals_budget_and_limits() {
    let rt = runtime();
    let url = postgres_url();
    let schema = Schema::new(&url);
    let fake = FakeProvider::start();
    let gw = served(&rt, &schema, &fake);
    let window = format!("?from={}&to={}", day(30), day(0));
    let today = day(0).to_string();

    // Alice: her two requests of today (once charged to her budget) and her seeded rows of the
    // window; never bob's, alice2's, jwt:alice's, nobody's, nor her row before the window.
    let doc = until("alice's charge counted", Duration::from_secs(10), || {
        let resp = usage(gw.addr, &window, ALICE);
        assert_eq!(resp.status, 200, "{}", resp.text());
        let doc = resp.json();
        (doc["budgets"][0]["spent_today"] == "0.00033", doc)
    });
    assert_eq!(doc["caller"], "key:alice");
    assert_eq!(
        (&doc["from"], &doc["to"]),
        (&json!(day(30).to_string()), &json!(today))
    );
    let row = |ago: i64,
               model: &str,
               requests: i64,
               errors: i64,
               chars: i64,
               images: i64,
               cost: Value,
               currency: Value| {
        json!({"day": day(ago).to_string(), "model": model, "requests": requests,
               "errors": errors, "tokens": 0, "characters": chars, "images": images,
               "cost": cost, "currency": currency})
    };
    assert_eq!(
        rows(&doc),
        [
            row(20, "dall-e-3", 1, 0, 0, 1, json!("0.04"), json!("USD")),
            row(19, "tts-1", 1, 0, 10, 0, json!("0.0000007"), json!("CNY")),
            row(19, "tts-1", 1, 1, 0, 0, Value::Null, Value::Null),
            row(0, "tts-1", 2, 0, 22, 0, json!("0.00033"), json!("USD")),
        ],
        "{doc:#}"
    );
    assert_eq!(
        doc["totals"],
        json!([
            {"currency": "CNY", "requests": 1, "errors": 0, "tokens": 0, "characters": 10,
             "images": 0, "cost": "0.0000007"},
            {"currency": "USD", "requests": 3, "errors": 0, "tokens": 0, "characters": 22,
             "images": 1, "cost": "0.04033"},
            {"currency": null, "requests": 1, "errors": 1, "tokens": 0, "characters": 0,
             "images": 0, "cost": null},
        ])
    );
    // The budget from the live counters (what refusals read): today's two requests.
    assert_eq!(
        doc["budgets"],
        json!([{"currency": "USD", "per_day": "1", "spent_today": "0.00033",
                "left_today": "0.99967", "per_month": "10", "spent_this_month": "0.00033",
                "left_this_month": "9.99967"}])
    );
    let limits = &doc["limits"];
    assert_eq!(
        (
            &limits["requests_per_minute"]["used"],
            &limits["requests_per_minute"]["remaining"]
        ),
        (&json!(2), &json!(8)),
        "{limits}"
    );
    assert_eq!(limits["characters_per_day"]["used"], 22);
    assert_eq!(limits["characters_per_day"]["remaining"], 99_978);
    assert_eq!(
        limits["characters_per_day"]["resets_at"],
        format!("{}T00:00:00Z", day(-1))
    );
    assert_eq!(
        limits["concurrent"],
        json!({"limit": 2, "used": 0, "remaining": 2})
    );

    // Reading it again and again counts against no limit, and records nothing.
    for _ in 0..5 {
        assert_eq!(usage(gw.addr, &window, ALICE).status, 200);
    }
    let again = usage(gw.addr, &window, ALICE).json();
    assert_eq!(again["limits"]["requests_per_minute"]["used"], 2);
    assert_eq!(again["data"], doc["data"]);

    // Bob: his own, and no budget.
    let doc = usage(gw.addr, &window, BOB).json();
    assert_eq!(doc["caller"], "key:bob");
    assert_eq!(
        rows(&doc),
        [
            row(20, "dall-e-3", 1, 0, 0, 2, json!("0.08"), json!("USD")),
            row(0, "tts-1", 1, 0, 6, 0, json!("0.00009"), json!("USD")),
        ],
        "{doc:#}"
    );
    assert_eq!(doc["budgets"], json!([]));
    let limits = doc["limits"].as_object().unwrap();
    assert_eq!(limits.keys().collect::<Vec<_>>(), ["requests_per_minute"]);
    assert_eq!(limits["requests_per_minute"]["used"], 1);

    // A token's subject is a caller of its own: `jwt:carol`, no limits configured.
    let token = format!("Bearer {}", carols_token());
    let resp = client::request(
        gw.addr,
        "GET",
        &format!("/api/v1/usage{window}"),
        &[("Authorization", &token)],
        b"",
    );
    let doc = resp.json();
    assert_eq!(doc["caller"], "jwt:carol", "{doc}");
    assert_eq!(
        rows(&doc),
        [row(0, "tts-1", 1, 0, 3, 0, json!("0.000045"), json!("USD"))]
    );
    assert_eq!((&doc["budgets"], &doc["limits"]), (&json!([]), &json!({})));

    // A caller with no rows: empty, not an error.
    let doc = usage(gw.addr, &window, crate::support::KEY).json();
    assert_eq!(
        (&doc["caller"], &doc["data"], &doc["totals"]),
        (&json!("key:tester"), &json!([]), &json!([]))
    );

    // None of the dozen reads above was recorded. The ledger writes rows in the order requests
    // finish, so once a request made after them is in the table, theirs would be too.
    speech(gw.addr, ("Service-API-Key", crate::support::KEY), "marker");
    until("the marker recorded", Duration::from_secs(30), || {
        let n = rt.block_on(count(&url, &schema.name, "path = '/api/v1/audio/speech'"));
        (n == 5, n)
    });
    let recorded = rt.block_on(count(&url, &schema.name, "path = '/api/v1/usage'"));
    assert_eq!(recorded, 0);
    assert_eq!(
        rt.block_on(count(&url, &schema.name, "true")),
        5 + SEEDED.len() as i64
    );
}

#[cfg(feature = "ledger")]
#[test]
fn the_window_picks_utc_days_and_defaults_to_this_month() {
    let rt = runtime();
    let url = postgres_url();
    let schema = Schema::new(&url);
    let fake = FakeProvider::start();
    let gw = served(&rt, &schema, &fake);
    // One day, `to` included.
    let one = usage(gw.addr, &format!("?from={d}&to={d}", d = day(20)), ALICE).json();
    let days: Vec<&Value> = one["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["day"])
        .collect();
    assert_eq!(days, [&json!(day(20).to_string())], "{one}");
    assert_eq!(one["totals"][0]["cost"], "0.04");
    // Only `from`: to today.
    let since = usage(gw.addr, &format!("?from={}", day(19)), ALICE).json();
    assert_eq!(since["to"], day(0).to_string());
    assert_eq!(since["data"].as_array().unwrap().len(), 3, "{since}");
    // No window: from the first of this month to today.
    let month = usage(gw.addr, "", ALICE).json();
    let first = format!("{}-01", &day(0).to_string()[..7]);
    assert_eq!(
        (&month["from"], &month["to"]),
        (&json!(first), &json!(day(0).to_string()))
    );
    let in_month: Vec<&Value> = month["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["day"])
        .collect();
    assert!(
        in_month
            .iter()
            .all(|d| d.as_str().unwrap() >= first.as_str()),
        "{month}"
    );
    assert!(in_month.contains(&&json!(day(0).to_string())), "{month}");
    // A window with nothing in it.
    let empty = usage(gw.addr, &format!("?from={d}&to={d}", d = day(60)), ALICE).json();
    assert_eq!((&empty["data"], &empty["totals"]), (&json!([]), &json!([])));
}

#[cfg(feature = "ledger")]
#[test]
fn credentials_are_required_and_bad_dates_are_named() {
    let url = postgres_url();
    let schema = Schema::new(&url);
    let fake = FakeProvider::start();
    let ledger = format!("schema: {}, flush_interval_ms: 50", schema.name);
    let gw = TestGateway::start_with(|p| with_ledger(&fake, p, &url, &ledger));
    let resp = client::request(gw.addr, "GET", "/api/v1/usage", &[], b"");
    assert_eq!(resp.status, 401, "{}", resp.text());
    assert_eq!(resp.json()["code"], "unauthorized");
    assert_eq!(usage(gw.addr, "", "not-a-key").status, 401);
    for (query, field, says) in [
        ("?from=2026-13-01", "from", "YYYY-MM-DD"),
        ("?to=12/03/2026", "to", "YYYY-MM-DD"),
        ("?from=2026-12-03&to=2026-12-01", "to", "before it starts"),
        ("?from=2025-01-01&to=2026-01-02", "to", "at most 366"),
        ("?from=2026-12-01&from=2026-12-02", "from", "more than once"),
        ("?model=tts-1", "model", "unknown parameter"),
    ] {
        let resp = usage(gw.addr, query, ALICE);
        assert_eq!(resp.status, 400, "{query}: {}", resp.text());
        let body = resp.json();
        assert_eq!(body["code"], "validation_error", "{query}");
        let detail = body["details"][field]
            .as_str()
            .unwrap_or_else(|| panic!("{query}: {body}"));
        assert!(detail.contains(says), "{query}: {detail}");
    }
    let resp = client::request(
        gw.addr,
        "POST",
        "/api/v1/usage",
        &[("Service-API-Key", ALICE)],
        b"{}",
    );
    assert_eq!(resp.status, 405);
    assert_eq!(resp.header("allow"), Some("GET"));
}

/// Without a ledger (the standard test config has none; or a build without the feature) the
/// endpoint says what it needs, once the caller is known and its window checked.
#[test]
fn without_a_ledger_it_is_501_naming_the_setting() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let resp = usage(gw.addr, "", crate::support::KEY);
    assert_eq!(resp.status, 501, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "not_configured");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("ledger.database_url"),
        "{body}"
    );
    assert!(resp.header("x-request-id").is_some());
    let resp = client::request(gw.addr, "GET", "/api/v1/usage", &[], b"");
    assert_eq!(resp.status, 401);
    // A bad window is the caller's to fix, ledger or not.
    let resp = usage(gw.addr, "?from=2026-02-30", crate::support::KEY);
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]["from"].is_string());
}

/// A stopped database is `503 ledger_unavailable` at once, the address never shown; once it is
/// back, the endpoint answers again (its pooled connection replaced).
#[cfg(feature = "ledger")]
#[test]
fn a_stopped_database_is_503_and_a_restarted_one_answers_again() {
    let pg = PgProc::start();
    let url = pg.url();
    let fake = FakeProvider::start();
    let ledger = "schema: ledger, flush_interval_ms: 50, read_timeout_ms: 1000";
    let gw = TestGateway::start_with(|p| with_ledger(&fake, p, &url, ledger));
    let first = usage(gw.addr, "", ALICE);
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.json()["data"], json!([]));

    pg.down();
    let started = Instant::now();
    let resp = usage(gw.addr, "", ALICE);
    let took = started.elapsed();
    assert_eq!(resp.status, 503, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "ledger_unavailable");
    assert!(!body.to_string().contains("127.0.0.1"), "{body}");
    // Refused connections fail at once; the bound is the read timeout (1 s), generously.
    assert!(took < Duration::from_secs(5), "{took:?}");

    pg.up();
    until("answers again", Duration::from_secs(30), || {
        let resp = usage(gw.addr, "", ALICE);
        (resp.status == 200, resp.status)
    });
}

/// A database that accepts connections and never answers (a listener nobody serves) is 503
/// within the read timeout, never a hang.
#[cfg(feature = "ledger")]
#[test]
fn a_database_that_never_answers_is_503_within_the_read_timeout() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "postgresql://postgres@{}/postgres",
        silent.local_addr().unwrap()
    );
    let fake = FakeProvider::start();
    let ledger = "flush_interval_ms: 50, write_timeout_ms: 500, read_timeout_ms: 500";
    let gw = TestGateway::start_with(|p| with_ledger(&fake, p, &url, ledger));
    let started = Instant::now();
    let resp = usage(gw.addr, "", ALICE);
    let took = started.elapsed();
    assert_eq!(resp.status, 503, "{}", resp.text());
    assert_eq!(resp.json()["code"], "ledger_unavailable");
    assert!(
        took >= Duration::from_millis(450),
        "{took:?}: the read timed out early"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    drop(silent);
}

/// With Redis, the budget and limits are the shared counters: a caller's spend through one
/// instance is what another instance's `GET /api/v1/usage` shows, beside the ledger's rows.
#[cfg(all(feature = "ledger", feature = "redis"))]
#[test]
fn another_instance_on_the_same_redis_shows_the_same_budget_and_limits() {
    use crate::support::redis::{redis_url, run_prefix};
    let url = postgres_url();
    let schema = Schema::new(&url);
    let fake = FakeProvider::start();
    fake.set_default(Reply::bytes(
        200,
        "audio/mpeg",
        vec![0xFF, 0xF3, 0x44, 0xC4, 1, 2, 3],
    ));
    let store = format!(
        "  store: {{redis_url: \"{}\", key_prefix: \"{}\", timeout_ms: 1000}}\n  images: {{",
        redis_url(),
        run_prefix()
    );
    let ledger = format!("schema: {}, flush_interval_ms: 50", schema.name);
    let clock = Clock::manual(Clock::System.now());
    let make = |p| with_ledger(&fake, p, &url, &ledger).replacen("  images: {", &store, 1);
    let a = TestGateway::start_with_limits_clock(make, &clock);
    let b = TestGateway::start_with_limits_clock(make, &clock);
    speech(a.addr, ("Service-API-Key", ALICE), "hello world");
    speech(a.addr, ("Service-API-Key", ALICE), "hello world");
    let doc = until("b shows a's spend", Duration::from_secs(10), || {
        let doc = usage(b.addr, "", ALICE).json();
        let today = doc["data"].as_array().and_then(|d| d.last()).cloned();
        let done = doc["budgets"][0]["spent_today"] == "0.00033"
            && today.is_some_and(|r| r["requests"] == 2);
        (done, doc)
    });
    assert_eq!(doc["budgets"][0]["left_today"], "0.99967");
    assert_eq!(doc["limits"]["requests_per_minute"]["used"], 2);
    assert_eq!(doc["limits"]["characters_per_day"]["used"], 22);
    assert_eq!(doc["limits"]["concurrent"]["used"], 0);
    // Both instances read the same, and reading changed nothing: a's view after b's reads.
    let from_a = usage(a.addr, "", ALICE).json();
    assert_eq!(from_a["limits"], doc["limits"]);
    assert_eq!(from_a["budgets"], doc["budgets"]);
}
