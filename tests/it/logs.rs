//! What the gateway binary writes to its log: no credential at any level (`RUST_LOG=trace`
//! included, where Pingora dumps every request head it reads and sends), and a client that goes
//! away is one access-log line saying so, not a Pingora `ERROR`.
//!
//! These run the `switchyard` binary (its logger is what is under test), with its output in
//! files read once the lines the test waits for are there.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::json;

use crate::support::fake::{FakeProvider, Recorded, Reply};
use crate::support::{free_port, gateway_starting, wait_listening};

// Distinctive credentials, one per kind of header the gateway sends or reads.
const CLIENT_KEY: &str = "client-key-LOGTEST-c1a2b3";
const WRONG_CLIENT_KEY: &str = "wrong-client-key-LOGTEST-d4e5";
const JWT_SECRET: &str = "jwt-secret-LOGTEST-that-is-at-least-32-bytes";
const OPENAI_KEY: &str = "sk-openai-LOGTEST-0a1b2c3d"; // Authorization: Bearer
const MINIMAX_KEY: &str = "minimax-key-LOGTEST-9f8e7d"; // Authorization: Bearer
const COHERE_KEY: &str = "cohere-key-LOGTEST-5e6f7a"; // Authorization: Bearer
const XI_KEY: &str = "xi-key-LOGTEST-1b2c3d4e"; // xi-api-key
const GOOGLE_KEY: &str = "AIza-google-LOGTEST-6f7a8b"; // x-goog-api-key
const VOLC_KEY: &str = "volc-access-LOGTEST-2c3d4e"; // x-api-access-key
const KLING_ACCESS: &str = "kling-access-LOGTEST-3d4e5f"; // a signed token's issuer
const KLING_SECRET: &str = "kling-secret-LOGTEST-4e5f6a"; // signs the token
                                                          // ---- AWS SigV4 (issue 30) ----
const AWS_ACCESS: &str = "AKIALOGTEST5F6A7B8C"; // in the signed Authorization's Credential
const AWS_SECRET: &str = "aws-secret-LOGTEST-5f6a7b8c9d"; // derives the signing key, never sent
const AWS_TOKEN: &str = "aws-token-LOGTEST-6a7b8c9d0e"; // x-amz-security-token
                                                        // ---- Tencent Cloud TC3 (issue 30) ----
const TC_SECRET_ID: &str = "AKIDLOGTEST7b8c9d0e1f"; // in the signed Authorization's Credential
const TC_SECRET_KEY: &str = "tc-secret-LOGTEST-7b8c9d0e1f"; // derives the signing key, never sent
const TC_TOKEN: &str = "tc-token-LOGTEST-8c9d0e1f2a"; // X-TC-Token
const REPLICATE_KEY: &str = "r8_replicate-LOGTEST-7b8c9d0e"; // Authorization: Bearer, polled too

/// A gateway process whose stdout and stderr go to files; killed when dropped.
pub(crate) struct Binary {
    child: Child,
    pub(crate) addr: SocketAddr,
    out: PathBuf,
    err: PathBuf,
}

impl Binary {
    pub(crate) fn start(yaml: impl FnOnce(u16) -> String, rust_log: &str) -> Binary {
        let _starting = gateway_starting();
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("switchyard-logs-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("gateway.yaml");
        std::fs::write(&file, yaml(port)).unwrap();
        let (out, err) = (dir.join("stdout"), dir.join("stderr"));
        let child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(["-c", file.to_str().unwrap()])
            .env("RUST_LOG", rust_log)
            .stdout(Stdio::from(std::fs::File::create(&out).unwrap()))
            .stderr(Stdio::from(std::fs::File::create(&err).unwrap()))
            .spawn()
            .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        wait_listening(addr);
        Binary {
            child,
            addr,
            out,
            err,
        }
    }

    /// Everything written so far, stdout then stderr.
    pub(crate) fn output(&self) -> String {
        let out = std::fs::read(&self.out).unwrap_or_default();
        let err = std::fs::read(&self.err).unwrap_or_default();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&err)
        )
    }

    /// Wait (at most 10 s) until `done` holds for the output; the output then.
    pub(crate) fn output_when(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = self.output();
            if done(&text) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "waited 10 s for {what}; the log:\n{text}"
            );
            std::thread::park_timeout(Duration::from_millis(20));
        }
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = self.out.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The access-log lines (target `access`) of the output.
fn access_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.contains(" access] ")).collect()
}

/// The lines logged at `ERROR`.
fn error_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.contains(" ERROR ")).collect()
}

fn post(addr: SocketAddr, path: &str, auth: (&str, &str), body: serde_json::Value) -> u16 {
    crate::support::client::post_json(addr, path, &[auth], &body).status
}

// ---- no secret in the log ----------------------------------------------------------------------

fn secrets_config(fake: &str, port: u16) -> String {
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
    api_keys: [{{name: caller, key: "{CLIENT_KEY}"}}]
    jwt: {{hs256_secret: "{JWT_SECRET}"}}
  providers:
    openai: {{kind: openai, api_key: "{OPENAI_KEY}", base_url: "{fake}/oa/v1"}}
    minimax: {{kind: minimax, api_key: "{MINIMAX_KEY}", base_url: "{fake}"}}
    cohere: {{kind: cohere, api_key: "{COHERE_KEY}", base_url: "{fake}"}}
    elevenlabs: {{kind: elevenlabs, api_key: "{XI_KEY}", base_url: "{fake}"}}
    google: {{kind: google, api_key: "{GOOGLE_KEY}", base_url: "{fake}"}}
    volcengine: {{kind: volcengine, api_key: "{VOLC_KEY}", app_id: "app-LOGTEST", base_url: "{fake}"}}
    kling: {{kind: kling, api_key: "{KLING_ACCESS}", secret_key: "{KLING_SECRET}", base_url: "{fake}"}}
    bedrock: {{kind: bedrock, api_key: "{AWS_ACCESS}", secret_key: "{AWS_SECRET}", session_token: "{AWS_TOKEN}", region: us-west-2, base_url: "{fake}"}}
    polly: {{kind: polly, api_key: "{AWS_ACCESS}", secret_key: "{AWS_SECRET}", session_token: "{AWS_TOKEN}", region: eu-west-1, base_url: "{fake}"}}
    tencent-tts: {{kind: tencent-tts, api_key: "{TC_SECRET_ID}", secret_key: "{TC_SECRET_KEY}", session_token: "{TC_TOKEN}", region: ap-guangzhou, base_url: "{fake}/tc"}}
    replicate: {{kind: replicate, api_key: "{REPLICATE_KEY}", base_url: "{fake}"}}
  models:
    tts-1: {{family: openai-tts, targets: [{{provider: openai, model: tts-1}}]}}
    speech-2.8-hd: {{family: minimax-tts, targets: [{{provider: minimax, model: speech-2.8-hd}}]}}
    eleven: {{family: elevenlabs-tts, default_voice: JBFqnCBsd6RMkjVDRZzb, targets: [{{provider: elevenlabs, model: eleven_multilingual_v2}}]}}
    google-tts: {{family: google-tts, targets: [{{provider: google, model: default}}]}}
    doubao-tts: {{family: doubao-tts, targets: [{{provider: volcengine, model: seed-tts-1.0}}]}}
    gpt-image-1: {{family: gpt-image, targets: [{{provider: openai, model: gpt-image-1, lifecycle: {{still_available: true}}}}]}}
    kling-v2-1: {{family: kling, targets: [{{provider: kling, model: kling-v2-1}}]}}
    rerank-v3.5: {{family: cohere-rerank, targets: [{{provider: cohere, model: rerank-v3.5}}]}}
    bedrock-rerank: {{family: bedrock-rerank, targets: [{{provider: bedrock, model: amazon.rerank-v1:0}}]}}
    polly-neural: {{family: polly-neural, targets: [{{provider: polly, model: neural}}]}}
    tencent-tts: {{family: tencent-tts, targets: [{{provider: tencent-tts, model: tts}}]}}
    replicate-flux-schnell: {{family: replicate-flux-schnell, targets: [{{provider: replicate, model: black-forest-labs/flux-schnell}}]}}
"#
    )
}

/// The fake's answers, by path and what was asked: real-looking successes, and for the input
/// `fail` (and any Kling submit) a 401 whose body echoes the key it was sent, as a provider may.
fn answer(req: &Recorded) -> Option<Reply> {
    let audio = || Reply::bytes(200, "audio/mpeg", vec![0xFF, 0xF3, 0x44, 0xC4, 7, 7, 7, 7]);
    let echo = |req: &Recorded| {
        let sent = req.header("authorization").unwrap_or_default().to_string();
        Reply::json(
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {sent}"), "code": "invalid_api_key"}}),
        )
    };
    let path = req.path.as_str();
    Some(if path == "/oa/v1/audio/speech" {
        if req.json()["input"] == "fail" {
            echo(req)
        } else {
            audio()
        }
    } else if path == "/oa/v1/images/generations" {
        Reply::json(
            200,
            json!({"created": 1, "data": [{"b64_json": "iVBORw0KGgo="}]}),
        )
    } else if path.starts_with("/v1/images/generations") {
        // Kling: refuse the signed token, echoing it.
        echo(req)
    } else if path == "/v1/t2a_v2" {
        let ev = json!({"data": {"audio": hex::encode([1u8, 2, 3]), "status": 1}, "base_resp": {"status_code": 0, "status_msg": ""}});
        let last = json!({"data": {"audio": hex::encode([1u8, 2, 3]), "status": 2}, "extra_info": {"audio_format": "mp3"}, "base_resp": {"status_code": 0, "status_msg": "success"}});
        Reply::sse(vec![
            (Duration::ZERO, format!("data: {ev}\n\n")),
            (Duration::ZERO, format!("data: {last}\n\n")),
        ])
    } else if path.starts_with("/v1/text-to-speech/") {
        audio()
    } else if path == "/v1/text:synthesize" {
        Reply::json(
            200,
            json!({"audioContent": base64::engine::general_purpose::STANDARD.encode([0xFFu8, 0xF3, 1, 2])}),
        )
    } else if path == "/rerank" || path == "/v1/speech" {
        // Bedrock and Polly: refuse the signature, quoting the request's credentials back.
        let sent = req.header("authorization").unwrap_or_default().to_string();
        let token = req
            .header("x-amz-security-token")
            .unwrap_or_default()
            .to_string();
        Reply::json(
            403,
            json!({"message": format!("The request signature we calculated does not match: {sent} {token}")}),
        )
    } else if path == "/tc/" {
        // Tencent Cloud: refuse the signature inside a 200, quoting the credentials back.
        let sent = req.header("authorization").unwrap_or_default().to_string();
        let token = req.header("x-tc-token").unwrap_or_default().to_string();
        Reply::json(
            200,
            json!({"Response": {"Error": {"Code": "AuthFailure.SignatureFailure", "Message": format!("signature mismatch: {sent} {token}")}, "RequestId": "r"}}),
        )
    } else if path.starts_with("/v1/models/") {
        // Replicate: a prediction still starting, polled next.
        Reply::json(
            200,
            json!({"id": "logtest", "status": "starting", "output": null}),
        )
    } else if path.starts_with("/v1/predictions/") {
        // Replicate's poll: a failed prediction whose error quotes the token it was sent.
        let sent = req.header("authorization").unwrap_or_default().to_string();
        Reply::json(
            200,
            json!({"id": "logtest", "status": "failed", "error": format!("worker saw {sent}")}),
        )
    } else if path == "/v2/rerank" {
        Reply::json(
            200,
            json!({"id": "r", "results": [{"index": 0, "relevance_score": 0.5}]}),
        )
    } else {
        // Volcengine and anything else: a provider error, logged by the gateway.
        Reply::json(500, json!({"message": "internal", "code": 500}))
    })
}

/// Each form a secret could take in a log line.
fn forms(secret: &str) -> Vec<String> {
    let mut out = vec![secret.to_string()];
    for engine in [
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        out.push(engine.encode(secret));
    }
    // A byte buffer printed with `{:?}` as numbers (`[115, 107, …]`).
    let bytes = format!("{:?}", secret.as_bytes());
    out.push(bytes.trim_matches(|c| c == '[' || c == ']').to_string());
    out
}

#[test]
fn no_credential_reaches_the_log_at_trace() {
    let fake = FakeProvider::start();
    fake.set_handler(answer);
    let base = fake.base_url();
    let gw = Binary::start(|port| secrets_config(&base, port), "trace");
    let jwt = encode(
        &Header::new(Algorithm::HS256),
        &json!({"sub": "user-LOGTEST", "exp": 4_000_000_000u64}),
        &EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .unwrap();
    let bearer_jwt = format!("Bearer {jwt}");
    let bearer_key = format!("Bearer {CLIENT_KEY}");
    let api_key = ("Service-API-Key", CLIENT_KEY);
    let speech = "/api/v1/audio/speech";

    // (path, credential header, body, status): every operation, raw and SSE speech, each kind
    // of provider credential, client keys in each header the gateway reads, and failures.
    let cases: Vec<(&str, (&str, &str), serde_json::Value, u16)> = vec![
        (
            speech,
            api_key,
            json!({"model": "tts-1", "input": "hi"}),
            200,
        ),
        (
            speech,
            ("Authorization", &bearer_key),
            json!({"model": "speech-2.8-hd", "input": "hi", "stream_format": "sse"}),
            200,
        ),
        (
            speech,
            ("Authorization", &bearer_jwt),
            json!({"model": "eleven", "input": "hi", "voice": "voice-1"}),
            200,
        ),
        (
            speech,
            api_key,
            json!({"model": "google-tts", "input": "hi", "voice": "en-US-Standard-A"}),
            200,
        ),
        (
            speech,
            api_key,
            json!({"model": "doubao-tts", "input": "hi"}),
            502,
        ),
        (
            "/api/v1/images/generations",
            api_key,
            json!({"model": "gpt-image-1", "prompt": "a fox", "response_format": "b64_json"}),
            200,
        ),
        (
            "/api/v1/rerank",
            api_key,
            json!({"model": "rerank-v3.5", "query": "q", "documents": ["a", "b"]}),
            200,
        ),
        // The provider refuses the key and quotes it back: the gateway logs the failure.
        (
            speech,
            api_key,
            json!({"model": "tts-1", "input": "fail"}),
            502,
        ),
        (
            "/api/v1/images/generations",
            api_key,
            json!({"model": "kling-v2-1", "prompt": "a fox"}),
            502,
        ),
        // A prediction polled until it fails, its error quoting the token.
        (
            "/api/v1/images/generations",
            api_key,
            json!({"model": "replicate-flux-schnell", "prompt": "a fox"}),
            502,
        ),
        // A SigV4-signed provider refusing the signature, quoting it back.
        (
            "/api/v1/rerank",
            api_key,
            json!({"model": "bedrock-rerank", "query": "q", "documents": ["a"]}),
            502,
        ),
        (
            speech,
            api_key,
            json!({"model": "polly-neural", "input": "hi"}),
            502,
        ),
        // A TC3-signed provider refusing the signature inside a 200, quoting it back.
        (
            speech,
            api_key,
            json!({"model": "tencent-tts", "input": "hi"}),
            502,
        ),
        // A key the gateway does not know is a secret too.
        (
            speech,
            ("Service-API-Key", WRONG_CLIENT_KEY),
            json!({"model": "tts-1", "input": "hi"}),
            401,
        ),
    ];
    for (path, auth, body, status) in &cases {
        let got = post(gw.addr, path, *auth, body.clone());
        // Any answer other than the expected one means the case did not exercise its path.
        assert!(
            got == *status || (*status == 502 && got >= 500),
            "{path} {body}: {got}, expected {status}"
        );
    }
    // One access line per request: the log is written, not empty or cut short.
    let text = gw.output_when("an access line per request", |t| {
        access_lines(t).len() >= cases.len()
    });
    // Pingora's own head dumps (the client's request, the request to the provider) are there,
    // blanked: the test looks where the keys would be.
    for dump in ["Request header:", "Writing request header:"] {
        assert!(text.contains(dump), "no `{dump}` record at trace:\n{text}");
    }
    assert!(text.contains("[redacted]"), "{text}");

    let mut secrets: Vec<String> = [
        CLIENT_KEY,
        WRONG_CLIENT_KEY,
        JWT_SECRET,
        &jwt,
        OPENAI_KEY,
        MINIMAX_KEY,
        COHERE_KEY,
        XI_KEY,
        GOOGLE_KEY,
        VOLC_KEY,
        KLING_ACCESS,
        KLING_SECRET,
        AWS_ACCESS,
        AWS_SECRET,
        AWS_TOKEN,
        TC_SECRET_ID,
        TC_SECRET_KEY,
        TC_TOKEN,
        REPLICATE_KEY,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // And every credential the providers were actually sent (Kling's signed token among them).
    let sent = fake.requests();
    for req in &sent {
        for (name, value) in &req.headers {
            if switchyard::internals::logging::sensitive_name(name) {
                secrets.push(value.trim_start_matches("Bearer ").to_string());
            }
        }
    }
    assert!(
        sent.iter()
            .any(|r| r.header("x-goog-api-key") == Some(GOOGLE_KEY))
            && sent.iter().any(|r| r.header("xi-api-key") == Some(XI_KEY))
            && sent
                .iter()
                .any(|r| r.header("x-api-access-key") == Some(VOLC_KEY))
            && sent
                .iter()
                .any(|r| r.path.starts_with("/v1/images/generations"))
            && sent
                .iter()
                .any(|r| r.header("x-amz-security-token") == Some(AWS_TOKEN))
            && sent.iter().any(|r| r.path == "/v1/speech")
            && sent
                .iter()
                .any(|r| r.header("x-tc-token") == Some(TC_TOKEN))
            && sent.iter().any(|r| r.path == "/v1/predictions/logtest"),
        "a provider kind was not reached: {sent:?}"
    );
    for secret in &secrets {
        for form in forms(secret) {
            if let Some(at) = text.find(&form) {
                let from = text[..at].rfind('\n').map_or(0, |n| n + 1);
                let to = text[at..].find('\n').map_or(text.len(), |n| at + n);
                panic!(
                    "`{form}` (from {secret}) is in the log:\n{}",
                    &text[from..to]
                );
            }
        }
    }
}

// ---- the access line as JSON ------------------------------------------------------------------

#[test]
fn json_access_lines_parse_have_every_field_and_hold_no_credential() {
    let fake = FakeProvider::start();
    fake.set_handler(answer);
    let base = fake.base_url();
    let gw = Binary::start(
        |port| {
            secrets_config(&base, port).replacen(
                "switchyard:\n",
                "switchyard:\n  access_log: {format: json}\n",
                1,
            )
        },
        "info",
    );
    let api_key = ("Service-API-Key", CLIENT_KEY);
    let speech = "/api/v1/audio/speech";
    let bearer = format!("Bearer {CLIENT_KEY}");
    assert_eq!(
        post(
            gw.addr,
            speech,
            api_key,
            json!({"model": "tts-1", "input": "hello"})
        ),
        200
    );
    assert_eq!(
        post(
            gw.addr,
            speech,
            ("Authorization", &bearer),
            json!({"model": "speech-2.8-hd", "input": "hi", "stream_format": "sse"})
        ),
        200
    );
    assert_eq!(
        post(
            gw.addr,
            "/api/v1/rerank",
            api_key,
            json!({"model": "rerank-v3.5", "query": "q", "documents": ["a", "b"]})
        ),
        200
    );
    // An image hosted by the gateway, then read through its link: the link's id is a capability.
    let image = crate::support::client::post_json(
        gw.addr,
        "/api/v1/images/generations",
        &[api_key],
        &json!({"model": "gpt-image-1", "prompt": "a fox", "response_format": "url"}),
    );
    assert_eq!(image.status, 200, "{}", image.text());
    let url = image.json()["data"][0]["url"].as_str().unwrap().to_string();
    let file_path = &url[url.find("/api/v1/files/").unwrap()..];
    let file_id = file_path.rsplit('/').next().unwrap().to_string();
    let file = crate::support::client::request(gw.addr, "GET", file_path, &[], b"");
    assert_eq!(file.status, 200);
    // A provider refusing its key (quoted back), and a client key the gateway does not know.
    assert!(
        post(
            gw.addr,
            speech,
            api_key,
            json!({"model": "tts-1", "input": "fail"})
        ) >= 500
    );
    assert_eq!(
        post(
            gw.addr,
            speech,
            ("Service-API-Key", WRONG_CLIENT_KEY),
            json!({"model": "tts-1", "input": "hi"})
        ),
        401
    );

    let text = gw.output_when("seven access lines", |t| access_lines(t).len() >= 7);
    let lines: Vec<serde_json::Value> = access_lines(&text)
        .iter()
        .map(|l| {
            let json = &l[l.find(" access] ").unwrap() + " access] ".len()..];
            serde_json::from_str(json).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))
        })
        .collect();
    assert_eq!(lines.len(), 7, "{text}");
    let fields = [
        "time",
        "entry_point",
        "method",
        "path",
        "principal",
        "operation",
        "model",
        "provider",
        "native_model",
        "status",
        "code",
        "attempts",
        "duration_ms",
        "ttfb_ms",
        "bytes_in",
        "bytes_out",
        "usage",
        "aborted",
    ];
    for line in &lines {
        for field in fields {
            assert!(line.get(field).is_some(), "no `{field}` in {line}");
        }
        let time = line["time"].as_str().unwrap();
        assert!(
            time.len() == 24 && time.ends_with('Z') && &time[10..11] == "T",
            "{time}"
        );
        assert_eq!(line["entry_point"], "main");
    }
    let by_model = |model: &str, status: u64| {
        lines
            .iter()
            .find(|l| l["model"] == model && l["status"] == status)
            .unwrap_or_else(|| panic!("no line for {model} {status}: {text}"))
    };
    let raw = by_model("tts-1", 200);
    assert_eq!(raw["principal"], "key:caller");
    assert_eq!(raw["operation"], "speech");
    assert_eq!(raw["provider"], "openai");
    assert_eq!(raw["native_model"], "tts-1");
    assert_eq!(raw["attempts"], 1);
    assert_eq!(raw["code"], serde_json::Value::Null);
    assert_eq!(raw["usage"]["characters"], 5);
    assert_eq!(raw["bytes_out"], 8);
    assert!(raw["bytes_in"].as_u64().unwrap() > 0);
    assert!(raw["ttfb_ms"].as_f64().unwrap() <= raw["duration_ms"].as_f64().unwrap());
    let sse = by_model("speech-2.8-hd", 200);
    assert_eq!(sse["provider"], "minimax");
    assert!(sse["ttfb_ms"].is_number());
    assert_eq!(
        by_model("rerank-v3.5", 200)["usage"]["tokens"]
            .as_u64()
            .map(|t| t > 0),
        Some(true)
    );
    let img = by_model("gpt-image-1", 200);
    assert_eq!(img["usage"]["images"], 1);
    assert_eq!(img["native_model"], "gpt-image-1");
    let failed = lines
        .iter()
        .find(|l| l["model"] == "tts-1" && l["status"].as_u64().unwrap() >= 500)
        .unwrap();
    assert_eq!(failed["code"], "upstream_auth_failed");
    assert_eq!(failed["attempts"], 1);
    // Refused before its body is read: no model is known.
    let refused = lines.iter().find(|l| l["status"] == 401).unwrap();
    assert_eq!(refused["code"], "unauthorized");
    assert_eq!(refused["model"], serde_json::Value::Null);
    assert_eq!(refused["principal"], serde_json::Value::Null);
    assert_eq!(refused["provider"], serde_json::Value::Null);
    let hosted = lines
        .iter()
        .find(|l| l["method"] == "GET")
        .unwrap_or_else(|| panic!("no line for the file: {text}"));
    assert_eq!(hosted["path"], "/api/v1/files/{id}");

    for secret in [
        CLIENT_KEY,
        WRONG_CLIENT_KEY,
        OPENAI_KEY,
        MINIMAX_KEY,
        COHERE_KEY,
        &file_id,
    ] {
        for form in forms(secret) {
            assert!(!text.contains(&form), "`{form}` is in the log:\n{text}");
        }
    }
}

// ---- hosted-file ids -----------------------------------------------------------------------------

/// A hosted file's id is its link's only credential: at `trace`, where Pingora dumps every
/// request line (`GET /api/v1/files/<id>`), neither the link the answer carries nor reading it
/// (`GET` and `HEAD`, an id that exists and one that does not) puts the id in any log line.
#[test]
fn no_hosted_file_id_reaches_the_log_at_trace() {
    let fake = FakeProvider::start();
    fake.set_handler(|req: &Recorded| {
        (req.path == "/oa/v1/images/generations").then(|| {
            Reply::json(
                200,
                json!({"created": 1, "data": [{"b64_json": "iVBORw0KGgo="}]}),
            )
        })
    });
    let base = fake.base_url();
    let gw = Binary::start(
        |port| {
            format!(
                r#"
version: 1
threads: 2
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners: [{{name: main, address: "127.0.0.1:{port}"}}]
  auth:
    api_keys: [{{name: caller, key: "{CLIENT_KEY}"}}]
  providers:
    openai: {{kind: openai, api_key: "{OPENAI_KEY}", base_url: "{base}/oa/v1"}}
  models:
    gpt-image-2: {{family: gpt-image-2, targets: [{{provider: openai, model: gpt-image-2}}]}}
"#
            )
        },
        "trace",
    );
    let image = crate::support::client::post_json(
        gw.addr,
        "/api/v1/images/generations",
        &[("Service-API-Key", CLIENT_KEY)],
        &json!({"model": "gpt-image-2", "prompt": "a fox", "response_format": "url"}),
    );
    assert_eq!(image.status, 200, "{}", image.text());
    let url = image.json()["data"][0]["url"].as_str().unwrap().to_string();
    let file_path = url[url.find("/api/v1/files/").unwrap()..].to_string();
    let file_id = file_path.rsplit('/').next().unwrap().to_string();
    assert_eq!(file_id.len(), 32, "{url}");
    for method in ["GET", "HEAD"] {
        let file = crate::support::client::request(gw.addr, method, &file_path, &[], b"");
        assert_eq!(file.status, 200, "{method}");
    }
    // An id that does not exist (an expired link, a guess) is kept out as well.
    let unknown = "ZZZZyyyyXXXXwwwwVVVVuuuuTTTTssss";
    let missing = crate::support::client::request(
        gw.addr,
        "GET",
        &format!("/api/v1/files/{unknown}"),
        &[],
        b"",
    );
    assert_eq!(missing.status, 404);
    let text = gw.output_when("four access lines", |t| access_lines(t).len() >= 4);
    // The request lines were dumped, with the id blanked: the test looks where it would be.
    assert!(
        text.contains("/api/v1/files/[redacted]"),
        "no blanked file path in the trace log:\n{text}"
    );
    for id in [file_id.as_str(), unknown] {
        if let Some(at) = text.find(id) {
            let from = text[..at].rfind('\n').map_or(0, |n| n + 1);
            let to = text[at..].find('\n').map_or(text.len(), |n| at + n);
            panic!("the file id {id} is in the log:\n{}", &text[from..to]);
        }
    }
}

// ---- a client that goes away -------------------------------------------------------------------

fn streaming_config(fake: &str, port: u16) -> String {
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
    api_keys: [{{name: caller, key: "{CLIENT_KEY}"}}]
  providers:
    openai: {{kind: openai, api_key: "{OPENAI_KEY}", base_url: "{fake}/v1"}}
    minimax: {{kind: minimax, api_key: "{MINIMAX_KEY}", base_url: "{fake}"}}
    cohere: {{kind: cohere, api_key: "{COHERE_KEY}", base_url: "{fake}"}}
  models:
    tts-mid: {{family: openai-tts, targets: [{{provider: openai, model: tts-mid}}]}}
    tts-wait: {{family: openai-tts, targets: [{{provider: openai, model: tts-wait}}]}}
    tts-dies: {{family: openai-tts, targets: [{{provider: openai, model: tts-dies}}]}}
    speech-2.8-hd: {{family: minimax-tts, targets: [{{provider: minimax, model: speech-2.8-hd}}]}}
    rerank-v3.5: {{family: cohere-rerank, targets: [{{provider: cohere, model: rerank-v3.5}}]}}
"#
    )
}

const GAP: Duration = Duration::from_millis(20);

/// Long, slowly streamed answers; the one that `dies` is cut by the provider halfway.
fn slow_answer(req: &Recorded) -> Option<Reply> {
    // An MPEG frame header first: the gateway checks that an audio answer begins like audio.
    let mut chunk = vec![0xFF, 0xFB, 0x90, 0x64];
    chunk.resize(8 * 1024, 0x55);
    let audio = |first: Duration, n: usize, abort: bool| {
        let mut chunks = vec![(first, chunk.clone())];
        chunks.extend((1..n).map(|_| (GAP, chunk.clone())));
        Reply::chunked(200, "audio/mpeg", chunks, abort)
    };
    Some(match req.path.as_str() {
        "/v1/audio/speech" => match req.json()["model"].as_str() {
            Some("tts-mid") => audio(Duration::ZERO, 100, false),
            // The provider takes its time to start: the client is gone by then.
            Some("tts-wait") => audio(Duration::from_millis(300), 20, false),
            _ => audio(Duration::ZERO, 5, true),
        },
        "/v1/t2a_v2" => {
            let ev = json!({"data": {"audio": hex::encode([7u8; 512]), "status": 1}, "base_resp": {"status_code": 0, "status_msg": ""}});
            Reply::sse(
                (0..100)
                    .map(|i| {
                        let gap = if i == 0 { Duration::ZERO } else { GAP };
                        (gap, format!("data: {ev}\n\n"))
                    })
                    .collect(),
            )
        }
        _ => Reply::chunked(
            200,
            "application/json",
            vec![(
                Duration::from_millis(300),
                json!({"id": "r", "results": [{"index": 0, "relevance_score": 0.5}]})
                    .to_string()
                    .into_bytes(),
            )],
            false,
        ),
    })
}

/// Send a request, read `read` bytes of the answer (0: none), and go away.
fn leave_early(addr: SocketAddr, path: &str, body: serde_json::Value, read: usize) {
    let body = body.to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: gw\r\nService-API-Key: {CLIENT_KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut got = 0;
    let mut buf = [0u8; 4096];
    while got < read {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "the answer ended after {got} bytes");
        got += n;
    }
    // Dropped with unread answer bytes pending: the kernel resets the connection.
}

/// Requests whose clients go away, on a gateway logging at `rust_log`; the log once every
/// request has its access line.
fn clients_going_away(rust_log: &str) -> String {
    let fake = FakeProvider::start();
    fake.set_handler(slow_answer);
    let base = fake.base_url();
    let gw = Binary::start(|port| streaming_config(&base, port), rust_log);
    let speech = "/api/v1/audio/speech";
    // Before its request head is complete (no request made: no access line). First, so it is
    // long handled when the last access line below is written.
    let mut half = TcpStream::connect(gw.addr).unwrap();
    half.write_all(b"POST /api/v1/rerank HTTP/1.1\r\nHost: gw\r\nServ")
        .unwrap();
    drop(half);
    // Mid-answer, raw audio and SSE.
    leave_early(
        gw.addr,
        speech,
        json!({"model": "tts-mid", "input": "hi"}),
        20_000,
    );
    leave_early(
        gw.addr,
        speech,
        json!({"model": "speech-2.8-hd", "input": "hi", "stream_format": "sse"}),
        2_000,
    );
    // While the gateway waits for the provider, before the first byte.
    leave_early(
        gw.addr,
        speech,
        json!({"model": "tts-wait", "input": "hi"}),
        0,
    );
    leave_early(
        gw.addr,
        "/api/v1/rerank",
        json!({"model": "rerank-v3.5", "query": "q", "documents": ["a"]}),
        0,
    );
    // A real failure, which must stay visible: the provider dies mid-answer (the client reads
    // to the end, a truncated answer).
    post(
        gw.addr,
        speech,
        ("Service-API-Key", CLIENT_KEY),
        json!({"model": "tts-dies", "input": "hi"}),
    );
    gw.output_when("an access line for each request", |t| {
        access_lines(t).len() >= 5
    })
}

/// The access line of the request for `model`; exactly one.
fn line_for<'t>(text: &'t str, model: &str) -> &'t str {
    let lines: Vec<&str> = access_lines(text)
        .into_iter()
        .filter(|l| l.contains(&format!(" model={model} ")))
        .collect();
    assert_eq!(lines.len(), 1, "access lines for {model}:\n{text}");
    lines[0]
}

#[test]
fn a_client_that_goes_away_is_one_access_line_not_an_error() {
    let text = clients_going_away("info");
    for model in ["tts-mid", "speech-2.8-hd", "tts-wait"] {
        let line = line_for(&text, model);
        assert!(
            line.contains(r#"aborted="client went away""#),
            "{model}: {line}"
        );
    }
    // A short answer may fit in the socket's buffers before the reset arrives: whether it saw
    // the client go, the request is one line.
    line_for(&text, "rerank-v3.5");
    // Only the provider's failure is an error.
    let dies = line_for(&text, "tts-dies");
    assert!(
        dies.contains("aborted=") && !dies.contains("client went away"),
        "{dies}"
    );
    let errors = error_lines(&text);
    assert!(
        errors
            .iter()
            .all(|l| l.contains("tts-dies") || l.contains("provider")),
        "errors other than the provider's failure:\n{}",
        errors.join("\n")
    );
    assert!(
        !errors.is_empty(),
        "the provider's failure is not logged:\n{text}"
    );
}

#[test]
fn at_error_level_clients_going_away_log_nothing() {
    // `error` for every logger, and the access log on, to know when each request is done.
    let text = clients_going_away("error,access=info");
    let errors = error_lines(&text);
    assert_eq!(
        errors.len(),
        1,
        "one error, the provider's failure:\n{}",
        errors.join("\n")
    );
    assert!(!errors[0].contains("client"), "{}", errors[0]);
}

// ---- token-billed answers: their tokens in the access line -----------------------------------

/// The OpenAI answers of a token-billed model, each as the provider documents it: a
/// `gpt-image-2` image answer with its `usage` (2,150 tokens: 10 text and 40 image tokens in,
/// 2,100 image tokens out), then a `gpt-4o-mini-tts` SSE stream whose closing
/// `speech.audio.done` event reports 10 input and 40 output tokens.
pub(crate) fn push_token_billed_answers(fake: &FakeProvider) {
    use crate::support::image_conformance::{b64, png};
    fake.push(Reply::json(
        200,
        json!({"created": 1713833628, "data": [{"b64_json": b64(&png(64, 1))}],
               "size": "1024x1024", "quality": "high",
               "usage": {"total_tokens": 2150, "input_tokens": 50, "output_tokens": 2100,
                         "input_tokens_details": {"text_tokens": 10, "image_tokens": 40},
                         "output_tokens_details": {"image_tokens": 2100}}}),
    ));
    let audio = base64::engine::general_purpose::STANDARD.encode([0xFF, 0xF3, 0x44, 0xC4, 1, 2]);
    let delta = json!({"type": "speech.audio.delta", "audio": audio});
    let done = json!({"type": "speech.audio.done",
                      "usage": {"input_tokens": 10, "output_tokens": 40, "total_tokens": 50}});
    fake.push(Reply::sse(vec![
        (Duration::ZERO, format!("data: {delta}\n\n")),
        (Duration::from_millis(10), format!("data: {done}\n\n")),
    ]));
}

/// Ask for the two answers of [`push_token_billed_answers`], in order, as `key`.
pub(crate) fn ask_token_billed(addr: SocketAddr, key: &str) {
    let auth = [("Service-API-Key", key)];
    let image = crate::support::client::post_json(
        addr,
        "/api/v1/images/generations",
        &auth,
        &json!({"model": "gpt-image-2", "prompt": "p", "size": "1024x1024", "quality": "high",
                "response_format": "b64_json"}),
    );
    assert_eq!(image.status, 200, "{}", image.text());
    let speech = crate::support::client::post_json(
        addr,
        "/api/v1/audio/speech",
        &auth,
        &json!({"model": "gpt-4o-mini-tts", "input": "hello world", "voice": "alloy",
                "stream_format": "sse"}),
    );
    assert_eq!(speech.status, 200, "{}", speech.text());
    assert!(speech.text().contains("speech.audio.done"));
}

/// A token-billed answer's access line carries the tokens its cost was computed from
/// (`usage.tokens`: the provider's total), not 0 beside a cost made of them.
#[test]
fn the_access_line_carries_the_tokens_of_token_billed_answers() {
    let fake = FakeProvider::start();
    push_token_billed_answers(&fake);
    let base = fake.base_url();
    let gw = Binary::start(
        |port| {
            crate::support::config(&base, (port, free_port())).replacen(
                "switchyard:\n",
                "switchyard:\n  access_log: {format: json}\n",
                1,
            )
        },
        "warn,access=info",
    );
    ask_token_billed(gw.addr, crate::support::KEY);
    let text = gw.output_when("both access lines", |t| access_lines(t).len() >= 2);
    let lines: Vec<serde_json::Value> = access_lines(&text)
        .into_iter()
        .map(|l| serde_json::from_str(l.split_once(" access] ").unwrap().1).unwrap())
        .collect();
    let of = |model: &str| {
        lines
            .iter()
            .find(|l| l["model"] == model)
            .unwrap_or_else(|| panic!("no access line for {model}:\n{text}"))
    };
    let image = of("gpt-image-2");
    assert_eq!(
        image["usage"],
        json!({"tokens": 2150, "characters": 0, "images": 1}),
        "{image}"
    );
    assert_eq!(image["cost_basis"], "provider");
    let speech = of("gpt-4o-mini-tts");
    assert_eq!(
        speech["usage"],
        json!({"tokens": 50, "characters": 11, "images": 0}),
        "{speech}"
    );
    assert_eq!(speech["cost"], "0.000486");
}
