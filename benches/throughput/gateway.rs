//! Starting the system under test: the real `switchyard` binary (built by `cargo bench` along
//! with this bench) with a generated config pointing every provider at the fake, and the baseline
//! proxy (this bench executable in its `baseline` role).
//!
//! Both get one Pingora worker thread and the same core; the gateway logs at `error` only
//! (`RUST_LOG=error`, unless `SWITCHYARD_BENCH_GATEWAY_LOG` says otherwise), so no access log is
//! written per request. `SWITCHYARD_BENCH_METRICS=1` gives it a metrics listener;
//! `SWITCHYARD_BENCH_LIMITS=1` gives the bench's key limits on every meter (never reached, so every
//! request is checked and charged), counted in process memory or, with
//! `SWITCHYARD_BENCH_REDIS=redis://...`, in that Redis, in the mode
//! `SWITCHYARD_BENCH_LIMITS_MODE` names (`exact`, the default, or `approximate`: no Redis call on
//! the request's path). `SWITCHYARD_BENCH_UNPRICED=1` declares
//! every model unpriced, so no request computes, counts or announces a cost.
//! `SWITCHYARD_BENCH_TRACING=1` (or `0.01`) exports spans of that share of requests over OTLP;
//! `SWITCHYARD_BENCH_TRACING_ENDPOINT=closed` or `stalled` sends them to a collector that is down
//! (a port nothing listens on) or hung (a listener here that accepts and never answers).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::procs::{self, Proc};
use crate::workload::{KEY, PROVIDER_KEY};

/// The fake provider's listeners beside its plain HTTP one: TLS (and the CA its certificate
/// chains to) and the Realtime API's WebSocket.
#[derive(Debug, Clone)]
pub struct FakeListeners {
    /// The TLS listener.
    pub addr: SocketAddr,
    /// The CA's certificate, PEM.
    pub ca_file: String,
    /// The Realtime API's WebSocket listener (plain TCP, `crate::realtime`).
    pub realtime: SocketAddr,
}

/// The gateway's config: one listener, one key, providers at the fake (path prefixes pick the
/// fake's special answers: `/d100` 100 rerank results, `/big` 100 MiB audio, `/sse` timed SSE,
/// `/b64` a GPT image answer with its image inline);
/// `*-tls` providers reach the fake's TLS listener (`https://127.0.0.1:…/tls`, trusting the
/// bench's CA); `openai-realtime` reaches the fake's Realtime API (`gpt-realtime-2.1-mini`); with
/// `metrics`, a metrics listener on that port (what metrics cost is then in the figures). The
/// Seedream 4.0 models are kept with `lifecycle: {still_available: true}`: Ark shut the model down
/// on 2026-11-24 and the gateway refuses such a target at load, but the fake still serves it, and
/// the `image` workloads stay comparable with earlier runs.
pub fn config(
    port: u16,
    fake: SocketAddr,
    tls: &FakeListeners,
    tag: &str,
    extra: &Extra,
) -> String {
    let f = format!("http://{fake}");
    // The same paths as the baseline proxy's HTTPS requests (`/tls/…`, which the fake ignores).
    let t = format!("https://{}/tls", tls.addr);
    // The Realtime API's WebSocket (`ws://` for an `http://` base URL).
    let rt = format!("http://{}/v1", tls.realtime);
    // How the HTTPS providers trust the fake: their own CA file (the default), or nothing here
    // and the CA among the process's system roots (`SWITCHYARD_BENCH_TLS_ROOTS=system`).
    let trust = if extra.system_roots {
        String::new()
    } else {
        format!(", tls: {{ca_file: \"{}\"}}", tls.ca_file)
    };
    let metrics = extra
        .metrics
        .map(|m| format!("  metrics: {{address: \"127.0.0.1:{m}\"}}\n"))
        .unwrap_or_default();
    let store = extra
        .redis
        .as_ref()
        .map(|url| format!("  store: {{redis_url: \"{url}\", key_prefix: \"bench-{tag}:\"}}\n"))
        .unwrap_or_default();
    // Spans sampled at `ratio` and exported to `endpoint` (by default the fake, whose 404 makes
    // every export a counted failure after all of the exporter's work: queue, encode, post).
    let tracing = extra
        .tracing
        .as_ref()
        .map(|(ratio, endpoint)| {
            let endpoint = endpoint.clone().unwrap_or_else(|| format!("{f}/v1/traces"));
            format!("  tracing: {{endpoint: \"{endpoint}\", sample_ratio: {ratio}}}\n")
        })
        .unwrap_or_default();
    // Far above anything a run reaches: every request pays for its checks, none is refused.
    let limits = if extra.limits {
        ", limits: {requests_per_minute: 1000000000, concurrent: 1000000, \
         tokens_per_minute: 1000000000000, tokens_per_day: 1000000000000, \
         characters_per_minute: 1000000000000, characters_per_day: 1000000000000, \
         images_per_minute: 1000000000, images_per_day: 1000000000}"
    } else {
        ""
    };
    let mode = extra
        .limits_mode
        .as_deref()
        .map(|m| format!("limits_mode: {m}, "))
        .unwrap_or_default();
    let yaml = format!(
        r#"version: 1
threads: 1
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
pid_file: /tmp/switchyard-bench-{tag}.pid
upgrade_sock: /tmp/switchyard-bench-{tag}.sock
switchyard:
{metrics}{store}{tracing}  listeners: [{{name: bench, address: "127.0.0.1:{port}"}}]
  auth: {{{mode}api_keys: [{{name: bench, key: "{KEY}"{limits}}}]}}
  providers:
    cohere: {{kind: cohere, api_key: "{PROVIDER_KEY}", base_url: "{f}"}}
    cohere-d100: {{kind: cohere, api_key: "{PROVIDER_KEY}", base_url: "{f}/d100"}}
    openai: {{kind: openai, api_key: "{PROVIDER_KEY}", base_url: "{f}/v1"}}
    openai-big: {{kind: openai, api_key: "{PROVIDER_KEY}", base_url: "{f}/big/v1"}}
    openai-length: {{kind: openai, api_key: "{PROVIDER_KEY}", base_url: "{f}/length/v1"}}
    openai-sse: {{kind: openai, api_key: "{PROVIDER_KEY}", base_url: "{f}/sse/v1"}}
    elevenlabs: {{kind: elevenlabs, api_key: "{PROVIDER_KEY}", base_url: "{f}"}}
    openai-b64: {{kind: openai, api_key: "{PROVIDER_KEY}", base_url: "{f}/b64/v1"}}
    ark: {{kind: ark, api_key: "{PROVIDER_KEY}", base_url: "{f}/v1"}}
    cohere-tls: {{kind: cohere, api_key: "{PROVIDER_KEY}", base_url: "{t}"{trust}}}
    openai-tls: {{kind: openai, api_key: "{PROVIDER_KEY}", base_url: "{t}/v1"{trust}}}
    ark-tls: {{kind: ark, api_key: "{PROVIDER_KEY}", base_url: "{t}/v1"{trust}}}
    openai-realtime: {{kind: openai, api_key: "{PROVIDER_KEY}", base_url: "{rt}"}}
  models:
    rerank-v3.5: {{family: cohere-rerank, targets: [{{provider: cohere, model: rerank-v3.5}}]}}
    rerank-v3.5-d100: {{family: cohere-rerank, targets: [{{provider: cohere-d100, model: rerank-v3.5}}]}}
    tts-1: {{family: openai-tts, targets: [{{provider: openai, model: tts-1}}]}}
    tts-1-big: {{family: openai-tts, targets: [{{provider: openai-big, model: tts-1}}]}}
    tts-1-length: {{family: openai-tts, targets: [{{provider: openai-length, model: tts-1}}]}}
    seedream-4.0: {{family: seedream, lifecycle: {{still_available: true}}, targets: [{{provider: ark, model: doubao-seedream-4-0-250828}}]}}
    gpt-image-b64: {{family: gpt-image-2, targets: [{{provider: openai-b64, model: gpt-image-2}}]}}
    gpt-4o-mini-tts: {{family: openai-tts-instruct, targets: [{{provider: openai-sse, model: gpt-4o-mini-tts}}]}}
    eleven: {{family: elevenlabs-tts, default_voice: JBFqnCBsd6RMkjVDRZzb, targets: [{{provider: elevenlabs, model: eleven_multilingual_v2}}]}}
    tts-1-cached: {{family: openai-tts, targets: [{{provider: openai, model: tts-1}}], cache: {{ttl_seconds: 86400}}}}
    tts-1-sse-cached: {{family: openai-tts-instruct, targets: [{{provider: openai-sse, model: gpt-4o-mini-tts}}], cache: {{ttl_seconds: 86400}}}}
    rerank-v3.5-cached: {{family: cohere-rerank, targets: [{{provider: cohere, model: rerank-v3.5}}], cache: {{ttl_seconds: 86400}}}}
    rerank-v3.5-https: {{family: cohere-rerank, targets: [{{provider: cohere-tls, model: rerank-v3.5}}]}}
    tts-1-https: {{family: openai-tts, targets: [{{provider: openai-tls, model: tts-1}}]}}
    seedream-4.0-https: {{family: seedream, lifecycle: {{still_available: true}}, targets: [{{provider: ark-tls, model: doubao-seedream-4-0-250828}}]}}
    gpt-realtime-2.1-mini: {{family: openai-realtime, default_voice: alloy, targets: [{{provider: openai-realtime, model: gpt-realtime-2.1-mini}}]}}
"#
    );
    // Every model declared unpriced: no cost is computed, counted or announced, so a run with and
    // one without this show what the cost path costs a request.
    if extra.unpriced {
        yaml.replace("{family: ", "{price: unpriced, family: ")
    } else {
        yaml
    }
}

/// What the bench's gateway runs with beside its traffic (`SWITCHYARD_BENCH_METRICS`, `_LIMITS`,
/// `_REDIS`), to measure what each costs.
#[derive(Default)]
pub struct Extra {
    /// A metrics listener on this port.
    pub metrics: Option<u16>,
    /// Limits on the bench's key.
    pub limits: bool,
    /// Shared state (the limits' counters) in this Redis.
    pub redis: Option<String>,
    /// `auth.limits_mode` (`exact` or `approximate`; unset: the gateway's default, exact).
    pub limits_mode: Option<String>,
    /// Every model declared `price: unpriced` (`SWITCHYARD_BENCH_UNPRICED=1`): the run without
    /// the cost path, to compare with.
    pub unpriced: bool,
    /// The HTTPS providers trust the bench's CA as a system root (`SSL_CERT_FILE`) rather than
    /// through `tls.ca_file` (`SWITCHYARD_BENCH_TLS_ROOTS=system`).
    pub system_roots: bool,
    /// Traces sampled at this ratio, exported to this endpoint (`None`: the fake's).
    pub tracing: Option<(f64, Option<String>)>,
}

/// `SWITCHYARD_BENCH_TLS_ROOTS=system`: the bench's CA is given to the gateway and the baseline as
/// a system root (`SSL_CERT_FILE`, which Pingora's connector reads at start) instead of as the
/// HTTPS peers' own CA. Pingora 0.9.1's rustls connector builds a new client config (and so an
/// empty session cache) for every connection to a peer with its own CA, so only with system roots,
/// as real providers are reached, can a new connection resume an earlier TLS session.
pub fn system_roots() -> bool {
    std::env::var("SWITCHYARD_BENCH_TLS_ROOTS").as_deref() == Ok("system")
}

/// The `switchyard` binary: `SWITCHYARD_BIN` if set, else the one cargo built for this bench.
pub fn binary() -> PathBuf {
    match std::env::var_os("SWITCHYARD_BIN") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_BIN_EXE_switchyard")),
    }
}

/// Where spans go for `SWITCHYARD_BENCH_TRACING_ENDPOINT`: `closed`, a port nothing listens on
/// (every export refused at once); `stalled`, a listener in this process that accepts every
/// connection and never answers (every export waits out the exporter's timeout, and the queue
/// fills); anything else is an endpoint as given.
fn tracing_endpoint(given: Option<String>) -> Result<Option<String>, String> {
    static STALLED: std::sync::OnceLock<SocketAddr> = std::sync::OnceLock::new();
    match given.as_deref() {
        Some("closed") => {
            // Bound and released: nothing listens there for the rest of the run.
            let port = procs::free_port().map_err(|e| e.to_string())?;
            Ok(Some(format!("http://127.0.0.1:{port}/v1/traces")))
        }
        Some("stalled") => {
            let addr = match STALLED.get() {
                Some(a) => *a,
                None => {
                    let l =
                        std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
                    let a = l.local_addr().map_err(|e| e.to_string())?;
                    std::thread::spawn(move || {
                        // Held open, never read nor answered.
                        let mut held = Vec::new();
                        for conn in l.incoming().flatten() {
                            held.push(conn);
                        }
                    });
                    *STALLED.get_or_init(|| a)
                }
            };
            Ok(Some(format!("http://{addr}/v1/traces")))
        }
        _ => Ok(given),
    }
}

/// The gateway's trace span counts (`switchyard_trace_spans_total`: exported, failed, dropped)
/// read from its metrics listener at `metrics` (zeros when it cannot be read).
pub fn trace_spans(metrics: SocketAddr) -> [u64; 3] {
    use std::io::{Read, Write};
    let mut out = [0; 3];
    let Ok(mut conn) =
        std::net::TcpStream::connect_timeout(&metrics, std::time::Duration::from_secs(2))
    else {
        return out;
    };
    let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(2)));
    let _ = conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n");
    let mut text = String::new();
    let _ = conn.read_to_string(&mut text);
    for (i, outcome) in ["exported", "failed", "dropped"].iter().enumerate() {
        let series = format!("switchyard_trace_spans_total{{outcome=\"{outcome}\"}} ");
        out[i] = text
            .lines()
            .find_map(|l| l.strip_prefix(&series))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map_or(0, |v| v as u64);
    }
    out
}

/// Start the gateway on a free port; its stderr goes to `<dir>/gateway.log`. Also its metrics
/// listener's address, when it has one.
pub fn start(
    fake: SocketAddr,
    tls: &FakeListeners,
    core: Option<usize>,
    dir: &Path,
) -> Result<(Proc, SocketAddr, Option<SocketAddr>), String> {
    let port = procs::free_port().map_err(|e| e.to_string())?;
    let tag = format!("{}-{port}", std::process::id());
    let file = dir.join("gateway.yaml");
    // `SWITCHYARD_BENCH_METRICS=1`: the gateway counts its traffic in Prometheus metrics.
    let metrics = match std::env::var("SWITCHYARD_BENCH_METRICS").as_deref() {
        Ok("1") => Some(procs::free_port().map_err(|e| e.to_string())?),
        _ => None,
    };
    let extra = Extra {
        metrics,
        limits: std::env::var("SWITCHYARD_BENCH_LIMITS").as_deref() == Ok("1"),
        redis: std::env::var("SWITCHYARD_BENCH_REDIS").ok(),
        limits_mode: std::env::var("SWITCHYARD_BENCH_LIMITS_MODE").ok(),
        unpriced: std::env::var("SWITCHYARD_BENCH_UNPRICED").as_deref() == Ok("1"),
        system_roots: system_roots(),
        // `SWITCHYARD_BENCH_TRACING=1` (every trace) or `0.01` (a typical 1%).
        tracing: match std::env::var("SWITCHYARD_BENCH_TRACING")
            .ok()
            .and_then(|r| r.parse::<f64>().ok())
        {
            Some(r) => Some((
                r,
                tracing_endpoint(std::env::var("SWITCHYARD_BENCH_TRACING_ENDPOINT").ok())?,
            )),
            None => None,
        },
    };
    std::fs::write(&file, config(port, fake, tls, &tag, &extra)).map_err(|e| e.to_string())?;
    let log = std::fs::File::create(dir.join("gateway.log")).map_err(|e| e.to_string())?;
    let level = std::env::var("SWITCHYARD_BENCH_GATEWAY_LOG").unwrap_or_else(|_| "error".into());
    let conf = file.to_string_lossy().into_owned();
    let mut env = vec![("RUST_LOG", level)];
    if extra.system_roots {
        env.push(("SSL_CERT_FILE", tls.ca_file.clone()));
    }
    let mut p = procs::spawn(
        "gateway",
        &binary(),
        &["-c", &conf],
        &env,
        core,
        Stdio::null(),
        Stdio::from(log),
    )
    .map_err(|e| format!("starting {}: {e}", binary().display()))?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    procs::wait_listening(&mut p, addr)?;
    Ok((p, addr, metrics.map(|m| ([127, 0, 0, 1], m).into())))
}

/// Start the baseline proxy (this executable, role `baseline`) on a free port.
pub fn start_baseline(
    fake: SocketAddr,
    tls: &FakeListeners,
    core: Option<usize>,
) -> Result<(Proc, SocketAddr), String> {
    let port = procs::free_port().map_err(|e| e.to_string())?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    // `SWITCHYARD_BENCH_BASELINE_WRAPPER`: a program given this executable as its first argument
    // (a profiler wrapper, as `SWITCHYARD_BIN` is for the gateway), so both can be profiled alike.
    let wrapper = std::env::var_os("SWITCHYARD_BENCH_BASELINE_WRAPPER").map(PathBuf::from);
    let me_arg = me.to_string_lossy().into_owned();
    let (program, args): (&Path, Vec<&str>) = match &wrapper {
        Some(w) => (w, vec![me_arg.as_str()]),
        None => (&me, vec![]),
    };
    let mut env = vec![
        ("SWITCHYARD_BENCH_ROLE", "baseline".into()),
        ("SWITCHYARD_BENCH_LISTEN", addr.to_string()),
        ("SWITCHYARD_BENCH_UPSTREAM", fake.to_string()),
        ("SWITCHYARD_BENCH_TLS_UPSTREAM", tls.addr.to_string()),
    ];
    // The CA as the peer's own roots (as `tls.ca_file`), or among the system roots.
    env.push(if system_roots() {
        ("SSL_CERT_FILE", tls.ca_file.clone())
    } else {
        ("SWITCHYARD_BENCH_TLS_CA", tls.ca_file.clone())
    });
    let mut p = procs::spawn(
        "baseline",
        program,
        &args,
        &env,
        core,
        Stdio::null(),
        Stdio::null(),
    )
    .map_err(|e| format!("starting the baseline: {e}"))?;
    procs::wait_listening(&mut p, addr)?;
    Ok((p, addr))
}

/// Start the fake provider (this executable, role `fake`) on the current core; its CA file goes
/// to `dir`.
pub fn start_fake(dir: &Path) -> Result<(Proc, SocketAddr, FakeListeners), String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut p = procs::spawn(
        "fake",
        &me,
        &[],
        &[
            ("SWITCHYARD_BENCH_ROLE", "fake".into()),
            ("SWITCHYARD_BENCH_DIR", dir.to_string_lossy().into_owned()),
        ],
        None,
        Stdio::piped(),
        Stdio::inherit(),
    )
    .map_err(|e| format!("starting the fake: {e}"))?;
    // `PORT <plain> TLS <tls> RT <realtime> CA <path>`
    let line = procs::read_line(&mut p)?;
    let bad = || format!("fake: expected `PORT <n> TLS <n> RT <n> CA <path>`, got {line:?}");
    let mut words = line.trim().splitn(8, ' ');
    let mut field = |name: &str| match (words.next(), words.next()) {
        (Some(n), Some(v)) if n == name => Ok(v.to_string()),
        _ => Err(bad()),
    };
    let port: u16 = field("PORT")?.parse().map_err(|_| bad())?;
    let tls_port: u16 = field("TLS")?.parse().map_err(|_| bad())?;
    let rt_port: u16 = field("RT")?.parse().map_err(|_| bad())?;
    let ca_file = field("CA")?;
    let tls = FakeListeners {
        addr: ([127, 0, 0, 1], tls_port).into(),
        ca_file,
        realtime: ([127, 0, 0, 1], rt_port).into(),
    };
    Ok((p, ([127, 0, 0, 1], port).into(), tls))
}
