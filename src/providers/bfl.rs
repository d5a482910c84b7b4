//! Black Forest Labs FLUX: a natively asynchronous image API (submit a task, then poll it).
//!
//! Submit: `POST /v1/{native_model}` (e.g. `/v1/flux-pro-1.1`, `/v1/flux-2-pro`) with the `x-key`
//! header (added by the gateway from the config key, like every provider credential) and a JSON
//! body: `prompt`, the size — `width`/`height` in pixels for the `flux` and `flux-2*` families,
//! `aspect_ratio` for `flux-kontext` and `flux-ultra` (the size's ratio from the family's table) —,
//! `output_format` (`jpeg`|`png`; the public `jpg` is `jpeg`), `input_image` (the reference image
//! of Kontext and FLUX.2: the caller's URL unchanged, or plain base64 without a `data:` prefix;
//! FLUX.2's further references, up to 8 in all, as `input_image_2` … `input_image_8`) and
//! the caller's pass-through fields (`seed`, `safety_tolerance`, `prompt_upsampling`,
//! `disable_pup`, `raw`, `steps`, `guidance`, as each family lists). BFL makes one image per task:
//! the families' `per_call_n` is 1 and the gateway fans out. A request with a reference image and
//! no size chosen sends no size at all, so the edit keeps the input image's proportions (Kontext)
//! or size (FLUX.2), BFL's default then, instead of being forced square.
//!
//! The answer is `{"id","polling_url"}`. The poll is sent with the `x-key`, so `polling_url` is
//! trusted only when it is `https` on `bfl.ai` or a subdomain of it (BFL's regional hosts, e.g.
//! `api.us1.bfl.ai`) on the default port, or on exactly the scheme, host and port of the
//! provider's own base URL (a proxy in front of BFL, or a test's fake). Any other URL fails the
//! submission with a non-retryable bad-response error and is never requested: a redirected poll
//! would hand the key to whoever controls that host. The check runs again before every poll,
//! because a task may come back from the task store. Without a `polling_url` the task is read at
//! `GET /v1/get_result?id={id}` on the base URL.
//!
//! Poll answer (BFL's OpenAPI `ResultResponse`): `{"id","status","result":{"sample":url,…},
//! "progress","details","preview"}`. States:
//! - `Pending` is both waiting in BFL's queue and generating; it is reported as queued while
//!   `progress` is absent, null or 0, and as running once `progress` is above 0. `Reasoning` and
//!   `Generating` (FLUX.2's finer stages) are running. A status this adapter does not know is
//!   taken as still running: BFL adding a stage must not fail every request, and a task that
//!   never finishes still ends at the gateway's deadline.
//! - `Ready` → the image at `result.sample` (a signed link valid about 10 minutes, on
//!   `delivery-*.bfl.ai` or BFL's storage account `bfldeliveryprod.blob.core.windows.net`; the
//!   gateway downloads it when the caller asked for base64).
//! - `Request Moderated` (the prompt or input image was refused) and `Content Moderated` (the
//!   generated image was withheld) → content policy, with BFL's `details["Moderation Reasons"]`
//!   in the message when given.
//! - `Error` → BFL's guides show `{"status":"Error","error":"<code>","message":"<text>"}`: the
//!   reason (`error`, `message`, else `details`/`result`/`detail`) is shown to the caller, and
//!   `content_policy_violation` (or a text saying the content was moderated) is content policy,
//!   anything else a provider failure. A verdict read from a poll ends the wait at once whatever
//!   its kind (the poll loop never asks again); resubmitting would be a new paid generation,
//!   which the gateway never does after a submission was accepted.
//! - `Task not found` (expired or unknown) → a failure, likewise final.
//!
//! Errors (submit or poll): HTTP 400, 402 (credits exhausted: a failure of the gateway's account,
//! not retried), 403 (key refused), 404 `{"detail":"Not Found"}` (FastAPI's answer for a path no
//! route serves: the configured model is not a BFL endpoint, so an unknown model), 422 (FastAPI
//! validation, `{"detail":[{"loc","msg"}]}`), 429 (too many active tasks: rate limited, retried),
//! 500, 503; bodies are `{"detail": …}`.
//!
//! Unconfirmed (from BFL's guides and third-party copies of its API reference, not a live call):
//! that `Pending` carries a numeric `progress` (0–1 or a percentage; only "above 0" is relied on);
//! the `Reasoning`/`Generating` stages; the `details["Moderation Reasons"]` shape; the `error` /
//! `message` fields of a failed task (not in the OpenAPI schema); the exact `detail` texts of 402,
//! 404 and 429. The provider ledger (`docs/providers/bfl.md`) lists each fact and its source.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::native::json_with_extra;

use crate::common::native::NativeRequest;

use crate::common::native::PollRequest;

use crate::api::images::ImageRequest;
use crate::caps::ImageCaps;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::image_input::ImageInput;
use crate::common::images::ImageAnswer;
use crate::common::images::ImageData;
use crate::common::images::NativeImage;
use crate::common::images::NativeImages;
use crate::common::images::NativeTask;
use crate::common::images::Poll;
use crate::providers::formats::fastapi;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

/// Submission path prefix; the native model completes it (`/v1/flux-pro-1.1`).
const SUBMIT_PREFIX: &str = "/v1/";

/// Where a task is read when the submit answer gave no `polling_url`.
const GET_RESULT_PATH: &str = "/v1/get_result?id=";

/// BFL's own domain: polls may go to it and its subdomains (regional API hosts).
const BFL_DOMAIN: &str = "bfl.ai";

/// Where BFL serves result samples (the default `result_hosts`).
const RESULT_HOSTS: &[&str] = &["*.bfl.ai", "bfldeliveryprod.blob.core.windows.net"];

/// Longest provider text quoted in an error message.
const MAX_QUOTED: usize = 300;

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct SubmitBody<'a> {
    prompt: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    width: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    height: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    aspect_ratio: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_image: Option<Cow<'a, str>>,
    /// FLUX.2's further references, `input_image_2` to `input_image_8`.
    #[serde(flatten)]
    more_inputs: BTreeMap<&'static str, Cow<'a, str>>,
    output_format: &'static str,
}

/// The native names of FLUX.2's references after the first (`input_image`), in order.
const MORE_INPUTS: [&str; 7] = [
    "input_image_2",
    "input_image_3",
    "input_image_4",
    "input_image_5",
    "input_image_6",
    "input_image_7",
    "input_image_8",
];

/// The submit answer; `detail` is read so an error body that came with HTTP 200 can say why.
#[derive(Deserialize)]
struct SubmitAnswer {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    polling_url: Option<String>,
    #[serde(default)]
    detail: Option<Value>,
}

/// One poll's answer. `result` and `details` stay loose: their shape depends on the status.
/// `error` and `message` are not in BFL's OpenAPI `ResultResponse`, but BFL's own guides show a
/// failed task as `{"status": "Error", "error": "content_policy_violation", "message": "…"}`.
#[derive(Deserialize)]
struct ResultAnswer {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    result: Option<Value>,
    /// Loose too: an unconfirmed field must not make a good answer unreadable.
    #[serde(default)]
    progress: Option<Value>,
    #[serde(default)]
    details: Option<Value>,
    #[serde(default)]
    detail: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    message: Option<Value>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn image_request(
    target: &Target,
    req: &ImageRequest<'_>,
    n: u64,
) -> Result<NativeRequest, GatewayError> {
    // One image per task: the gateway fans out, never asking one call for more.
    if n != 1 {
        return Err(GatewayError::Internal(format!(
            "bfl asked for {n} images in one call; it makes one per task"
        )));
    }
    // With a reference image and no size chosen, BFL keeps the input's proportions (Kontext) or
    // size (FLUX.2), so nothing is sent that would force the default square.
    let keep_input = req.image.is_some() && !req.size_given;
    let (width, height, aspect_ratio) = if keep_input {
        (None, None, None)
    } else if sized_by_ratio(req.caps) {
        (None, None, Some(req.required_aspect_ratio()?))
    } else {
        let (w, h) = pixels(&req.size)?;
        (Some(w), Some(h), None)
    };
    let input_image = req.image.as_ref().map(native_input);
    // Validation holds `more_images` to the family's `max_images` (8 for FLUX.2, 1 elsewhere).
    if req.more_images.len() > MORE_INPUTS.len() {
        return Err(GatewayError::Internal(format!(
            "bfl takes at most {} reference images; {} reached the adapter",
            MORE_INPUTS.len() + 1,
            req.more_images.len() + 1
        )));
    }
    let more_inputs = MORE_INPUTS
        .into_iter()
        .zip(req.more_images.iter().map(native_input))
        .collect();
    let body = SubmitBody {
        prompt: req.prompt.as_str(),
        width,
        height,
        aspect_ratio,
        input_image,
        more_inputs,
        output_format: native_format(req.output_format),
    };
    Ok(NativeRequest::post_json(
        format!("{SUBMIT_PREFIX}{}", target.native_model),
        json_with_extra(&body, &req.passthrough)?,
    ))
}

/// A reference image as BFL takes it: the caller's URL unchanged, or plain base64.
fn native_input(i: &ImageInput) -> Cow<'_, str> {
    match i.base64() {
        Some(b64) => Cow::Owned(b64),
        None => i.url_or_data_url(),
    }
}

/// BFL's refusal that the family table cannot express (a size a ratio-only endpoint has no
/// ratio for), run by the adapter's validation step before anything is started; [`image_request`]
/// meets the same rule when it picks the ratio.
fn check(req: &ImageRequest<'_>) -> Result<(), GatewayError> {
    let keep_input = req.image.is_some() && !req.size_given;
    if !keep_input && sized_by_ratio(req.caps) {
        req.required_aspect_ratio()?;
    }
    Ok(())
}

/// Whether `caps` come from a family whose endpoints take `aspect_ratio` and no pixel size:
/// Kontext and FLUX1.1 [pro] Ultra (a model's overrides keep the family).
fn sized_by_ratio(caps: &ImageCaps) -> bool {
    matches!(caps.family, "flux-kontext" | "flux-ultra")
}

/// `WxH` as numbers; the family's sizes are all of this form, so anything else is a catalog bug.
fn pixels(size: &str) -> Result<(u32, u32), GatewayError> {
    size.split_once('x')
        .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
        .filter(|(w, h): &(u32, u32)| *w > 0 && *h > 0)
        .ok_or_else(|| GatewayError::Internal(format!("bfl size {size:?} is not WxH")))
}

/// BFL's name for a public output format.
fn native_format(public: &str) -> &'static str {
    match public {
        "jpg" => "jpeg",
        _ => "png",
    }
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn image_response(
    provider: &Provider,
    _req: &ImageRequest<'_>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<ImageAnswer, UpstreamError> {
    let parsed: SubmitAnswer = crate::providers::parse_answer(provider, body)?;
    let Some(id) = parsed.id.filter(|i| !i.trim().is_empty()) else {
        let why = parsed
            .detail
            .as_ref()
            .and_then(fastapi::detail_text)
            .map(|d| format!(": {}", quote(provider, &d)))
            .unwrap_or_default();
        return Err(crate::upstream::provider::bad_answer(
            provider,
            format!("submission answer has no task id{why}"),
        ));
    };
    let polling_url = match parsed.polling_url.filter(|u| !u.trim().is_empty()) {
        Some(url) => Some(check_polling_url(provider, &url)?),
        None => None,
    };
    Ok(ImageAnswer::Task(NativeTask {
        provider: provider.name.clone(),
        id,
        polling_url,
    }))
}

pub(crate) fn poll_request(
    provider: &Provider,
    task: &NativeTask,
) -> Result<PollRequest, UpstreamError> {
    match &task.polling_url {
        // Checked again: the task may have been read back from the store.
        Some(url) => Ok(PollRequest::Url(check_polling_url(provider, url)?)),
        None => Ok(PollRequest::Api(NativeRequest::get(format!(
            "{GET_RESULT_PATH}{}",
            query_escape(&task.id)
        )))),
    }
}

/// `url` when the `x-key` may be sent to it (see the module doc), else a non-retryable error.
fn check_polling_url(provider: &Provider, url: &str) -> Result<String, UpstreamError> {
    let url = url.trim();
    match polling_url_refusal(provider, url) {
        None => Ok(url.to_string()),
        Some(why) => Err(crate::upstream::provider::bad_answer(
            provider,
            format!("refused to poll the task: {}", provider.redact(&why)),
        )),
    }
}

/// Why `url` must not receive the key, or `None` when it may.
fn polling_url_refusal(provider: &Provider, url: &str) -> Option<String> {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return Some("polling_url is not a valid URL".into());
    };
    let Some(authority) = uri.authority() else {
        return Some("polling_url has no host".into());
    };
    // Credentials in the authority only serve to disguise the host; BFL never sends them.
    if authority.as_str().contains('@') {
        return Some("polling_url carries user information".into());
    }
    // Brackets off an IPv6 literal, as the provider's own endpoint stores its host.
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let tls = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Some(format!("polling_url on {host} is neither https nor http")),
    };
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let on_bfl = host == BFL_DOMAIN
        || host
            .strip_suffix(BFL_DOMAIN)
            .is_some_and(|rest| rest.ends_with('.') && rest.len() > 1);
    if on_bfl && tls && port == 443 {
        return None;
    }
    let own = provider.endpoint("").is_some_and(|e| {
        e.tls == tls && e.port == port && e.host.trim_end_matches('.').eq_ignore_ascii_case(&host)
    });
    if own {
        return None;
    }
    Some(if on_bfl {
        format!("polling_url on {host} is not https on the default port")
    } else {
        format!("polling_url host {host} is not a BFL host nor the provider's base URL")
    })
}

/// Percent-encode a task id for a query string (BFL's ids are UUIDs; anything else is escaped).
fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(crate) fn poll_response(
    provider: &Provider,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<Poll, UpstreamError> {
    let parsed: ResultAnswer = crate::providers::parse_answer(provider, body)?;
    let Some(status) = parsed.status.as_deref().map(str::trim) else {
        let why = parsed
            .detail
            .as_ref()
            .and_then(fastapi::detail_text)
            .map(|d| format!(": {}", quote(provider, &d)))
            .unwrap_or_default();
        return Err(crate::upstream::provider::bad_answer(
            provider,
            format!("task answer has no status{why}"),
        ));
    };
    match status {
        "Pending" => Ok(if started(parsed.progress.as_ref()) {
            Poll::Running
        } else {
            Poll::Queued
        }),
        "Ready" => ready(provider, parsed.result.as_ref()),
        "Request Moderated" => Err(moderated(
            provider,
            "the prompt or input image was refused by the provider's moderation",
            status,
            parsed.details.as_ref(),
        )),
        "Content Moderated" => Err(moderated(
            provider,
            "the generated image was withheld by the provider's moderation",
            status,
            parsed.details.as_ref(),
        )),
        "Error" => Err(failed(provider, &parsed)),
        "Task not found" => Err(UpstreamError::new(
            UpstreamErrorKind::Failure,
            &provider.name,
            "the provider no longer knows the task (expired or never created)",
        )),
        // `Reasoning`, `Generating` and any stage added later: still working.
        _ => Ok(Poll::Running),
    }
}

/// Whether a `Pending` task's `progress` says generation began (a number above 0, possibly sent
/// as a string).
fn started(progress: Option<&Value>) -> bool {
    let p = match progress {
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => s.trim().trim_end_matches('%').parse::<f64>().ok(),
        _ => None,
    };
    p.is_some_and(|p| p > 0.0)
}

/// A `Ready` task's image.
fn ready(provider: &Provider, result: Option<&Value>) -> Result<Poll, UpstreamError> {
    let sample = result
        .and_then(|r| r.get("sample"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty());
    match sample {
        // BFL reports no creation time the gateway relies on; its own clock is used.
        Some(url) => Ok(Poll::Done(NativeImages {
            created: None,
            images: vec![NativeImage::new(ImageData::Url(url.to_string()))],
            ..Default::default()
        })),
        None => Err(crate::upstream::provider::bad_answer(
            provider,
            "finished task has no result.sample",
        )),
    }
}

/// A moderation verdict, naming BFL's status and its reasons when it gave them.
fn moderated(
    provider: &Provider,
    what: &str,
    status: &str,
    details: Option<&Value>,
) -> UpstreamError {
    let reasons: Vec<&str> = details
        .and_then(|d| d.get("Moderation Reasons"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let message = if reasons.is_empty() {
        format!("{what} ({status})")
    } else {
        format!("{what} ({status}: {})", reasons.join(", "))
    };
    UpstreamError::new(
        UpstreamErrorKind::ContentPolicy,
        &provider.name,
        quote(provider, &message),
    )
}

/// An `Error` task: a content-policy refusal when BFL's error code or reason says so, else a
/// provider failure; either way with BFL's reason for the caller.
fn failed(provider: &Provider, parsed: &ResultAnswer) -> UpstreamError {
    let reasons = reasons(parsed);
    let policy = reasons.iter().any(|r| is_policy_reason(r));
    let message = if reasons.is_empty() {
        "the generation failed (Error)".to_string()
    } else {
        format!(
            "the generation failed: {}",
            quote(provider, &reasons.join(": "))
        )
    };
    let kind = if policy {
        UpstreamErrorKind::ContentPolicy
    } else {
        UpstreamErrorKind::Failure
    };
    UpstreamError::new(kind, &provider.name, message)
}

/// The texts a failed task's answer carries, most specific first: the `error` code, `message`,
/// then whatever `details`, `result` or `detail` say. Repeats are dropped.
fn reasons(parsed: &ResultAnswer) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in [
        parsed.error.as_ref(),
        parsed.message.as_ref(),
        parsed.details.as_ref(),
        parsed.result.as_ref(),
        parsed.detail.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        let text = match v {
            Value::String(s) => Some(s.trim().to_string()),
            Value::Object(_) | Value::Array(_) => fastapi::detail_text(v),
            _ => None,
        };
        if let Some(t) = text.filter(|t| !t.is_empty() && !out.contains(t)) {
            out.push(t);
        }
    }
    out
}

/// Whether a failed task's reason is a moderation refusal: BFL's `content_policy_violation` code,
/// or a text saying the content was moderated or broke the content policy.
fn is_policy_reason(reason: &str) -> bool {
    let lower = reason.to_ascii_lowercase();
    [
        "content_policy",
        "content policy",
        "moderated",
        "moderation",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// Provider text fit to show a caller: secrets redacted, length bounded.
fn quote(provider: &Provider, text: &str) -> String {
    let text = provider.redact(text.trim());
    if text.chars().count() > MAX_QUOTED {
        text.chars().take(MAX_QUOTED).collect::<String>() + "…"
    } else {
        text
    }
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    // A non-2xx body is FastAPI's `{"detail": …}` (`message` tolerated).
    let message = fastapi::ErrorBody::parse(body)
        .and_then(fastapi::ErrorBody::text)
        .map(|m| quote(provider, &m))
        .unwrap_or_else(|| format!("HTTP {status}"));
    // `from_status` already says what BFL's statuses mean: 402 (credits exhausted) and 404 are
    // failures kept non-retryable by their status, 401/403 the gateway's key, 400/422 the
    // request, 429 (too many active tasks) a rate limit, 5xx a retryable failure.
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    // Each model is its own path (`/v1/{native_model}`), so a model BFL does not serve (retired,
    // misspelt) is FastAPI's route-not-found answer: 404 `{"detail": "Not Found"}`. A poll never
    // answers it for an unknown task (that is a 200 with `Task not found`).
    if status == 404 && is_route_not_found(body) {
        err.kind = UpstreamErrorKind::UnknownModel;
    }
    err
}

/// FastAPI's answer for a path no route serves.
fn is_route_not_found(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("detail").and_then(Value::as_str).map(str::to_owned))
        .is_some_and(|d| d.trim().eq_ignore_ascii_case("not found"))
}

// ---- registration ----------------------------------------------------------------------------

/// The Black Forest Labs kind: `x-key`, images only, run as tasks polled at the URL it returns.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    let auth = crate::providers::registry::keyed(key, |k| {
        crate::upstream::provider::Auth::header("x-key", k)
    })?;
    let images = crate::providers::registry::ImageFns {
        request: image_request,
        validate: |_, req| check(req),
        response: image_response,
        input_as_bytes: false,
        tasks: Some(crate::providers::registry::TaskFns {
            poll_request,
            poll_response,
        }),
    };
    // FLUX samples are signed links on BFL's delivery hosts: `delivery-*.bfl.ai`, and BFL's own
    // Azure storage account `bfldeliveryprod.blob.core.windows.net` (in BFL's API guides). That
    // host exactly, never `*.blob.core.windows.net`, which anyone can rent.
    Ok(crate::providers::registry::images_kind(
        auth,
        error_response,
        RESULT_HOSTS,
        images,
    ))
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::providers::test_support as support;

    const KEY: &str = "bfl-secret-key-0123456789";
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    fn bfl() -> Arc<Provider> {
        support::provider_at("bfl", KEY, "https://api.bfl.ai")
    }

    fn flux(body: &[u8]) -> ImageRequest<'_> {
        let t = support::target(bfl(), "flux-pro-1.1");
        support::image_request("flux-pro-1.1", "flux", t, body)
    }

    fn kontext(body: &[u8]) -> ImageRequest<'_> {
        let t = support::target(bfl(), "flux-kontext-pro");
        support::image_request("flux-kontext-pro", "flux-kontext", t, body)
    }

    fn native(req: &ImageRequest<'_>) -> (String, Value) {
        let n = image_request(&req.model.targets[0], req, 1).unwrap();
        assert_eq!(n.method, http::Method::POST);
        assert_eq!(n.content_type, "application/json");
        (n.path, serde_json::from_slice(&n.body).unwrap())
    }

    fn task(polling_url: Option<&str>) -> NativeTask {
        NativeTask {
            provider: "bfl".into(),
            id: "7f3c-task".into(),
            polling_url: polling_url.map(String::from),
        }
    }

    fn poll(body: Value) -> Result<Poll, UpstreamError> {
        poll_response(
            &bfl(),
            &http::HeaderMap::new(),
            &serde_json::to_vec(&body).unwrap(),
        )
    }

    #[test]
    fn flux_sends_pixels_format_and_pass_through_fields() {
        let req = flux(
            br#"{"model":"flux-pro-1.1","prompt":"a fox","size":"1344x768","output_format":"jpg","seed":42,"safety_tolerance":2,"prompt_upsampling":true}"#,
        );
        let (path, body) = native(&req);
        assert_eq!(path, "/v1/flux-pro-1.1");
        assert_eq!(
            body,
            json!({"prompt": "a fox", "width": 1344, "height": 768, "output_format": "jpeg",
                   "seed": 42, "safety_tolerance": 2, "prompt_upsampling": true})
        );
        // Defaults: 1024x1024 and png; an aspect ratio becomes its size.
        let req = flux(br#"{"model":"flux-pro-1.1","prompt":"p"}"#);
        assert_eq!(
            native(&req).1,
            json!({"prompt": "p", "width": 1024, "height": 1024, "output_format": "png"})
        );
        let req = flux(br#"{"model":"flux-pro-1.1","prompt":"p","aspect_ratio":"2:3"}"#);
        let body = native(&req).1;
        assert_eq!(
            (body["width"].clone(), body["height"].clone()),
            (json!(832), json!(1216))
        );
        assert!(body.get("aspect_ratio").is_none());
    }

    #[test]
    fn one_image_per_call() {
        let req = flux(br#"{"model":"flux-pro-1.1","prompt":"p","n":3}"#);
        for n in [0, 2] {
            assert!(matches!(
                image_request(&req.model.targets[0], &req, n),
                Err(GatewayError::Internal(_))
            ));
        }
        assert!(image_request(&req.model.targets[0], &req, 1).is_ok());
    }

    #[test]
    fn flux_refuses_what_it_cannot_do() {
        let t = || support::target(bfl(), "flux-pro-1.1");
        let refused = support::image_refusal(
            "flux-pro-1.1",
            "flux",
            t(),
            br#"{"model":"flux-pro-1.1","prompt":"p","image":"https://a.example/i.png","output_format":"webp","size":"500x500","quality":"hd","guidance":3}"#,
        );
        for field in ["image", "output_format", "size", "quality", "guidance"] {
            assert!(refused.get(field).is_some(), "{field}: {refused}");
        }
    }

    #[test]
    fn kontext_sends_an_aspect_ratio_and_the_reference_image() {
        let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, PNG);
        let body = format!(
            r#"{{"model":"flux-kontext-pro","prompt":"make it blue","image":"data:image/png;base64,{b64}","aspect_ratio":"16:9","seed":7}}"#
        );
        let req = kontext(body.as_bytes());
        let (path, native_body) = native(&req);
        assert_eq!(path, "/v1/flux-kontext-pro");
        assert_eq!(
            native_body,
            json!({"prompt": "make it blue", "aspect_ratio": "16:9", "input_image": b64,
                   "output_format": "png", "seed": 7})
        );
        // A URL goes as given; with no size chosen the edit keeps the input's proportions.
        let req = kontext(
            br#"{"model":"flux-kontext-pro","prompt":"p","image":"https://img.example/a.png?s=1"}"#,
        );
        assert_eq!(
            native(&req).1,
            json!({"prompt": "p", "input_image": "https://img.example/a.png?s=1", "output_format": "png"})
        );
        // Text-to-image: the (default) size's ratio; a size is sent as its ratio.
        let req = kontext(br#"{"model":"flux-kontext-pro","prompt":"p","output_format":"jpg"}"#);
        assert_eq!(
            native(&req).1,
            json!({"prompt": "p", "aspect_ratio": "1:1", "output_format": "jpeg"})
        );
        let req = kontext(br#"{"model":"flux-kontext-pro","prompt":"p","size":"832x1216"}"#);
        assert_eq!(native(&req).1["aspect_ratio"], "2:3");
        // The widest ratio Kontext takes.
        let req = kontext(br#"{"model":"flux-kontext-pro","prompt":"p","size":"1568x672"}"#);
        let body = native(&req).1;
        assert_eq!(body["aspect_ratio"], "21:9");
        assert!(body.get("width").is_none() && body.get("height").is_none());
    }

    fn flux2(body: &[u8]) -> ImageRequest<'_> {
        let t = support::target(bfl(), "flux-2-pro");
        support::image_request("flux-2-pro", "flux-2", t, body)
    }

    #[test]
    fn flux2_sends_pixels_and_the_reference_image() {
        // Multiples of 16 up to 4 MP.
        let req =
            flux2(br#"{"model":"flux-2-pro","prompt":"p","size":"1920x1088","disable_pup":true}"#);
        let (path, body) = native(&req);
        assert_eq!(path, "/v1/flux-2-pro");
        assert_eq!(
            body,
            json!({"prompt": "p", "width": 1920, "height": 1088, "output_format": "png", "disable_pup": true})
        );
        // An edit with no size chosen follows the input: no width or height is sent.
        let req = flux2(br#"{"model":"flux-2-pro","prompt":"make it blue","image":"https://img.example/a.png"}"#);
        assert_eq!(
            native(&req).1,
            json!({"prompt": "make it blue", "input_image": "https://img.example/a.png", "output_format": "png"})
        );
        // Several references: the first is `input_image`, the rest `input_image_2` onwards, each a
        // URL as given or plain base64.
        let req = flux2(
            br#"{"model":"flux-2-pro","prompt":"person 1 in the outfit of 2 at 3","image":["https://img.example/1.png","iVBORw0KGgo=","https://img.example/3.png"]}"#,
        );
        assert_eq!(
            native(&req).1,
            json!({"prompt": "person 1 in the outfit of 2 at 3",
                   "input_image": "https://img.example/1.png",
                   "input_image_2": "iVBORw0KGgo=",
                   "input_image_3": "https://img.example/3.png",
                   "output_format": "png"})
        );
        let nine: Vec<String> = (0..9)
            .map(|i| format!("https://img.example/{i}.png"))
            .collect();
        let body =
            serde_json::to_vec(&json!({"model": "flux-2-pro", "prompt": "p", "image": nine}))
                .unwrap();
        let target = support::target(bfl(), "flux-2-pro");
        let refused = support::image_refusal("flux-2-pro", "flux-2", target, &body);
        assert!(
            refused["image"].as_str().unwrap().contains("at most 8"),
            "{refused}"
        );
        // With a size, the edit is sent at that size.
        let req = flux2(br#"{"model":"flux-2-pro","prompt":"p","image":"https://img.example/a.png","size":"1024x1024"}"#);
        let body = native(&req).1;
        assert_eq!(
            (body["width"].clone(), body["height"].clone()),
            (json!(1024), json!(1024))
        );
        let t = || support::target(bfl(), "flux-2-pro");
        for size in ["1000x1000", "2064x1024", "2048x2064", "48x64"] {
            let body = format!(r#"{{"model":"flux-2-pro","prompt":"p","size":"{size}"}}"#);
            let refused = support::image_refusal("flux-2-pro", "flux-2", t(), body.as_bytes());
            assert!(refused.get("size").is_some(), "{size}: {refused}");
        }
        // FLUX.2 [pro] has no `prompt_upsampling` switch (it is `disable_pup`).
        let refused = support::image_refusal(
            "flux-2-pro",
            "flux-2",
            t(),
            br#"{"model":"flux-2-pro","prompt":"p","prompt_upsampling":true}"#,
        );
        assert!(refused.get("prompt_upsampling").is_some(), "{refused}");
    }

    #[test]
    fn ultra_sends_an_aspect_ratio_and_takes_no_reference_image() {
        let t = || support::target(bfl(), "flux-pro-1.1-ultra");
        let req = support::image_request(
            "flux-pro-1.1-ultra",
            "flux-ultra",
            t(),
            br#"{"model":"flux-pro-1.1-ultra","prompt":"p","size":"1344x768","raw":true}"#,
        );
        let (path, body) = native(&req);
        assert_eq!(path, "/v1/flux-pro-1.1-ultra");
        assert_eq!(
            body,
            json!({"prompt": "p", "aspect_ratio": "16:9", "output_format": "png", "raw": true})
        );
        let refused = support::image_refusal(
            "flux-pro-1.1-ultra",
            "flux-ultra",
            t(),
            br#"{"model":"flux-pro-1.1-ultra","prompt":"p","image":"https://img.example/a.png"}"#,
        );
        assert!(refused.get("image").is_some(), "{refused}");
    }

    #[test]
    fn samples_may_be_downloaded_from_bfls_delivery_hosts() {
        let kind = kind(KEY).unwrap();
        assert_eq!(
            kind.result_hosts,
            &["*.bfl.ai", "bfldeliveryprod.blob.core.windows.net"]
        );
    }

    #[test]
    fn pixel_sizes_parse() {
        assert!(pixels("1024x768").is_ok());
        for bad in ["auto", "x768", "1024x", "0x10", "axb"] {
            assert!(pixels(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn reads_the_submit_answer() {
        let req = flux(br#"{"model":"flux-pro-1.1","prompt":"p"}"#);
        let h = http::HeaderMap::new();
        let p = bfl();
        let body = br#"{"id":"abc-123","polling_url":"https://api.us1.bfl.ai/v1/get_result?id=abc-123","cost":4.0}"#;
        match image_response(&p, &req, &h, body).unwrap() {
            ImageAnswer::Task(t) => assert_eq!(
                t,
                NativeTask {
                    provider: "bfl".into(),
                    id: "abc-123".into(),
                    polling_url: Some("https://api.us1.bfl.ai/v1/get_result?id=abc-123".into()),
                }
            ),
            other => panic!("{other:?}"),
        }
        match image_response(&p, &req, &h, br#"{"id":"abc-123"}"#).unwrap() {
            ImageAnswer::Task(t) => assert_eq!(t.polling_url, None),
            other => panic!("{other:?}"),
        }
        let spaced =
            br#"{"id":"abc-123","polling_url":" https://api.bfl.ai/v1/get_result?id=abc-123\n"}"#;
        match image_response(&p, &req, &h, spaced).unwrap() {
            ImageAnswer::Task(t) => assert_eq!(
                t.polling_url.as_deref(),
                Some("https://api.bfl.ai/v1/get_result?id=abc-123")
            ),
            other => panic!("{other:?}"),
        }
        for bad in [
            &br#"{"polling_url":"https://api.bfl.ai/v1/get_result?id=x"}"#[..],
            br#"{"id":""}"#,
            br#"[]"#,
            b"<html>",
        ] {
            let e = image_response(&p, &req, &h, bad).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
            assert!(!e.retryable());
        }
        let e = image_response(
            &p,
            &req,
            &h,
            format!(r#"{{"detail":"key {KEY} has no access"}}"#).as_bytes(),
        )
        .unwrap_err();
        assert!(
            e.message.contains("no access") && !e.message.contains(KEY),
            "{}",
            e.message
        );
    }

    #[test]
    fn only_bfl_or_own_hosts_may_be_polled() {
        let p = bfl();
        for ok in [
            "https://api.bfl.ai/v1/get_result?id=x",
            "https://api.us1.bfl.ai/v1/get_result?id=x",
            "https://API.EU.BFL.AI/v1/get_result?id=x",
            "https://bfl.ai/v1/get_result?id=x",
            "https://api.bfl.ai.:443/v1/get_result?id=x",
        ] {
            assert_eq!(polling_url_refusal(&p, ok), None, "{ok}");
        }
        for bad in [
            "https://evil.example/v1/get_result?id=x",
            "http://api.bfl.ai.evil.example/v1/get_result?id=x",
            "https://api.bfl.ai.evil.example/v1/get_result?id=x",
            "https://evilbfl.ai/v1/get_result?id=x",
            "https://.bfl.ai/x",
            "http://api.bfl.ai/v1/get_result?id=x",
            "https://api.bfl.ai:8443/v1/get_result?id=x",
            "https://api.bfl.ai@evil.example/v1/get_result?id=x",
            "https://user@api.bfl.ai/v1/get_result?id=x",
            "ftp://api.bfl.ai/x",
            "/v1/get_result?id=x",
            "not a url",
        ] {
            assert!(polling_url_refusal(&p, bad).is_some(), "{bad}");
            let e = poll_request(&p, &task(Some(bad))).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse, "{bad}");
            assert!(!e.retryable());
        }
        // A proxy or fake in front of BFL: its exact scheme, host and port, nothing else.
        let own = support::provider_at("bfl", KEY, "http://127.0.0.1:8099");
        assert_eq!(
            polling_url_refusal(&own, "http://127.0.0.1:8099/v1/get_result?id=x"),
            None
        );
        for bad in [
            "http://127.0.0.1:8100/v1/get_result?id=x",
            "https://127.0.0.1:8099/v1/get_result?id=x",
            "http://localhost:8099/v1/get_result?id=x",
        ] {
            assert!(polling_url_refusal(&own, bad).is_some(), "{bad}");
        }
        let v6 = support::provider_at("bfl", KEY, "http://[::1]:8099");
        assert_eq!(
            polling_url_refusal(&v6, "http://[::1]:8099/v1/get_result?id=x"),
            None
        );
        assert!(polling_url_refusal(&v6, "http://[::2]:8099/v1/get_result?id=x").is_some());
        // The submit answer is refused the same way, before anything is polled.
        let req = flux(br#"{"model":"flux-pro-1.1","prompt":"p"}"#);
        let e = image_response(
            &p,
            &req,
            &http::HeaderMap::new(),
            br#"{"id":"x","polling_url":"https://evil.example/v1/get_result?id=x"}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
        assert!(e.message.contains("evil.example"), "{}", e.message);
    }

    #[test]
    fn polls_the_given_url_or_get_result() {
        let p = bfl();
        let url = "https://api.us1.bfl.ai/v1/get_result?id=7f3c-task";
        match poll_request(&p, &task(Some(url))).unwrap() {
            PollRequest::Url(u) => assert_eq!(u, url),
            other => panic!("{other:?}"),
        }
        match poll_request(&p, &task(None)).unwrap() {
            PollRequest::Api(r) => {
                assert_eq!(r.method, http::Method::GET);
                assert_eq!(r.path, "/v1/get_result?id=7f3c-task");
            }
            other => panic!("{other:?}"),
        }
        let mut odd = task(None);
        odd.id = "a b&c=d/é".into();
        match poll_request(&p, &odd).unwrap() {
            PollRequest::Api(r) => {
                assert_eq!(r.path, "/v1/get_result?id=a%20b%26c%3Dd%2F%C3%A9")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reads_task_states() {
        for (body, queued) in [
            (json!({"id": "t", "status": "Pending"}), true),
            (
                json!({"id": "t", "status": "Pending", "progress": null}),
                true,
            ),
            (json!({"id": "t", "status": "Pending", "progress": 0}), true),
            (
                json!({"id": "t", "status": "Pending", "progress": 0.4}),
                false,
            ),
            (
                json!({"id": "t", "status": "Pending", "progress": 55}),
                false,
            ),
            (
                json!({"id": "t", "status": "Generating", "progress": 0.1}),
                false,
            ),
            (
                json!({"id": "t", "status": "Pending", "progress": "12%"}),
                false,
            ),
            (
                json!({"id": "t", "status": "Pending", "progress": "0"}),
                true,
            ),
            (
                json!({"id": "t", "status": "Pending", "progress": {}}),
                true,
            ),
            (json!({"id": "t", "status": "Reasoning"}), false),
            (json!({"id": "t", "status": "Some Future Stage"}), false),
        ] {
            match poll(body.clone()).unwrap() {
                Poll::Queued => assert!(queued, "{body}"),
                Poll::Running => assert!(!queued, "{body}"),
                Poll::Done(_) => panic!("{body}"),
            }
        }
        let done = poll(json!({"id": "t", "status": "Ready", "progress": null,
            "result": {"sample": "https://delivery-eu1.bfl.ai/results/a/sample.jpeg?se=1&sig=x",
                       "prompt": "p", "seed": 1, "start_time": 1.7e9, "end_time": 1.7e9, "duration": 3.2}}))
        .unwrap();
        match done {
            Poll::Done(images) => assert_eq!(
                images,
                NativeImages {
                    created: None,
                    images: vec![NativeImage::new(ImageData::Url(
                        "https://delivery-eu1.bfl.ai/results/a/sample.jpeg?se=1&sig=x".into()
                    ))],
                    ..Default::default()
                }
            ),
            other => panic!("{other:?}"),
        }
        for bad in [
            json!({"id": "t", "status": "Ready", "result": null}),
            json!({"id": "t", "status": "Ready", "result": {"sample": ""}}),
            json!({"id": "t"}),
            json!({"detail": "oops"}),
        ] {
            let e = poll(bad.clone()).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse, "{bad}");
        }
    }

    #[test]
    fn failed_tasks_are_classified_and_not_retried() {
        let e = poll(json!({"id": "t", "status": "Request Moderated",
            "details": {"Moderation Reasons": ["Derivative Works"]}}))
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        assert!(
            e.message.contains("Request Moderated: Derivative Works"),
            "{}",
            e.message
        );
        let e =
            poll(json!({"id": "t", "status": "Content Moderated", "result": null})).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        assert!(e.message.contains("withheld"), "{}", e.message);

        let e = poll(json!({"id": "t", "status": "Error", "result": null})).unwrap_err();
        assert_eq!((e.kind, e.status), (UpstreamErrorKind::Failure, None));
        let e = poll(json!({"id": "t", "status": "Error",
            "details": {"message": format!("worker crashed near {KEY}")}}))
        .unwrap_err();
        assert!(e.message.contains("worker crashed"), "{}", e.message);
        assert!(!e.message.contains(KEY));

        let e = poll(json!({"id": "t", "status": "Task not found"})).unwrap_err();
        assert_eq!((e.kind, e.status), (UpstreamErrorKind::Failure, None));
    }

    #[test]
    fn an_error_task_says_why_and_policy_failures_are_content_policy() {
        // BFL's guides: a failed task is `{"status": "Error", "error": code, "message": text}`.
        let e = poll(
            json!({"id": "t", "status": "Error", "error": "content_policy_violation",
            "message": "The prompt violated content policy"}),
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        assert!(
            e.message.contains("content_policy_violation")
                && e.message.contains("The prompt violated content policy"),
            "{}",
            e.message
        );
        let e =
            poll(json!({"id": "t", "status": "Error", "error": "Content moderated"})).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy, "{}", e.message);
        for (error, text) in [
            (json!("internal_error"), "internal_error"),
            (json!("Error description"), "Error description"),
            (json!({"message": "invalid_image"}), "invalid_image"),
        ] {
            let e = poll(json!({"id": "t", "status": "Error", "error": error})).unwrap_err();
            assert_eq!(
                (e.kind, e.status),
                (UpstreamErrorKind::Failure, None),
                "{text}"
            );
            assert!(e.message.contains(text), "{}", e.message);
        }
        let e = poll(json!({"id": "t", "status": "Error", "error": format!("bad key {KEY}")}))
            .unwrap_err();
        assert!(!e.message.contains(KEY), "{}", e.message);
    }

    #[test]
    fn maps_http_errors() {
        let p = bfl();
        let e = error_response(
            &p,
            422,
            br#"{"detail":[{"loc":["body","width"],"msg":"Input should be less than or equal to 1440","type":"less_than_equal"}]}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(
            e.message,
            "body.width: Input should be less than or equal to 1440"
        );
        let cases = [
            (400, UpstreamErrorKind::InvalidRequest, false),
            (401, UpstreamErrorKind::AuthRejected, false),
            (402, UpstreamErrorKind::Failure, false),
            (403, UpstreamErrorKind::AuthRejected, false),
            (404, UpstreamErrorKind::Failure, false),
            (429, UpstreamErrorKind::RateLimited, true),
            (500, UpstreamErrorKind::Failure, true),
            (503, UpstreamErrorKind::Failure, true),
        ];
        for (status, kind, retryable) in cases {
            let body = format!(r#"{{"detail":"status {status} for key {KEY}"}}"#);
            let e = error_response(&p, status, body.as_bytes());
            assert_eq!((e.kind, e.retryable()), (kind, retryable), "{status}");
            assert_eq!(e.status, Some(status));
            assert!(
                e.message.contains(&format!("status {status}")),
                "{}",
                e.message
            );
            assert!(!e.message.contains(KEY));
        }
        let e = error_response(&p, 502, b"<html>bad gateway</html>");
        assert_eq!(e.message, "HTTP 502");
    }

    #[test]
    fn an_endpoint_bfl_does_not_serve_is_an_unknown_model() {
        let p = bfl();
        let e = error_response(&p, 404, br#"{"detail":"Not Found"}"#);
        assert_eq!(e.kind, UpstreamErrorKind::UnknownModel);
        assert!(!e.retryable());
        // Any other 404 stays a failure.
        let e = error_response(&p, 404, br#"{"detail":"Finetune not found"}"#);
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        let e = error_response(&p, 404, b"<html>not found</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
    }
}
