//! A model a provider retired without notice (issue 43): when a provider answers "model gone" (or
//! "not enabled for this account") in its own shape, the gateway holds that one target out for
//! hours, not the account; moves the request to the model's next target, or to its successor, in
//! the same request; warns once in the log; and shows the target on the
//! `switchyard_target_retired` gauge. One case per provider, each with a fake that speaks the
//! provider's real error shape (see each provider's ledger, `docs/providers/*.md`).
//!
//! These run the `switchyard` binary (`logs::Binary`): the log line is part of what is checked.

use std::net::SocketAddr;

use base64::Engine;
use serde_json::{json, Value};

use crate::logs::Binary;
use crate::support::fake::{FakeProvider, Recorded, Reply};
use crate::support::{self, client, free_port, wait_listening};

/// One provider: its account in the test config, the family its models use, what the gateway is
/// asked, and the fake's answers.
struct Case {
    /// The account (`support::config`'s provider name) and the prefix of its native models.
    provider: &'static str,
    /// The models' family, with any setting a model of it needs (ElevenLabs' families name no
    /// default voice, so the models name one).
    family: &'static str,
    /// The gateway's path and a request body for public model `model`.
    path: &'static str,
    body: fn(&str) -> Value,
    /// The provider's "model gone" answer for native model `model`.
    gone: fn(&str) -> Reply,
    /// A success.
    ok: fn() -> Reply,
}

impl Case {
    /// The native models: two the provider says are gone, one it serves.
    fn natives(&self) -> (String, String, String) {
        let p = self.provider;
        (
            format!("{p}-dead-a"),
            format!("{p}-dead-b"),
            format!("{p}-alive"),
        )
    }
}

/// The native model an intercepted request asked for (`model`, or ElevenLabs' `model_id`).
fn native_of(req: &Recorded) -> String {
    let body = req.json();
    body.get("model")
        .or_else(|| body.get("model_id"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn rerank_body(model: &str) -> Value {
    json!({"model": model, "query": "q", "documents": ["a", "b"]})
}

fn speech_body(model: &str) -> Value {
    json!({"model": model, "input": "hello"})
}

fn image_body(model: &str) -> Value {
    json!({"model": model, "prompt": "a red cube", "response_format": "b64_json"})
}

fn png() -> String {
    let mut v = b"\x89PNG\r\n\x1a\n".to_vec();
    v.extend([7u8; 24]);
    base64::engine::general_purpose::STANDARD.encode(v)
}

fn audio() -> Reply {
    let mut v = vec![0xFF, 0xF3, 0x44, 0xC4];
    v.extend([1u8; 60]);
    Reply::bytes(200, "audio/mpeg", v)
}

/// OpenAI: 404 `invalid_request_error` / `model_not_found` (what a retired model answers).
const OPENAI: Case = Case {
    provider: "openai",
    family: "openai-tts",
    path: "/api/v1/audio/speech",
    body: speech_body,
    gone: |m| {
        Reply::json(
            404,
            json!({"error": {"message": format!("The model `{m}` does not exist or you do not have access to it."),
                             "type": "invalid_request_error", "param": null, "code": "model_not_found"}}),
        )
    },
    ok: audio,
};

/// Pinecone: 403 with the deprecation message (its SDK's 2026-07 fixtures).
const PINECONE: Case = Case {
    provider: "pinecone",
    family: "pinecone-rerank",
    path: "/api/v1/rerank",
    body: rerank_body,
    gone: |m| {
        Reply::json(
            403,
            json!({"error": {"code": "FORBIDDEN",
                             "message": format!("Model {m} has been deprecated, please use a different reranking model from (https://docs.pinecone.io/models)")},
                   "status": 403}),
        )
    },
    ok: || {
        Reply::json(
            200,
            json!({"model": "m", "data": [{"index": 0, "score": 0.9}, {"index": 1, "score": 0.1}],
                   "usage": {"rerank_units": 1}}),
        )
    },
};

/// Ark: 404 `InvalidEndpointOrModel.NotFound` (its error-code page; what a shut-down Seedream
/// answers).
const ARK: Case = Case {
    provider: "ark",
    family: "seedream",
    path: "/api/v1/images/generations",
    body: image_body,
    gone: |m| {
        Reply::json(
            404,
            json!({"error": {"code": "InvalidEndpointOrModel.NotFound",
                             "message": format!("The model or endpoint {m} does not exist or you do not have access to it. Request id: 0217"),
                             "param": "", "type": "NotFound"}}),
        )
    },
    ok: || {
        Reply::json(
            200,
            json!({"model": "m", "created": 1757469067,
                   "data": [{"b64_json": png(), "size": "1024x1024"}],
                   "usage": {"generated_images": 1, "output_tokens": 16384, "total_tokens": 16384}}),
        )
    },
};

/// DashScope: 400 `InvalidParameter` "Model not exist." (the native API's answer for a model it
/// does not serve).
const DASHSCOPE: Case = Case {
    provider: "dashscope",
    family: "dashscope-rerank",
    path: "/api/v1/rerank",
    body: rerank_body,
    gone: |_| {
        Reply::json(
            400,
            json!({"code": "InvalidParameter", "message": "Model not exist.",
                   "request_id": "5a1b8c2e-0000-0000-0000-000000000001"}),
        )
    },
    ok: || {
        Reply::json(
            200,
            json!({"output": {"results": [{"index": 0, "relevance_score": 0.9}, {"index": 1, "relevance_score": 0.1}]},
                   "usage": {"total_tokens": 10}, "request_id": "5a1b8c2e-0000-0000-0000-000000000002"}),
        )
    },
};

/// ElevenLabs: 400 `{"detail": {"status": "model_not_found", …}}`.
const ELEVENLABS: Case = Case {
    provider: "elevenlabs",
    family: "elevenlabs-tts, default_voice: JBFqnCBsd6RMkjVDRZzb",
    path: "/api/v1/audio/speech",
    body: speech_body,
    gone: |m| {
        Reply::json(
            400,
            json!({"detail": {"status": "model_not_found",
                              "message": format!("A model with model ID {m} does not exist or is not available to you.")}}),
        )
    },
    ok: audio,
};

/// Cohere: 404 "model '…' not found, make sure the correct model ID was used …" (its errors
/// page; what rerank-english-v2.0 answered after its shutdown).
const COHERE: Case = Case {
    provider: "cohere",
    family: "cohere-rerank",
    path: "/api/v1/rerank",
    body: rerank_body,
    gone: |m| {
        Reply::json(
            404,
            json!({"id": "da62", "message": format!("model '{m}' not found, make sure the correct model ID was used and that you have access to the model.")}),
        )
    },
    ok: || {
        Reply::json(
            200,
            json!({"results": [{"index": 0, "relevance_score": 0.9}, {"index": 1, "relevance_score": 0.1}]}),
        )
    },
};

/// The test config with a metrics listener, plus the case's models: `dead` (its only target
/// gone, successor `heir`), `alive` (the same account's other model), `two` (a gone target, then
/// a standby that serves) and `heir`.
fn config(case: &Case, fake: &str, port: u16, metrics: u16) -> String {
    let (dead, dead_b, alive) = case.natives();
    let (p, f) = (case.provider, case.family);
    support::config(fake, (port, free_port())).replacen(
        "switchyard:\n",
        &format!("switchyard:\n  metrics: {{address: \"127.0.0.1:{metrics}\"}}\n"),
        1,
    ) + &format!(
        "    dead: {{family: {f}, successor: heir, targets: [{{provider: {p}, model: {dead}}}]}}\n\
         \x20   alive: {{family: {f}, targets: [{{provider: {p}, model: {alive}}}]}}\n\
         \x20   two: {{family: {f}, targets: [{{provider: {p}, model: {dead_b}}}, {{provider: {p}, model: {alive}-standby, weight: 0}}]}}\n\
         \x20   heir: {{family: {f}, targets: [{{provider: {p}, model: {alive}-heir}}]}}\n"
    )
}

/// The natives the fake was asked for, in order.
fn asked(fake: &FakeProvider) -> Vec<String> {
    fake.requests().iter().map(native_of).collect()
}

fn post(addr: SocketAddr, case: &Case, model: &str) -> client::Response {
    client::post_json(addr, case.path, &support::auth(), &(case.body)(model))
}

/// The value of `switchyard_target_retired` for `native` at `provider` (`None`: no series).
fn retired_gauge(metrics: SocketAddr, provider: &str, native: &str) -> Option<String> {
    let text = client::request(metrics, "GET", "/metrics", &[], b"").text();
    let (p, n) = (
        format!("provider=\"{provider}\""),
        format!("native_model=\"{native}\""),
    );
    text.lines()
        .filter(|l| l.starts_with("switchyard_target_retired{"))
        .find(|l| l.contains(&p) && l.contains(&n))
        .and_then(|l| l.rsplit(' ').next())
        .map(str::to_string)
}

fn run(case: &Case) {
    let (dead, dead_b, alive) = case.natives();
    let fake = FakeProvider::start();
    let (gone, ok) = (case.gone, case.ok);
    fake.set_handler(move |req| {
        let native = native_of(req);
        Some(if native.contains("-dead-") {
            gone(&native)
        } else {
            ok()
        })
    });
    let m = free_port();
    let url = fake.base_url();
    let bin = Binary::start(|port| config(case, &url, port, m), "warn");
    let metrics: SocketAddr = format!("127.0.0.1:{m}").parse().unwrap();
    wait_listening(metrics);
    let p = case.provider;

    // The only target answers "model gone": the successor serves, in the same request.
    let resp = post(bin.addr, case, "dead");
    assert_eq!(resp.status, 200, "{p}: {}", resp.text());
    assert_eq!(resp.header("switchyard-served-model"), Some("heir"), "{p}");
    assert_eq!(asked(&fake), [dead.clone(), format!("{alive}-heir")], "{p}");

    // The account's other model keeps serving (the account was not taken for a bad key).
    let resp = post(bin.addr, case, "alive");
    assert_eq!(resp.status, 200, "{p}: {}", resp.text());
    assert_eq!(asked(&fake).last(), Some(&alive), "{p}");

    // The dead target stays out: the next request goes to the successor without asking it.
    let before = fake.requests().len();
    let resp = post(bin.addr, case, "dead");
    assert_eq!(resp.status, 200, "{p}: {}", resp.text());
    assert_eq!(resp.header("switchyard-served-model"), Some("heir"), "{p}");
    assert_eq!(asked(&fake)[before..], [format!("{alive}-heir")], "{p}");

    // Two targets: the gone one, then the next, in the same request (no `retries` asked).
    let before = fake.requests().len();
    let resp = post(bin.addr, case, "two");
    assert_eq!(resp.status, 200, "{p}: {}", resp.text());
    assert!(resp.header("switchyard-served-model").is_none(), "{p}");
    assert_eq!(
        asked(&fake)[before..],
        [dead_b.clone(), format!("{alive}-standby")],
        "{p}"
    );

    // The gauge names the retired targets, and only them.
    assert_eq!(
        retired_gauge(metrics, p, &dead).as_deref(),
        Some("1"),
        "{p}"
    );
    assert_eq!(
        retired_gauge(metrics, p, &dead_b).as_deref(),
        Some("1"),
        "{p}"
    );
    assert_ne!(
        retired_gauge(metrics, p, &alive).as_deref(),
        Some("1"),
        "{p}"
    );

    // One warning per retired target, however many requests met it; never the key.
    let marker = format!("target {p} / {dead} retired");
    let out = bin.output_when("the retirement warnings", |t| {
        t.contains(&marker) && t.contains(&format!("target {p} / {dead_b} retired"))
    });
    let warned: Vec<&str> = out.lines().filter(|l| l.contains(&marker)).collect();
    assert_eq!(warned.len(), 1, "{p}: {out}");
    assert!(warned[0].contains("WARN"), "{p}: {}", warned[0]);
    assert!(!out.contains(support::PROVIDER_KEY), "{p}: the key leaked");
}

#[test]
fn openai_model_not_found() {
    run(&OPENAI);
}

#[test]
fn pinecone_deprecated_model_403() {
    run(&PINECONE);
}

#[test]
fn ark_model_not_found() {
    run(&ARK);
}

#[test]
fn dashscope_model_not_exist() {
    run(&DASHSCOPE);
}

#[test]
fn elevenlabs_model_not_found() {
    run(&ELEVENLABS);
}

#[test]
fn cohere_model_not_found() {
    run(&COHERE);
}

/// A model gone at its only target, with no successor: `503 model_unavailable` naming the public
/// and native model, as before; and the account's other model still serves.
#[test]
fn without_a_successor_the_answer_names_the_model() {
    let case = &PINECONE;
    let (dead, _, alive) = case.natives();
    let fake = FakeProvider::start();
    let (gone, ok) = (case.gone, case.ok);
    fake.set_handler(move |req| {
        let native = native_of(req);
        Some(if native.contains("-dead-") {
            gone(&native)
        } else {
            ok()
        })
    });
    let m = free_port();
    let url = fake.base_url();
    let bin = Binary::start(
        |port| config(case, &url, port, m).replace(", successor: heir", ""),
        "warn",
    );
    for _ in 0..2 {
        let resp = post(bin.addr, case, "dead");
        assert_eq!(resp.status, 503, "{}", resp.text());
        let body = resp.json();
        assert_eq!(body["code"], "model_unavailable", "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains("dead") && message.contains(&dead),
            "{message}"
        );
    }
    assert_eq!(asked(&fake), [dead], "asked once, then held out");
    let resp = post(bin.addr, case, "alive");
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(asked(&fake).last(), Some(&alive));
}
