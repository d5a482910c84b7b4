//! Switchyard embedded in a host's Pingora server, end to end: the set-up of
//! `examples/host_delegation.rs` (compiled in here from the example's own file) on one listener.
//! The host's routes go through Pingora's proxy path to the host's upstream; under `/ai`,
//! Switchyard answers speech (raw and SSE), rerank and a synchronous image with hosted links, its
//! OpenAPI document names the prefix; an unknown `/ai/...` path is Switchyard's 404 and an
//! unknown host path the host's answer; access lines and metrics exist only for Switchyard's
//! requests.
//!
//! The host runs in a child process (this test binary again, running
//! [`host_process`] alone): its logger is process-wide, and the access lines are read from its
//! output.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::fake::{FakeProvider, Reply};
use crate::support::image_conformance::{b64, png};
use crate::support::speech_conformance::{decoded_audio, public_events};
use crate::support::{
    auth, client, config, free_port, gateway_starting, wait_listening, KEY, TEST_NOW,
};
use switchyard::internals::caps::lifecycle::Clock;

#[allow(dead_code)]
#[path = "../../examples/host_delegation.rs"]
mod host_delegation;

#[allow(dead_code)]
#[path = "../../examples/auth_module.rs"]
mod auth_module;

#[allow(dead_code)]
#[path = "../../examples/mount_prefix.rs"]
mod mount_prefix;

#[cfg(feature = "metrics")]
#[allow(dead_code)]
#[path = "../../examples/host_metrics.rs"]
mod host_metrics;

const CONF: &str = "SWITCHYARD_EMBED_TEST_CONF";
const LISTEN: &str = "SWITCHYARD_EMBED_TEST_LISTEN";
const UPSTREAM: &str = "SWITCHYARD_EMBED_TEST_UPSTREAM";

/// The host server of the example, run by [`Host::start`] in a child process; does nothing in
/// a test run of its own.
#[test]
#[ignore = "the host process of delegation_end_to_end"]
fn host_process() {
    let (Ok(conf), Ok(listen), Ok(upstream)) = (
        std::env::var(CONF),
        std::env::var(LISTEN),
        std::env::var(UPSTREAM),
    ) else {
        return;
    };
    switchyard::logging::init().unwrap();
    let clock = Clock::manual(TEST_NOW);
    let settings = switchyard::config::Loader::new()
        .clock(&clock)
        .hosted()
        .file(&conf)
        .unwrap_or_else(|e| panic!("{e:#?}"));
    host_delegation::server(settings, &listen, upstream.parse().unwrap())
        .unwrap()
        .run_forever();
}

/// The standard test configuration without its listeners (the host owns the sockets), with
/// `extra` settings under `switchyard:`, a key limited to 2 requests a minute, and a model with a
/// successor.
fn hosted_config(fake_url: &str, extra: &str) -> String {
    let yaml: String = config(fake_url, (0, 0))
        .lines()
        .filter(|l| {
            !l.contains("listeners:")
                && !l.contains("{name: domestic")
                && !l.contains("{name: overseas")
        })
        .map(|l| match l {
            "switchyard:" => format!("switchyard:\n{extra}"),
            "    api_keys:" => format!(
                "{l}\n      - {{name: limited, key: \"{LIMITED_KEY}\", limits: {{requests_per_minute: 2}}}}"
            ),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!yaml.contains("listeners"));
    // A model being retired, with a successor: its answers link to the successor.
    yaml + r#"
    rerank-old:
      family: cohere-rerank
      successor: rerank-v3.5
      lifecycle: {deprecated: 2026-10-01, shutdown: 2026-12-10, replacement: [rerank-v3.5], source: "https://docs.cohere.com/docs/deprecations"}
      targets: [{provider: cohere, model: rerank-old}]
"#
}

/// A key with `requests_per_minute: 2`.
const LIMITED_KEY: &str = "limited-key-embed-0001";

/// The host process; killed when dropped.
struct Host {
    child: Child,
    addr: SocketAddr,
    metrics: SocketAddr,
    dir: PathBuf,
}

impl Host {
    fn start(fake: &FakeProvider, upstream: SocketAddr) -> Host {
        let _starting = gateway_starting();
        let (port, metrics_port) = (free_port(), free_port());
        // A short head deadline: the host's requests, served longer than it, must not be cut.
        let yaml = hosted_config(
            &fake.base_url(),
            &format!(
                "  metrics: {{address: \"127.0.0.1:{metrics_port}\"}}\n  \
                 clients: {{head_timeout_ms: 300}}"
            ),
        );
        let dir =
            std::env::temp_dir().join(format!("switchyard-embed-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("embedded.yaml");
        std::fs::write(&conf, yaml).unwrap();
        let child = Command::new(std::env::current_exe().unwrap())
            .args([
                "embedding::host_process",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env(CONF, &conf)
            .env(LISTEN, format!("127.0.0.1:{port}"))
            .env(UPSTREAM, upstream.to_string())
            .env("RUST_LOG", "info")
            .stdout(Stdio::from(
                std::fs::File::create(dir.join("stdout")).unwrap(),
            ))
            .stderr(Stdio::from(
                std::fs::File::create(dir.join("stderr")).unwrap(),
            ))
            .spawn()
            .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let metrics: SocketAddr = format!("127.0.0.1:{metrics_port}").parse().unwrap();
        wait_listening(addr);
        wait_listening(metrics);
        Host {
            child,
            addr,
            metrics,
            dir,
        }
    }

    fn output(&self) -> String {
        let read = |f: &str| std::fs::read(self.dir.join(f)).unwrap_or_default();
        format!(
            "{}{}",
            String::from_utf8_lossy(&read("stdout")),
            String::from_utf8_lossy(&read("stderr"))
        )
    }

    /// The access lines of the example's entry point (`edge`), once there are `n` of them.
    fn access_lines(&self, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = self.output();
            let lines: Vec<String> = text
                .lines()
                .filter(|l| l.contains(" access] "))
                .map(str::to_string)
                .collect();
            if lines.len() >= n {
                return lines;
            }
            assert!(
                Instant::now() < deadline,
                "waited for {n} access lines:\n{text}"
            );
            std::thread::park_timeout(Duration::from_millis(20));
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn get(addr: SocketAddr, path: &str) -> client::Response {
    client::request(addr, "GET", path, &auth(), b"")
}

fn post(addr: SocketAddr, path: &str, body: serde_json::Value) -> client::Response {
    client::post_json(addr, path, &auth(), &body)
}

/// The sum of `switchyard_requests_total` samples whose labels hold `filter`.
fn requests_counted(metrics: &str, filter: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("switchyard_requests_total{") && l.contains(filter))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

#[test]
fn delegation_end_to_end() {
    let fake = FakeProvider::start();
    // The host's own upstream: one page, and its own answer for every other path.
    let upstream = FakeProvider::start();
    upstream.set_handler(|r| {
        Some(if r.path == "/hello" {
            Reply::bytes(200, "text/plain", b"hello from the host".to_vec())
        } else if r.path == "/slow" {
            // Longer than the head deadline: the host's request is served, not cut.
            std::thread::sleep(Duration::from_millis(700));
            Reply::bytes(200, "text/plain", b"slow page".to_vec())
        } else {
            Reply::bytes(404, "text/plain", b"the host has no such page".to_vec())
        })
    });
    let host = Host::start(&fake, upstream.addr());
    let mut ours = 0; // Switchyard's requests so far

    // The host's routes: through Pingora's proxy path to the host's upstream.
    let page = get(host.addr, "/hello");
    assert_eq!(page.status, 200, "{}", page.text());
    assert_eq!(page.text(), "hello from the host");
    let missing = get(host.addr, "/no/such/page");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.text(), "the host has no such page");
    // A path that only looks like Switchyard's outside its mount is the host's too.
    let outside = get(host.addr, "/api/v1/models");
    assert_eq!(outside.text(), "the host has no such page");
    let slow = get(host.addr, "/slow");
    assert_eq!(slow.status, 200);
    assert_eq!(slow.text(), "slow page");
    let seen: Vec<String> = upstream.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(seen, ["/hello", "/no/such/page", "/api/v1/models", "/slow"]);

    // An unknown path under the mount: Switchyard's 404, in its error shape.
    let unknown = get(host.addr, "/ai/no/such/route");
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["code"], "not_found", "{}", unknown.text());
    ours += 1;

    // Speech, raw audio.
    let audio = b"ID3 raw audio from the fake".to_vec();
    fake.push(Reply::bytes(200, "audio/mpeg", audio.clone()));
    let raw = post(
        host.addr,
        "/ai/api/v1/audio/speech",
        json!({"model": "tts-1", "input": "hello", "voice": "alloy"}),
    );
    assert_eq!(raw.status, 200, "{}", raw.text());
    assert_eq!(raw.header("content-type"), Some("audio/mpeg"));
    assert_eq!(raw.body, audio);
    ours += 1;
    let sent = fake.requests().pop().unwrap();
    assert_eq!(sent.path, "/v1/audio/speech");
    assert_eq!(sent.json()["input"], "hello");

    // Speech as SSE: a provider's raw audio, one event per piece.
    let pieces: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i + 1; 500]).collect();
    fake.push(Reply::chunked(
        200,
        "audio/mpeg",
        pieces.iter().map(|p| (Duration::ZERO, p.clone())).collect(),
        false,
    ));
    let sse = post(
        host.addr,
        "/ai/api/v1/audio/speech",
        json!({"model": "eleven-multilingual-v2", "input": "hi", "stream_format": "sse"}),
    );
    assert_eq!(sse.status, 200, "{}", sse.text());
    assert_eq!(sse.header("content-type"), Some("text/event-stream"));
    assert_eq!(decoded_audio(&public_events(&sse)), pieces.concat());
    ours += 1;

    // Rerank.
    fake.push(Reply::json(
        200,
        json!({"id": "r1", "results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}],
               "meta": {"billed_units": {"search_units": 1}}}),
    ));
    let rerank = post(
        host.addr,
        "/ai/api/v1/rerank",
        json!({"model": "rerank-v3.5", "query": "capital of France", "documents": ["Berlin", "Paris"]}),
    );
    assert_eq!(rerank.status, 200, "{}", rerank.text());
    assert_eq!(rerank.json()["results"][0]["index"], 1);
    assert_eq!(fake.requests().pop().unwrap().path, "/v2/rerank");
    ours += 1;
    // A retiring model's answer links to its successor under the mount.
    fake.push(Reply::json(
        200,
        json!({"id": "r2", "results": [{"index": 0, "relevance_score": 0.9}], "meta": {"billed_units": {"search_units": 1}}}),
    ));
    let old = post(
        host.addr,
        "/ai/api/v1/rerank",
        json!({"model": "rerank-old", "query": "q", "documents": ["d"]}),
    );
    assert_eq!(old.status, 200, "{}", old.text());
    let link = old.header("link").expect("a Link header");
    assert!(
        link.starts_with("</ai/api/v1/models/rerank-v3.5>; rel=\"successor-version\""),
        "{link}"
    );
    assert!(!link.contains("</api/"), "{link}");
    ours += 1;

    // A synchronous image as a link: hosted under the mount, and served there.
    let image = png(64, 7);
    fake.push(Reply::json(
        200,
        json!({"data": [{"b64_json": b64(&image)}]}),
    ));
    let made = post(
        host.addr,
        "/ai/api/v1/images/generations",
        json!({"model": "gpt-image-1", "prompt": "a lighthouse", "response_format": "url"}),
    );
    assert_eq!(made.status, 200, "{}", made.text());
    ours += 1;
    let url = made.json()["data"][0]["url"].as_str().unwrap().to_string();
    let prefix = format!("http://{}/ai/api/v1/files/", host.addr);
    assert!(url.starts_with(&prefix), "{url}");
    let file = client::request(
        host.addr,
        "GET",
        &url[url.find("/ai/").unwrap()..],
        &[],
        b"",
    );
    assert_eq!(file.status, 200, "{}", file.text());
    assert_eq!(file.body, image);
    ours += 1;

    // The OpenAPI document: its server is the mount.
    let doc = get(host.addr, "/ai/api/v1/openapi.json");
    assert_eq!(doc.status, 200);
    assert_eq!(doc.json()["servers"][0]["url"], "/ai");
    assert!(doc.json()["paths"]["/api/v1/rerank"].is_object());
    ours += 1;

    // Only Switchyard's requests have access lines, each under the mount.
    let lines = host.access_lines(ours);
    std::thread::sleep(Duration::from_millis(200));
    let lines_now = host.access_lines(ours);
    assert_eq!(lines_now.len(), lines.len(), "{lines_now:#?}");
    assert_eq!(lines.len(), ours, "{lines:#?}");
    for l in &lines {
        assert!(l.contains(" edge "), "{l}");
        assert!(l.contains(" /ai/"), "{l}");
        assert!(!l.contains("/hello") && !l.contains("/no/such/page"), "{l}");
    }
    // The hosted file's id (its capability) is not logged.
    assert!(lines.iter().any(|l| l.contains(" /ai/api/v1/files/{id} ")));
    assert!(!host.output().contains(&url[url.find("/files/").unwrap()..]));

    // Only Switchyard's requests are counted.
    let metrics = client::request(host.metrics, "GET", "/metrics", &[], b"").text();
    assert_eq!(requests_counted(&metrics, ""), ours as u64, "{metrics}");
    assert_eq!(
        requests_counted(&metrics, "entry_point=\"edge\""),
        ours as u64
    );
    assert_eq!(requests_counted(&metrics, "status=\"404\""), 1);
}

/// Stops an in-process server when the test's sender drops.
struct Stop(tokio::sync::Mutex<Option<tokio::sync::oneshot::Receiver<()>>>);

#[async_trait::async_trait]
impl pingora::server::ShutdownSignalWatch for Stop {
    async fn recv(&self) -> pingora::server::ShutdownSignal {
        if let Some(rx) = self.0.lock().await.take() {
            let _ = rx.await;
        }
        pingora::server::ShutdownSignal::FastShutdown
    }
}

/// Run the server `make` builds from the hosted test configuration in this process, on a free
/// port; it stops when the returned sender drops.
fn in_process(
    fake: &FakeProvider,
    make: impl FnOnce(
        switchyard::config::Settings,
        &str,
    ) -> std::result::Result<pingora::server::Server, String>,
) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let yaml = hosted_config(&fake.base_url(), "");
    let settings = switchyard::config::Loader::new()
        .clock(&Clock::manual(TEST_NOW))
        .hosted()
        .text(&yaml, &|_| None)
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let _starting = gateway_starting();
    let server = make(settings, &addr.to_string()).unwrap();
    std::thread::spawn(move || {
        server.run(pingora::server::RunArgs {
            shutdown_signal: Box::new(Stop(tokio::sync::Mutex::new(Some(rx)))),
        })
    });
    wait_listening(addr);
    (addr, stop)
}

/// `examples/mount_prefix.rs`: the host's own answer beside Switchyard under `/ai`, with the
/// root-level routes kept at the root.
#[test]
fn mount_prefix_keeps_the_root_routes_when_asked() {
    let fake = FakeProvider::start();
    let (addr, _stop) = in_process(&fake, mount_prefix::server);
    let page = client::request(addr, "GET", "/", &[], b"");
    assert_eq!(page.text(), "the host's own page\n");
    let elsewhere = client::request(addr, "GET", "/api/v1/openapi.json", &[], b"");
    assert_eq!(elsewhere.text(), "the host's own page\n");
    for path in ["/healthz", "/ai/healthz"] {
        let health = client::request(addr, "GET", path, &[], b"");
        assert_eq!(health.json()["status"], "ok", "{path}");
    }
    // LiteLLM's Jina path at the root, and Jina's own under the mount.
    for path in ["/v1/rerank", "/ai/compat/jina/v1/rerank"] {
        let jina = post(
            addr,
            path,
            json!({"model": "local-bm25", "query": "capital of France", "documents": ["Berlin", "Paris is the capital of France"]}),
        );
        assert_eq!(jina.status, 200, "{path}: {}", jina.text());
        assert_eq!(jina.json()["results"][0]["index"], 1, "{path}");
    }
    let unknown = client::request(addr, "GET", "/ai/nope", &[], b"");
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["code"], "not_found");
    let wrong_method = client::request(addr, "GET", "/ai/api/v1/rerank", &[], b"");
    assert_eq!(wrong_method.status, 405);
    assert_eq!(wrong_method.header("allow"), Some("POST"));
    assert!(fake.requests().is_empty());
}

/// `examples/auth_module.rs`: Switchyard's authentication and limits on a host route.
#[test]
fn auth_module_guards_a_host_route() {
    let fake = FakeProvider::start();
    let upstream = FakeProvider::start();
    upstream.set_handler(|_| Some(Reply::bytes(200, "text/plain", b"upstream page".to_vec())));
    let (addr, _stop) = in_process(&fake, |settings, listen| {
        auth_module::server(settings, listen, upstream.addr())
    });

    // No credential: refused before the upstream, in Switchyard's shape.
    let refused = client::request(addr, "GET", "/private/report", &[], b"");
    assert_eq!(refused.status, 401, "{}", refused.text());
    assert_eq!(refused.json()["code"], "unauthorized");
    let wrong = client::request(
        addr,
        "GET",
        "/private/report",
        &[("Service-API-Key", "not-a-key-0000")],
        b"",
    );
    assert_eq!(wrong.status, 401);
    assert!(upstream.requests().is_empty());

    // A known key: proxied, the caller named, its key not forwarded.
    let ok = client::request(addr, "GET", "/private/report", &auth(), b"");
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(ok.text(), "upstream page");
    let sent = upstream.requests().pop().unwrap();
    assert_eq!(sent.path, "/private/report");
    assert_eq!(sent.header("x-caller"), Some("key:tester"));
    assert_eq!(sent.header("service-api-key"), None);
    assert!(!format!("{:?}", sent.headers).contains(KEY));

    // An unguarded host path needs nothing, and a caller cannot name itself.
    let open = client::request(addr, "GET", "/public", &[("x-caller", "key:forged")], b"");
    assert_eq!(open.status, 200);
    let sent = upstream.requests().pop().unwrap();
    assert_eq!(sent.path, "/public");
    assert_eq!(sent.header("x-caller"), Some("key:forged"));

    // The caller's requests_per_minute: the third request in the minute is refused.
    let limited = [("Service-API-Key", LIMITED_KEY)];
    let answers: Vec<client::Response> = (0..5)
        .map(|_| client::request(addr, "GET", "/private/x", &limited, b""))
        .collect();
    // Two fit a minute: of five requests, one window (the minute may turn once) gets three.
    let refused = answers.iter().find(|r| r.status == 429);
    let statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
    let refused = refused.unwrap_or_else(|| panic!("no 429 in {statuses:?}"));
    assert_eq!(refused.json()["code"], "rate_limited", "{}", refused.text());
    assert!(refused.header("retry-after").is_some());
    assert_eq!(statuses[..2], [200, 200], "{statuses:?}");

    // Switchyard's own routes authenticate themselves, beside the module.
    let models = client::request(addr, "GET", "/ai/api/v1/models", &auth(), b"");
    assert_eq!(models.status, 200, "{}", models.text());
    let anonymous = client::request(addr, "GET", "/ai/api/v1/models", &[], b"");
    assert_eq!(anonymous.status, 401);
}

/// The module's refusal keeps the connection, as Switchyard's own 401 does: a client that
/// reuses it after the 401 gets its next answer on it (not a reset). A refused request whose
/// body was not read says `Connection: close` and closes, since its body would be taken for the
/// next request.
#[test]
fn auth_module_refusal_keeps_the_connection() {
    use std::io::Write;
    let fake = FakeProvider::start();
    let upstream = FakeProvider::start();
    upstream.set_handler(|_| Some(Reply::bytes(200, "text/plain", b"upstream page".to_vec())));
    let (addr, _stop) = in_process(&fake, |settings, listen| {
        auth_module::server(settings, listen, upstream.addr())
    });

    let mut conn = client::connect(addr);
    conn.write_all(b"GET /private/report HTTP/1.1\r\nHost: host\r\n\r\n")
        .unwrap();
    let refused = client::read_response(&mut conn, "GET");
    assert_eq!(refused.status, 401, "{}", refused.text());
    assert_eq!(refused.json()["code"], "unauthorized");
    assert_ne!(refused.header("connection"), Some("close"));
    let second =
        format!("GET /private/report HTTP/1.1\r\nHost: host\r\nService-API-Key: {KEY}\r\n\r\n");
    conn.write_all(second.as_bytes()).unwrap();
    let answered = client::read_response(&mut conn, "GET");
    assert_eq!(answered.status, 200, "{}", answered.text());
    assert_eq!(answered.text(), "upstream page");
    assert_eq!(upstream.requests().len(), 1);

    // A body the refusal did not read: the answer says so and the connection ends cleanly.
    let mut conn = client::connect(addr);
    conn.write_all(
        b"POST /private/report HTTP/1.1\r\nHost: host\r\nContent-Length: 5\r\n\r\nhello",
    )
    .unwrap();
    let refused = client::read_response(&mut conn, "POST");
    assert_eq!(refused.status, 401, "{}", refused.text());
    assert_eq!(refused.header("connection"), Some("close"));
}

/// `examples/host_metrics.rs`: the host's own registry gathers Switchyard's families, whose
/// series count the request Switchyard answered, beside the host's own counter; the
/// configuration has no `metrics:` listener.
#[cfg(feature = "metrics")]
#[test]
fn a_host_registry_serves_switchyard_metrics() {
    let fake = FakeProvider::start();
    let (addr, _stop) = in_process(&fake, host_metrics::server);
    let before = client::request(addr, "GET", "/metrics", &[], b"");
    assert_eq!(before.status, 200);
    assert_eq!(requests_counted(&before.text(), "entry_point="), 0);
    let page = client::request(addr, "GET", "/", &[], b"");
    assert_eq!(page.text(), "the host's own page\n");
    let models = client::request(addr, "GET", "/ai/api/v1/models", &auth(), b"");
    assert_eq!(models.status, 200, "{}", models.text());

    let after = client::request(addr, "GET", "/metrics", &[], b"");
    let text = after.text();
    assert!(text.contains("host_pages_total 1"), "{text}");
    assert!(
        text.contains("# TYPE switchyard_requests_total counter"),
        "{text}"
    );
    // Only Switchyard's own request is counted: the host's page and /metrics are not.
    assert_eq!(
        requests_counted(&text, "entry_point=\"embedded\""),
        1,
        "{text}"
    );
}

/// The code of the README's embedding section and of the guide's embedding page is quoted from the
/// examples verbatim, so it is compiled (as the examples are) and cannot drift from them; and every
/// example they name exists.
#[test]
fn readme_embedding_quotes_the_examples() {
    let root = env!("CARGO_MANIFEST_DIR");
    let examples: Vec<(String, String)> = std::fs::read_dir(format!("{root}/examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let start = readme
        .find("\n## Embedding\n")
        .expect("an Embedding section");
    let section = &readme[start + 1..];
    let section = &section[..section[1..].find("\n## ").map_or(section.len(), |i| i + 1)];
    assert_quotes_examples("README.md", section, &examples);
    // The guide's page is all about embedding: the whole of it.
    let guide = std::fs::read_to_string(format!("{root}/docs/guide/embedding.md")).unwrap();
    assert_quotes_examples("docs/guide/embedding.md", &guide, &examples);
}

/// Every `rust` block of `section` is part of an example, and the section names the examples.
fn assert_quotes_examples(doc: &str, section: &str, examples: &[(String, String)]) {
    let mut blocks = 0;
    let mut rest = section;
    while let Some(open) = rest.find("```rust\n") {
        let after = &rest[open + "```rust\n".len()..];
        let close = after.find("```").expect("a closed block");
        let code = &after[..close];
        assert!(
            examples.iter().any(|(_, text)| text.contains(code)),
            "{doc}: the embedding code is not quoted from examples/:\n{code}"
        );
        blocks += 1;
        rest = &after[close + 3..];
    }
    assert!(blocks >= 1, "{doc}: the Embedding section has no code");
    for name in [
        "host_delegation.rs",
        "mount_prefix.rs",
        "auth_module.rs",
        "gateway.rs",
    ] {
        assert!(examples.iter().any(|(n, _)| n == name), "{name}");
        assert!(
            section.contains(&format!("examples/{name}")),
            "{doc}: {name}"
        );
    }
}
