//! The attempt loop: one request, several tries, possibly several targets.
//!
//! Each attempt rebuilds the native request from the validated request (translation is pure), sends
//! it to a target, and classifies a failure. The first attempt's target is chosen by weight among
//! the model's healthy targets; each retry moves to another healthy one not yet tried when there
//! is one. Every outcome is reported to the target's health (`upstream::health`), which ejects
//! targets that keep failing. Retryable failures (connect errors, timeouts, 429, 5xx) are retried
//! up to the request's `retries`, spaced by the retry policy. A provider account whose TLS
//! certificate or API key was refused is not tried again in the request (it would be refused
//! again): the next attempt goes to another account at once, or the request fails. Such a
//! refusal is the operator's broken account, not a failure of the caller's request, so moving
//! past it does not spend the caller's `retries` (with the default of none, the request still
//! reaches a healthy account). A provider saying the target's *model* is gone (`UnknownModel`:
//! retired without notice, or not enabled for the account) retires that target in the health
//! table (held out for hours); the request moves at once to the model's next target that is not
//! retired, again without spending `retries`. When none is left the request fails
//! `model_unavailable`, and the operation serves it by the model's successor, if it names one
//! (`Catalog::serving` resolves a model whose every target is retired to its successor). Nothing
//! has been sent to the client while this loop runs, which is what makes retrying safe.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

use crate::catalog::{Model, Target};
use crate::common::error::GatewayError;
use crate::common::error::{UpstreamError, UpstreamErrorKind};
use crate::common::native::Prepared;
use crate::engine::trace;
use crate::metrics;
use crate::upstream::exchange::{Response, Upstream};
use crate::upstream::health::Admission;
use std::time::{Instant, SystemTime};

use crate::common::trace_context::SpanId;
use crate::telemetry::{Kind, Status};

/// What the caller does with a successful (2xx) response inside the loop, so that a failure
/// there — a short read, an error the provider reports inside a 200 — is retried like any other.
/// The future may borrow the request being served (`'f`), not only the connection pool.
pub(crate) type AcceptFuture<'f, T> =
    Pin<Box<dyn Future<Output = Result<T, UpstreamError>> + Send + 'f>>;

/// A successful attempt: an in-process provider's answer, or what `accept` made of a response.
pub(crate) enum Reply<T> {
    Local(Bytes),
    Remote(T),
}

/// Largest error body read from a provider (errors are small; anything bigger is cut).
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// Run the attempts, reading the whole answer inside the loop (a failure while reading is retried
/// too). `build` makes the native request for a target. The answer's headers are empty for
/// in-process providers.
pub(crate) async fn run<'u: 'm, 'm>(
    upstream: &'u Upstream,
    model: &'m Model,
    region: &str,
    retries: u32,
    build: impl Fn(&Target) -> Result<Prepared, GatewayError>,
) -> Result<((http::HeaderMap, Bytes), &'m Target), GatewayError> {
    let accept =
        |target: &'m Target, resp: Response<'u>| -> AcceptFuture<'m, (http::HeaderMap, Bytes)> {
            let limit = target.provider.max_response_bytes;
            Box::pin(async move {
                let headers = resp.headers().cloned().unwrap_or_default();
                let body = resp.read_all(limit).await?;
                Ok((headers, body))
            })
        };
    let (reply, target) = run_with(upstream, model, region, retries, build, accept).await?;
    Ok(match reply {
        Reply::Local(answer) => ((http::HeaderMap::new(), answer), target),
        Reply::Remote(answer) => (answer, target),
    })
}

/// Whether `model` has a target a request could be sent to now: `503 model_unavailable` when
/// none is enabled (its providers have no API key, or every target is past its shutdown with no
/// successor), before any attempt. The attempt loop asks it first, and so does the acceptance of
/// an asynchronous task, so that what is known at acceptance is refused there, in the same words.
pub(crate) fn servable(model: &Model) -> Result<(), GatewayError> {
    // Counted rather than collected: no allocation per request.
    if model.enabled_targets().next().is_some() {
        return Ok(());
    }
    if model.gone() {
        // Past its shutdown, with no successor (or a successor that is gone too).
        return Err(GatewayError::ModelUnavailable {
            model: model.name.clone(),
            reason: model.gone_reason(),
        });
    }
    let names: Vec<&str> = model
        .targets
        .iter()
        .map(|t| t.provider.name.as_str())
        .collect();
    Err(GatewayError::ModelUnavailable {
        model: model.name.clone(),
        reason: format!("provider {} has no API key configured", names.join(", ")),
    })
}

/// Run the attempts; `accept` turns each 2xx response into the caller's value, and its failures
/// count as the attempt's.
pub(crate) async fn run_with<'u, 'm, 'f, T>(
    upstream: &'u Upstream,
    model: &'m Model,
    region: &str,
    retries: u32,
    build: impl Fn(&Target) -> Result<Prepared, GatewayError>,
    accept: impl Fn(&'m Target, Response<'u>) -> AcceptFuture<'f, T>,
) -> Result<(Reply<T>, &'m Target), GatewayError>
where
    'u: 'f,
    'm: 'f,
{
    servable(model)?;
    let mut tries = Tries::new(model, retries);
    loop {
        let picked = pick(
            upstream,
            model,
            tries.start,
            tries.tried,
            tries.dead,
            &tries.refused,
        );
        let Some((index, target)) = picked else {
            return Err(all_retired(model));
        };
        tries.tried |= 1 << (index % 64);
        tries.made += 1;
        let mut native = match build(target)? {
            Prepared::Local(answer) => {
                trace::attempt(model, target);
                return Ok((Reply::Local(answer), target));
            }
            native => native,
        };
        let outcome = attempt(
            upstream,
            model,
            target,
            region,
            &mut native,
            &mut tries,
            &accept,
        );
        let err = match outcome.await {
            Ok(value) => return Ok((Reply::Remote(value), target)),
            Err(e) => e,
        };
        if let Some(delay) = tries.failed(upstream, model, (index, target), err)? {
            tokio::time::sleep(delay).await;
        }
    }
}

/// What the attempt loop knows of a request's attempts so far.
struct Tries {
    /// Retries the caller allows.
    retries: u32,
    /// Retries spent (the caller's budget): a refused account costs an attempt but no retry.
    attempt: u32,
    /// Attempts made (for the log and the spans).
    made: u32,
    /// Where this request starts in the model's weighted schedule.
    start: usize,
    /// Targets tried in this request (bit `index % 64`): retries prefer the others.
    tried: u64,
    /// Accounts (by id) whose TLS certificate or key was refused in this request: never tried
    /// again (empty, so no allocation, unless that happens).
    refused: Vec<usize>,
    /// Targets whose provider said their model is gone in this request (bit `index % 64`): never
    /// tried again in it, even if the health table could not retire them.
    dead: u64,
    /// How long the attempt about to be sent waited after the last one failed (its span says).
    waited: Option<std::time::Duration>,
}

impl Tries {
    fn new(model: &Model, retries: u32) -> Tries {
        Tries {
            retries,
            attempt: 0,
            made: 0,
            start: model.start(),
            tried: 0,
            refused: Vec::new(),
            dead: 0,
            waited: None,
        }
    }

    /// After the attempt at target `index` failed with `err`: the wait before the next attempt
    /// (`None`: at once), or the request's failure.
    fn failed(
        &mut self,
        upstream: &Upstream,
        model: &Model,
        (index, target): (usize, &Target),
        err: UpstreamError,
    ) -> Result<Option<std::time::Duration>, GatewayError> {
        log::warn!(
            "model {}: attempt {} via {} failed: {err}",
            model.name,
            self.made,
            target.provider.name
        );
        if err.kind == UpstreamErrorKind::UnknownModel {
            // The health table retired this target; move to the next one at once, without
            // spending a retry (the model is the operator's configuration, not the caller's
            // request), or stop when none is left (the operation may hand it to the successor).
            self.dead |= 1 << (index % 64);
            if !any_usable(upstream, model, self.dead, &self.refused) {
                return Err(unknown_model(model, target, &err));
            }
            retried(upstream, target, &err);
            return Ok(None);
        }
        if err.certificate_refused || err.kind == UpstreamErrorKind::AuthRejected {
            // The same certificate (or key) would be refused again: move to another account, at
            // once (nothing to wait for), or stop when every account was refused. The account is
            // the operator's, so this does not count against the caller's `retries`; each
            // account is refused at most once, so the loop still ends.
            self.refused.push(target.provider.id);
            let other = model
                .enabled_targets()
                .any(|t| !self.refused.contains(&t.provider.id));
            if !other {
                return Err(GatewayError::Upstream(err));
            }
            retried(upstream, target, &err);
            return Ok(None);
        }
        if self.attempt >= self.retries || !err.retryable() {
            return Err(GatewayError::Upstream(err));
        }
        retried(upstream, target, &err);
        self.attempt += 1;
        let delay = upstream.retry.load().delay(self.attempt, err.retry_after);
        self.waited = Some(delay);
        Ok(Some(delay))
    }
}

/// One attempt at `target`: sent (its trace span, metrics and health recorded), and its 2xx
/// answer turned into the caller's value by `accept`.
async fn attempt<'u, 'm, 'f, T>(
    upstream: &'u Upstream,
    model: &'m Model,
    target: &'m Target,
    region: &str,
    native: &mut Prepared,
    tries: &mut Tries,
    accept: &impl Fn(&'m Target, Response<'u>) -> AcceptFuture<'f, T>,
) -> Result<T, UpstreamError> {
    trace::attempt(model, target);
    let send = target.provider.send_trace_context;
    let span = match native {
        Prepared::Http(req) => trace::propagate(&mut req.headers, send),
        Prepared::Socket(req) => trace::propagate(&mut req.headers, send),
        Prepared::Local(_) => None,
    };
    let span_start = trace::now();
    let started = Instant::now();
    let mut status = None;
    let outcome = match try_once(upstream, target, region, native).await {
        Ok(resp) => {
            status = Some(resp.status);
            accept(target, resp).await
        }
        Err(e) => Err(e),
    };
    count(upstream, target, started, outcome.as_ref().err());
    let sent = Sent {
        number: tries.made,
        status,
        waited: tries.waited.take(),
    };
    attempt_span(span, span_start, target, &sent, outcome.as_ref().err());
    let health = target.health(&upstream.health);
    match &outcome {
        Ok(_) => upstream.health.success(health),
        Err(e) => upstream.health.failure(health, e.kind),
    }
    outcome
}

/// The target for the next attempt, and its index: by the model's weighted schedule from
/// `start`, the first one that is enabled, not refused and not ejected (or whose probe this is),
/// preferring targets not yet `tried` in this request; standby targets (weight 0) only when no
/// weighted one can be used. When every usable target is ejected, the one whose ejection ends
/// first (panic mode, as Envoy's: failing outright would be worse than trying it).
/// No allocation; the usual case returns at the first entry it looks at.
fn pick<'m>(
    upstream: &Upstream,
    model: &'m Model,
    start: usize,
    tried: u64,
    dead: u64,
    refused: &[usize],
) -> Option<(usize, &'m Target)> {
    let health = &upstream.health;
    let now = model.lifecycle_now();
    let usable = |i: usize, t: &Target| takeable(upstream, now, (i, t), dead, refused);
    // (ejected until, index) of the ejected target back soonest.
    let mut soonest: Option<(u64, usize)> = None;
    for fresh in [true, false] {
        let weighted = (0..model.schedule_len()).filter_map(|k| model.scheduled(start + k));
        let standby = (0..model.targets.len()).filter(|&i| model.targets[i].weight == 0);
        for i in weighted.chain(standby) {
            let Some(t) = model.targets.get(i) else {
                continue;
            };
            if !usable(i, t) || (tried & (1 << (i % 64)) == 0) != fresh {
                continue;
            }
            match health.admit(t.health(health)) {
                Admission::Healthy | Admission::Probe => return Some((i, t)),
                Admission::Ejected(until) => {
                    if soonest.is_none_or(|(u, _)| until < u) {
                        soonest = Some((until, i));
                    }
                }
            }
        }
    }
    let (_, i) = soonest?;
    model.targets.get(i).map(|t| (i, t))
}

/// Whether the model has a target left that the attempt loop may take (enabled, not refused, not
/// retired).
fn any_usable(upstream: &Upstream, model: &Model, dead: u64, refused: &[usize]) -> bool {
    let now = model.lifecycle_now();
    (model.targets.iter().enumerate()).any(|it| takeable(upstream, now, it, dead, refused))
}

/// Whether target `i` may be taken: its account is enabled and not refused in this request, it
/// is not past its shutdown, and it is not retired (its provider said the model is gone: not even
/// in panic mode, it would only fail again).
fn takeable(
    upstream: &Upstream,
    now: Option<i64>,
    (i, t): (usize, &Target),
    dead: u64,
    refused: &[usize],
) -> bool {
    t.provider.enabled()
        && !refused.contains(&t.provider.id)
        && !now.is_some_and(|n| t.gone(n))
        && dead & (1 << (i % 64)) == 0
        && !t.health(&upstream.health).retired()
}

/// No target can be taken because every one left was retired by its provider (it said the model
/// is gone): `model_unavailable` naming the public model and the native models refused.
fn all_retired(model: &Model) -> GatewayError {
    let natives: Vec<String> = model
        .targets
        .iter()
        .map(|t| format!("{} at {}", t.native_model, t.provider.name))
        .collect();
    GatewayError::ModelUnavailable {
        model: model.name.clone(),
        reason: format!(
            "its provider no longer serves its configured model ({}); the gateway holds it out \
             until the configuration names a model the provider serves",
            natives.join(", ")
        ),
    }
}

/// Count one attempt at `target`: its outcome (success, or its error's class) and its duration.
fn count(upstream: &Upstream, target: &Target, started: Instant, err: Option<&UpstreamError>) {
    upstream.metrics.with(|f| {
        let (provider, native) = (target.provider.name.as_str(), target.native_model.as_str());
        let outcome = err.map_or("success", |e| class(e.kind));
        metrics::inc(&f.upstream_attempts, &[provider, native, outcome], 1);
        metrics::observe(
            &f.upstream_duration,
            &[provider, native],
            started.elapsed().as_secs_f64(),
        );
    });
}

/// What an attempt's span says besides its target and outcome.
struct Sent {
    /// Its number in the request, from 1.
    number: u32,
    /// The provider's HTTP status (2xx: before its body was read).
    status: Option<u16>,
    /// How long it waited after the attempt before it failed (`None`: the first, or sent at once).
    waited: Option<std::time::Duration>,
}

/// The attempt's span (when the request's spans are recorded): the account and its kind, the
/// native model, the attempt's number, outcome, status and the wait before it. An error's class
/// only, never its message (a provider may quote the caller's text back).
fn attempt_span(
    id: Option<SpanId>,
    start: Option<SystemTime>,
    target: &Target,
    sent: &Sent,
    err: Option<&UpstreamError>,
) {
    trace::span(id, "upstream_attempt", Kind::Client, start, |s| {
        let p = &target.provider;
        s.set("gen_ai.provider.name", p.kind.clone());
        s.set("switchyard.provider.account", p.name.clone());
        s.set("gen_ai.request.model", target.native_model.clone());
        s.set("switchyard.attempt", i64::from(sent.number));
        let outcome = err.map_or("success", |e| class(e.kind));
        s.set("switchyard.attempt.outcome", outcome);
        if let Some(status) = err.and_then(|e| e.status).or(sent.status) {
            s.set("http.response.status_code", i64::from(status));
        }
        if let Some(w) = sent.waited {
            s.set("switchyard.retry.delay_ms", w.as_millis() as u64);
        }
        if err.is_some() {
            s.set("error.type", outcome);
            s.status = Status::Error(outcome.to_string());
        }
    });
}

/// Count a failed attempt at `target` that is tried again.
fn retried(upstream: &Upstream, target: &Target, err: &UpstreamError) {
    upstream.metrics.with(|f| {
        let labels = [
            target.provider.name.as_str(),
            target.native_model.as_str(),
            class(err.kind),
        ];
        metrics::inc(&f.upstream_retries, &labels, 1);
    });
}

/// An error class as a metric label.
fn class(kind: UpstreamErrorKind) -> &'static str {
    match kind {
        UpstreamErrorKind::Connect => "connect",
        UpstreamErrorKind::Timeout => "timeout",
        UpstreamErrorKind::RateLimited => "rate_limited",
        UpstreamErrorKind::InvalidRequest => "invalid_request",
        UpstreamErrorKind::ContentPolicy => "content_policy",
        UpstreamErrorKind::AuthRejected => "auth_rejected",
        UpstreamErrorKind::UnknownModel => "unknown_model",
        UpstreamErrorKind::UnknownVoice => "unknown_voice",
        UpstreamErrorKind::Failure => "failure",
        UpstreamErrorKind::BadResponse => "bad_response",
        UpstreamErrorKind::WrongAnswer => "wrong_answer",
    }
}

/// A provider's "no such model" for a target: the caller learns which public model is unusable and
/// which native model its provider refused, since only the operator can fix it (the configuration
/// names a retired or misspelt model, or one this account may not use).
fn unknown_model(model: &Model, target: &Target, err: &UpstreamError) -> GatewayError {
    GatewayError::ModelUnavailable {
        model: model.name.clone(),
        reason: format!(
            "provider {} does not serve its configured model {} (it answered: {}); \
             the gateway's configuration must name a model the provider serves",
            target.provider.name, target.native_model, err.message
        ),
    }
}

/// Send one native request; a 2xx response (an open WebSocket) comes back unread, anything else
/// as its classified error.
async fn try_once<'u>(
    upstream: &'u Upstream,
    target: &Target,
    region: &str,
    native: &Prepared,
) -> Result<Response<'u>, UpstreamError> {
    let provider = &target.provider;
    let native = match native {
        Prepared::Http(native) => native,
        // A refused handshake is classified inside, by the same error map.
        Prepared::Socket(socket) => return upstream.send_socket(provider, region, socket).await,
        Prepared::Local(_) => {
            return Err(UpstreamError::new(
                UpstreamErrorKind::Failure,
                &provider.name,
                "an in-process answer has nothing to send",
            ))
        }
    };
    let resp = upstream.send(provider, region, native).await?;
    if (200..300).contains(&resp.status) {
        return Ok(resp);
    }
    let status = resp.status;
    let headers = resp.headers().cloned().unwrap_or_default();
    // Boxed: reading a body is a big future (the connection and its release inside), and held
    // inline it would make every attempt's future, and the request's around it, that much
    // bigger, for an error path.
    let body = match Box::pin(resp.read_all(ERROR_BODY_LIMIT)).await {
        Ok(b) => b,
        Err(_) => Bytes::new(),
    };
    Err(provider.error_response(status, &headers, &body))
}
