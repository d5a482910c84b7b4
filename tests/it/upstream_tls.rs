//! TLS towards providers: a provider's `tls.ca_file` is what its certificate is verified against,
//! and a certificate refused (unknown issuer, expired, another host name) is a clear
//! `502 upstream_unreachable` naming the certificate, tried once per provider account.
//!
//! The providers are fake ones behind a TLS front on 127.0.0.1 (support::tls_front), with
//! certificates made here from a local CA; the gateway reaches them as `https://localhost:PORT`.

use std::time::Duration;

use crate::support;
use serde_json::json;
use support::fake::{FakeProvider, Reply};
use support::tls_front::{self_signed, ServerCert, TestCa, TlsFront};
use support::{post, TestGateway, KEY, PROVIDER_KEY};

/// A gateway whose providers are `(name, kind, base_url)`, each trusting `ca_file` when given,
/// with a rerank model per cohere provider (`rerank-NAME`), `tts-1` on the `openai` provider,
/// `qwen3-tts-flash` on the `dashscope` one, and `rerank-failover` over `bad` then `good` when both
/// exist.
fn gateway(providers: &[(&str, &str, String)], ca_file: Option<&str>) -> TestGateway {
    let each: Vec<_> = providers
        .iter()
        .map(|(name, kind, url)| (*name, *kind, url.clone(), ca_file))
        .collect();
    gateway_each(&each)
}

/// [`gateway`] with a CA file (or none) per provider.
fn gateway_each(providers: &[(&str, &str, String, Option<&str>)]) -> TestGateway {
    let mut yaml_providers = String::new();
    let mut models = String::new();
    for (name, kind, url, ca_file) in providers {
        let tls = ca_file
            .map(|f| format!(", tls: {{ca_file: \"{f}\"}}"))
            .unwrap_or_default();
        yaml_providers.push_str(&format!(
            "    {name}: {{kind: {kind}, api_key: \"{PROVIDER_KEY}\", base_url: \"{url}\"{tls}, \
             timeouts: {{connect_ms: 1000, total_connect_ms: 2000, read_ms: 2000, idle_ms: 5000}}}}\n"
        ));
        match *kind {
            "cohere" => models.push_str(&format!(
                "    rerank-{name}: {{family: cohere-rerank, targets: [{{provider: {name}, model: rerank-v3.5}}]}}\n"
            )),
            "dashscope" => models.push_str(&format!(
                "    qwen3-tts-flash: {{family: qwen-tts, targets: [{{provider: {name}, model: qwen3-tts-flash}}]}}\n"
            )),
            _ => models.push_str(&format!(
                "    tts-1: {{family: openai-tts, targets: [{{provider: {name}, model: tts-1}}]}}\n"
            )),
        }
    }
    if providers.iter().any(|p| p.0 == "bad") && providers.iter().any(|p| p.0 == "good") {
        models.push_str(
            "    rerank-failover: {family: cohere-rerank, targets: [{provider: bad, model: rerank-v3.5}, {provider: good, model: rerank-v3.5}]}\n",
        );
    }
    // One worker: `connections_are_reused_over_tls` counts connections, and with two Pingora's
    // pool can lose a pooled one to a race (see `TestGateway::start_one_worker`).
    TestGateway::start_with(|ports| {
        format!(
            r#"
version: 1
threads: 1
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners:
    - {{name: domestic, region: cn, address: "127.0.0.1:{p0}"}}
    - {{name: overseas, region: global, address: "127.0.0.1:{p1}"}}
  retries: {{max: 3, initial_backoff_ms: 1, max_backoff_ms: 5, max_retry_after_ms: 50}}
  auth:
    api_keys:
      - {{name: tester, key: "{KEY}"}}
  providers:
{yaml_providers}  models:
{models}"#,
            p0 = ports.0,
            p1 = ports.1,
        )
    })
}

fn cohere_ok() -> Reply {
    Reply::json(
        200,
        json!({"results": [{"index": 0, "relevance_score": 0.5}]}),
    )
}

fn rerank(model: &str, retries: u32) -> serde_json::Value {
    json!({"model": model, "query": "q", "documents": ["a"], "retries": retries})
}

/// A fake provider behind TLS with `cert`, answering rerank requests.
fn tls_fake(cert: ServerCert) -> (FakeProvider, TlsFront) {
    let fake = FakeProvider::start();
    fake.set_default(cohere_ok());
    let front = TlsFront::start(cert, fake.addr());
    (fake, front)
}

fn url(front: &TlsFront) -> String {
    format!("https://localhost:{}", front.port())
}

/// The answer to a request to a provider whose certificate is refused: 502, the certificate
/// named with `why`, one handshake attempt although three retries were allowed, and nothing sent.
/// The gateway trusts `ca`.
fn assert_refused(ca: &TestCa, cert: ServerCert, why: &str) {
    let (fake, front) = tls_fake(cert);
    let gw = gateway(&[("cohere", "cohere", url(&front))], Some(&ca.ca_file));
    let resp = post(&gw, "/api/v1/rerank", &rerank("rerank-cohere", 3));
    assert_eq!(resp.status, 502, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "upstream_unreachable");
    let message = body["message"].as_str().unwrap();
    assert_eq!(
        message,
        format!("provider cohere's TLS certificate was refused: {why}")
    );
    assert!(!message.contains(PROVIDER_KEY));
    assert_eq!(front.wait_connections(1), 1);
    assert_eq!(front.handshakes(), 0);
    assert!(fake.requests().is_empty());
}

#[test]
fn a_certificate_from_the_configured_ca_is_trusted_for_rerank_and_streamed_speech() {
    let ca = TestCa::new("good");
    let (fake, front) = tls_fake(ca.leaf(&["localhost"]));
    let gw = gateway(
        &[
            ("cohere", "cohere", url(&front)),
            ("openai", "openai", format!("{}/v1", url(&front))),
        ],
        Some(&ca.ca_file),
    );
    let resp = post(&gw, "/api/v1/rerank", &rerank("rerank-cohere", 0));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["results"][0]["relevance_score"], 0.5);

    let audio: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i; 3000]).collect();
    fake.push(Reply::chunked(
        200,
        "audio/mpeg",
        audio.iter().map(|a| (Duration::ZERO, a.clone())).collect(),
        false,
    ));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-1", "input": "hello over TLS"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.body, audio.concat());

    let seen = fake.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].path, "/v2/rerank");
    assert_eq!(seen[1].path, "/v1/audio/speech");
    assert_eq!(
        seen[1].header("authorization"),
        Some(format!("Bearer {PROVIDER_KEY}").as_str())
    );
    // The host name is sent as SNI and is what the certificate was checked against.
    assert_eq!(front.sni()[0].as_deref(), Some("localhost"));
}

#[test]
fn the_system_roots_stay_the_default() {
    // The same good certificate, but no ca_file: the test CA is not a system root.
    let ca = TestCa::new("default-roots");
    let (fake, front) = tls_fake(ca.leaf(&["localhost"]));
    let gw = gateway(&[("cohere", "cohere", url(&front))], None);
    let resp = post(&gw, "/api/v1/rerank", &rerank("rerank-cohere", 0));
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert_eq!(
        resp.json()["message"],
        "provider cohere's TLS certificate was refused: it is not signed by a trusted certificate authority (unknown issuer)"
    );
    assert!(fake.requests().is_empty());
}

#[test]
fn a_certificate_for_another_host_name_is_refused() {
    let ca = TestCa::new("wrong-name");
    assert_refused(
        &ca,
        ca.leaf(&["api.other-provider.example"]),
        "it is not valid for the provider's host name",
    );
}

#[test]
fn an_expired_certificate_is_refused() {
    let ca = TestCa::new("expired");
    assert_refused(&ca, ca.expired_leaf(&["localhost"]), "it has expired");
}

#[test]
fn a_self_signed_certificate_is_refused() {
    // The configured CA exists, but the certificate is signed by its own key.
    let ca = TestCa::new("self-signed");
    assert_refused(
        &ca,
        self_signed(&["localhost"]),
        "it is not signed by a trusted certificate authority (unknown issuer)",
    );
}

#[test]
fn a_refused_certificate_moves_to_the_next_target_and_is_not_tried_again() {
    let ca = TestCa::new("failover");
    let (bad_fake, bad) = tls_fake(self_signed(&["localhost"]));
    let (good_fake, good) = tls_fake(ca.leaf(&["localhost"]));
    let gw = gateway(
        &[("bad", "cohere", url(&bad)), ("good", "cohere", url(&good))],
        Some(&ca.ca_file),
    );
    let resp = post(&gw, "/api/v1/rerank", &rerank("rerank-failover", 3));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(good_fake.requests().len(), 1);

    // The good target failing too: its retries go to it alone, never back to the refused one,
    // and the refused account (the operator's) spends none of them: the first try and all
    // three retries reach the good one.
    good_fake.set_default(Reply::json(503, json!({"message": "overloaded"})));
    let resp = post(&gw, "/api/v1/rerank", &rerank("rerank-failover", 3));
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert_eq!(resp.json()["code"], "upstream_error");
    assert_eq!(good_fake.requests().len(), 1 + 1 + 3);
    assert_eq!(
        bad.wait_connections(2),
        2,
        "one handshake attempt per request"
    );
    assert!(bad_fake.requests().is_empty());
}

#[test]
fn connections_are_reused_over_tls() {
    let ca = TestCa::new("reuse");
    let (fake, front) = tls_fake(ca.leaf(&["localhost"]));
    let gw = gateway(&[("cohere", "cohere", url(&front))], Some(&ca.ca_file));
    for _ in 0..3 {
        let resp = post(&gw, "/api/v1/rerank", &rerank("rerank-cohere", 0));
        assert_eq!(resp.status, 200, "{}", resp.text());
    }
    assert_eq!(fake.requests().len(), 3);
    assert_eq!((front.connections(), front.handshakes()), (1, 1));
}

#[test]
fn an_ip_address_base_url_is_verified_against_the_address_and_sends_no_sni() {
    let ca = TestCa::new("ip");
    // A certificate naming the address: trusted; the client sends no SNI (RFC 6066 has no IP
    // form), and the certificate's IP address entry is what is checked.
    let (fake, front) = tls_fake(ca.leaf(&["127.0.0.1"]));
    // A certificate naming only `localhost`: refused for an IP base_url.
    let (_named_fake, named) = tls_fake(ca.leaf(&["localhost"]));
    let gw = gateway(
        &[
            (
                "cohere",
                "cohere",
                format!("https://127.0.0.1:{}", front.port()),
            ),
            (
                "named",
                "cohere",
                format!("https://127.0.0.1:{}", named.port()),
            ),
        ],
        Some(&ca.ca_file),
    );
    let resp = post(&gw, "/api/v1/rerank", &rerank("rerank-cohere", 0));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(front.sni(), vec![None]);
    let resp = post(&gw, "/api/v1/rerank", &rerank("rerank-named", 0));
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert_eq!(
        resp.json()["message"],
        "provider named's TLS certificate was refused: it is not valid for the provider's host name"
    );
}

#[test]
fn a_bad_ca_file_is_a_config_error_naming_its_path() {
    let ca = TestCa::new("config");
    let empty = ca.write("empty.pem", "no certificate here\n");
    let key = ca.write(
        "key.pem",
        "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n",
    );
    let missing = format!("{}.missing", ca.ca_file);
    for (file, problem) in [
        (&missing, "cannot be read"),
        (&empty, "holds no PEM certificate"),
        (&key, "holds a `PRIVATE KEY` PEM block (#1)"),
    ] {
        let yaml = format!(
            r#"
switchyard:
  listeners: [{{name: a, address: "127.0.0.1:1"}}]
  providers:
    cohere: {{kind: cohere, api_key: k, base_url: "https://localhost:1", tls: {{ca_file: "{file}"}}}}
"#
        );
        let errors = switchyard::config::load_str(&yaml, &|_| None)
            .err()
            .unwrap();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with(&format!(
                "switchyard.providers.cohere.tls.ca_file: `{file}` {problem}"
            )),
            "{errors:?}"
        );
    }
    let yaml = r#"
switchyard:
  listeners: [{name: a, address: "127.0.0.1:1"}]
  providers:
    cohere: {kind: cohere, api_key: k, base_url: "https://localhost:1", tls: {ca_fil: x}}
"#;
    let errors = switchyard::config::load_str(yaml, &|_| None).err().unwrap();
    assert_eq!(
        errors,
        ["switchyard.providers.cohere.tls.ca_fil: unknown key"]
    );
}

#[test]
fn a_connection_verified_against_one_providers_ca_is_not_reused_for_another() {
    // Two accounts at the same address and host name, one trusting the test CA and one the
    // system roots: a pooled connection of the first must not serve the second.
    let ca = TestCa::new("pool");
    let (fake, front) = tls_fake(ca.leaf(&["localhost"]));
    let gw = gateway_each(&[
        ("cohere", "cohere", url(&front), Some(ca.ca_file.as_str())),
        ("public", "cohere", url(&front), None),
    ]);
    let resp = post(&gw, "/api/v1/rerank", &rerank("rerank-cohere", 0));
    assert_eq!(resp.status, 200, "{}", resp.text());
    let resp = post(&gw, "/api/v1/rerank", &rerank("rerank-public", 0));
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert_eq!(
        resp.json()["message"],
        "provider public's TLS certificate was refused: it is not signed by a trusted certificate authority (unknown issuer)"
    );
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn a_result_file_from_the_provider_is_downloaded_trusting_its_ca() {
    let ca = TestCa::new("result");
    let (fake, front) = tls_fake(ca.leaf(&["localhost"]));
    let gw = gateway(
        &[("dashscope", "dashscope", url(&front))],
        Some(&ca.ca_file),
    );
    let wav = b"RIFF\x24\0\0\0WAVEfmt fake-audio".to_vec();
    fake.push(Reply::json(
        200,
        json!({
            "request_id": "r1",
            "output": {
                "finish_reason": "stop",
                "audio": {"url": format!("{}/results/abc.wav?Signature=x", url(&front)), "data": "", "id": "a1", "expires_at": 1}
            },
            "usage": {"characters": 5}
        }),
    ));
    fake.push(Reply::bytes(200, "audio/wav", wav.clone()));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "qwen3-tts-flash", "input": "hello", "response_format": "wav"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.body, wav);
    let seen = fake.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].path, "/results/abc.wav?Signature=x");
}
