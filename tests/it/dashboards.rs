//! The shipped Grafana dashboard (`deploy/grafana/switchyard.json`) and Prometheus alerting rules
//! (`deploy/prometheus/alerts.yml`) against a real Prometheus (Debian's `prometheus` package)
//! scraping two gateways under traffic: every dashboard query, evaluated through Prometheus's HTTP
//! API, returns at least one series; every rule loads and evaluates without error; and the
//! alerts that gauges alone raise (a target ejected, a model near its shutdown, a target retired
//! by its provider) are raised.
//!
//! The traffic makes every series the dashboard shows exist: speech (first byte, characters, a
//! price), a synchronous image and an asynchronous task, rerank, a 400, a provider failing through
//! its retries (a retry, an ejection, a 502), a model its provider says is gone (a retired
//! target), a request shed by a connection cap, one refused by a per-key limit, cached speech
//! (misses, a hit, evictions), spans exported to a collector that is down, and, on a second
//! gateway whose Redis is down, a limit check failing in the store.
//!
//! Without a `prometheus` binary (on PATH, or at `SWITCHYARD_TEST_PROMETHEUS`) the live test says so
//! loudly and passes, unless `SWITCHYARD_TEST_REQUIRE_PROMETHEUS=1` (set by `scripts/test`, which
//! installs the package) makes it fail. That every metric the dashboard and the rules name is one
//! of the gateway's families is checked without Prometheus.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use switchyard::internals::caps::lifecycle::Date;

use crate::support::fake::{FakeProvider, Reply};
use crate::support::image_conformance::{b64, png};
use crate::support::{
    self, client, free_port, post, tasks, wait_listening, TestGateway, KEY, TEST_NOW,
};

/// Set (to `1`) where the live test must run: a missing Prometheus fails it instead of skipping.
const REQUIRE: &str = "SWITCHYARD_TEST_REQUIRE_PROMETHEUS";
/// The API key with a per-key limit of one request a minute.
const LIMITED: &str = "limited-key-0001";
/// How long Prometheus is given to scrape the traffic and evaluate the queries and rules.
const SETTLE: Duration = Duration::from_secs(30);

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Every `expr` of the dashboard's panels (rows' nested panels included), with its panel's title.
fn dashboard_queries() -> Vec<(String, String)> {
    let path = repo_file("deploy/grafana/switchyard.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let dash: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut out = Vec::new();
    let mut stack: Vec<&Value> = dash["panels"].as_array().unwrap().iter().collect();
    while let Some(panel) = stack.pop() {
        if let Some(nested) = panel["panels"].as_array() {
            stack.extend(nested);
        }
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_else(|| panic!("{panel}"));
            let title = panel["title"].as_str().unwrap_or_default();
            out.push((title.to_string(), expr.to_string()));
        }
    }
    out
}

/// A dashboard query as Grafana would send it with every entry point selected over a short range.
fn as_grafana_sends(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$__range", "1h")
        .replace("$entry_point", ".*")
}

/// The `switchyard_*` metric names in `text`, a histogram's series named by their family.
fn metric_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("switchyard_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let family = ["_bucket", "_count", "_sum"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        if !names.iter().any(|n| n == family) {
            names.push(family.to_string());
        }
        rest = &tail[end..];
    }
    names
}

/// A metric name misspelt in the dashboard or the rules would show nothing or never alert: each
/// must be a family of the table in `src/metrics.rs`.
#[test]
fn every_metric_named_is_a_family() {
    let table = std::fs::read_to_string(repo_file("src/metrics.rs")).unwrap();
    for file in [
        "deploy/grafana/switchyard.json",
        "deploy/prometheus/alerts.yml",
        "deploy/prometheus/alerts_test.yml",
    ] {
        let text = std::fs::read_to_string(repo_file(file)).unwrap();
        let names = metric_names(&text);
        assert!(!names.is_empty(), "{file} names no metric");
        for name in names {
            assert!(
                table.contains(&format!("= \"{name}\"")),
                "{file}: {name} is not a metric family of src/metrics.rs"
            );
        }
    }
    // The queries are all found (rows' panels too).
    let queries = dashboard_queries();
    assert!(queries.len() >= 25, "{queries:?}");
}

/// The dashboard imports into any Grafana: every panel reads the data source the `datasource`
/// variable picks (no data source uid of the machine it was drawn on), panel ids are unique, and
/// a request panel whose metric has an entry point follows the `entry_point` variable.
#[test]
fn the_dashboard_is_portable() {
    let text = std::fs::read_to_string(repo_file("deploy/grafana/switchyard.json")).unwrap();
    let dash: Value = serde_json::from_str(&text).unwrap();
    let vars: Vec<&str> = dash["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(vars, ["datasource", "entry_point"]);
    let mut ids = Vec::new();
    for panel in dash["panels"].as_array().unwrap() {
        ids.push(panel["id"].as_u64().unwrap());
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{panel}");
        for target in panel["targets"].as_array().unwrap() {
            assert_eq!(target["datasource"]["uid"], "${datasource}", "{target}");
            let expr = target["expr"].as_str().unwrap();
            for family in [
                "switchyard_requests_total",
                "switchyard_requests_shed_total",
            ] {
                if expr.contains(family) {
                    assert!(expr.contains("entry_point=~\"$entry_point\""), "{expr}");
                }
            }
        }
    }
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count, "panel ids repeat");
}

/// A Prometheus server of its own, stopped and its directory removed when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Prometheus {
    /// Start `binary` scraping `targets` every 500 ms, evaluating the shipped rules as often.
    fn start(binary: &Path, targets: &[SocketAddr]) -> Prometheus {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!(
            "switchyard-prometheus-{}-{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let targets: Vec<String> = targets.iter().map(|a| format!("\"{a}\"")).collect();
        let config = format!(
            "global: {{scrape_interval: 500ms, scrape_timeout: 500ms, evaluation_interval: 500ms}}\n\
             rule_files: [\"{rules}\"]\n\
             scrape_configs:\n  - job_name: switchyard\n    static_configs: [{{targets: [{targets}]}}]\n",
            rules = repo_file("deploy/prometheus/alerts.yml").display(),
            targets = targets.join(", "),
        );
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(binary)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {binary:?}: {e}"));
        let mut prometheus = Prometheus {
            child,
            addr: format!("127.0.0.1:{port}").parse().unwrap(),
            dir,
        };
        prometheus.wait_ready();
        prometheus
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// Until `/-/ready` answers 200 (the configuration and the rules loaded), at most 20 s.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("prometheus exited ({status}):\n{}", self.log());
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(100)).is_ok()
                && client::request(self.addr, "GET", "/-/ready", &[], b"").status == 200
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus not ready:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `GET /api/v1/<path>`: its `data`, failing on an error answer (a query that does not parse).
    fn api(&self, path: &str) -> Value {
        let resp = client::request(self.addr, "GET", &format!("/api/v1/{path}"), &[], b"");
        let body = resp.json();
        assert_eq!(body["status"], "success", "{path}: {body}");
        body["data"].clone()
    }

    /// The series an instant query returns now.
    fn query(&self, expr: &str) -> Vec<Value> {
        let data = self.api(&format!("query?query={}", percent_encode(expr)));
        data["result"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `s` as a URL query value: everything but unreserved characters percent-encoded.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The `prometheus` binary: `SWITCHYARD_TEST_PROMETHEUS`, else the first on PATH.
fn prometheus_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SWITCHYARD_TEST_PROMETHEUS") {
        return Some(PathBuf::from(path));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("prometheus"))
        .find(|p| p.is_file())
}

/// The standard test config with a metrics listener, the overseas entry point capped at one
/// connection, a key limited to one request a minute, and a rerank model whose target its
/// provider shuts down on `shutdown` (`store`: the limits' Redis, when given).
fn config(
    fake: &str,
    ports: (u16, u16),
    metrics: u16,
    shutdown: Date,
    store: Option<&str>,
) -> String {
    let yaml = support::config(fake, ports);
    let overseas = format!("address: \"127.0.0.1:{}\"}}", ports.1);
    let hashed = "      - {name: hashed,";
    assert!(yaml.contains(&overseas) && yaml.contains(hashed));
    let deprecated = Date::of_unix(shutdown.unix() - 60 * 86_400);
    let mut yaml = yaml
        .replacen(
            &overseas,
            &format!("address: \"127.0.0.1:{}\", max_connections: 1}}", ports.1),
            1,
        )
        .replacen(
            "switchyard:\n",
            &format!("switchyard:\n  metrics: {{address: \"127.0.0.1:{metrics}\"}}\n"),
            1,
        )
        .replacen(
            hashed,
            &format!(
                "      - {{name: limited, key: \"{LIMITED}\", limits: {{requests_per_minute: 1}}}}\n{hashed}"
            ),
            1,
        )
        + &format!(
            "    rerank-retiring: {{family: cohere-rerank, targets: [{{provider: cohere, model: rerank-retiring, \
             lifecycle: {{deprecated: {deprecated}, shutdown: {shutdown}, replacement: [rerank-v3.5]}}}}]}}\n"
        )
        // A model its provider retired without notice (the target retired: its gauge and alert).
        + "    rerank-gone: {family: cohere-rerank, targets: [{provider: cohere, model: rerank-gone}]}\n"
        // A cached (priced) speech model, in a memory cache small enough to evict.
        + "    tts-cached: {family: openai-tts, targets: [{provider: openai, model: tts-1}], cache: {ttl_seconds: 600}}\n"
        + "  cache: {store: memory, max_bytes: 65536, max_entry_bytes: 16384}\n";
    // Spans exported to a collector that is down (nothing listens there): counted as failed.
    yaml = yaml.replacen(
        "switchyard:\n",
        &format!(
            "switchyard:\n  tracing: {{endpoint: \"http://127.0.0.1:{}\", flush_interval_ms: 50}}\n",
            free_port()
        ),
        1,
    );
    if let Some(url) = store {
        yaml = yaml.replacen(
            "  images: {",
            &format!(
                "  store: {{redis_url: \"{url}\", key_prefix: \"dash\", timeout_ms: 300}}\n  images: {{"
            ),
            1,
        );
    }
    yaml
}

fn rerank(addr: SocketAddr, key: &str) -> client::Response {
    client::post_json(
        addr,
        "/api/v1/rerank",
        &[("Service-API-Key", key)],
        &json!({"model": "local-bm25", "query": "a cat", "documents": ["a cat sat", "dogs"]}),
    )
}

/// Traffic through `gw` that makes every series of the dashboard exist.
fn traffic(gw: &TestGateway, fake: &FakeProvider) {
    // Speech (a priced model: characters, a cost, a first byte).
    fake.push(Reply::bytes(
        200,
        "audio/mpeg",
        [0xFF, 0xF3, 0x44, 0xC4].repeat(100),
    ));
    let resp = post(
        gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-1", "input": "Hello there", "voice": "nova"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    // An image, synchronously, and one as a task followed to its end.
    fake.push(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": b64(&png(64, 1))}]}),
    ));
    let resp = post(
        gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-1", "prompt": "a fox", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    fake.push(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": b64(&png(64, 2))}]}),
    ));
    let id = tasks::start(
        gw,
        json!({"model": "gpt-image-2", "prompt": "a fox", "async": true, "response_format": "b64_json"}),
    );
    assert_eq!(tasks::finished(gw, &id)["task_status"], "succeed");
    // Rerank (billed tokens), then a 400.
    fake.push(Reply::json(
        200,
        json!({"results": [{"index": 0, "relevance_score": 0.5}], "meta": {"billed_units": {"search_units": 1}}}),
    ));
    let resp = post(
        gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "capital of France", "documents": ["Paris"]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        post(gw, "/api/v1/rerank", &json!({"model": "rerank-v3.5"})).status,
        400
    );
    // A provider failing through two retries: three failed attempts eject the target; a 502.
    for _ in 0..3 {
        fake.push(Reply::json(500, json!({"message": "internal"})));
    }
    let failed = post(
        gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a"], "retries": 2}),
    );
    assert_eq!(failed.status, 502, "{}", failed.text());
    // A model the provider says is gone: its target is retired (503, no successor).
    fake.push(Reply::json(
        404,
        json!({"message": "model 'rerank-gone' not found, make sure the correct model ID was used and that you have access to the model."}),
    ));
    let gone = post(
        gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-gone", "query": "q", "documents": ["a"]}),
    );
    assert_eq!(gone.status, 503, "{}", gone.text());
    // The response cache: eight different answers of 10 kB (misses, stored, past the 64 KiB
    // bound: evictions), then the last one again (a hit, a cost saved).
    for i in 0..8 {
        fake.push(Reply::bytes(200, "audio/mpeg", vec![9; 10_000]));
        let resp = post(
            gw,
            "/api/v1/audio/speech",
            &json!({"model": "tts-cached", "input": format!("line {i}")}),
        );
        assert_eq!(resp.status, 200, "{}", resp.text());
    }
    let hit = post(
        gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-cached", "input": "line 7"}),
    );
    assert_eq!(hit.status, 200, "{}", hit.text());
    assert_eq!(hit.header("switchyard-cache"), Some("hit"));
    // A per-key limit: the second request of the minute is refused.
    assert_eq!(rerank(gw.addr, LIMITED).status, 200);
    assert_eq!(rerank(gw.addr, LIMITED).status, 429);
    // Shed: the overseas entry point takes one connection; a request on a second is refused.
    let mut held = TcpStream::connect(gw.overseas).unwrap();
    std::io::Write::write_all(&mut held, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert_eq!(client::read_response(&mut held, "GET").status, 200);
    let shed = client::post_json(
        gw.overseas,
        "/api/v1/rerank",
        &[("Service-API-Key", KEY)],
        &json!({}),
    );
    assert_eq!(shed.status, 503, "{}", shed.text());
}

#[test]
fn prometheus_scrapes_every_dashboard_query_and_evaluates_the_rules() {
    let Some(binary) = prometheus_binary() else {
        let required = std::env::var(REQUIRE).is_ok_and(|v| v == "1");
        assert!(
            !required,
            "{REQUIRE}=1 but no `prometheus` binary on PATH (Debian: apt-get install prometheus)"
        );
        // Straight to the process's stderr, past the test harness's capture: seen in every run.
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!(
                "\n*** SKIPPED dashboards::prometheus_scrapes_every_dashboard_query_and_evaluates_the_rules: \
                 no `prometheus` binary on PATH (Debian: apt-get install prometheus; scripts/test \
                 installs it and sets {REQUIRE}=1) ***\n\n"
            )
            .as_bytes(),
        );
        return;
    };
    // The retiring model shuts down eight days after now by the wall clock (Prometheus judges
    // the shutdown alerts by it): within the warning's 14 days, outside the critical 3. The
    // gateways judge lifecycles by the test clock, never later than the wall clock.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let shutdown = Date::of_unix(now.max(TEST_NOW) + 8 * 86_400);
    let fake = FakeProvider::start();
    let url = fake.base_url();
    let (m1, m2) = (free_port(), free_port());
    let gw = TestGateway::start_with(|p| config(&url, p, m1, shutdown, None));
    // A second gateway whose limits' Redis is down: its limited key's checks fail in the store
    // (and are let through: limits fail open by default).
    let dead = format!("redis://127.0.0.1:{}", free_port());
    let broken = TestGateway::start_with(|p| config(&url, p, m2, shutdown, Some(&dead)));
    let metrics: Vec<SocketAddr> = [m1, m2]
        .iter()
        .map(|m| format!("127.0.0.1:{m}").parse().unwrap())
        .collect();
    for addr in &metrics {
        wait_listening(*addr);
    }
    let prometheus = Prometheus::start(&binary, &metrics);

    traffic(&gw, &fake);
    assert_eq!(rerank(broken.addr, LIMITED).status, 200);

    // Every query returns a series once Prometheus has scraped the traffic twice (a rate needs
    // two samples): asked again until then, at most SETTLE.
    let queries = dashboard_queries();
    let deadline = Instant::now() + SETTLE;
    let empty = loop {
        let empty: Vec<&(String, String)> = queries
            .iter()
            .filter(|(_, expr)| prometheus.query(&as_grafana_sends(expr)).is_empty())
            .collect();
        if empty.is_empty() || Instant::now() > deadline {
            break empty;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(
        empty.is_empty(),
        "{} of {} dashboard queries return no series: {empty:#?}",
        empty.len(),
        queries.len()
    );

    // The rules: every one loaded, evaluated, and without error.
    let rules_in_file = std::fs::read_to_string(repo_file("deploy/prometheus/alerts.yml"))
        .unwrap()
        .matches("- alert: ")
        .count();
    let data = prometheus.api("rules");
    let rules: Vec<&Value> = data["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect();
    assert_eq!(rules.len(), rules_in_file, "{data}");
    for rule in &rules {
        assert_eq!(rule["health"], "ok", "{rule}");
    }

    // The alerts gauges raise: the target ejected (pending: it must stay so 10 minutes), the
    // retiring model and the retired target (firing at once), on both gateways' series.
    let deadline = Instant::now() + SETTLE;
    let (ejected, retiring, retired) = loop {
        let alerts = prometheus.api("alerts")["alerts"].clone();
        let alerts = alerts.as_array().unwrap();
        let find = |name: &str, state: &str, label: (&str, &str)| {
            alerts.iter().any(|a| {
                a["labels"]["alertname"] == name
                    && a["state"] == state
                    && a["labels"][label.0] == label.1
            })
        };
        let ejected = find(
            "SwitchyardTargetEjected",
            "pending",
            ("native_model", "rerank-v3.5"),
        );
        let retiring = find(
            "SwitchyardModelShutdownSoon",
            "firing",
            ("model", "rerank-retiring"),
        );
        let retired = find(
            "SwitchyardTargetRetired",
            "firing",
            ("native_model", "rerank-gone"),
        );
        if (ejected && retiring && retired) || Instant::now() > deadline {
            break (ejected, retiring, retired);
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(
        ejected,
        "no pending SwitchyardTargetEjected: {}",
        prometheus.api("alerts")
    );
    assert!(
        retiring,
        "no firing SwitchyardModelShutdownSoon: {}",
        prometheus.api("alerts")
    );
    assert!(
        retired,
        "no firing SwitchyardTargetRetired: {}",
        prometheus.api("alerts")
    );
    // Not the imminent one: the shutdown is eight days away. (The test config's models served
    // past their built-in dates, `still_available`, raise both.)
    let alerts = prometheus.api("alerts");
    let imminent = alerts["alerts"].as_array().unwrap().iter().any(|a| {
        a["labels"]["alertname"] == "SwitchyardModelShutdownImminent"
            && a["labels"]["model"] == "rerank-retiring"
    });
    assert!(!imminent, "{alerts}");
}
