//! `switchyard check-providers [-c FILE] [--json]`: a live check of the configured world. With
//! the operator's keys (the configuration loaded exactly as the gateway loads it, `${ENV}` and
//! all), every provider account a model uses is asked what it serves, at its base URL and at each
//! of its regional ones: its model list, and its voice list where it has one
//! (`api::discovery`, read by `engine::discovery`). The report names configured models and
//! voices the provider does not list, models it lists with a shutdown date (past: a problem;
//! to come: a warning, compared with the gateway's own lifecycle data), keys it refuses, and
//! endpoints that do not answer; an account whose kind has no list endpoint is only reached, and
//! reported as not checked.
//!
//! One line per finding (or, with `--json`, one JSON document); the exit status is
//! [`EXIT_OK`], [`EXIT_PROBLEMS`] or [`EXIT_USAGE`]. No key is ever printed: provider messages are
//! redacted by the provider's error map, and every line goes through the logger's filter
//! (`logging::redact`), which blanks every credential the configuration holds.

pub(crate) mod report;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::api::discovery::{Discovery, ListFns, Listed};
use crate::caps::lifecycle::Date;
use crate::caps::Caps;
use crate::common::error::{UpstreamError, UpstreamErrorKind};
use crate::common::native::NativeRequest;
use crate::config::GatewaySettings;
use crate::engine::discovery;
use crate::metrics::Metrics;
use crate::upstream::exchange::Upstream;
use crate::upstream::provider::Provider;
use report::{Finding, Report, Status};

/// Every account answered as configured (notes about what could not be checked allowed).
pub(crate) const EXIT_OK: i32 = 0;
/// At least one problem: a model or voice the provider does not list, a model it lists as shut
/// down, a refused key, an endpoint that does not answer, or an answer the check could not read.
/// (A model it lists with a shutdown date still to come is a warning, not a problem.)
pub(crate) const EXIT_PROBLEMS: i32 = 1;
/// Bad arguments, or a configuration that does not load (its problems are printed).
pub(crate) const EXIT_USAGE: i32 = 2;

/// Longest the check waits for one answer (connecting included), whatever the account's own
/// read timeout (made for long syntheses) says.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

const USAGE: &str = "usage: switchyard check-providers [-c FILE] [--json]\n\
\n\
Asks every provider account the configuration's models use what it serves, with the configured\n\
keys, and reports configured models and voices it does not list, models it lists with a\n\
shutdown date (past: a problem; to come: a warning), refused keys and endpoints that do not\n\
answer. Without -c, the built-in default configuration is checked.\n\
\n\
Exit status: 0 all well, 1 problems found, 2 bad arguments or an invalid configuration.\n";

/// The command: `args` are those after `check-providers`. Returns the exit status.
pub fn main(args: &[String]) -> i32 {
    let mut conf: Option<String> = None;
    let mut json = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "-c" | "--conf" => match rest.next() {
                Some(path) => conf = Some(path.clone()),
                None => return usage(&format!("{arg} needs a file")),
            },
            "--json" => json = true,
            "-h" | "--help" => {
                print!("{USAGE}");
                return EXIT_OK;
            }
            other => match other.strip_prefix("--conf=") {
                Some(path) => conf = Some(path.to_string()),
                None => return usage(&format!("unknown argument `{other}`")),
            },
        }
    }
    let (source, loaded) = match &conf {
        Some(path) => (path.clone(), crate::config::load_file(path)),
        None => (
            "built-in default configuration".to_string(),
            crate::config::load_str(crate::config::DEFAULT_CONFIG, &|name| {
                std::env::var(name).ok()
            }),
        ),
    };
    let settings = match loaded {
        Ok(s) => s,
        Err(problems) => {
            eprintln!("{source}: {} problem(s):", problems.len());
            for p in &problems {
                eprintln!("  {}", crate::logging::redact(p));
            }
            return EXIT_USAGE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("check-providers: cannot start the async runtime: {e}");
            return EXIT_USAGE;
        }
    };
    let report = runtime.block_on(run(&settings.gateway));
    let out = if json { report.json() } else { report.text() };
    // Every credential the configuration holds is blanked, whatever carried it here.
    print!("{}", crate::logging::redact(&out));
    report.exit_code()
}

fn usage(problem: &str) -> i32 {
    eprint!("check-providers: {problem}\n\n{USAGE}");
    EXIT_USAGE
}

/// What the configuration expects of one account: its native models (with the public models
/// that name them) and the voices its speech models name: their defaults, the voices their
/// `capabilities.voices` lists, and the voices their `voice_map`s send.
struct Expected {
    provider: Arc<Provider>,
    models: BTreeMap<String, Configured>,
    /// Voice → why it is configured (`default voice of m`, `voice_map.alloy of m`).
    voices: BTreeMap<String, Vec<String>>,
}

/// A native model as the configuration uses it.
#[derive(Default)]
struct Configured {
    /// The public models that name it.
    publics: Vec<String>,
    /// The shutdown date the gateway's lifecycle data gives it (built in, or the target's
    /// `lifecycle:`; the first target that has one).
    lifecycle: Option<Date>,
}

/// The accounts the catalog's models use, by name.
fn expectations(settings: &GatewaySettings) -> BTreeMap<String, Expected> {
    let mut out: BTreeMap<String, Expected> = BTreeMap::new();
    for model in settings.catalog.models() {
        for target in &model.targets {
            let e = out
                .entry(target.provider.name.clone())
                .or_insert_with(|| Expected {
                    provider: target.provider.clone(),
                    models: BTreeMap::new(),
                    voices: BTreeMap::new(),
                });
            let configured = e.models.entry(target.native_model.clone()).or_default();
            if !configured.publics.contains(&model.name) {
                configured.publics.push(model.name.clone());
            }
            if configured.lifecycle.is_none() {
                configured.lifecycle = target.lifecycle.as_ref().and_then(|l| l.shutdown);
            }
            if let Caps::Speech(caps) = model.caps {
                if let Some(default) = caps.default_voice {
                    let default = model
                        .voice_map
                        .get(default)
                        .map(String::as_str)
                        .unwrap_or(default);
                    e.voices
                        .entry(default.to_string())
                        .or_default()
                        .push(format!("default voice of {}", model.name));
                }
                for voice in caps.voices {
                    e.voices
                        .entry(voice.to_string())
                        .or_default()
                        .push(format!("capabilities.voices of {}", model.name));
                }
                for (name, voice) in &model.voice_map {
                    e.voices
                        .entry(voice.clone())
                        .or_default()
                        .push(format!("voice_map.{name} of {}", model.name));
                }
            }
        }
    }
    out
}

/// Check every account the configuration's models use; accounts are asked concurrently.
pub(crate) async fn run(settings: &GatewaySettings) -> Report {
    let upstream = Upstream::new(
        settings.retry,
        settings.dns_ttl,
        settings.ejection,
        Metrics::off(),
    );
    let expected = expectations(settings);
    // Today (UTC) by the configuration's clock, which judges lifecycles everywhere else too.
    let today = Date::of_unix(settings.catalog.clock().now());
    let checks = expected.values().map(|e| {
        let discovery = settings.adapters.discovery(&e.provider);
        check_account(&upstream, e, discovery, today)
    });
    let findings = futures_util::future::join_all(checks)
        .await
        .into_iter()
        .flatten()
        .collect();
    Report { findings }
}

async fn check_account(
    upstream: &Upstream,
    e: &Expected,
    discovery: Discovery,
    today: Date,
) -> Vec<Finding> {
    let p = &e.provider;
    let mut out = Vec::new();
    if p.endpoint("").is_none() {
        out.push(Finding::new(
            Status::NotChecked,
            p,
            None,
            "runs in-process; nothing to reach".into(),
        ));
        return out;
    }
    if !p.enabled() {
        out.push(Finding::new(
            Status::NotChecked,
            p,
            None,
            format!(
                "no api_key configured: its {} model(s) answer 503 until one is",
                e.models.len()
            ),
        ));
        return out;
    }
    for (region, url) in endpoints(p) {
        let region = region.unwrap_or_default();
        check_endpoint(upstream, e, &discovery, today, (region, url), &mut out).await;
    }
    out
}

/// The account's base URL, then each region's, each once (with the region that names it).
fn endpoints(p: &Provider) -> Vec<(Option<&str>, String)> {
    let mut endpoints: Vec<(Option<&str>, String)> = Vec::new();
    for region in std::iter::once(None).chain(p.regions().into_iter().map(Some)) {
        let Some(ep) = p.endpoint(region.unwrap_or_default()) else {
            continue;
        };
        let url = format!(
            "{}://{}{}",
            if ep.tls { "https" } else { "http" },
            ep.authority,
            ep.base_path
        );
        if !endpoints.iter().any(|(_, u)| *u == url) {
            endpoints.push((region, url));
        }
    }
    endpoints
}

/// One endpoint (`url`, of `region`) of the account: its model list against the configured
/// models, its voice list against the configured voices, or only whether it answers when the
/// kind has no list endpoint. An `ok` finding when nothing is wrong.
async fn check_endpoint(
    upstream: &Upstream,
    e: &Expected,
    discovery: &Discovery,
    today: Date,
    (region, url): (&str, String),
    out: &mut Vec<Finding>,
) {
    let p = &e.provider;
    let ep = Some(url);
    let Some(models) = discovery.models else {
        out.push(reach(upstream, p, region, ep, e).await);
        return;
    };
    let listed = match ask(upstream, p, region, models).await {
        Ok(listed) => listed,
        Err(err) => {
            out.push(trouble(p, ep, "model list", &err));
            return;
        }
    };
    let mut problems = 0;
    let mut unlisted = 0;
    for (native, configured) in &e.models {
        let Some(f) = model_finding(p, ep.clone(), native, configured, &listed, today) else {
            continue;
        };
        if f.status == Status::ModelUnknown {
            unlisted += 1;
        }
        if f.status.is_problem() {
            problems += 1;
        }
        out.push(f);
    }
    let mut said = format!(
        "key accepted; {} of {} configured model(s) listed",
        e.models.len() - unlisted,
        e.models.len()
    );
    match discovery.voices {
        Some(voices) if !e.voices.is_empty() => match ask(upstream, p, region, voices).await {
            Ok(listed) => {
                let missing = unlisted_voices(p, e, &ep, &listed, out);
                problems += missing;
                said.push_str(&format!(
                    "; {} of {} configured voice(s) listed",
                    e.voices.len() - missing,
                    e.voices.len()
                ));
            }
            Err(err) => {
                problems += 1;
                out.push(trouble(p, ep.clone(), "voice list", &err));
            }
        },
        None if !e.voices.is_empty() => out.push(Finding::new(
            Status::NotChecked,
            p,
            ep.clone(),
            format!(
                "no voice-list endpoint is known for kind {}: {} configured voice(s) not checked",
                p.kind,
                e.voices.len()
            ),
        )),
        _ => {}
    }
    if problems == 0 {
        out.push(Finding::new(Status::Ok, p, ep, said));
    }
}

/// A `voice_unknown` finding for each configured voice the account's list (`listed`) lacks; how
/// many there were.
fn unlisted_voices(
    p: &Provider,
    e: &Expected,
    ep: &Option<String>,
    listed: &[Listed],
    out: &mut Vec<Finding>,
) -> usize {
    let mut missing = 0;
    for (voice, why) in &e.voices {
        if !listed.iter().any(|l| l.id == *voice) {
            missing += 1;
            let mut f = Finding::new(
                Status::VoiceUnknown,
                p,
                ep.clone(),
                format!(
                    "voice `{voice}` ({}) is not among the {} voice(s) the account lists",
                    why.join(", "),
                    listed.len()
                ),
            );
            f.voice = Some(voice.clone());
            out.push(f);
        }
    }
    missing
}

/// What the account's model list says of one configured native model, when it says something
/// wrong: not listed at all (`model_unknown`, as a retired model usually is), listed with a
/// shutdown date that has come (`model_shut_down`) or is still to come (`model_retiring`). A
/// shutdown date is compared with the gateway's lifecycle data, whose disagreement is noted.
fn model_finding(
    p: &Provider,
    ep: Option<String>,
    native: &str,
    configured: &Configured,
    listed: &[Listed],
    today: Date,
) -> Option<Finding> {
    let publics = configured.publics.join(", ");
    let ours = configured.lifecycle;
    let (status, message, shutdown) = match listed.iter().find(|l| l.id == native) {
        None => {
            let mut message = format!(
                "model `{native}` (configured for {publics}) is not among the {} model(s) the account lists",
                listed.len()
            );
            if let Some(d) = ours.filter(|d| *d <= today) {
                message.push_str(&format!(
                    " (the gateway's lifecycle data says it was shut down on {d})"
                ));
            }
            (Status::ModelUnknown, message, None)
        }
        Some(Listed {
            shutdown: Some(d), ..
        }) => {
            let d = *d;
            let mut message = if d <= today {
                format!(
                    "model `{native}` (configured for {publics}) was shut down on {d}, says the account's model list: the provider no longer serves it"
                )
            } else {
                format!(
                    "model `{native}` (configured for {publics}) shuts down on {d} (in {} day(s)), says the account's model list",
                    today.days_until(d)
                )
            };
            match ours {
                Some(o) if o == d => {}
                Some(o) => message.push_str(&format!(
                    "; the gateway's lifecycle data says {o} (src/caps/lifecycle.yaml, or the target's `lifecycle:`)"
                )),
                None => message.push_str(
                    "; the gateway's lifecycle data has no shutdown date for it (add the target's `lifecycle:`)",
                ),
            }
            let status = if d <= today {
                Status::ModelShutDown
            } else {
                Status::ModelRetiring
            };
            (status, message, Some(d))
        }
        Some(_) => return None,
    };
    let mut f = Finding::new(status, p, ep, message);
    f.model = Some(native.to_string());
    f.public_models = configured.publics.clone();
    f.shutdown_date = shutdown.map(|d| d.to_string());
    f.lifecycle_shutdown = ours.map(|d| d.to_string());
    Some(f)
}

/// A list, bounded by [`ANSWER_TIMEOUT`].
async fn ask(
    upstream: &Upstream,
    p: &Provider,
    region: &str,
    fns: ListFns,
) -> Result<Vec<Listed>, UpstreamError> {
    match tokio::time::timeout(
        ANSWER_TIMEOUT,
        Box::pin(discovery::list(upstream, p, region, fns)),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => Err(UpstreamError::new(
            UpstreamErrorKind::Timeout,
            &p.name,
            format!("no answer within {} s", ANSWER_TIMEOUT.as_secs()),
        )),
    }
}

/// For a kind without a list endpoint: whether the endpoint answers at all (a `GET` of its base
/// URL; any HTTP answer will do), and a note that its models were not checked.
async fn reach(
    upstream: &Upstream,
    p: &Provider,
    region: &str,
    ep: Option<String>,
    e: &Expected,
) -> Finding {
    let base = p
        .endpoint(region)
        .map(|e| e.base_path.is_empty())
        .unwrap_or(true);
    let req = NativeRequest::get(if base { "/" } else { "" });
    let answered = tokio::time::timeout(ANSWER_TIMEOUT, async {
        let resp = upstream.send(p, region, &req).await?;
        let status = resp.status;
        resp.release_unread().await;
        Ok::<u16, UpstreamError>(status)
    })
    .await;
    match answered {
        Ok(Ok(status)) => Finding::new(
            Status::NotChecked,
            p,
            ep,
            format!(
                "answers (HTTP {status} at the base URL); no model-list endpoint is known for kind {}: {} configured model(s) not checked",
                p.kind,
                e.models.len()
            ),
        ),
        Ok(Err(err)) => trouble(p, ep, "base URL", &err),
        Err(_) => Finding::new(
            Status::Unreachable,
            p,
            ep,
            format!("no answer within {} s", ANSWER_TIMEOUT.as_secs()),
        ),
    }
}

/// A failed request as a finding: a refused key, an endpoint that does not answer, or an answer
/// the check could not use.
fn trouble(p: &Provider, ep: Option<String>, what: &str, err: &UpstreamError) -> Finding {
    let status_text = err
        .status
        .map(|s| format!("HTTP {s}: "))
        .unwrap_or_default();
    let (status, message) = match err.kind {
        _ if err.kind == UpstreamErrorKind::AuthRejected
            || matches!(err.status, Some(401 | 403)) =>
        {
            (
                Status::KeyRefused,
                format!(
                    "the provider refused the key for its {what} ({status_text}{}); a key \
                     restricted to fewer endpoints is refused here too",
                    err.message
                ),
            )
        }
        UpstreamErrorKind::Connect | UpstreamErrorKind::Timeout => (
            Status::Unreachable,
            format!("does not answer: {}", err.message),
        ),
        _ => (
            Status::Error,
            format!("{what}: unexpected answer ({status_text}{})", err.message),
        ),
    };
    Finding::new(status, p, ep, p.redact(&message))
}
