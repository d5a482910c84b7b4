//! Gemini image models on Vertex AI end to end: a fake Google token endpoint
//! (`support::google_token`, which verifies the RS256 assertion with the test service account's
//! public key and its claims) and a fake Vertex AI that speaks `POST /v1/projects/{project}/
//! locations/{location}/publishers/google/models/{model}:generateContent` with the Gemini body,
//! asserting the bearer token and the path. The shared conformance cases run against the
//! standard test config's `vertex` account; then what is Vertex's own: one token minted and
//! reused, a token refreshed before it expires without a request waiting, a refused assertion as
//! the operator's error, a rejected token (401) as `upstream_auth_failed`, the private key and
//! the token absent from the log.

use std::time::{Duration, Instant};

use crate::images_gemini::{
    answer, errors, full_image, google_error, image_config, inline_images, reference, rejected,
    success_as,
};
use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Recorded, Reply};
use support::google_token::{self, SHARED_TOKEN};
use support::image_conformance::{
    self as conformance, b64, image_conformance, png, Answers, ImageCase,
};
use support::{post, TestGateway, KEY};

const GENERATE: &str = "/api/v1/images/generations";
/// The standard test config's account: the key's project, location `us-central1`.
const MODELS: &str = "/v1/projects/switchyard-test/locations/us-central1/publishers/google/models";

fn check_auth(req: &Recorded, token: &str) {
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {token}").as_str())
    );
    assert!(req.header("x-goog-api-key").is_none());
    for (name, value) in &req.headers {
        assert!(
            !value.contains(KEY),
            "the caller's key reached Vertex in {name}"
        );
    }
}

fn check_pro_full(req: &Recorded) {
    assert_eq!(
        req.path,
        format!("{MODELS}/gemini-3-pro-image:generateContent")
    );
    check_auth(req, SHARED_TOKEN);
    assert_eq!(
        req.json(),
        json!({
            "contents": [{"role": "user", "parts": [
                {"text": conformance::PROMPT},
                {"inlineData": {"mimeType": "image/png", "data": b64(&full_image())}}
            ]}],
            "generationConfig": {
                "responseModalities": ["IMAGE"],
                "imageConfig": {"aspectRatio": "16:9", "imageSize": "2K"}
            }
        })
    );
}

fn check_flash_full(req: &Recorded) {
    assert_eq!(
        req.path,
        format!("{MODELS}/gemini-3.1-flash-image:generateContent")
    );
    check_auth(req, SHARED_TOKEN);
    assert_eq!(
        image_config(req),
        json!({"aspectRatio": "8:1", "imageSize": "1K"})
    );
}

/// Gemini's error shapes, and Vertex's own answer to a token it does not accept.
fn vertex_errors() -> Vec<(Reply, u16, &'static str)> {
    let mut all = errors();
    all.push((
        google_error(
            401,
            "UNAUTHENTICATED",
            "Request had invalid authentication credentials. Expected OAuth 2 access token.",
        ),
        502,
        "upstream_auth_failed",
    ));
    all
}

image_conformance!(
    vertex_gemini_3_pro_image_conformance,
    ImageCase {
        model: "vertex-gemini-3-pro-image",
        base: json!({}),
        full: json!({"size": "2752x1536", "image": b64(&full_image()), "n": 1, "output_format": "png"}),
        check_full: check_pro_full,
        answer,
        answers: Answers::Inline,
        sizes: &["1K", "2K", "4K", "1024x1024", "1376x768", "3072x5504"],
        rejected_sizes: &["512", "1792x1024", "auto"],
        qualities: &[],
        rejected_qualities: &["hd"],
        max_n: 4,
        per_call_n: 1,
        native_n: None,
        rejected: rejected(),
        reference: Some(reference),
        errors: vertex_errors,
    }
);

image_conformance!(
    vertex_gemini_3_1_flash_image_conformance,
    ImageCase {
        model: "vertex-gemini-3.1-flash-image",
        base: json!({}),
        full: json!({"aspect_ratio": "8:1"}),
        check_full: check_flash_full,
        answer,
        answers: Answers::Inline,
        sizes: &["512", "1K", "4K", "2944x368"],
        rejected_sizes: &["256x256", "8K"],
        qualities: &[],
        rejected_qualities: &["standard"],
        max_n: 4,
        per_call_n: 1,
        native_n: None,
        rejected: rejected(),
        reference: Some(reference),
        errors: vertex_errors,
    }
);

// ---- Vertex's own ----------------------------------------------------------------------------

/// A gateway with one Vertex account on `vertex`, minting from `tokens`, with `settings` added.
fn gateway(vertex: &FakeProvider, tokens: &FakeProvider, settings: &str) -> TestGateway {
    let key = google_token::key_file();
    let token_url = format!("{}/token", tokens.base_url());
    let base = vertex.base_url();
    TestGateway::start_with(|(p0, p1)| {
        format!(
            r#"
version: 1
threads: 2
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners:
    - {{name: domestic, region: cn, address: "127.0.0.1:{p0}"}}
    - {{name: overseas, region: global, address: "127.0.0.1:{p1}"}}
  retries: {{max: 1, initial_backoff_ms: 1, max_backoff_ms: 5, max_retry_after_ms: 50}}
  auth:
    api_keys: [{{name: tester, key: "{KEY}"}}]
  providers:
    vertex: {{kind: vertex, credentials_file: "{key}", token_url: "{token_url}", base_url: "{base}", timeouts: {{read_ms: 1500}}{settings}}}
  models:
    nano-banana-pro: {{family: gemini-image, targets: [{{provider: vertex, model: gemini-3-pro-image}}]}}
"#
        )
    })
}

fn generate(gw: &TestGateway) -> support::client::Response {
    post(
        gw,
        GENERATE,
        &json!({"model": "nano-banana-pro", "prompt": "a fox", "response_format": "b64_json"}),
    )
}

fn numbered(n: usize) -> String {
    format!("ya29.token-{n}")
}

/// One token, minted at the first request and reused; the project and location from the
/// settings make the path (`global`'s host has no location prefix: the base URL is the
/// operator's).
#[test]
fn one_token_is_minted_and_reused() {
    let tokens = google_token::start(3600, numbered);
    let vertex = FakeProvider::start();
    vertex.set_default(Reply::json(200, success_as(&png(300, 3), "image/png")));
    let gw = gateway(&vertex, &tokens, ", project: my-project, location: global");
    assert!(
        tokens.requests().is_empty(),
        "no token before a request needs one"
    );
    for _ in 0..3 {
        let resp = generate(&gw);
        assert_eq!(resp.status, 200, "{}", resp.text());
    }
    assert_eq!(tokens.requests().len(), 1);
    let sent = vertex.requests();
    assert_eq!(sent.len(), 3);
    for req in &sent {
        assert_eq!(
            req.path,
            "/v1/projects/my-project/locations/global/publishers/google/models/gemini-3-pro-image:generateContent"
        );
        check_auth(req, "ya29.token-1");
        assert_eq!(inline_images(req).len(), 0);
    }
}

/// A token living 4 seconds is replaced after 2 by the background task: the second token is
/// minted while no request is in flight, and the next request carries it.
#[test]
fn a_token_is_refreshed_before_it_expires_without_a_request_waiting() {
    let tokens = google_token::start(4, numbered);
    let vertex = FakeProvider::start();
    vertex.set_default(Reply::json(200, success_as(&png(300, 3), "image/png")));
    let gw = gateway(&vertex, &tokens, "");
    let started = Instant::now();
    assert_eq!(generate(&gw).status, 200);
    let first_mint = tokens.requests().len();
    assert_eq!(first_mint, 1);
    // The refresh comes on its own, before the first token's 4 seconds are up.
    tokens.wait_requests(2, Duration::from_secs(5));
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "refreshed only after expiry"
    );
    assert_eq!(vertex.requests().len(), 1, "no request drove the refresh");
    // The fake has answered the second mint; the gateway publishes it a moment later. Until
    // then requests still carry the first token, which is still valid: none waits or fails.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let resp = generate(&gw);
        assert_eq!(resp.status, 200, "{}", resp.text());
        let last = vertex.requests().pop().unwrap();
        if last.header("authorization") == Some("Bearer ya29.token-2") {
            break;
        }
        check_auth(&last, "ya29.token-1");
        assert!(
            Instant::now() < deadline,
            "the refreshed token was never used"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    check_auth(&vertex.requests()[0], "ya29.token-1");
}

/// A token endpoint that refuses the assertion: the request is the operator's error
/// (`upstream_auth_failed`, 502) at once, and Vertex is never called.
#[test]
fn a_refused_assertion_is_the_operators_error() {
    let tokens = FakeProvider::start();
    tokens.set_default(Reply::json(
        400,
        json!({"error": "invalid_grant", "error_description": "Invalid JWT Signature."}),
    ));
    let vertex = FakeProvider::start();
    let gw = gateway(&vertex, &tokens, "");
    let started = Instant::now();
    let resp = generate(&gw);
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert_eq!(
        resp.json()["code"],
        "upstream_auth_failed",
        "{}",
        resp.text()
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "waited for the timeout"
    );
    assert!(vertex.requests().is_empty());
}

/// A config naming no project and a key without one, both a key and a file, a location that is
/// no location's name or a key that is not an RSA key is refused at load with a message naming
/// what is wrong (and never quoting the key).
#[test]
fn vertex_settings_are_checked_at_load() {
    let key = google_token::key_file();
    let mut no_project: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&key).unwrap()).unwrap();
    no_project.as_object_mut().unwrap().remove("project_id");
    let no_project_file = std::env::temp_dir().join(format!(
        "switchyard-vertex-no-project-{}.json",
        std::process::id()
    ));
    std::fs::write(&no_project_file, no_project.to_string()).unwrap();
    let cases = [
        (
            format!(
                r#"{{kind: vertex, credentials_file: "{}", base_url: "https://aiplatform.googleapis.com"}}"#,
                no_project_file.display()
            ),
            "needs a project",
        ),
        (
            format!(r#"{{kind: vertex, credentials_file: "{key}", api_key: "{{}}", base_url: "https://aiplatform.googleapis.com"}}"#),
            "not both",
        ),
        (
            format!(r#"{{kind: vertex, credentials_file: "{key}", location: "us/central", base_url: "https://aiplatform.googleapis.com"}}"#),
            "location",
        ),
        (
            r#"{kind: vertex, api_key: "{\"type\": \"service_account\", \"client_email\": \"a@b\", \"private_key\": \"PRIVATE-LOADTEST-123\"}", base_url: "https://aiplatform.googleapis.com"}"#.to_string(),
            "not an RSA private key",
        ),
    ];
    for (provider, expected) in cases {
        let yaml = format!(
            "version: 1\nswitchyard:\n  listeners: [{{name: main, address: \"127.0.0.1:1\"}}]\n  providers:\n    v: {provider}\n  models: {{}}\n"
        );
        let err = match switchyard::config::load_str(&yaml, &|_| None) {
            Ok(_) => panic!("{provider} loaded"),
            Err(e) => format!("{e:#?}"),
        };
        assert!(err.contains("switchyard.providers.v"), "{err}");
        assert!(err.contains(expected), "{expected}: {err}");
        assert!(!err.contains("PRIVATE-LOADTEST"), "{err}");
    }
    let _ = std::fs::remove_file(&no_project_file);
}

/// The gateway binary at `trace`: neither the service account's private key nor the access
/// token appears in its log, though the token crosses the wire on every request.
#[test]
fn the_private_key_and_the_token_never_reach_the_log() {
    const TOKEN: &str = "ya29.LOGTEST-vertex-token-5e6f";
    let tokens = google_token::start(3600, |_| TOKEN.to_string());
    let vertex = FakeProvider::start();
    vertex.set_default(Reply::json(200, success_as(&png(300, 3), "image/png")));
    let key = google_token::key_file();
    let token_url = format!("{}/token", tokens.base_url());
    let base = vertex.base_url();
    let gw = crate::logs::Binary::start(
        |port| {
            format!(
                r#"
version: 1
threads: 2
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners: [{{name: main, address: "127.0.0.1:{port}"}}]
  retries: {{max: 0}}
  auth:
    api_keys: [{{name: caller, key: "{KEY}"}}]
  providers:
    vertex: {{kind: vertex, credentials_file: "{key}", token_url: "{token_url}", base_url: "{base}"}}
  models:
    nano-banana-pro: {{family: gemini-image, targets: [{{provider: vertex, model: gemini-3-pro-image}}]}}
"#
            )
        },
        "trace",
    );
    let resp = support::client::post_json(
        gw.addr,
        GENERATE,
        &[("Authorization", format!("Bearer {KEY}").as_str())],
        &json!({"model": "nano-banana-pro", "prompt": "a fox", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    check_auth(&vertex.requests()[0], TOKEN);
    let text = gw.output_when("an access line", |t| t.contains(" access] "));
    assert!(
        text.contains("Writing request header:"),
        "no request dump at trace"
    );
    let key_file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&key).unwrap()).unwrap();
    let private = key_file["private_key"].as_str().unwrap();
    let body_line = private.lines().nth(5).unwrap();
    for secret in [TOKEN, body_line, KEY] {
        assert!(!text.contains(secret), "{secret} is in the log:\n{text}");
    }
    // The assertion itself (a JWT posted to the token endpoint) is a credential too.
    let assertion = tokens.requests()[0].text();
    let jwt = assertion.split("assertion=").nth(1).unwrap();
    assert!(!text.contains(jwt), "the assertion is in the log");
}
