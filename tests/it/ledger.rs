//! The usage ledger against a real PostgreSQL: records arrive whole; with the database stopped
//! mid-run and started again, nothing within the bound is lost and the drops past it are counted
//! exactly (a private server the test stops and starts); what is unwritten at shutdown is
//! counted too; and `switchyard spend` reads seeded records back, as a table and as JSON.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pingora::services::background::BackgroundService;
use serde_json::{json, Value};
use switchyard::internals::ledger::LedgerSettings;
use switchyard::internals::ledger::{Ledger, Record, Usage};
use switchyard::internals::metrics::Metrics;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::support::postgres::{eventually, postgres_url, raw, PgProc, Schema};

const PATIENCE: Duration = Duration::from_secs(30);

fn settings(url: &str, schema: &str, queue: usize, batch: usize) -> LedgerSettings {
    LedgerSettings {
        database_url: url.to_string(),
        schema: schema.to_string(),
        queue_records: queue,
        batch_records: batch,
        flush_interval: Duration::from_millis(50),
        write_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(2),
    }
}

/// A ledger with its writer running on the test's runtime; send `true` to stop it.
fn start(
    settings: &LedgerSettings,
    metrics: Metrics,
) -> (Ledger, watch::Sender<bool>, JoinHandle<()>) {
    let ledger = Ledger::new(settings, metrics);
    let writer = ledger.writer();
    let (stop, watch) = watch::channel(false);
    let task = tokio::spawn(async move { writer.start(watch).await });
    (ledger, stop, task)
}

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// 2026-11-03T10:00:00Z and friends.
const NOV_3: u64 = 1_793_700_000;
const NOV_20: u64 = NOV_3 + 17 * 86_400;
const DEC_2: u64 = NOV_3 + 29 * 86_400;

fn record(request_id: &str) -> Record {
    let mut r = Record::new("public", "/api/v1/audio/speech", 200);
    r.request_id = Some(request_id.to_string());
    r
}

async fn count(url: &str, schema: &str) -> i64 {
    raw(url)
        .await
        .query_one(&format!("SELECT count(*) FROM {schema}.usage_records"), &[])
        .await
        .map(|r| r.get(0))
        .unwrap_or(-1)
}

async fn request_ids(url: &str, schema: &str) -> BTreeSet<String> {
    raw(url)
        .await
        .query(
            &format!("SELECT request_id FROM {schema}.usage_records"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_arrive_in_postgresql_with_every_field() {
    let url = postgres_url();
    let schema = Schema::new(&url);
    let (ledger, stop, task) = start(&settings(&url, &schema.name, 1000, 10), Metrics::off());
    let mut full = Record::new("public", "/api/v1/images/generations", 200);
    full.time = at(NOV_3);
    full.request_id = Some("req-full".into());
    full.caller = Some("key:alice".into());
    full.operation = Some("images".into());
    full.model = Some("gpt-image-1".into());
    full.provider = Some("openai".into());
    full.native_model = Some("gpt-image-1".into());
    full.usage = Usage {
        tokens: 1056,
        characters: 0,
        images: 2,
        detail: Some(json!({"input_text_tokens": 16, "output_image_tokens": 1040})),
    };
    full.cost_nanos = Some(84_000_000);
    full.currency = Some("USD".into());
    full.cost_basis = Some("provider".into());
    full.attempts = 2;
    full.trace_id = Some("4bf92f3577b34da6a3ce929d0e0e4736".into());
    ledger.record(full);
    for i in 0..24 {
        ledger.record(record(&format!("req-{i}")));
    }
    // A NUL (PostgreSQL's text and jsonb refuse it) must not fail its batch forever.
    let mut nul = record("req-nul");
    nul.path = "/api/v1/x\0y".into();
    nul.usage.detail = Some(json!({"k\u{0}": "v\u{0}"}));
    ledger.record(nul);
    eventually("26 records written", PATIENCE, || async {
        ledger.written() == 26
    })
    .await;
    assert_eq!(count(&url, &schema.name).await, 26);
    assert_eq!(ledger.dropped(), 0);
    let nul = raw(&url)
        .await
        .query_one(
            &format!(
                "SELECT path, usage_detail FROM {}.usage_records WHERE request_id = 'req-nul'",
                schema.name
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(nul.get::<_, String>(0), "/api/v1/x\u{FFFD}y");
    assert_eq!(nul.get::<_, Value>(1), json!({"k\u{FFFD}": "v\u{FFFD}"}));
    let row = raw(&url)
        .await
        .query_one(
            &format!(
                "SELECT extract(epoch FROM finished_at)::int8, caller, entry_point, path, operation, \
                 model, provider, native_model, tokens, characters, images, usage_detail, \
                 cost_nanos, currency, cost_basis, status, attempts, trace_id \
                 FROM {}.usage_records WHERE request_id = 'req-full'",
                schema.name
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), NOV_3 as i64);
    let texts: Vec<Option<String>> = [1, 2, 3, 4, 5, 6, 7].map(|i| row.get(i)).to_vec();
    assert_eq!(
        texts,
        [
            "key:alice",
            "public",
            "/api/v1/images/generations",
            "images",
            "gpt-image-1",
            "openai",
            "gpt-image-1"
        ]
        .map(|s| Some(s.to_string()))
    );
    assert_eq!(
        (
            row.get::<_, i64>(8),
            row.get::<_, i64>(9),
            row.get::<_, i64>(10)
        ),
        (1056, 0, 2)
    );
    assert_eq!(
        row.get::<_, Value>(11),
        json!({"input_text_tokens": 16, "output_image_tokens": 1040})
    );
    assert_eq!(row.get::<_, Option<i64>>(12), Some(84_000_000));
    assert_eq!(row.get::<_, Option<String>>(13).as_deref(), Some("USD"));
    assert_eq!(
        row.get::<_, Option<String>>(14).as_deref(),
        Some("provider")
    );
    assert_eq!((row.get::<_, i16>(15), row.get::<_, i32>(16)), (200, 2));
    assert_eq!(
        row.get::<_, Option<String>>(17).as_deref(),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
    );
    stop.send(true).unwrap();
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_loses_nothing_within_the_bound_and_counts_the_rest_exactly() {
    // `record` is a plain function: it cannot wait on anything, the database least of all.
    let _never_awaits: fn(&Ledger, Record) = Ledger::record;
    let pg = PgProc::start();
    let url = pg.url();
    let metrics = Metrics::on().unwrap_or_else(|_| Metrics::off());
    let (ledger, stop, task) = start(&settings(&url, "ledger", 50, 10), metrics.clone());
    for i in 0..20 {
        ledger.record(record(&format!("before-{i}")));
    }
    eventually("the first 20 written", PATIENCE, || async {
        ledger.written() == 20
    })
    .await;
    assert_eq!(ledger.held(), 0);

    pg.down();
    let started = std::time::Instant::now();
    for i in 0..70 {
        ledger.record(record(&format!("during-{i}")));
    }
    let took = started.elapsed();
    // Not a timing test (the bench measures it): a generous bound that only a call waiting on
    // the stopped database (connect timeouts are seconds) would exceed.
    assert!(took < Duration::from_secs(1), "70 records took {took:?}");
    assert_eq!(ledger.dropped(), 20, "exactly the 20 past the bound of 50");
    assert_eq!(ledger.held(), 50);
    // The writer keeps trying while it is down; nothing more is lost.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!((ledger.dropped(), ledger.held()), (20, 50));

    pg.up();
    eventually(
        "the 50 held written after the restart",
        PATIENCE,
        || async { ledger.written() == 70 },
    )
    .await;
    assert_eq!(count(&url, "ledger").await, 70, "no record twice");
    let expected: BTreeSet<String> = (0..20)
        .map(|i| format!("before-{i}"))
        .chain((0..50).map(|i| format!("during-{i}")))
        .collect();
    assert_eq!(request_ids(&url, "ledger").await, expected);
    assert_eq!(ledger.dropped(), 20);
    if let Some(registry) = metrics.registry() {
        let text =
            String::from_utf8(switchyard::internals::metrics::encode(registry).unwrap()).unwrap();
        for line in [
            "switchyard_ledger_records_total{outcome=\"dropped\"} 20",
            "switchyard_ledger_records_total{outcome=\"written\"} 70",
        ] {
            assert!(text.contains(line), "`{line}` not in:\n{text}");
        }
    }
    stop.send(true).unwrap();
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_still_unwritten_at_shutdown_are_counted_as_dropped() {
    let (port, _closed) = crate::support::refused_port();
    let url = format!("postgresql://postgres@127.0.0.1:{port}/postgres");
    let mut s = settings(&url, "ledger", 100, 10);
    s.write_timeout = Duration::from_millis(300);
    let (ledger, stop, task) = start(&s, Metrics::off());
    for i in 0..7 {
        ledger.record(record(&format!("r{i}")));
    }
    assert_eq!((ledger.held(), ledger.dropped()), (7, 0));
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the writer stops within its write timeout")
        .unwrap();
    assert_eq!(
        (ledger.held(), ledger.dropped(), ledger.written()),
        (0, 7, 0)
    );
}

/// Seed three callers' requests over two months, then write them all.
async fn seed(url: &str, schema: &str) {
    let (ledger, stop, task) = start(&settings(url, schema, 1000, 100), Metrics::off());
    let add = |secs: u64,
               caller: &str,
               model: &str,
               usage: (u64, u64, u64),
               cost: Option<i64>,
               status: u16| {
        let mut r = Record::new("public", "/api/v1/x", status);
        r.time = at(secs);
        r.caller = Some(caller.into());
        r.model = Some(model.into());
        r.provider = Some("acct".into());
        r.usage = Usage {
            tokens: usage.0,
            characters: usage.1,
            images: usage.2,
            detail: None,
        };
        r.cost_nanos = cost;
        r.currency = cost.map(|_| "USD".into());
        ledger.record(r);
    };
    // alice: two speech requests on Nov 3 (1,000 and 2,000 characters at $15 per million), one
    // failed one on Nov 20 (no cost); an image on Dec 2 (outside November).
    add(
        NOV_3,
        "key:alice",
        "tts-1",
        (0, 1000, 0),
        Some(15_000_000),
        200,
    );
    add(
        NOV_3 + 60,
        "key:alice",
        "tts-1",
        (0, 2000, 0),
        Some(30_000_000),
        200,
    );
    add(NOV_20, "key:alice", "tts-1", (0, 0, 0), None, 502);
    add(
        DEC_2,
        "key:alice",
        "dall-e-3",
        (0, 0, 1),
        Some(40_000_000),
        200,
    );
    // bob: rerank on Nov 20, 5,000 tokens, $0.002 per search.
    add(
        NOV_20,
        "jwt:bob",
        "rerank-v3.5",
        (5000, 0, 0),
        Some(2_000_000),
        200,
    );
    add(
        NOV_20 + 1,
        "jwt:bob",
        "rerank-v3.5",
        (3000, 0, 0),
        Some(2_000_000),
        200,
    );
    eventually("the seed written", PATIENCE, || async {
        ledger.written() == 6
    })
    .await;
    stop.send(true).unwrap();
    task.await.unwrap();
}

/// Run `switchyard spend` with `args`: its exit code, stdout and stderr. (Called from async tests
/// too: it blocks one of their two worker threads for a moment, while nothing else runs.)
fn spend(args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"));
    cmd.arg("spend").args(args).env_clear();
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spend_reads_back_spend_and_usage_per_caller_model_and_day() {
    let url = postgres_url();
    let schema = Schema::new(&url);
    seed(&url, &schema.name).await;
    let db = ["--database-url", &url, "--schema", &schema.name];
    let november = ["--from", "2026-11-01", "--to", "2026-12-01"];

    // Per caller and model, as JSON: December's image is outside the period.
    let args: Vec<&str> = db
        .iter()
        .chain(&november)
        .copied()
        .chain(["--json"])
        .collect();
    let (code, out, err) = spend(&args, &[]);
    assert_eq!(code, 0, "{out}{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["from"], "2026-11-01T00:00:00.000000Z");
    assert_eq!(doc["by"], json!(["caller", "model"]));
    let rows = doc["rows"].as_array().unwrap();
    let row = |caller: &str, currency: Value| {
        rows.iter()
            .find(|r| r["caller"] == caller && r["currency"] == currency)
            .unwrap_or_else(|| panic!("no row for {caller} {currency}: {out}"))
            .clone()
    };
    let alice = row("key:alice", json!("USD"));
    assert_eq!(
        (
            &alice["model"],
            &alice["requests"],
            &alice["characters"],
            &alice["cost"]
        ),
        (&json!("tts-1"), &json!(2), &json!(3000), &json!("0.045000"))
    );
    // The failed request: counted, its cost unknown (never a silent 0).
    let alice_unpriced = row("key:alice", Value::Null);
    assert_eq!(
        (
            &alice_unpriced["requests"],
            &alice_unpriced["errors"],
            &alice_unpriced["cost"]
        ),
        (&json!(1), &json!(1), &Value::Null)
    );
    let bob = row("jwt:bob", json!("USD"));
    assert_eq!(
        (
            &bob["model"],
            &bob["requests"],
            &bob["tokens"],
            &bob["cost_nanos"]
        ),
        (
            &json!("rerank-v3.5"),
            &json!(2),
            &json!(8000),
            &json!(4_000_000)
        )
    );
    assert_eq!(rows.len(), 3, "{out}");
    let usd = doc["totals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["currency"] == "USD")
        .unwrap();
    assert_eq!(
        (&usd["requests"], &usd["cost"]),
        (&json!(4), &json!("0.049000"))
    );

    // The same as a table: names as they are (`key:alice` is a caller, not a credential to
    // blank), numbers right-aligned, a total per currency with the unknown cost last.
    let args: Vec<&str> = db.iter().chain(&november).copied().collect();
    let (code, out, err) = spend(&args, &[]);
    assert_eq!(code, 0, "{out}{err}");
    for line in [
        "caller     model        requests  errors  tokens  characters  images  cost",
        "jwt:bob    rerank-v3.5         2       0    8000           0       0  0.004000 USD",
        "key:alice  tts-1               2       0       0        3000       0  0.045000 USD",
        "key:alice  tts-1               1       1       0           0       0  unknown",
    ] {
        assert!(out.contains(line), "`{line}` not in:\n{out}");
    }
    let totals: Vec<&str> = out.lines().filter(|l| l.starts_with("total")).collect();
    assert_eq!(
        totals,
        [
            "total                          4       0    8000        3000       0  0.049000 USD",
            "total                          1       1       0           0       0  unknown",
        ],
        "{out}"
    );

    // Per day for one caller, as a table.
    let args: Vec<&str> = db
        .iter()
        .chain(&november)
        .copied()
        .chain(["--caller", "key:alice", "--by", "day"])
        .collect();
    let (code, out, err) = spend(&args, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("by day"), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    let day = |d: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(d))
            .unwrap_or_else(|| panic!("no line for {d}:\n{out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        day("2026-11-03"),
        ["2026-11-03", "2", "0", "0", "3000", "0", "0.045000", "USD"]
    );
    assert_eq!(
        day("2026-11-20"),
        ["2026-11-20", "1", "1", "0", "0", "0", "unknown"]
    );
    assert!(!out.contains("2026-12-02"), "{out}");

    // Through a configuration file, its URL from the environment, by model.
    let dir = std::env::temp_dir().join(format!("switchyard-spend-{}", schema.name));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ledger.yaml");
    std::fs::write(
        &file,
        format!(
            "version: 1\nswitchyard:\n  listeners: [{{name: a, address: \"127.0.0.1:1\"}}]\n  \
             ledger: {{database_url: \"${{LEDGER_URL}}\", schema: {}}}\n",
            schema.name
        ),
    )
    .unwrap();
    let path = file.to_string_lossy().into_owned();
    let (code, out, err) = spend(
        &[
            "-c",
            &path,
            "--from",
            "2026-11-01",
            "--to",
            "2027-01-01",
            "--by",
            "model",
        ],
        &[("LEDGER_URL", &url)],
    );
    assert_eq!(code, 0, "{out}{err}");
    let image = out
        .lines()
        .find(|l| l.starts_with("dall-e-3"))
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(
        image.split_whitespace().collect::<Vec<_>>(),
        ["dall-e-3", "1", "0", "0", "0", "1", "0.040000", "USD"]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn spend_refuses_bad_arguments_and_a_config_without_a_ledger() {
    let (code, _, err) = spend(&["--by", "week"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("`week` is not one of"), "{err}");
    // The built-in configuration with no SWITCHYARD_LEDGER_DATABASE_URL: no ledger to read.
    let (code, _, err) = spend(&[], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has no ledger"), "{err}");
}

#[test]
fn spend_names_an_unreachable_database_without_its_password() {
    let (port, _closed) = std::thread::spawn(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async { crate::support::refused_port() })
    })
    .join()
    .unwrap();
    let url = format!("postgresql://billing:pw-SPEND-SECRET-1@127.0.0.1:{port}/db");
    let (code, out, err) = spend(&["--database-url", &url], &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.starts_with("spend: "), "{err}");
    assert!(
        !format!("{out}{err}").contains("pw-SPEND-SECRET-1"),
        "{err}"
    );
}

/// The gateway itself writes one record per finished operation, with the caller, the model, the
/// account that answered, the usage and the cost its answer announced (`tts-1`: 11 characters at
/// $15 per million = 165,000 nano-dollars); a health check and a model listing are nobody's
/// spend and leave none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_records_each_finished_operation_with_its_cost() {
    use crate::support::fake::{FakeProvider, Reply};
    use crate::support::{client, KEY};

    let url = postgres_url();
    let schema = Schema::new(&url);
    let fake = FakeProvider::start();
    fake.push(Reply::bytes(
        200,
        "audio/mpeg",
        vec![0xFF, 0xF3, 0x44, 0xC4, 1, 2, 3],
    ));
    let base = fake.base_url();
    let ledger = format!(
        "switchyard:\n  ledger: {{database_url: \"{url}\", schema: {}, flush_interval_ms: 50}}\n",
        schema.name
    );
    let bin = crate::logs::Binary::start(
        |port| {
            crate::support::config(&base, (port, crate::support::free_port())).replacen(
                "switchyard:\n",
                &ledger,
                1,
            )
        },
        "warn",
    );
    let addr = bin.addr;
    tokio::task::spawn_blocking(move || {
        // The health check and the model list first: records are written in order, so a record
        // of theirs would be in the table before (or with) the speech one.
        assert_eq!(
            client::request(addr, "GET", "/healthz", &[], b"").status,
            200
        );
        let models = client::request(
            addr,
            "GET",
            "/api/v1/models",
            &[("Service-API-Key", KEY)],
            b"",
        );
        assert_eq!(models.status, 200);
        let body = json!({"model": "tts-1", "input": "hello world", "voice": "alloy"});
        let resp = client::post_json(
            addr,
            "/api/v1/audio/speech",
            &[
                ("Service-API-Key", KEY),
                ("X-Request-Id", "ledger-req-1"),
                (
                    "traceparent",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                ),
            ],
            &body,
        );
        assert_eq!(resp.status, 200, "{}", resp.text());
        assert_eq!(resp.header("x-request-id"), Some("ledger-req-1"));
    })
    .await
    .unwrap();
    eventually("the gateway's record", PATIENCE, || async {
        count(&url, &schema.name).await == 1
    })
    .await;
    let row = raw(&url)
        .await
        .query_one(
            &format!(
                "SELECT caller, operation, model, provider, native_model, characters, \
                 cost_nanos, currency, cost_basis, status, attempts, path, request_id, \
                 trace_id FROM {}.usage_records",
                schema.name
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        row.get::<_, Option<String>>(0).as_deref(),
        Some("key:tester")
    );
    assert_eq!(row.get::<_, Option<String>>(1).as_deref(), Some("speech"));
    assert_eq!(row.get::<_, Option<String>>(2).as_deref(), Some("tts-1"));
    assert_eq!(row.get::<_, Option<String>>(3).as_deref(), Some("openai"));
    assert_eq!(row.get::<_, Option<String>>(4).as_deref(), Some("tts-1"));
    assert_eq!(row.get::<_, i64>(5), 11);
    assert_eq!(row.get::<_, Option<i64>>(6), Some(165_000));
    assert_eq!(row.get::<_, Option<String>>(7).as_deref(), Some("USD"));
    assert_eq!(row.get::<_, Option<String>>(8).as_deref(), Some("gateway"));
    assert_eq!(row.get::<_, i16>(9), 200);
    assert_eq!(row.get::<_, i32>(10), 1);
    assert_eq!(row.get::<_, String>(11), "/api/v1/audio/speech");
    // The same request id the answer carried, and the caller's trace.
    assert_eq!(
        row.get::<_, Option<String>>(12).as_deref(),
        Some("ledger-req-1")
    );
    assert_eq!(
        row.get::<_, Option<String>>(13).as_deref(),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
    );
    // The health check and the model list, answered before the speech, left no record.
    assert_eq!(count(&url, &schema.name).await, 1);
}

/// A token-billed answer's record carries the tokens its cost was computed from, with their
/// breakdown in `usage_detail`: a `gpt-image-2` answer's `usage` as OpenAI reported it (2,150
/// tokens, by kind), and a `gpt-4o-mini-tts` SSE stream's closing event (10 in, 40 out) — not
/// `tokens = 0` and a `NULL` detail beside a `provider`-basis cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_records_the_tokens_of_token_billed_answers() {
    use crate::support::fake::FakeProvider;

    let url = postgres_url();
    let schema = Schema::new(&url);
    let fake = FakeProvider::start();
    crate::logs::push_token_billed_answers(&fake);
    let base = fake.base_url();
    let ledger = format!(
        "switchyard:\n  ledger: {{database_url: \"{url}\", schema: {}, flush_interval_ms: 50}}\n",
        schema.name
    );
    let bin = crate::logs::Binary::start(
        |port| {
            crate::support::config(&base, (port, crate::support::free_port())).replacen(
                "switchyard:\n",
                &ledger,
                1,
            )
        },
        "warn",
    );
    let addr = bin.addr;
    tokio::task::spawn_blocking(move || {
        crate::logs::ask_token_billed(addr, crate::support::KEY);
    })
    .await
    .unwrap();
    eventually("both records", PATIENCE, || async {
        count(&url, &schema.name).await == 2
    })
    .await;
    let rows = raw(&url)
        .await
        .query(
            &format!(
                "SELECT model, tokens, characters, images, usage_detail, cost_nanos, cost_basis \
                 FROM {}.usage_records ORDER BY model",
                schema.name
            ),
            &[],
        )
        .await
        .unwrap();
    let speech = &rows[0];
    assert_eq!(
        speech.get::<_, Option<String>>(0).as_deref(),
        Some("gpt-4o-mini-tts")
    );
    assert_eq!(
        (
            speech.get::<_, i64>(1),
            speech.get::<_, i64>(2),
            speech.get::<_, i64>(3)
        ),
        (50, 11, 0)
    );
    assert_eq!(
        speech.get::<_, Option<Value>>(4),
        Some(json!({"input_tokens": 10, "output_tokens": 40}))
    );
    // 10 × $0.60 + 40 × $12 per 1M tokens.
    assert_eq!(speech.get::<_, Option<i64>>(5), Some(486_000));
    assert_eq!(
        speech.get::<_, Option<String>>(6).as_deref(),
        Some("provider")
    );
    let image = &rows[1];
    assert_eq!(
        image.get::<_, Option<String>>(0).as_deref(),
        Some("gpt-image-2")
    );
    assert_eq!(
        (
            image.get::<_, i64>(1),
            image.get::<_, i64>(2),
            image.get::<_, i64>(3)
        ),
        (2150, 0, 1)
    );
    assert_eq!(
        image.get::<_, Option<Value>>(4),
        Some(
            json!({"input_tokens": 50, "output_tokens": 2100, "total_tokens": 2150,
                    "input_tokens_details": {"text_tokens": 10, "image_tokens": 40},
                    "output_tokens_details": {"image_tokens": 2100}})
        )
    );
    // 10 × $5 + 40 × $8 + 2,100 × $30 per 1M tokens.
    assert_eq!(image.get::<_, Option<i64>>(5), Some(63_370_000));
    assert_eq!(
        image.get::<_, Option<String>>(6).as_deref(),
        Some("provider")
    );
}

/// An asynchronous image task leaves two records: its request's, accepted with no cost yet, and
/// the task's own once its images exist, with their cost (`gpt-image-2`, one low 1024x1024
/// image: $0.006) and the task's id — so a sum over the ledger counts the images once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_task_is_recorded_with_its_cost_once_its_images_exist() {
    use crate::support::fake::{FakeProvider, Reply};
    use crate::support::{client, KEY};

    let url = postgres_url();
    let schema = Schema::new(&url);
    let fake = FakeProvider::start();
    fake.set_default(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": "iVBORw0KGgo="}]}),
    ));
    let base = fake.base_url();
    let ledger = format!(
        "switchyard:\n  ledger: {{database_url: \"{url}\", schema: {}, flush_interval_ms: 50}}\n",
        schema.name
    );
    let bin = crate::logs::Binary::start(
        |port| {
            crate::support::config(&base, (port, crate::support::free_port())).replacen(
                "switchyard:\n",
                &ledger,
                1,
            )
        },
        "warn",
    );
    let addr = bin.addr;
    let task_id = tokio::task::spawn_blocking(move || {
        let resp = client::post_json(
            addr,
            "/api/v1/images/generations",
            &[("Service-API-Key", KEY)],
            &json!({"model": "gpt-image-2", "prompt": "p", "quality": "low",
                    "size": "1024x1024", "async": true}),
        );
        assert_eq!(resp.status, 200, "{}", resp.text());
        resp.json()["task_id"].as_str().unwrap().to_string()
    })
    .await
    .unwrap();
    eventually("both records", PATIENCE, || async {
        count(&url, &schema.name).await == 2
    })
    .await;
    let rows = raw(&url)
        .await
        .query(
            &format!(
                "SELECT entry_point, images, cost_nanos, currency, cost_basis, \
                 usage_detail->>'task_id', caller, model \
                 FROM {}.usage_records ORDER BY images",
                schema.name
            ),
            &[],
        )
        .await
        .unwrap();
    let accepted = &rows[0];
    assert_ne!(accepted.get::<_, String>(0), "(task)");
    assert_eq!(accepted.get::<_, i64>(1), 0);
    assert_eq!(accepted.get::<_, Option<i64>>(2), None);
    assert_eq!(
        accepted.get::<_, Option<String>>(4).as_deref(),
        Some("asynchronous")
    );
    let made = &rows[1];
    assert_eq!(made.get::<_, String>(0), "(task)");
    assert_eq!(made.get::<_, i64>(1), 1);
    assert_eq!(made.get::<_, Option<i64>>(2), Some(6_000_000));
    assert_eq!(made.get::<_, Option<String>>(3).as_deref(), Some("USD"));
    assert_eq!(made.get::<_, Option<String>>(4).as_deref(), Some("gateway"));
    assert_eq!(made.get::<_, Option<String>>(5), Some(task_id));
    assert_eq!(
        made.get::<_, Option<String>>(6).as_deref(),
        Some("key:tester")
    );
    assert_eq!(
        made.get::<_, Option<String>>(7).as_deref(),
        Some("gpt-image-2")
    );
}

/// An asynchronous task's own record carries its images' token usage too (a `gpt-image-2`
/// answer's `usage`, which the task's cost is computed from), beside the task's id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_tasks_record_carries_its_token_usage() {
    use crate::support::fake::FakeProvider;
    use crate::support::{client, KEY};

    let url = postgres_url();
    let schema = Schema::new(&url);
    let fake = FakeProvider::start();
    crate::logs::push_token_billed_answers(&fake);
    let base = fake.base_url();
    let ledger = format!(
        "switchyard:\n  ledger: {{database_url: \"{url}\", schema: {}, flush_interval_ms: 50}}\n",
        schema.name
    );
    let bin = crate::logs::Binary::start(
        |port| {
            crate::support::config(&base, (port, crate::support::free_port())).replacen(
                "switchyard:\n",
                &ledger,
                1,
            )
        },
        "warn",
    );
    let addr = bin.addr;
    let task_id = tokio::task::spawn_blocking(move || {
        let resp = client::post_json(
            addr,
            "/api/v1/images/generations",
            &[("Service-API-Key", KEY)],
            &json!({"model": "gpt-image-2", "prompt": "p", "quality": "high",
                    "size": "1024x1024", "response_format": "b64_json", "async": true}),
        );
        assert_eq!(resp.status, 200, "{}", resp.text());
        resp.json()["task_id"].as_str().unwrap().to_string()
    })
    .await
    .unwrap();
    eventually("both records", PATIENCE, || async {
        count(&url, &schema.name).await == 2
    })
    .await;
    let made = raw(&url)
        .await
        .query_one(
            &format!(
                "SELECT tokens, images, usage_detail, cost_nanos, cost_basis \
                 FROM {}.usage_records WHERE entry_point = '(task)'",
                schema.name
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!((made.get::<_, i64>(0), made.get::<_, i64>(1)), (2150, 1));
    assert_eq!(
        made.get::<_, Option<Value>>(2),
        Some(
            json!({"task_id": task_id, "input_tokens": 50, "output_tokens": 2100,
                    "total_tokens": 2150,
                    "input_tokens_details": {"text_tokens": 10, "image_tokens": 40},
                    "output_tokens_details": {"image_tokens": 2100}})
        )
    );
    assert_eq!(made.get::<_, Option<i64>>(3), Some(63_370_000));
    assert_eq!(
        made.get::<_, Option<String>>(4).as_deref(),
        Some("provider")
    );
}
