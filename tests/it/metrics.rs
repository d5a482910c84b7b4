//! Prometheus metrics, scraped over HTTP from the metrics listener after real traffic through the
//! entry points: speech (raw and SSE), an image (synchronous and as a task), rerank, a 400, a 401,
//! a provider failing through its retries, and a request shed as overloaded. Every series this
//! gateway can count exactly is asserted exactly; the exposition must parse as Prometheus text.

use std::collections::{BTreeMap, HashMap};
use std::net::{SocketAddr, TcpStream};

use serde_json::json;

use crate::support::fake::{FakeProvider, Reply};
use crate::support::image_conformance::{b64, png};
use crate::support::{client, free_port, post, tasks, wait_listening, TestGateway, KEY};

/// One sample: family name and labels.
type Key = (String, BTreeMap<String, String>);

/// A parsed exposition: every sample, and every family's declared type.
struct Scrape {
    samples: HashMap<Key, f64>,
    types: HashMap<String, String>,
    text: String,
}

impl Scrape {
    /// The value of `name{labels}` (labels in any order); 0 when the series does not exist yet.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples
            .get(&(name.to_string(), labels))
            .copied()
            .unwrap_or(0.0)
    }

    /// The sum of `name` over every series whose labels include `labels`.
    fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|((n, l), _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, v)| v)
            .sum()
    }
}

/// Parse the Prometheus text format (version 0.0.4), failing on anything malformed: each line
/// is a `# HELP`/`# TYPE` comment or `name{label="value",...} number`, every sample's family has a
/// `# TYPE`, and label values are quoted with only `\\`, `\"` and `\n` escaped.
fn parse(text: &str) -> Scrape {
    let mut samples = HashMap::new();
    let mut types = HashMap::new();
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect(line);
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line}"
            );
            types.insert(name.to_string(), kind.to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(!line.starts_with('#'), "unknown comment: {line}");
        let name_end = line.find(['{', ' ']).expect(line);
        let name = &line[..name_end];
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name in {line}"
        );
        let mut rest = &line[name_end..];
        let mut labels = BTreeMap::new();
        if rest.starts_with('{') {
            let (parsed, close) = parse_labels(rest, line);
            labels = parsed;
            rest = &rest[close + 1..];
        }
        assert!(rest.starts_with(' '), "no space before the value: {line}");
        let value = rest.trim();
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line}")),
        };
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| types.contains_key(*f)))
            .unwrap_or(name);
        assert!(types.contains_key(family), "no # TYPE for {line}");
        let old = samples.insert((name.to_string(), labels), value);
        assert!(old.is_none(), "sample given twice: {line}");
    }
    Scrape {
        samples,
        types,
        text: text.to_string(),
    }
}

/// The labels of `{a="x",b="y"}...` (`s` starts at the `{`), and the index of the closing `}`.
fn parse_labels(s: &str, line: &str) -> (BTreeMap<String, String>, usize) {
    let b = s.as_bytes();
    let mut i = 1;
    let mut labels = BTreeMap::new();
    loop {
        if b[i] == b'}' {
            return (labels, i);
        }
        let eq = s[i..].find('=').expect(line) + i;
        let name = s[i..eq].to_string();
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "bad label name in {line}"
        );
        assert_eq!(b[eq + 1], b'"', "{line}");
        let mut value = String::new();
        i = eq + 2;
        loop {
            match b[i] {
                b'\\' => {
                    value.push(match b[i + 1] {
                        b'\\' => '\\',
                        b'"' => '"',
                        b'n' => '\n',
                        _ => panic!("bad escape in {line}"),
                    });
                    i += 2;
                }
                b'"' => break,
                _ => {
                    let c = s[i..].chars().next().unwrap();
                    value.push(c);
                    i += c.len_utf8();
                }
            }
        }
        labels.insert(name, value);
        i += 1;
        match b[i] {
            b',' => i += 1,
            b'}' => {}
            _ => panic!("bad label list in {line}"),
        }
    }
}

fn scrape(addr: SocketAddr) -> Scrape {
    let resp = client::request(addr, "GET", "/metrics", &[], b"");
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        resp.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    parse(&resp.text())
}

/// The standard test config with a metrics listener at `metrics`, and the overseas entry point
/// capped at one connection (so a second one is shed).
fn config(fake: &str, ports: (u16, u16), metrics: u16) -> String {
    let yaml = crate::support::config(fake, ports);
    let overseas = format!("address: \"127.0.0.1:{}\"}}", ports.1);
    assert!(yaml.contains(&overseas));
    yaml.replacen(
        &overseas,
        &format!("address: \"127.0.0.1:{}\", max_connections: 1}}", ports.1),
        1,
    )
    .replacen(
        "switchyard:\n",
        &format!("switchyard:\n  metrics: {{address: \"127.0.0.1:{metrics}\"}}\n"),
        1,
    )
}

fn mp3(n: usize) -> Vec<u8> {
    let mut v = vec![0xFF, 0xF3, 0x44, 0xC4];
    v.extend((0..n - 4).map(|i| (i * 31 % 251) as u8));
    v
}

#[test]
fn traffic_moves_the_counters_it_must() {
    let fake = FakeProvider::start();
    let m = free_port();
    let gw = TestGateway::start_with(|ports| config(&fake.base_url(), ports, m));
    let metrics: SocketAddr = format!("127.0.0.1:{m}").parse().unwrap();
    wait_listening(metrics);
    // Before any traffic only the entry points' in-flight gauges exist (a family shows once it
    // has a series).
    let before = scrape(metrics);
    assert_eq!(before.types["switchyard_requests_in_flight"], "gauge");
    assert!(!before.types.contains_key("switchyard_requests_total"));

    // Speech, raw: 11 input characters, 2,000 bytes of audio.
    fake.push(Reply::bytes(200, "audio/mpeg", mp3(2_000)));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-1", "input": "Hello there", "voice": "nova"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.body.len(), 2_000);

    // Speech, SSE: OpenAI's own events pass through.
    let delta = json!({"type": "speech.audio.delta", "audio": b64(&[0xFF, 0xF3, 1, 2])});
    let done = json!({"type": "speech.audio.done", "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}});
    fake.push(Reply::sse(vec![
        (std::time::Duration::ZERO, format!("data: {delta}\n\n")),
        (std::time::Duration::ZERO, format!("data: {done}\n\n")),
    ]));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "gpt-4o-mini-tts", "input": "hi", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());

    // An image, synchronously.
    fake.push(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": b64(&png(64, 1))}]}),
    ));
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-1", "prompt": "a fox", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());

    // An image, as a task, followed to its end.
    fake.push(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": b64(&png(64, 2))}]}),
    ));
    let id = tasks::start(
        &gw,
        json!({"model": "gpt-image-2", "prompt": "a fox", "async": true, "response_format": "b64_json"}),
    );
    assert_eq!(tasks::finished(&gw, &id)["task_status"], "succeed");

    // Rerank: its billed tokens are counted as the answer says.
    fake.push(Reply::json(
        200,
        json!({"results": [{"index": 0, "relevance_score": 0.5}]}),
    ));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "capital of France", "documents": ["Paris"]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let tokens = resp.json()["usage"]["total_tokens"].as_u64().unwrap();
    assert!(tokens > 0);

    // A 400 and a 401.
    let bad = post(&gw, "/api/v1/rerank", &json!({"model": "rerank-v3.5"}));
    assert_eq!(bad.status, 400);
    let bad_code = bad.json()["code"].as_str().unwrap().to_string();
    let anon = client::post_json(gw.addr, "/api/v1/rerank", &[], &json!({}));
    assert_eq!(anon.status, 401);
    let anon_code = anon.json()["code"].as_str().unwrap().to_string();

    // A provider failing through two retries: three attempts, two retries, one 502.
    for _ in 0..3 {
        fake.push(Reply::json(500, json!({"message": "internal"})));
    }
    let failed = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a"], "retries": 2}),
    );
    assert_eq!(failed.status, 502, "{}", failed.text());
    let failed_code = failed.json()["code"].as_str().unwrap().to_string();

    // Shed: the overseas entry point takes one connection; a request on a second is refused.
    // The first is served a health check and kept open, so it is surely counted.
    let mut held = TcpStream::connect(gw.overseas).unwrap();
    std::io::Write::write_all(&mut held, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert_eq!(client::read_response(&mut held, "GET").status, 200);
    let shed = client::post_json(
        gw.overseas,
        "/api/v1/rerank",
        &[("Service-API-Key", KEY)],
        &json!({}),
    );
    assert_eq!(shed.status, 503);
    assert_eq!(shed.json()["code"], "overloaded");

    // A request is counted once its answer is written, so the client may read its answer first:
    // scrape until the last one (the shed request) is counted and nothing is in flight.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let s = loop {
        let s = scrape(metrics);
        let shed_counted = s.get(
            "switchyard_requests_total",
            &[
                ("entry_point", "overseas"),
                ("operation", "-"),
                ("model", "-"),
                ("status", "503"),
                ("code", "overloaded"),
            ],
        ) > 0.0;
        let idle = s.get(
            "switchyard_requests_in_flight",
            &[("entry_point", "domestic")],
        ) == 0.0;
        if (shed_counted && idle) || std::time::Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert_eq!(s.types["switchyard_requests_total"], "counter");
    assert_eq!(s.types["switchyard_request_duration_seconds"], "histogram");
    let req = |ep: &str, op: &str, model: &str, status: &str, code: &str| {
        s.get(
            "switchyard_requests_total",
            &[
                ("entry_point", ep),
                ("operation", op),
                ("model", model),
                ("status", status),
                ("code", code),
            ],
        )
    };
    let d = "domestic";
    assert_eq!(req(d, "speech", "tts-1", "200", ""), 1.0, "{}", s.text);
    assert_eq!(req(d, "speech", "gpt-4o-mini-tts", "200", ""), 1.0);
    assert_eq!(req(d, "images", "gpt-image-1", "200", ""), 1.0);
    assert_eq!(req(d, "images", "gpt-image-2", "200", ""), 1.0);
    assert_eq!(req(d, "rerank", "rerank-v3.5", "200", ""), 1.0);
    // The 400 is answered before its model is known; the 401 before its body is read.
    assert_eq!(req(d, "rerank", "-", "400", &bad_code), 1.0);
    assert_eq!(req(d, "rerank", "-", "401", &anon_code), 1.0);
    assert_eq!(req(d, "rerank", "rerank-v3.5", "502", &failed_code), 1.0);
    assert_eq!(req("overseas", "-", "-", "503", "overloaded"), 1.0);
    assert_eq!(
        s.get(
            "switchyard_requests_shed_total",
            &[("entry_point", "overseas"), ("cause", "connections")]
        ),
        1.0
    );

    // Durations: one observation per request, in the histogram of its series.
    let dur = |model: &str, op: &str| {
        s.get(
            "switchyard_request_duration_seconds_count",
            &[("entry_point", d), ("operation", op), ("model", model)],
        )
    };
    assert_eq!(dur("tts-1", "speech"), 1.0);
    assert_eq!(dur("rerank-v3.5", "rerank"), 2.0);
    let inf = s.get(
        "switchyard_request_duration_seconds_bucket",
        &[
            ("entry_point", d),
            ("operation", "speech"),
            ("model", "tts-1"),
            ("le", "+Inf"),
        ],
    );
    assert_eq!(inf, 1.0);
    for model in ["tts-1", "gpt-4o-mini-tts"] {
        assert_eq!(
            s.get(
                "switchyard_speech_first_byte_seconds_count",
                &[("entry_point", d), ("model", model)]
            ),
            1.0,
            "{model}"
        );
    }
    // Bytes out: the raw audio's 2,000 at least (chunked framing is not body).
    let out = s.get(
        "switchyard_response_body_bytes_total",
        &[
            ("entry_point", d),
            ("operation", "speech"),
            ("model", "tts-1"),
        ],
    );
    assert_eq!(out, 2_000.0);

    // Upstream: one success per target that answered; the failing one's three attempts, two
    // of them retried.
    let attempts = |provider: &str, native: &str, outcome: &str| {
        s.get(
            "switchyard_upstream_attempts_total",
            &[
                ("provider", provider),
                ("native_model", native),
                ("outcome", outcome),
            ],
        )
    };
    assert_eq!(attempts("openai", "tts-1", "success"), 1.0);
    assert_eq!(attempts("openai", "gpt-4o-mini-tts", "success"), 1.0);
    assert_eq!(attempts("openai", "gpt-image-1", "success"), 1.0);
    assert_eq!(attempts("openai", "gpt-image-2", "success"), 1.0);
    assert_eq!(attempts("cohere", "rerank-v3.5", "success"), 1.0);
    assert_eq!(attempts("cohere", "rerank-v3.5", "failure"), 3.0);
    assert_eq!(
        s.get(
            "switchyard_upstream_retries_total",
            &[
                ("provider", "cohere"),
                ("native_model", "rerank-v3.5"),
                ("error", "failure")
            ]
        ),
        2.0
    );
    assert_eq!(
        s.get(
            "switchyard_upstream_duration_seconds_count",
            &[("provider", "cohere"), ("native_model", "rerank-v3.5")]
        ),
        4.0
    );

    // Usage, by model and key name (never the key).
    let usage = |name: &str, model: &str| s.get(name, &[("model", model), ("key", "tester")]);
    assert_eq!(
        usage("switchyard_speech_input_characters_total", "tts-1"),
        11.0
    );
    assert_eq!(
        usage(
            "switchyard_speech_input_characters_total",
            "gpt-4o-mini-tts"
        ),
        2.0
    );
    assert_eq!(
        usage("switchyard_images_generated_total", "gpt-image-1"),
        1.0
    );
    assert_eq!(
        usage("switchyard_images_generated_total", "gpt-image-2"),
        1.0
    );
    assert_eq!(
        usage("switchyard_rerank_tokens_total", "rerank-v3.5"),
        tokens as f64
    );

    // The task: accepted, then succeeded.
    for state in ["accepted", "succeeded"] {
        assert_eq!(
            s.get(
                "switchyard_image_tasks_total",
                &[("model", "gpt-image-2"), ("state", state)]
            ),
            1.0,
            "{state}"
        );
    }
    assert_eq!(
        s.sum("switchyard_image_tasks_total", &[("state", "failed")]),
        0.0
    );

    // Nothing in flight once every answer is in; nothing for hooks no part calls yet.
    assert_eq!(
        s.get("switchyard_requests_in_flight", &[("entry_point", d)]),
        0.0
    );
    assert_eq!(s.sum("switchyard_rate_limited_total", &[]), 0.0);
    // The three failures in a row ejected that target (the default threshold), and only it.
    let rerank_target = [("provider", "cohere"), ("native_model", "rerank-v3.5")];
    assert_eq!(s.sum("switchyard_targets_ejected_total", &[]), 1.0);
    assert_eq!(
        s.get("switchyard_targets_ejected_total", &rerank_target),
        1.0
    );
    assert_eq!(s.get("switchyard_target_ejected", &rerank_target), 1.0);

    // No credential anywhere in the exposition.
    for secret in [KEY, crate::support::PROVIDER_KEY, "hashed-secret-key"] {
        assert!(!s.text.contains(secret), "{secret} in the metrics");
    }
}

#[test]
fn metrics_are_never_on_an_entry_point() {
    let fake = FakeProvider::start();
    // Without a metrics listener, and with one: the entry points do not serve /metrics.
    let plain = TestGateway::start(&fake);
    let m = free_port();
    let with = TestGateway::start_with(|ports| config(&fake.base_url(), ports, m));
    for addr in [plain.addr, with.addr] {
        let resp = client::request(addr, "GET", "/metrics", &[("Service-API-Key", KEY)], b"");
        assert_eq!(resp.status, 404, "{addr}");
        assert_eq!(resp.json()["code"], "not_found");
    }
    // The metrics listener serves /metrics only.
    let metrics: SocketAddr = format!("127.0.0.1:{m}").parse().unwrap();
    wait_listening(metrics);
    assert_eq!(
        client::request(metrics, "GET", "/api/v1/rerank", &[], b"").status,
        404
    );
    assert_eq!(
        scrape(metrics).types["switchyard_requests_in_flight"],
        "gauge"
    );
}

#[test]
fn metrics_and_access_log_keys_are_checked() {
    let yaml = r#"
version: 1
switchyard:
  listeners: [{name: a, address: "127.0.0.1:9001"}]
  metrics: {address: "127.0.0.1:9001"}
"#;
    let errors = switchyard::config::load_str(yaml, &|_| None).err().unwrap();
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("switchyard.metrics.address")),
        "{errors:?}"
    );
    let yaml = yaml.replace("127.0.0.1:9001\"}\n", "nope\"}\n");
    let errors = switchyard::config::load_str(&yaml, &|_| None)
        .err()
        .unwrap();
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("switchyard.metrics.address")),
        "{errors:?}"
    );
    let yaml = r#"
version: 1
switchyard:
  listeners: [{name: a, address: "127.0.0.1:9001"}]
  access_log: {format: xml}
"#;
    let errors = switchyard::config::load_str(yaml, &|_| None).err().unwrap();
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("switchyard.access_log.format") && e.contains("text, json")),
        "{errors:?}"
    );
}
