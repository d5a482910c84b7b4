//! Keys and tenants as data (issue 47), end to end: gateway binaries on one PostgreSQL (each test
//! its own schema), keys made and changed through the management API, seen by every instance
//! within the stated bound (`docs/guide/tenants.md`: a notified change within a second or two;
//! these tests allow [`BOUND`]), a tenant's budget shared through Redis, rotation, expiry,
//! allowed models, a YAML key's name winning a clash, and a lost database.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::logs::Binary;
use crate::support::client::{self, Response};
use crate::support::fake::{FakeProvider, Reply};
use crate::support::free_port;
use crate::support::postgres::{postgres_url, raw, PgProc, Schema};

/// How long a change may take to reach another instance in these tests (the guide states the
/// bound; a loaded 2-core machine is given slack).
pub(crate) const BOUND: Duration = Duration::from_secs(5);
/// The administrator's key of the test configuration.
pub(crate) const ADMIN_KEY: &str = "admin-key-TENANTS-0123456789abcdef";
/// The HS256 secret of administrators' tokens.
pub(crate) const ADMIN_JWT_SECRET: &str = "admin-jwt-secret-TENANTS-at-least-32-bytes";

/// A gateway binary with its management and metrics listeners.
pub(crate) struct Instance {
    pub(crate) bin: Binary,
    pub(crate) admin: SocketAddr,
    pub(crate) metrics: SocketAddr,
}

/// What an instance is started with beyond the standard test configuration.
#[derive(Default, Clone)]
pub(crate) struct Setup {
    pub(crate) db_url: String,
    pub(crate) schema: String,
    /// `(url, prefix)` of a Redis shared by the instances.
    pub(crate) redis: Option<(String, String)>,
    pub(crate) serve_stale_seconds: Option<u64>,
    /// YAML lines added under `auth.api_keys`.
    pub(crate) yaml_keys: Vec<String>,
}

/// Start a gateway binary on `fake` with `setup`.
pub(crate) fn start(fake: &FakeProvider, setup: &Setup) -> Instance {
    let (admin, metrics) = (free_port(), free_port());
    let base = fake.base_url();
    let setup = setup.clone();
    let bin = Binary::start(
        move |port| {
            let mut yaml = crate::support::config(&base, (port, free_port()));
            let stale = setup.serve_stale_seconds.unwrap_or(3600);
            let mut extra = format!(
                "switchyard:\n  ledger: {{database_url: \"{}\", schema: {}, flush_interval_ms: 50}}\n  \
                 tenants: {{refresh_seconds: 30, serve_stale_seconds: {stale}}}\n  \
                 admin: {{address: \"127.0.0.1:{admin}\", keys: [{{name: ops, key: \"{ADMIN_KEY}\"}}], \
                 jwt: {{hs256_secret: \"{ADMIN_JWT_SECRET}\"}}, failed_logins_per_minute: 5}}\n  \
                 metrics: {{address: \"127.0.0.1:{metrics}\"}}\n  \
                 currency_rates: {{CNY: {{USD: \"0.14\"}}}}\n",
                setup.db_url, setup.schema
            );
            if let Some((url, prefix)) = &setup.redis {
                extra.push_str(&format!(
                    "  store: {{redis_url: \"{url}\", key_prefix: \"{prefix}\", timeout_ms: 500}}\n"
                ));
            }
            yaml = yaml.replacen("switchyard:\n", &extra, 1);
            let hashed = "      - {name: hashed,";
            for line in &setup.yaml_keys {
                yaml = yaml.replacen(hashed, &format!("      - {line}\n{hashed}"), 1);
            }
            yaml
        },
        "warn",
    );
    let admin: SocketAddr = format!("127.0.0.1:{admin}").parse().unwrap();
    crate::support::wait_listening(admin);
    Instance {
        bin,
        admin,
        metrics: format!("127.0.0.1:{metrics}").parse().unwrap(),
    }
}

/// `t` as RFC 3339 in UTC (whole seconds).
pub(crate) fn rfc3339(t: std::time::SystemTime) -> String {
    let secs = t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    // Howard Hinnant's civil-from-days.
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// A management API call with the administrator's key.
pub(crate) fn admin(i: &Instance, method: &str, path: &str, body: Option<Value>) -> Response {
    let auth = format!("Bearer {ADMIN_KEY}");
    let mut headers = vec![("Authorization", auth.as_str())];
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    if !bytes.is_empty() {
        headers.push(("Content-Type", "application/json"));
    }
    client::request(i.admin, method, path, &headers, bytes.as_bytes())
}

/// `admin` that must answer `status`; its JSON.
pub(crate) fn admin_ok(
    i: &Instance,
    method: &str,
    path: &str,
    body: Option<Value>,
    status: u16,
) -> Value {
    let resp = admin(i, method, path, body);
    assert_eq!(
        resp.status,
        status,
        "{method} {path}: {}\n{}",
        resp.text(),
        i.bin.output()
    );
    resp.json()
}

/// A speech request with `key`.
pub(crate) fn speak(i: &Instance, key: &str, input: &str) -> Response {
    client::post_json(
        i.bin.addr,
        "/api/v1/audio/speech",
        &[("Authorization", &format!("Bearer {key}"))],
        &json!({"model": "tts-1", "input": input, "voice": "alloy"}),
    )
}

/// Wait (at most `limit`) until `key`'s speech request on `i` answers `status`; the answer.
pub(crate) fn until_status(i: &Instance, key: &str, status: u16, limit: Duration) -> Response {
    let deadline = Instant::now() + limit;
    loop {
        let resp = speak(i, key, "hi");
        if resp.status == status {
            return resp;
        }
        assert!(
            Instant::now() < deadline,
            "no {status} within {limit:?}; the last answer: {} {}",
            resp.status,
            resp.text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The fake provider, answering speech.
pub(crate) fn speech_provider() -> FakeProvider {
    let fake = FakeProvider::start();
    fake.set_default(Reply::bytes(200, "audio/mpeg", vec![0xFF, 0xF3, 1, 2, 3]));
    fake
}

/// The value of the gauge `name` on `i`'s metrics listener.
fn gauge(i: &Instance, name: &str) -> Option<f64> {
    let text = client::request(i.metrics, "GET", "/metrics", &[], b"").text();
    text.lines().find_map(|l| {
        l.strip_prefix(&format!("{name} "))
            .and_then(|v| v.trim().parse().ok())
    })
}

fn until_gauge(i: &Instance, name: &str, want: f64, limit: Duration) {
    let deadline = Instant::now() + limit;
    while gauge(i, name) != Some(want) {
        assert!(
            Instant::now() < deadline,
            "{name} is {:?}, never {want}",
            gauge(i, name)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A tenant `team-a` and its key `ci` made on `i`; the key's id and secret.
pub(crate) fn tenant_and_key(i: &Instance, tenant: Value, key: Value) -> (String, String) {
    admin_ok(i, "POST", "/admin/v1/tenants", Some(tenant), 201);
    let made = admin_ok(i, "POST", "/admin/v1/keys", Some(key), 201);
    (
        made["id"].as_str().unwrap().to_string(),
        made["secret"].as_str().unwrap().to_string(),
    )
}

#[cfg(feature = "redis")]
#[test]
fn two_instances_share_keys_revocations_and_a_tenants_budget() {
    let fake = speech_provider();
    let url = postgres_url();
    let schema = Schema::new(&url);
    let setup = Setup {
        db_url: url.clone(),
        schema: schema.name.clone(),
        redis: Some((
            crate::support::redis::redis_url(),
            crate::support::redis::run_prefix(),
        )),
        ..Setup::default()
    };
    let (a, b) = (start(&fake, &setup), start(&fake, &setup));
    // $0.0003 a day for the tenant: 20 characters of tts-1 ($15 per million).
    let tenant =
        json!({"name": "team-a", "limits": {"budget": {"currency": "USD", "per_day": "0.0003"}}});
    let (id, secret) = tenant_and_key(&a, tenant, json!({"tenant": "team-a", "name": "ci"}));
    // Made on A, it serves on B within the bound.
    let started = Instant::now();
    until_status(&b, &secret, 200, BOUND);
    eprintln!("a key made on A served on B after {:?}", started.elapsed());
    let other = admin_ok(
        &b,
        "POST",
        "/admin/v1/keys",
        Some(json!({"tenant": "team-a", "name": "web"})),
        201,
    );
    let other = other["secret"].as_str().unwrap().to_string();
    until_status(&a, &other, 200, BOUND);
    // The tenant's budget: 2 + 2 characters so far ("hi" twice); 16 more on A spend it.
    assert_eq!(speak(&a, &secret, "sixteen chars!!!").status, 200);
    // Spent on A: the tenant's other key is refused on B (its own key has no limits).
    let refused = until_status(&b, &other, 429, BOUND);
    assert_eq!(refused.json()["code"], "rate_limited", "{}", refused.text());
    assert!(refused.json()["message"]
        .as_str()
        .unwrap()
        .contains("budget_per_day"));
    // Revoked through B, refused on A within the bound.
    let revoked = admin_ok(
        &b,
        "POST",
        &format!("/admin/v1/keys/{id}/revoke"),
        None,
        200,
    );
    assert_eq!(revoked["status"], "revoked");
    let started = Instant::now();
    let resp = until_status(&a, &secret, 401, BOUND);
    eprintln!(
        "a key revoked on B was refused on A after {:?}",
        started.elapsed()
    );
    assert_eq!(resp.json()["code"], "unauthorized");
    // The ledger names the tenant of each record of its keys.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(crate::support::postgres::eventually("ledger rows", BOUND, || async {
        let c = raw(&url).await;
        let sql = format!(
            "SELECT count(*) FROM {}.usage_records WHERE tenant = 'team-a' AND caller LIKE 'key:team-a/%'",
            schema.name
        );
        c.query_one(&sql, &[]).await.map(|r| r.get::<_, i64>(0) >= 3).unwrap_or(false)
    }));
}

#[test]
fn rotation_overlap_expiry_allowed_models_and_a_yaml_clash() {
    let fake = speech_provider();
    let url = postgres_url();
    let schema = Schema::new(&url);
    let setup = Setup {
        db_url: url.clone(),
        schema: schema.name.clone(),
        yaml_keys: vec!["{name: \"team-a/yaml\", key: \"yaml-clash-key-TENANTS\"}".into()],
        ..Setup::default()
    };
    let i = start(&fake, &setup);
    let tenant = json!({"name": "team-a", "allowed_models": ["tts-1", "rerank-v3.5"]});
    let (id, old) = tenant_and_key(
        &i,
        tenant,
        json!({"tenant": "team-a", "name": "ci", "allowed_models": ["tts-1"]}),
    );
    until_status(&i, &old, 200, BOUND);
    // A model outside the key's allowed models: 403, before any provider is asked.
    let asked = fake.requests().len();
    let rerank = client::post_json(
        i.bin.addr,
        "/api/v1/rerank",
        &[("Authorization", &format!("Bearer {old}"))],
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a", "b"]}),
    );
    assert_eq!(rerank.status, 403, "{}", rerank.text());
    assert_eq!(rerank.json()["code"], "model_not_allowed");
    assert_eq!(fake.requests().len(), asked);
    // Rotation with a 3-second overlap: both secrets work, then only the new one.
    let rotated = admin_ok(
        &i,
        "POST",
        &format!("/admin/v1/keys/{id}/rotate"),
        Some(json!({"overlap_seconds": 3})),
        200,
    );
    let new = rotated["secret"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    assert!(rotated["previous_expires_at"].is_string());
    until_status(&i, &new, 200, BOUND);
    assert_eq!(
        speak(&i, &old, "hi").status,
        200,
        "the old secret within the overlap"
    );
    until_status(&i, &old, 401, BOUND + Duration::from_secs(8));
    assert_eq!(speak(&i, &new, "hi").status, 200);
    // Expiry: three seconds from now, then refused.
    let soon = std::time::SystemTime::now() + Duration::from_secs(3);
    let expires = rfc3339(soon);
    let patched = admin_ok(
        &i,
        "PATCH",
        &format!("/admin/v1/keys/{id}"),
        Some(json!({"expires_at": expires})),
        200,
    );
    assert_eq!(patched["status"], "active");
    until_status(&i, &new, 401, BOUND + Duration::from_secs(3));
    let expired = admin_ok(&i, "GET", &format!("/admin/v1/keys/{id}"), None, 200);
    assert_eq!(expired["status"], "expired");
    // A database key named as a YAML key: the YAML key wins, and the log says so.
    let clash = admin_ok(
        &i,
        "POST",
        "/admin/v1/keys",
        Some(json!({"tenant": "team-a", "name": "yaml"})),
        201,
    );
    let clash = clash["secret"].as_str().unwrap().to_string();
    let log = i.bin.output_when("the clash warning", |t| {
        t.contains("key:team-a/yaml has the name of a YAML key")
    });
    assert!(log.contains("WARN"), "{log}");
    assert_eq!(speak(&i, &clash, "hi").status, 401);
    assert_eq!(speak(&i, "yaml-clash-key-TENANTS", "hi").status, 200);
    // No secret is in the log.
    for s in [&old, &new, &clash] {
        assert!(!log.contains(s.as_str()), "a secret in the log");
    }
}

#[test]
fn a_lost_database_keeps_keys_serving_then_refuses_them_and_the_gauges_say_so() {
    let pg = PgProc::start();
    let fake = speech_provider();
    let setup = Setup {
        db_url: pg.url(),
        schema: "switchyard".into(),
        serve_stale_seconds: Some(8),
        ..Setup::default()
    };
    let i = start(&fake, &setup);
    let (_, secret) = tenant_and_key(
        &i,
        json!({"name": "team-a"}),
        json!({"tenant": "team-a", "name": "ci"}),
    );
    until_status(&i, &secret, 200, BOUND);
    until_gauge(&i, "switchyard_tenants_stale", 0.0, BOUND);
    pg.down();
    // Lost: still served from the snapshot, and the gauge says it is stale.
    until_gauge(&i, "switchyard_tenants_stale", 1.0, BOUND);
    assert_eq!(speak(&i, &secret, "hi").status, 200);
    let down = admin(&i, "GET", "/admin/v1/tenants", None);
    assert_eq!(down.status, 503, "{}", down.text());
    assert_eq!(down.json()["code"], "database_unavailable");
    // Past serve_stale_seconds: database keys are refused (YAML keys still work).
    until_gauge(
        &i,
        "switchyard_tenants_stale",
        2.0,
        BOUND + Duration::from_secs(4),
    );
    assert!(gauge(&i, "switchyard_tenants_sync_age_seconds").unwrap() >= 4.0);
    assert_eq!(speak(&i, &secret, "hi").status, 401);
    assert_eq!(speak(&i, crate::support::KEY, "hi").status, 200);
    // Back: the key serves again.
    pg.up();
    until_status(&i, &secret, 200, Duration::from_secs(15));
    until_gauge(&i, "switchyard_tenants_stale", 0.0, BOUND);
}
