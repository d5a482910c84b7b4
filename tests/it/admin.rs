//! The management API (issue 47), end to end on a gateway binary and a real PostgreSQL (a schema
//! of its own per test): every endpoint's answer and errors, who may call it (administrators'
//! keys and scoped tokens, never callers' credentials, and the reverse on the public API),
//! failed logins limited per IP, the audit trail, and secrets shown only when made.

use jsonwebtoken::{encode, EncodingKey, Header};
use serde_json::{json, Value};

use crate::support::client;
use crate::support::postgres::{postgres_url, Schema};
use crate::tenants::{
    admin, admin_ok, speech_provider, start, until_status, Instance, Setup, ADMIN_JWT_SECRET,
    ADMIN_KEY, BOUND,
};

fn setup(schema: &Schema) -> Setup {
    Setup {
        db_url: postgres_url(),
        schema: schema.name.clone(),
        ..Setup::default()
    }
}

fn token(secret: &str, claims: Value) -> String {
    encode(
        &Header::default(),
        &claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

fn exp() -> u64 {
    jsonwebtoken::get_current_timestamp() + 300
}

fn with_bearer(i: &Instance, path: &str, bearer: &str) -> client::Response {
    let auth = format!("Bearer {bearer}");
    client::request(
        i.admin,
        "GET",
        path,
        &[("Authorization", auth.as_str())],
        b"",
    )
}

fn assert_error(resp: &client::Response, status: u16, code: &str) -> Value {
    assert_eq!(resp.status, status, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], code, "{body}");
    assert!(body["message"].is_string(), "{body}");
    body
}

#[test]
fn who_may_call_the_management_api_and_the_public_api() {
    let fake = speech_provider();
    let schema = Schema::new(&postgres_url());
    let i = start(&fake, &setup(&schema));
    let me = admin_ok(&i, "GET", "/admin/v1/whoami", None, 200);
    assert_eq!(me, json!({"admin": "ops", "via": "key"}));
    let scoped = token(
        ADMIN_JWT_SECRET,
        json!({"sub": "alice", "exp": exp(), "scope": "openid switchyard:admin"}),
    );
    let me = with_bearer(&i, "/admin/v1/whoami", &scoped).json();
    assert_eq!(me, json!({"admin": "alice", "via": "jwt"}));
    // Refused: no credential, a wrong key, a caller's key, a token without the scope.
    let none = client::request(i.admin, "GET", "/admin/v1/whoami", &[], b"");
    assert_error(&none, 401, "unauthorized");
    assert_error(
        &with_bearer(&i, "/admin/v1/whoami", "wrong"),
        401,
        "unauthorized",
    );
    let caller = with_bearer(&i, "/admin/v1/tenants", crate::support::KEY);
    assert_error(&caller, 401, "unauthorized");
    let unscoped = token(ADMIN_JWT_SECRET, json!({"sub": "bob", "exp": exp()}));
    assert_error(
        &with_bearer(&i, "/admin/v1/whoami", &unscoped),
        401,
        "unauthorized",
    );
    // The public API refuses an administrator's key, and a caller's token with the admin scope.
    let speech = |auth: &str| {
        client::post_json(
            i.bin.addr,
            "/api/v1/audio/speech",
            &[("Authorization", &format!("Bearer {auth}"))],
            &json!({"model": "tts-1", "input": "hi", "voice": "alloy"}),
        )
    };
    assert_error(&speech(ADMIN_KEY), 401, "unauthorized");
    let public_admin = token(
        crate::support::JWT_SECRET,
        json!({"sub": "eve", "exp": exp(), "iss": "switchyard-tests", "scope": "switchyard:admin"}),
    );
    let refused = assert_error(&speech(&public_admin), 401, "unauthorized");
    assert!(refused["message"]
        .as_str()
        .unwrap()
        .contains("administrator"));
    let public_plain = token(
        crate::support::JWT_SECRET,
        json!({"sub": "eve", "exp": exp(), "iss": "switchyard-tests", "scope": "speech"}),
    );
    assert_eq!(speech(&public_plain).status, 200);
    // Paths: unknown ones 404, a wrong method 405; the console is served without a credential.
    assert_error(
        &admin(&i, "GET", "/admin/v1/nothing", None),
        404,
        "not_found",
    );
    assert_error(
        &admin(&i, "PUT", "/admin/v1/tenants", None),
        405,
        "method_not_allowed",
    );
    assert_error(&admin(&i, "GET", "/elsewhere", None), 404, "not_found");
    let doc = admin_ok(&i, "GET", "/admin/v1/openapi.json", None, 200);
    assert_eq!(doc["openapi"], "3.1.0");
}

#[test]
fn failed_logins_are_limited_per_minute() {
    let fake = speech_provider();
    let schema = Schema::new(&postgres_url());
    let i = start(&fake, &setup(&schema));
    // The count is per UTC minute: start early enough in one for the whole test to fit in it.
    let second = || {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        now.as_secs() % 60
    };
    while second() > 45 {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // The setup allows 5 a minute; a credential-less request is not a guess.
    for _ in 0..3 {
        let none = client::request(i.admin, "GET", "/admin/v1/whoami", &[], b"");
        assert_eq!(none.status, 401);
    }
    for n in 0..5 {
        let resp = with_bearer(&i, "/admin/v1/whoami", &format!("guess-{n}"));
        assert_error(&resp, 401, "unauthorized");
    }
    assert_error(
        &with_bearer(&i, "/admin/v1/whoami", "guess-6"),
        429,
        "too_many_failed_logins",
    );
    // Within the minute, even the right key waits: guessing cannot go on behind it.
    assert_error(
        &admin(&i, "GET", "/admin/v1/whoami", None),
        429,
        "too_many_failed_logins",
    );
}

#[test]
fn tenants_are_made_read_changed_and_disabled() {
    let fake = speech_provider();
    let schema = Schema::new(&postgres_url());
    let i = start(&fake, &setup(&schema));
    let limits = json!({"requests_per_minute": 100, "budget": {"currency": "USD", "per_day": "5.00", "per_month": 100}});
    let body = json!({"name": "team-a", "description": "Team A", "limits": limits, "allowed_models": ["tts-1"]});
    let made = admin_ok(&i, "POST", "/admin/v1/tenants", Some(body.clone()), 201);
    assert_eq!(made["name"], "team-a");
    assert_eq!(made["description"], "Team A");
    assert_eq!(made["limits"]["requests_per_minute"], 100);
    assert_eq!(
        made["limits"]["budget"],
        json!({"currency": "USD", "per_day": "5", "per_month": "100"})
    );
    assert_eq!(made["allowed_models"], json!(["tts-1"]));
    assert!(made["created_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(made["disabled_at"], Value::Null);
    assert_error(
        &admin(&i, "POST", "/admin/v1/tenants", Some(body)),
        409,
        "conflict",
    );
    let bad = admin(
        &i,
        "POST",
        "/admin/v1/tenants",
        Some(
            json!({"name": "Team B", "limits": {"concurrent": 0}, "allowed_models": ["nope"], "extra": 1}),
        ),
    );
    let details = &assert_error(&bad, 400, "validation_error")["details"];
    for field in ["name", "limits", "allowed_models", "extra"] {
        assert!(details[field].is_string(), "{field}: {details}");
    }
    let not_json = client::request(
        i.admin,
        "POST",
        "/admin/v1/tenants",
        &[("Authorization", &format!("Bearer {ADMIN_KEY}"))],
        b"{",
    );
    assert!(assert_error(&not_json, 400, "validation_error")["details"]["body"].is_string());
    assert_eq!(
        admin_ok(&i, "GET", "/admin/v1/tenants/team-a", None, 200)["name"],
        "team-a"
    );
    assert_error(
        &admin(&i, "GET", "/admin/v1/tenants/nobody", None),
        404,
        "not_found",
    );
    let patched = admin_ok(
        &i,
        "PATCH",
        "/admin/v1/tenants/team-a",
        Some(json!({"description": "A team", "allowed_models": null})),
        200,
    );
    assert_eq!(patched["description"], "A team");
    assert_eq!(patched["allowed_models"], Value::Null);
    assert_eq!(patched["limits"]["requests_per_minute"], 100, "untouched");
    assert_error(
        &admin(&i, "PATCH", "/admin/v1/tenants/nobody", Some(json!({}))),
        404,
        "not_found",
    );
    let list = admin_ok(&i, "GET", "/admin/v1/tenants", None, 200);
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    // A key of it works until the tenant is deleted (disabled, not erased).
    let key = admin_ok(
        &i,
        "POST",
        "/admin/v1/keys",
        Some(json!({"tenant": "team-a", "name": "ci"})),
        201,
    );
    let secret = key["secret"].as_str().unwrap();
    until_status(&i, secret, 200, BOUND);
    let gone = admin_ok(&i, "DELETE", "/admin/v1/tenants/team-a", None, 200);
    assert!(gone["disabled_at"].is_string());
    until_status(&i, secret, 401, BOUND);
    let id = key["id"].as_str().unwrap();
    assert_eq!(
        admin_ok(&i, "GET", &format!("/admin/v1/keys/{id}"), None, 200)["status"],
        "disabled"
    );
    let refused = admin(
        &i,
        "POST",
        "/admin/v1/keys",
        Some(json!({"tenant": "team-a", "name": "more"})),
    );
    assert_eq!(
        assert_error(&refused, 400, "validation_error")["details"]["tenant"],
        "the tenant is disabled"
    );
    assert_error(
        &admin(&i, "DELETE", "/admin/v1/tenants/nobody", None),
        404,
        "not_found",
    );
}

#[test]
fn keys_are_made_listed_changed_rotated_revoked_and_audited_without_their_secrets() {
    let fake = speech_provider();
    let schema = Schema::new(&postgres_url());
    let i = start(&fake, &setup(&schema));
    admin_ok(
        &i,
        "POST",
        "/admin/v1/tenants",
        Some(json!({"name": "team-a"})),
        201,
    );
    let body = json!({"tenant": "team-a", "name": "ci", "limits": {"requests_per_minute": 60}, "allowed_models": ["tts-1"]});
    let made = admin_ok(&i, "POST", "/admin/v1/keys", Some(body.clone()), 201);
    let secret = made["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("sy_") && secret.len() == 46, "{secret}");
    assert_eq!(made["prefix"], &secret[..9]);
    assert_eq!(made["principal"], "key:team-a/ci");
    assert_eq!(made["status"], "active");
    assert_eq!(made["limits"]["requests_per_minute"], 60);
    let id = made["id"].as_str().unwrap().to_string();
    assert_error(
        &admin(&i, "POST", "/admin/v1/keys", Some(body)),
        409,
        "conflict",
    );
    let orphan = admin(
        &i,
        "POST",
        "/admin/v1/keys",
        Some(json!({"tenant": "nobody", "name": "x"})),
    );
    assert_eq!(
        assert_error(&orphan, 400, "validation_error")["details"]["tenant"],
        "no such tenant"
    );
    let bad = admin(
        &i,
        "POST",
        "/admin/v1/keys",
        Some(json!({"tenant": "team-a", "expires_at": "soon"})),
    );
    let details = &assert_error(&bad, 400, "validation_error")["details"];
    assert!(
        details["name"].is_string() && details["expires_at"].is_string(),
        "{details}"
    );
    // Read back: never the secret.
    let got = admin_ok(&i, "GET", &format!("/admin/v1/keys/{id}"), None, 200);
    assert!(got.get("secret").is_none(), "{got}");
    let listed = admin_ok(&i, "GET", "/admin/v1/keys?tenant=team-a", None, 200);
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    assert!(!listed.to_string().contains(&secret));
    assert_eq!(
        admin_ok(&i, "GET", "/admin/v1/keys?tenant=other", None, 200)["data"],
        json!([])
    );
    assert_error(
        &admin(&i, "GET", "/admin/v1/keys/not-a-uuid", None),
        404,
        "not_found",
    );
    let unknown = uuid::Uuid::new_v4();
    assert_error(
        &admin(&i, "GET", &format!("/admin/v1/keys/{unknown}"), None),
        404,
        "not_found",
    );
    // Changed, rotated (the new secret once), revoked.
    let patched = admin_ok(
        &i,
        "PATCH",
        &format!("/admin/v1/keys/{id}"),
        Some(json!({"limits": null})),
        200,
    );
    assert_eq!(patched["limits"], Value::Null);
    assert_eq!(patched["allowed_models"], json!(["tts-1"]));
    let bad = admin(
        &i,
        "PATCH",
        &format!("/admin/v1/keys/{id}"),
        Some(json!({"allowed_models": "tts-1"})),
    );
    assert!(assert_error(&bad, 400, "validation_error")["details"]["allowed_models"].is_string());
    let bad = admin(
        &i,
        "POST",
        &format!("/admin/v1/keys/{id}/rotate"),
        Some(json!({"overlap_seconds": "long"})),
    );
    assert_error(&bad, 400, "validation_error");
    let rotated = admin_ok(
        &i,
        "POST",
        &format!("/admin/v1/keys/{id}/rotate"),
        None,
        200,
    );
    let new = rotated["secret"].as_str().unwrap().to_string();
    assert_ne!(new, secret);
    assert!(rotated["rotated_at"].is_string() && rotated["previous_expires_at"].is_string());
    assert_eq!(rotated["prefix"], &new[..9]);
    let revoked = admin_ok(&i, "DELETE", &format!("/admin/v1/keys/{id}"), None, 200);
    assert_eq!(revoked["status"], "revoked");
    until_status(&i, &new, 401, BOUND);
    until_status(&i, &secret, 401, BOUND);
    assert_error(
        &admin(&i, "POST", &format!("/admin/v1/keys/{id}/rotate"), None),
        409,
        "conflict",
    );
    assert_error(
        &admin(
            &i,
            "POST",
            &format!("/admin/v1/keys/{unknown}/revoke"),
            None,
        ),
        404,
        "not_found",
    );
    // The audit trail: newest first, who, what, from where; no secret anywhere in it.
    let audit = admin_ok(&i, "GET", "/admin/v1/audit?limit=100", None, 200);
    let rows = audit["data"].as_array().unwrap();
    let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(
        actions,
        [
            "key.revoke",
            "key.rotate",
            "key.update",
            "key.create",
            "tenant.create"
        ]
    );
    assert_eq!(rows[0]["admin"], "ops");
    assert_eq!(rows[0]["from"], "127.0.0.1");
    assert_eq!(rows[0]["target"], id.as_str());
    assert_eq!(rows[3]["detail"]["name"], "ci");
    let text = audit.to_string();
    assert!(!text.contains(&secret) && !text.contains(&new), "{text}");
    assert_eq!(
        admin_ok(&i, "GET", "/admin/v1/audit?limit=1", None, 200)["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_error(
        &admin(&i, "GET", "/admin/v1/audit?limit=0", None),
        400,
        "validation_error",
    );
    // Nor in the gateway's log.
    let log = i.bin.output();
    assert!(
        !log.contains(&secret) && !log.contains(&new),
        "a secret in the log"
    );
}

#[test]
fn models_are_listed_with_their_targets_health_and_lifecycle() {
    let fake = speech_provider();
    let schema = Schema::new(&postgres_url());
    let i = start(&fake, &setup(&schema));
    let models = admin_ok(&i, "GET", "/admin/v1/models", None, 200);
    let tts = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "tts-1")
        .unwrap()
        .clone();
    assert_eq!(tts["operation"], "speech");
    let target = &tts["targets"][0];
    assert_eq!(target["provider"], "openai");
    assert_eq!(target["native_model"], "tts-1");
    assert_eq!(target["healthy"], true);
    assert!(target["lifecycle"].get("shutdown_at").is_some(), "{target}");
}

#[test]
fn spend_is_reported_by_tenant_key_model_and_day_from_the_ledger() {
    let fake = speech_provider();
    let schema = Schema::new(&postgres_url());
    let i = start(&fake, &setup(&schema));
    admin_ok(
        &i,
        "POST",
        "/admin/v1/tenants",
        Some(json!({"name": "team-a"})),
        201,
    );
    let made = admin_ok(
        &i,
        "POST",
        "/admin/v1/keys",
        Some(json!({"tenant": "team-a", "name": "ci"})),
        201,
    );
    let (id, secret) = (
        made["id"].as_str().unwrap(),
        made["secret"].as_str().unwrap(),
    );
    until_status(&i, secret, 200, BOUND);
    // 10 more characters of tts-1 ($15 per million): with "hi", 12 characters, $0.00018.
    assert_eq!(crate::tenants::speak(&i, secret, "ten chars!").status, 200);
    // A YAML key's request: no tenant.
    assert_eq!(
        crate::tenants::speak(&i, crate::support::KEY, "abc").status,
        200
    );
    let path = "/admin/v1/spend?by=tenant,key,model,day&tenant=team-a";
    let deadline = std::time::Instant::now() + BOUND;
    let report = loop {
        let r = admin_ok(&i, "GET", path, None, 200);
        let chars: i64 = r["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row["characters"].as_i64().unwrap())
            .sum();
        if chars >= 12 {
            break r;
        }
        assert!(std::time::Instant::now() < deadline, "{r}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(report["by"], json!(["tenant", "key", "model", "day"]));
    let rows = report["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{report}");
    let row = &rows[0];
    assert_eq!(row["tenant"], "team-a");
    assert_eq!(row["key"], "key:team-a/ci");
    assert_eq!(row["model"], "tts-1");
    assert_eq!(row["day"], report["to"]);
    assert_eq!(row["month"], Value::Null);
    assert_eq!(row["requests"], 2);
    assert_eq!(row["characters"], 12);
    assert_eq!(row["cost"], "0.00018");
    assert_eq!(row["currency"], "USD");
    // By the key's id, by month; the default grouping holds the YAML key's row with no tenant.
    let by_key = admin_ok(
        &i,
        "GET",
        &format!("/admin/v1/spend?by=month&key={id}"),
        None,
        200,
    );
    assert_eq!(by_key["data"][0]["characters"], 12, "{by_key}");
    assert!(by_key["data"][0]["month"].as_str().unwrap().len() == 7);
    let deadline = std::time::Instant::now() + BOUND;
    loop {
        let all = admin_ok(&i, "GET", "/admin/v1/spend", None, 200);
        assert_eq!(all["by"], json!(["tenant", "day"]));
        if all["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["tenant"].is_null() && r["characters"] == 3)
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{all}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Bad queries: per field.
    let bad = admin(
        &i,
        "GET",
        "/admin/v1/spend?by=week&from=2026-12-05&to=2026-12-01",
        None,
    );
    let details = &assert_error(&bad, 400, "validation_error")["details"];
    assert!(
        details["by"].is_string() && details["from"].is_string(),
        "{details}"
    );
    let bad = admin(&i, "GET", "/admin/v1/spend?to=yesterday", None);
    assert!(assert_error(&bad, 400, "validation_error")["details"]["to"].is_string());
}

/// `switchyard keys …` with the administrator's key (`key`) in its environment.
fn keys_cli(i: &Instance, key: &str, args: &[&str]) -> (i32, Value, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .arg("keys")
        .args(args)
        .args(["--admin", &format!("http://{}", i.admin)])
        .env("SWITCHYARD_ADMIN_KEY", key)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap(),
        json,
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn the_keys_command_line_makes_lists_rotates_and_revokes_keys() {
    let fake = speech_provider();
    let schema = Schema::new(&postgres_url());
    let i = start(&fake, &setup(&schema));
    admin_ok(
        &i,
        "POST",
        "/admin/v1/tenants",
        Some(json!({"name": "team-a"})),
        201,
    );
    let (code, made, err) = keys_cli(
        &i,
        ADMIN_KEY,
        &[
            "create", "--tenant", "team-a", "--name", "ci", "--models", "tts-1",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let secret = made["secret"].as_str().unwrap().to_string();
    assert_eq!(made["allowed_models"], json!(["tts-1"]));
    let id = made["id"].as_str().unwrap().to_string();
    until_status(&i, &secret, 200, BOUND);
    let (code, listed, _) = keys_cli(&i, ADMIN_KEY, &["list", "--tenant", "team-a"]);
    assert_eq!(code, 0);
    assert_eq!(listed["data"][0]["id"], id.as_str());
    assert!(!listed.to_string().contains(&secret));
    let (code, rotated, _) = keys_cli(&i, ADMIN_KEY, &["rotate", &id, "--overlap-seconds", "0"]);
    assert_eq!(code, 0);
    let new = rotated["secret"].as_str().unwrap().to_string();
    until_status(&i, &secret, 401, BOUND);
    until_status(&i, &new, 200, BOUND);
    let (code, revoked, _) = keys_cli(&i, ADMIN_KEY, &["revoke", &id]);
    assert_eq!((code, revoked["status"].as_str()), (0, Some("revoked")));
    until_status(&i, &new, 401, BOUND);
    // An error answer is exit 1 with its body; a usage error is 2.
    let (code, _, err) = keys_cli(&i, ADMIN_KEY, &["show", "not-an-id"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("HTTP 404") && err.contains("not_found"),
        "{err}"
    );
    let (code, _, err) = keys_cli(&i, "wrong", &["list"]);
    assert_eq!(code, 1);
    assert!(err.contains("HTTP 401"), "{err}");
    assert!(!err.contains("wrong"), "the key is not echoed: {err}");
    assert_eq!(keys_cli(&i, ADMIN_KEY, &["frobnicate"]).0, 2);
}
