//! Live reload and upgrade, on the real binary: `SIGHUP` re-reads the `-c` file (API keys,
//! models and targets change; an invalid file keeps the running configuration and logs every
//! problem; a speech stream in flight finishes from the provider it started on), and Pingora's
//! `-u` upgrade hands the listeners to a new process while the old one finishes its stream. The
//! binary runs as a child process: a signal sent to this test process would reach every test.
//! In-process tests call the library's reload directly.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::fake::{FakeProvider, Reply};
use crate::support::{self, client, free_port, wait_listening};

const OLD_KEY: &str = "old-key-0001";
const NEW_KEY: &str = "new-key-0002";
/// A speech answer's audio: binary, so the gateway's check that it is audio passes.
const AUDIO: [u8; 4] = [0xFF, 0xFB, 0x90, 0x00];

/// What a test's configuration varies.
struct Conf<'a> {
    port: u16,
    metrics: u16,
    dir: &'a Path,
    key: &'a str,
    /// `(public model, fake provider URL)`.
    models: &'a [(&'a str, &'a str)],
    /// Appended under `switchyard:` (a mistake, a changed listener cap).
    extra: &'a str,
    max_connections: usize,
}

impl<'a> Conf<'a> {
    /// Fresh ports, the old key, nothing extra, a cap of 100 connections.
    fn new(dir: &'a Path, models: &'a [(&'a str, &'a str)]) -> Conf<'a> {
        Conf {
            port: free_port(),
            metrics: free_port(),
            dir,
            key: OLD_KEY,
            models,
            extra: "",
            max_connections: 100,
        }
    }
}

fn yaml(c: &Conf) -> String {
    let mut providers = String::new();
    let mut models = String::new();
    for (i, (model, url)) in c.models.iter().enumerate() {
        providers.push_str(&format!(
            "    p{i}: {{kind: openai, api_key: \"{}\", base_url: \"{url}/v1\", timeouts: {{read_ms: 5000}}}}\n",
            support::PROVIDER_KEY
        ));
        models.push_str(&format!(
            "    {model}: {{family: openai-tts, targets: [{{provider: p{i}, model: tts-1}}]}}\n"
        ));
    }
    format!(
        r#"version: 1
threads: 2
pid_file: {dir}/switchyard.pid
upgrade_sock: {dir}/upgrade.sock
grace_period_seconds: 20
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners:
    - {{name: main, address: "127.0.0.1:{port}", max_connections: {max}}}
  metrics: {{address: "127.0.0.1:{metrics}"}}
  auth:
    api_keys:
      - {{name: user, key: "{key}"}}
  providers:
{providers}  models:
{models}{extra}"#,
        dir = c.dir.display(),
        port = c.port,
        metrics = c.metrics,
        max = c.max_connections,
        key = c.key,
        extra = c.extra,
    )
}

/// The gateway binary running with a config file in its own directory; killed when dropped.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn start(file: &Path, log: &str, upgrade: bool) -> Proc {
        let log = file.with_file_name(log);
        let mut args = vec!["-c", file.to_str().unwrap()];
        if upgrade {
            args.push("-u");
        }
        let child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Proc { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait until the log holds `needle` `times` times.
    fn wait_log(&self, needle: &str, times: usize) {
        wait_for(&format!("`{needle}` x{times} in the log"), || {
            self.log().matches(needle).count() >= times
        });
    }

    fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "could not send SIG{name}");
    }

    /// Send SIGHUP and wait until the reload it starts has ended (the `n`th reload).
    fn reload(&self, n: usize) {
        self.signal("HUP");
        wait_for("the reload to end", || {
            let log = self.log();
            log.matches("configuration reloaded").count()
                + log
                    .matches("the running configuration stays in force")
                    .count()
                >= n
        });
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::park_timeout(Duration::from_millis(20));
    }
}

/// A fresh directory for one test's files; removed when the test passes (kept, with the
/// processes' logs, when it fails).
struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn temp_dir(name: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!(
        "switchyard-reload-{name}-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

/// Start the binary on `conf` (written to `gateway.yaml`) and wait until it serves and listens
/// for SIGHUP.
fn start(conf: &Conf) -> (Proc, PathBuf, SocketAddr) {
    let _starting = support::gateway_starting();
    let file = conf.dir.join("gateway.yaml");
    std::fs::write(&file, yaml(conf)).unwrap();
    let proc = Proc::start(&file, "a.log", false);
    let addr: SocketAddr = format!("127.0.0.1:{}", conf.port).parse().unwrap();
    wait_listening(addr);
    proc.wait_log("listening for SIGHUP", 1);
    (proc, file, addr)
}

fn models_status(addr: SocketAddr, key: &str) -> u16 {
    client::request(
        addr,
        "GET",
        "/api/v1/models",
        &[("Service-API-Key", key)],
        b"",
    )
    .status
}

fn speech(addr: SocketAddr, key: &str, model: &str) -> client::Response {
    client::post_json(
        addr,
        "/api/v1/audio/speech",
        &[("Service-API-Key", key)],
        &json!({"model": model, "input": "hello", "voice": "alloy"}),
    )
}

fn metrics(port: u16) -> String {
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    client::request(addr, "GET", "/metrics", &[], b"").text()
}

#[test]
fn sighup_swaps_api_keys_and_models_and_warns_of_restart_only_fields() {
    let a = FakeProvider::start();
    let b = FakeProvider::start();
    a.set_default(Reply::bytes(200, "audio/mpeg", AUDIO.to_vec()));
    b.set_default(Reply::bytes(200, "audio/mpeg", AUDIO.to_vec()));
    let dir = temp_dir("keys");
    let (au, bu) = (a.base_url(), b.base_url());
    let voice = [("voice", au.as_str())];
    let mut conf = Conf::new(&dir, &voice);
    let (proc, file, addr) = start(&conf);
    assert_eq!(models_status(addr, OLD_KEY), 200);
    assert_eq!(models_status(addr, NEW_KEY), 401);
    assert_eq!(speech(addr, OLD_KEY, "voice").status, 200);
    assert_eq!(a.requests().len(), 1);

    // The key is replaced, `voice` moves to provider b, `voice2` is added; a listener cap changes.
    let models = [("voice", bu.as_str()), ("voice2", au.as_str())];
    conf.key = NEW_KEY;
    conf.models = &models;
    conf.max_connections = 50;
    std::fs::write(&file, yaml(&conf)).unwrap();
    proc.reload(1);

    assert_eq!(models_status(addr, NEW_KEY), 200);
    assert_eq!(models_status(addr, OLD_KEY), 401);
    let listed = client::request(
        addr,
        "GET",
        "/api/v1/models",
        &[("Service-API-Key", NEW_KEY)],
        b"",
    )
    .json();
    let ids: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert!(ids.contains(&"voice2"), "{listed}");
    assert_eq!(speech(addr, NEW_KEY, "voice").status, 200);
    assert_eq!(b.requests().len(), 1, "voice now goes to provider b");
    assert_eq!(a.requests().len(), 1);
    assert_eq!(speech(addr, NEW_KEY, "voice2").status, 200);
    assert_eq!(a.requests().len(), 2);

    let log = proc.log();
    assert!(
        log.contains("switchyard.listeners[0].max_connections changed"),
        "{log}"
    );
    // Only what changed is named: the Pingora settings and the other fields are the same.
    assert_eq!(
        log.matches("takes effect only after a restart").count(),
        1,
        "{log}"
    );
    assert!(!log.contains(NEW_KEY) && !log.contains(OLD_KEY), "{log}");
    let m = metrics(conf.metrics);
    assert!(
        m.contains("switchyard_config_reloads_total{result=\"success\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("switchyard_config_last_reload_success_timestamp_seconds "),
        "{m}"
    );
}

#[test]
fn an_invalid_file_keeps_the_running_config_and_logs_every_problem() {
    let a = FakeProvider::start();
    a.set_default(Reply::bytes(200, "audio/mpeg", AUDIO.to_vec()));
    let dir = temp_dir("invalid");
    let au = a.base_url();
    let voice = [("voice", au.as_str())];
    let mut conf = Conf::new(&dir, &voice);
    let (proc, file, addr) = start(&conf);

    // Two mistakes: an unknown key, and a model of a family that does not exist; a new key too.
    conf.key = NEW_KEY;
    conf.extra = "    broken: {family: no-such-family, targets: [{provider: p0, model: x}]}\n  unknown_setting: 1\n";
    std::fs::write(&file, yaml(&conf)).unwrap();
    proc.reload(1);

    let log = proc.log();
    for needle in [
        "switchyard.unknown_setting",
        "switchyard.models.broken.family",
        "problem(s); the running configuration stays in force",
    ] {
        assert!(log.contains(needle), "`{needle}` not logged:\n{log}");
    }
    assert_eq!(models_status(addr, OLD_KEY), 200, "the old key still works");
    assert_eq!(models_status(addr, NEW_KEY), 401);
    assert_eq!(speech(addr, OLD_KEY, "voice").status, 200);
    let m = metrics(conf.metrics);
    assert!(
        m.contains("switchyard_config_reloads_total{result=\"failure\"} 1"),
        "{m}"
    );

    // Fixed, it reloads.
    conf.extra = "";
    std::fs::write(&file, yaml(&conf)).unwrap();
    proc.reload(2);
    assert_eq!(models_status(addr, NEW_KEY), 200);
}

/// A slow speech answer: `n` chunks of 1000 bytes, `gap` apart.
fn slow_audio(n: u8, gap: Duration) -> (Reply, Vec<u8>) {
    let chunks: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let mut c = vec![0xFF, 0xFB];
            c.extend(vec![i; 998]);
            c
        })
        .collect();
    let whole = chunks.concat();
    let reply = Reply::chunked(
        200,
        "audio/mpeg",
        chunks
            .into_iter()
            .enumerate()
            .map(|(i, c)| (if i == 0 { Duration::ZERO } else { gap }, c))
            .collect(),
        false,
    );
    (reply, whole)
}

/// Start a speech request on its own thread; its raw answer (head and body) comes back.
fn speech_in_background(addr: SocketAddr, key: &str) -> std::thread::JoinHandle<Vec<u8>> {
    let body = json!({"model": "voice", "input": "hello", "voice": "alloy"}).to_string();
    let request = format!(
        "POST /api/v1/audio/speech HTTP/1.1\r\nHost: {addr}\r\nService-API-Key: {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        out
    })
}

/// The body of a chunked HTTP/1.1 answer, after checking its status is 200 and it ended properly.
fn chunked_body(raw: &[u8]) -> Vec<u8> {
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an answer head");
    let head = String::from_utf8_lossy(&raw[..head_end]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut rest = &raw[head_end + 4..];
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk size line (the answer was cut)");
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap(), 16)
            .expect("a chunk size");
        rest = &rest[line_end + 2..];
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

#[test]
fn a_stream_in_flight_finishes_from_its_provider_across_a_reload() {
    let a = FakeProvider::start();
    let b = FakeProvider::start();
    // 3 s: long enough to be still streaming after the reload and a request on the new config.
    let (slow, whole) = slow_audio(11, Duration::from_millis(300));
    a.push(slow);
    b.set_default(Reply::bytes(200, "audio/mpeg", AUDIO.to_vec()));
    let dir = temp_dir("stream");
    let (au, bu) = (a.base_url(), b.base_url());
    let voice = [("voice", au.as_str())];
    let mut conf = Conf::new(&dir, &voice);
    let (proc, file, addr) = start(&conf);
    let streaming = speech_in_background(addr, OLD_KEY);
    a.wait_requests(1, Duration::from_secs(10));

    let models = [("voice", bu.as_str())];
    conf.models = &models;
    conf.key = NEW_KEY;
    std::fs::write(&file, yaml(&conf)).unwrap();
    proc.reload(1);
    // New requests go to provider b (and need the new key) while the old stream goes on.
    assert_eq!(speech(addr, NEW_KEY, "voice").status, 200);
    assert_eq!(b.requests().len(), 1);
    assert!(
        !streaming.is_finished(),
        "the stream was in flight across the reload"
    );

    let raw = streaming.join().unwrap();
    assert_eq!(chunked_body(&raw), whole, "the stream finished intact");
    assert_eq!(a.requests().len(), 1);
}

#[test]
fn an_upgrade_hands_over_the_listener_while_the_old_process_finishes_its_stream() {
    let a = FakeProvider::start();
    let b = FakeProvider::start();
    // Longer than Pingora's 5 s between handing the sockets over and shutting down.
    let (slow, whole) = slow_audio(14, Duration::from_millis(500));
    a.push(slow);
    a.set_default(Reply::bytes(200, "audio/mpeg", AUDIO.to_vec()));
    b.set_default(Reply::bytes(200, "audio/mpeg", AUDIO.to_vec()));
    let dir = temp_dir("upgrade");
    let (au, bu) = (a.base_url(), b.base_url());
    let voice = [("voice", au.as_str())];
    let conf = Conf::new(&dir, &voice);
    let (old, _, addr) = start(&conf);
    let streaming = speech_in_background(addr, OLD_KEY);
    a.wait_requests(1, Duration::from_secs(10));

    // The new process: same listeners and upgrade socket, its model on provider b.
    let file_b = dir.join("gateway-b.yaml");
    let models = [("voice", bu.as_str())];
    std::fs::write(
        &file_b,
        yaml(&Conf {
            models: &models,
            ..conf
        }),
    )
    .unwrap();
    let new = Proc::start(&file_b, "b.log", true);
    old.signal("QUIT");

    // Every request in the hand-over is answered, by one process or the other, until the new
    // one answers alone (the old one stops accepting 5 s after handing the sockets over).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut by_new_in_a_row = 0;
    while by_new_in_a_row < 5 {
        assert!(Instant::now() < deadline, "the new process never took over");
        let before = b.requests().len();
        let resp = speech(addr, OLD_KEY, "voice");
        assert_eq!(resp.status, 200, "a request in the hand-over failed");
        if b.requests().len() > before {
            by_new_in_a_row += 1;
        } else {
            by_new_in_a_row = 0;
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
    new.wait_log("listening for SIGHUP", 1);

    let raw = streaming.join().unwrap();
    assert_eq!(
        chunked_body(&raw),
        whole,
        "the old process finished its stream"
    );
    let log = old.log();
    assert!(log.contains("listener sockets sent"), "{log}");
}

/// The library's reload, in process: a snapshot taken before keeps the old settings, one taken
/// after sees the new; fields that need a restart are named.
#[test]
fn the_library_reload_swaps_settings_and_keeps_snapshots() {
    let fake = FakeProvider::start();
    let ports = (free_port(), free_port());
    let load = |yaml: &str| switchyard::config::load_str(yaml, &|_| None).unwrap();
    let first = load(&support::config(&fake.base_url(), ports));
    let state = switchyard::GatewayState::new(first.gateway);
    let before = state.settings();
    let changed = support::config(&fake.base_url(), ports)
        .replace("name: tester", "name: renamed")
        .replace("max_backoff_ms: 5", "max_backoff_ms: 7")
        .replace("  limits:\n", "  dns_ttl_seconds: 7\n  limits:\n");
    let needs_restart = state.reload(load(&changed).gateway);
    assert_eq!(
        needs_restart,
        vec!["switchyard.dns_ttl_seconds".to_string()]
    );
    // The back-off is the upstream's, and reloads with the rest.
    assert_eq!(state.max_backoff(), Duration::from_millis(7));
    let mut headers = http::HeaderMap::new();
    headers.insert("service-api-key", support::KEY.parse().unwrap());
    let old = before.auth().authenticate(&headers).unwrap();
    let new = state.settings().auth().authenticate(&headers).unwrap();
    assert_eq!(old.id, "key:tester");
    assert_eq!(new.id, "key:renamed");

    // A reload from a file that does not parse changes nothing and says why.
    let dir = temp_dir("library");
    let file = dir.join("bad.yaml");
    std::fs::write(&file, "switchyard: [").unwrap();
    let reloader = switchyard::internals::reload::Reloader {
        state: state.clone(),
        source: switchyard::internals::reload::ConfigSource::File(file.display().to_string()),
        server: Default::default(),
    };
    let problems = reloader.reload().unwrap_err();
    assert!(problems[0].contains("not valid YAML"), "{problems:?}");
    let still = state.settings().auth().authenticate(&headers).unwrap();
    assert_eq!(still.id, "key:renamed");
}
