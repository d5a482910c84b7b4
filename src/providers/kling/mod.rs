//! Kling (可灵) images: `POST /v1/images/generations` starts a task, `GET
//! /v1/images/generations/{task_id}` reads it until it is done.
//!
//! Every request carries `Authorization: Bearer <JWT>`, signed by the gateway itself (see
//! [`crate::providers::kling::auth`]); nothing here deals with credentials.
//!
//! The submit body is `model_name`, `prompt`, `negative_prompt`, `image` (the caller's URL as is, or
//! the bytes as raw base64: Kling refuses the `data:` prefix), `image_fidelity` (the public
//! `strength`, only with an image), `resolution` (the public `quality`: `std` → `1k`, "1K
//! standard", `pro` → `2k`, "2K high-res"; no quality → no field, Kling's default 1k), `n` (up to 9
//! in one task, so the gateway never fans out), `aspect_ratio` (the family's table maps the public
//! `size` to it; it is always sent, because Kling's own default, 16:9, is not the public default
//! size 1024x1024) and `watermark_info: {"enabled": true}` when the caller asks for a watermark,
//! followed by the caller's pass-through fields (`image_reference`, `human_fidelity`).
//! `callback_url` is never sent: the gateway polls, and validation refuses the field from callers.
//!
//! What each model takes differs, and the families say it (Kling's capability map): `kling-v1`
//! edits a reference image (`image` + `image_fidelity`) at 1K, without 21:9; `kling-v1-5` takes a
//! reference image only typed by `image_reference` (`subject` or `face`) at 1K; `kling-v2` and
//! `kling-v2-1` take no plain reference image on this endpoint (theirs go through
//! `/v1/images/multi-image2image`, or, for kling-v2, a restyle whose size follows the input), so
//! their family refuses `image`; they make 1K or 2K. Kling refuses `negative_prompt` together with
//! `image`, and `image_reference` is required with an image on kling-v1-5; neither rule fits the
//! caps, so both are refused here with a 400 naming the field before anything is sent.
//!
//! Every answer, success or not, is the envelope `{"code", "message", "request_id", "data": {
//! "task_id", "task_status", "task_status_msg", "watermark_info", "created_at", "updated_at",
//! "task_result": {"images": [{"index", "url", "watermark_url"}]}}}`; a non-zero `code` is an error
//! even with HTTP 200. `task_status` is `submitted` (public `pending`), `processing` (`running`),
//! `succeed` (images sorted by `index`, `created` from `created_at` in milliseconds; with
//! `watermark_info.enabled` the watermarked copies at `watermark_url` are delivered) or `failed`.
//!
//! Error codes (Kling's table): 1000–1004 authentication (HTTP 401) → the gateway's credentials
//! were rejected; 1100–1102 account abnormal / in arrears / resource pack used up (sent with HTTP
//! 429!) and 1103 no permission for the interface or model (403) → a failure kept at its 4xx
//! status so it is not retried; 1200–1201 invalid parameters (400) → the caller's request, except
//! a 1201 about `model_name` (only the configuration sets it) → unknown model; 1202 invalid method
//! (404) → a failure; 1203 resource not found, "e.g. the model" (404) → unknown model when its
//! message is about the model, else (a polled task) a failure; 1300 platform policy (400) → a
//! failure, not retried; 1301 content security policy (400) → content policy; 1302–1303 rate or
//! concurrency limit (429) → rate limited, retried; 1304 IP allow-list (429) → the gateway's access
//! was refused, like bad credentials (not retried: waiting does not change an allow-list); 5000+
//! server errors (5xx) → a provider failure, retried.
//!
//! Unconfirmed (the sources are third-party mirrors of Kling's docs, not Kling's own pages):
//! - the texts of Kling's messages for an unknown model (only their codes are documented);
//! - why a task failed is only in the free text `task_status_msg`: a message mentioning risk
//!   control, sensitive content, policy, moderation or violations (English or Chinese) is taken for
//!   a content-policy refusal, anything else for a provider failure. Read while polling, either
//!   ends the wait (the task ran and was billed; whether to pay for it again is the caller's
//!   choice); the caller sees Kling's reason;
//! - task ids are numeric strings in every example; any id of URL-safe characters is accepted.
//!
//! The provider ledger (`docs/providers/kling.md`) lists each fact and its source.

pub(crate) mod auth;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::error::GatewayError;
use crate::common::native::PollRequest;

use crate::common::error::UpstreamError;

use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::common::error::UpstreamErrorKind;
use crate::common::image_input::ImageInput;
use crate::common::images::ImageAnswer;
use crate::common::images::ImageData;
use crate::common::images::NativeImage;
use crate::common::images::NativeImages;
use crate::common::images::NativeTask;
use crate::common::images::Poll;
use crate::common::native::json_with_extra;
use crate::common::native::NativeRequest;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const GENERATIONS_PATH: &str = "/v1/images/generations";

/// Largest reference image Kling takes (its documented limit).
const MAX_IMAGE_BYTES: usize = 10 * 1024 * 1024;

/// Reference image types Kling takes (`.jpg`, `.jpeg`, `.png`).
const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg"];

/// Longest task id accepted (it goes into the poll URL's path).
const MAX_TASK_ID: usize = 128;

/// Words in `task_status_msg` that mark a failed task as refused content (lower-cased match).
const POLICY_WORDS: &[&str] = &[
    "risk",
    "sensitive",
    "policy",
    "moderat",
    "violat",
    "inappropriate",
    "nsfw",
    "风控",
    "敏感",
    "违规",
    "违禁",
    "审核",
    "安全策略",
];

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct GenerationBody<'a> {
    model_name: &'a str,
    prompt: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    negative_prompt: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    image: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    image_fidelity: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resolution: Option<&'static str>,
    n: u64,
    aspect_ratio: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    watermark_info: Option<WatermarkInfo>,
}

/// `{"enabled": bool}`: whether Kling also makes a watermarked copy of each image.
#[derive(Serialize, Deserialize, Default)]
struct WatermarkInfo {
    #[serde(default)]
    enabled: bool,
}

/// The envelope of every Kling answer.
#[derive(Deserialize)]
struct Envelope {
    /// `0` on success; a number (a numeric string is tolerated).
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    data: Option<TaskData>,
}

#[derive(Deserialize)]
struct TaskData {
    /// A string in Kling's answers; a number is tolerated.
    #[serde(default)]
    task_id: Option<Value>,
    #[serde(default)]
    task_status: Option<String>,
    #[serde(default)]
    task_status_msg: Option<String>,
    /// Unix milliseconds.
    #[serde(default)]
    created_at: Option<f64>,
    #[serde(default)]
    task_result: Option<TaskResult>,
    /// Echoes the submit's `watermark_info`: when enabled, the images to deliver are the
    /// watermarked copies (`watermark_url`).
    #[serde(default)]
    watermark_info: Option<WatermarkInfo>,
}

#[derive(Deserialize)]
struct TaskResult {
    #[serde(default)]
    images: Vec<ResultImage>,
}

#[derive(Deserialize)]
struct ResultImage {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    watermark_url: Option<String>,
}

// ---- translation to native -------------------------------------------------------------------

/// The submit request for one task making `n` images (never more than the family's 9).
pub(crate) fn image_request(
    target: &Target,
    req: &ImageRequest<'_>,
    n: u64,
) -> Result<NativeRequest, GatewayError> {
    check(req)?;
    let aspect_ratio = req.required_aspect_ratio()?;
    let image = req.image.as_ref().map(reference_image).transpose()?;
    let body = GenerationBody {
        model_name: &target.native_model,
        prompt: req.prompt.as_str(),
        negative_prompt: req.negative_prompt.as_ref().map(|p| p.as_str()),
        image_fidelity: image.as_ref().and(req.strength),
        image,
        resolution: resolution(req.quality),
        n,
        aspect_ratio,
        // Kling's default is no watermarked copy, so the field is sent only when asked for.
        watermark_info: req.watermark.then_some(WatermarkInfo { enabled: true }),
    };
    Ok(NativeRequest::post_json(
        GENERATIONS_PATH,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

/// Kling's refusals that the family table cannot express, in one place: the adapter's validation
/// step runs them before anything is started, and [`image_request`] again.
fn check(req: &ImageRequest<'_>) -> Result<(), GatewayError> {
    if req.negative_prompt.is_some() && req.image.is_some() {
        return Err(GatewayError::field(
            "negative_prompt",
            "cannot be combined with `image`: Kling does not take a negative prompt with a \
             reference image",
        ));
    }
    check_reference_type(req)?;
    req.required_aspect_ratio()?;
    if let Some(ImageInput::Data { mime, bytes }) = &req.image {
        if !IMAGE_TYPES.contains(mime) {
            return Err(GatewayError::field(
                "image",
                format!("is {mime}; Kling takes PNG or JPEG reference images"),
            ));
        }
        if bytes.len() > MAX_IMAGE_BYTES {
            return Err(GatewayError::field(
                "image",
                "is larger than the 10 MB Kling takes",
            ));
        }
    }
    Ok(())
}

/// A family taking `image_reference` (kling-v1-5) takes a reference image only as a typed
/// reference: Kling requires `image_reference` (`subject` or `face`) whenever `image` is given, and
/// `image_reference` means nothing without an image. Both are refused here with a 400 naming the
/// field, before anything is sent.
fn check_reference_type(req: &ImageRequest<'_>) -> Result<(), GatewayError> {
    if !req.caps.native_fields.contains(&"image_reference") {
        return Ok(());
    }
    let typed = req
        .passthrough
        .iter()
        .any(|(k, _)| k.as_str() == "image_reference");
    match (req.image.is_some(), typed) {
        (true, false) => Err(GatewayError::field(
            "image_reference",
            format!(
                "is required with `image` on model {}: `subject` (character features) or `face` \
                 (facial appearance)",
                req.model.name
            ),
        )),
        (false, true) => Err(GatewayError::field(
            "image_reference",
            "needs a reference `image`",
        )),
        _ => Ok(()),
    }
}

/// The reference image as Kling takes it: the caller's URL (Kling downloads it), or the bytes as
/// raw base64 without the `data:` prefix, which Kling refuses.
fn reference_image(input: &ImageInput) -> Result<Cow<'_, str>, GatewayError> {
    match input {
        ImageInput::Url(url) => Ok(Cow::Borrowed(url)),
        // [`check`] has refused the types and sizes Kling does not take.
        ImageInput::Data { .. } => input.base64().map(Cow::Owned).ok_or_else(|| {
            GatewayError::Internal("reference image bytes could not be encoded".into())
        }),
    }
}

/// Kling's `resolution` for the public `quality`: `std` is 1K ("1K standard"), `pro` 2K ("2K
/// high-res"); the families list only the ones their models make.
fn resolution(quality: Option<&str>) -> Option<&'static str> {
    match quality {
        Some("std") => Some("1k"),
        Some("pro") => Some("2k"),
        _ => None,
    }
}

/// The poll request for `task`. Ids were checked when the task was accepted; they are
/// percent-encoded anyway, since a task can also come back from the shared task store.
pub(crate) fn poll_request(task: &NativeTask) -> NativeRequest {
    NativeRequest::get(format!("{GENERATIONS_PATH}/{}", path_segment(&task.id)))
}

/// `s` with every byte outside RFC 3986's unreserved set percent-encoded.
fn path_segment(s: &str) -> Cow<'_, str> {
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
    if s.bytes().all(unreserved) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if unreserved(b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Cow::Owned(out)
}

// ---- translation back ------------------------------------------------------------------------

/// The submit answer: the task to poll.
pub(crate) fn image_response(
    provider: &Provider,
    _req: &ImageRequest<'_>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<ImageAnswer, UpstreamError> {
    let answer: Envelope = crate::providers::parse_answer(provider, body)?;
    let data = accepted(provider, answer)?;
    let id = task_id(provider, data.task_id.as_ref())?;
    // A task refused at once (moderated prompt) may already say so.
    if data.task_status.as_deref() == Some("failed") {
        return Err(task_failed(provider, data.task_status_msg.as_deref()));
    }
    Ok(ImageAnswer::Task(NativeTask {
        provider: provider.name.clone(),
        id,
        polling_url: None,
    }))
}

/// One poll's answer: the task's state, its images, or why it failed.
pub(crate) fn poll_response(
    provider: &Provider,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<Poll, UpstreamError> {
    let answer: Envelope = crate::providers::parse_answer(provider, body)?;
    let data = accepted(provider, answer)?;
    match data.task_status.as_deref() {
        Some("submitted") => Ok(Poll::Queued),
        Some("processing") => Ok(Poll::Running),
        Some("succeed") => done(provider, data).map(Poll::Done),
        Some("failed") => Err(task_failed(provider, data.task_status_msg.as_deref())),
        Some(other) => Err(crate::upstream::provider::bad_answer(
            provider,
            format!("unknown task_status `{}`", provider.redact(other)),
        )),
        None => Err(crate::upstream::provider::bad_answer(
            provider,
            "answer has no task_status",
        )),
    }
}

/// The `data` of a 2xx answer whose `code` says success; a non-zero code is classified like the
/// error it is.
fn accepted(provider: &Provider, answer: Envelope) -> Result<TaskData, UpstreamError> {
    match answer.code.as_ref().map(code_number) {
        Some(Some(0)) => {}
        Some(Some(code)) => {
            return Err(code_error(
                provider,
                None,
                code,
                answer.message.as_deref(),
                answer.request_id.as_deref(),
            ))
        }
        Some(None) => {
            return Err(crate::upstream::provider::bad_answer(
                provider,
                "answer has a non-numeric code",
            ))
        }
        // No code at all: believed only when the task is there.
        None => {}
    }
    answer
        .data
        .ok_or_else(|| crate::upstream::provider::bad_answer(provider, "answer has no data"))
}

/// The task id, checked to be safe in a URL path.
fn task_id(provider: &Provider, id: Option<&Value>) -> Result<String, UpstreamError> {
    let id = match id {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => {
            return Err(crate::upstream::provider::bad_answer(
                provider,
                "answer has no task_id",
            ))
        }
    };
    let safe = !id.is_empty()
        && id.len() <= MAX_TASK_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !safe {
        return Err(crate::upstream::provider::bad_answer(
            provider,
            "answer has a malformed task_id",
        ));
    }
    Ok(id)
}

/// A finished task's images, in Kling's `index` order: the watermarked copies when the task was
/// asked for them (a watermark asked for is never dropped: a missing copy is a bad answer).
fn done(provider: &Provider, data: TaskData) -> Result<NativeImages, UpstreamError> {
    let watermarked = data.watermark_info.as_ref().is_some_and(|w| w.enabled);
    let mut images = data.task_result.map(|r| r.images).unwrap_or_default();
    if images.is_empty() {
        return Err(crate::upstream::provider::bad_answer(
            provider,
            "finished task holds no images",
        ));
    }
    // Stable: images without an index keep their place after the indexed ones.
    images.sort_by_key(|i| i.index.unwrap_or(u64::MAX));
    let total = images.len();
    let images = images
        .into_iter()
        .enumerate()
        .map(|(i, image)| {
            let (url, field) = if watermarked {
                (image.watermark_url, "watermark_url")
            } else {
                (image.url, "url")
            };
            match url.filter(|u| !u.trim().is_empty()) {
                Some(url) => Ok(NativeImage::new(ImageData::Url(url))),
                None => Err(crate::upstream::provider::bad_answer(
                    provider,
                    format!("image {} of {total} has no {field}", i + 1),
                )),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let created = data
        .created_at
        .filter(|ms| ms.is_finite() && *ms > 0.0)
        .map(|ms| (ms / 1000.0) as i64);
    Ok(NativeImages {
        created,
        images,
        ..Default::default()
    })
}

/// A task Kling reports `failed`: refused content or a failure, told apart by its message (see the
/// module doc for the heuristic). No HTTP status is attached: Kling sent none for the verdict, and
/// the caller is shown Kling's own reason. A verdict read while polling ends the wait whatever its
/// kind; one already in the submit answer may be retried (a generation that failed for another
/// reason than content can pass the next time).
fn task_failed(provider: &Provider, reason: Option<&str>) -> UpstreamError {
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    let message = reason
        .map(|r| format!("the task failed: {}", provider.redact(r)))
        .unwrap_or_else(|| "the task failed without a reason".to_string());
    if reason.is_some_and(is_policy_message) {
        UpstreamError::new(UpstreamErrorKind::ContentPolicy, &provider.name, message)
    } else {
        UpstreamError::new(UpstreamErrorKind::Failure, &provider.name, message)
    }
}

fn is_policy_message(message: &str) -> bool {
    let lower = message.to_lowercase();
    POLICY_WORDS.iter().any(|w| lower.contains(w))
}

// ---- error mapping ---------------------------------------------------------------------------

/// A non-2xx answer (submit or poll): classified by its envelope's `code` when it has a known one,
/// else by the HTTP status.
pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let envelope = serde_json::from_slice::<Envelope>(body).ok();
    let (code, message, request_id) = match &envelope {
        Some(e) => (
            e.code.as_ref().and_then(code_number),
            e.message.as_deref(),
            e.request_id.as_deref(),
        ),
        None => (None, None, None),
    };
    match code {
        Some(code) if code != 0 => code_error(provider, Some(status), code, message, request_id),
        _ => {
            let message = message
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(|m| provider.redact(m))
                .unwrap_or_else(|| format!("HTTP {status}"));
            UpstreamError::from_status(&provider.name, status, message)
        }
    }
}

/// The error for a non-zero Kling `code`; `http` is the answer's status (`None` for an error
/// inside a 200).
fn code_error(
    provider: &Provider,
    http: Option<u16>,
    code: i64,
    message: Option<&str>,
    request_id: Option<&str>,
) -> UpstreamError {
    let text = message
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| provider.redact(m));
    // The request id is what Kling's support asks for.
    let request_id = request_id
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(|r| format!(", request {}", provider.redact(r)))
        .unwrap_or_default();
    let about_the_model = names_the_model(code, text.as_deref());
    let message = match text {
        Some(t) => format!("{t} (code {code}{request_id})"),
        None => format!("code {code}{request_id}"),
    };
    match code_class(code) {
        Some((_, documented)) if about_the_model => {
            UpstreamError::new(UpstreamErrorKind::UnknownModel, &provider.name, message)
                .with_status(answer_status(http, documented))
        }
        Some((kind, documented)) => UpstreamError::new(kind, &provider.name, message)
            .with_status(answer_status(http, documented)),
        None => match http.filter(|s| *s >= 400) {
            Some(status) => UpstreamError::from_status(&provider.name, status, message),
            // An unknown code inside a 200: a provider failure that may pass, so the status stays
            // unset (retryable) and the message visible.
            None => UpstreamError::new(UpstreamErrorKind::Failure, &provider.name, message),
        },
    }
}

/// Whether a Kling error says the configured native model is not served: 1203 ("the requested
/// resource does not exist, e.g. the model") whose message is about the model, not a polled task;
/// or 1201 (an invalid parameter) about `model_name`, which only the gateway's configuration sets.
fn names_the_model(code: i64, message: Option<&str>) -> bool {
    let lower = message.unwrap_or_default().to_ascii_lowercase();
    match code {
        1203 => lower.contains("model"),
        1201 => lower.contains("model_name"),
        _ => false,
    }
}

/// What a Kling error code means, and the HTTP status Kling documents with it (see the module doc;
/// unconfirmed).
fn code_class(code: i64) -> Option<(UpstreamErrorKind, u16)> {
    use UpstreamErrorKind::*;
    Some(match code {
        1000..=1004 => (AuthRejected, 401),
        // Account problems: retrying does not pay the bill, so a 4xx Failure (never retried),
        // although Kling sends 1100–1102 with HTTP 429.
        1100..=1102 => (Failure, 429),
        1103 => (Failure, 403),
        1200 | 1201 => (InvalidRequest, 400),
        // No such method (a path the gateway should never send): the operator's to fix.
        1202 => (Failure, 404),
        // "The requested resource does not exist, e.g. the model" (or a polled task): see
        // `names_the_model` for when it is the configured native model.
        1203 => (Failure, 404),
        // "Platform policy" is not a content verdict (only 1301, the content security policy,
        // is); it is not the caller's to fix and does not pass by retrying.
        1300 => (Failure, 400),
        1301 => (ContentPolicy, 400),
        1302 | 1303 => (RateLimited, 429),
        // The gateway's address is not on the account's allow-list.
        1304 => (AuthRejected, 403),
        5001 => (Failure, 503),
        5000..=5999 => (Failure, 500),
        _ => return None,
    })
}

/// The status to keep: the answer's own when it is an error of the same class (4xx or 5xx) as the
/// documented one, else the documented one, so the code decides whether a retry can help.
fn answer_status(http: Option<u16>, documented: u16) -> u16 {
    match http {
        Some(s) if s >= 400 && s / 100 == documented / 100 => s,
        _ => documented,
    }
}

/// The error code as a number (Kling sends integers; numeric strings are tolerated).
fn code_number(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

// ---- registration ----------------------------------------------------------------------------

/// Settings only Kling takes.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Settings {
    /// The secret key its tokens are signed with (`api_key` is the access key).
    #[serde(default)]
    pub secret_key: Option<String>,
}

/// The Kling kind: JWTs signed per request from the access and secret keys; images, run as
/// tasks.
pub(crate) fn kind(
    settings: &Settings,
    key: &str,
) -> Result<crate::providers::registry::Kind, String> {
    use crate::upstream::provider::Auth;
    let secret = settings.secret_key.as_deref().map(str::trim).unwrap_or("");
    let auth = match (key.is_empty(), secret.is_empty()) {
        (true, _) => Auth::Missing,
        (false, true) => {
            return Err(
                "kling signs its tokens with a secret key: set secret_key as well".to_string(),
            )
        }
        (false, false) => Auth::Signed(Box::new(auth::Signer::new(key, secret))),
    };
    let images = crate::providers::registry::ImageFns {
        request: image_request,
        validate: |_, req| check(req),
        response: image_response,
        input_as_bytes: false,
        tasks: Some(crate::providers::registry::TaskFns {
            poll_request: |_, task| Ok(PollRequest::Api(poll_request(task))),
            poll_response,
        }),
    };
    // Kling's image links are on its CDN (`cdn.klingai.com`, `*-kling.klingai.com`).
    let hosts = &["*.klingai.com"];
    Ok(crate::providers::registry::images_kind(
        auth,
        error_response,
        hosts,
        images,
    ))
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::providers::test_support as support;
    use serde_json::json;

    const ACCESS_KEY: &str = "kling-access-key-unit";
    const NATIVE: &str = "kling-v2-1";
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRdata";

    /// A Kling account with a signer (so `redact` knows the access key).
    fn kling() -> Arc<Provider> {
        support::provider("kling", ACCESS_KEY)
    }

    fn b64(bytes: &[u8]) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// The native request for `model` (its own native name) of `family`, or the refusal.
    fn build_as(
        model: &str,
        family: &str,
        body: &Value,
        n: u64,
    ) -> Result<NativeRequest, GatewayError> {
        let bytes = serde_json::to_vec(body).unwrap();
        let req = support::image_request(model, family, support::target(kling(), model), &bytes);
        image_request(&req.model.targets[0], &req, n)
    }

    fn native(body: &Value, n: u64) -> Value {
        native_as(NATIVE, "kling", body, n)
    }

    fn native_as(model: &str, family: &str, body: &Value, n: u64) -> Value {
        let out = build_as(model, family, body, n).unwrap();
        assert_eq!(out.method, http::Method::POST);
        assert_eq!(out.path, "/v1/images/generations");
        assert_eq!(out.content_type, "application/json");
        serde_json::from_slice(&out.body).unwrap()
    }

    fn submit(answer: &Value) -> Result<ImageAnswer, UpstreamError> {
        let req = support::image_request(
            "kling-v2-1",
            "kling",
            support::target(kling(), NATIVE),
            br#"{"model":"kling-v2-1","prompt":"p"}"#,
        );
        let bytes = serde_json::to_vec(answer).unwrap();
        image_response(&kling(), &req, &http::HeaderMap::new(), &bytes)
    }

    fn poll(answer: &Value) -> Result<Poll, UpstreamError> {
        let bytes = serde_json::to_vec(answer).unwrap();
        poll_response(&kling(), &http::HeaderMap::new(), &bytes)
    }

    fn envelope(data: Value) -> Value {
        json!({"code": 0, "message": "SUCCEED", "request_id": "req-1", "data": data})
    }

    fn task(status: &str, extra: Value) -> Value {
        let mut data = json!({
            "task_id": "822953089408827433",
            "task_status": status,
            "task_status_msg": "",
            "task_info": {},
            "created_at": 1_764_235_825_029_i64,
            "updated_at": 1_764_235_834_382_i64,
            "task_result": {}
        });
        for (k, v) in extra.as_object().unwrap() {
            data[k] = v.clone();
        }
        envelope(data)
    }

    fn error(code: i64, message: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({"code": code, "message": message, "request_id": "r-9"})).unwrap()
    }

    // ---- requests ----

    #[test]
    fn text_to_image_request() {
        let body = native(
            &json!({
                "model": "kling-v2-1",
                "prompt": "a lighthouse",
                "negative_prompt": "blurry",
                "size": "1280x720",
                "quality": "pro",
                "n": 3
            }),
            3,
        );
        assert_eq!(
            body,
            json!({
                "model_name": NATIVE,
                "prompt": "a lighthouse",
                "negative_prompt": "blurry",
                "resolution": "2k",
                "n": 3,
                "aspect_ratio": "16:9"
            })
        );
    }

    #[test]
    fn defaults_send_the_public_default_ratio_and_no_resolution() {
        let body = native(&json!({"model": "kling-v2-1", "prompt": "p"}), 1);
        assert_eq!(
            body,
            json!({"model_name": NATIVE, "prompt": "p", "n": 1, "aspect_ratio": "1:1"})
        );
        let std = native(
            &json!({"model": "kling-v2-1", "prompt": "p", "quality": "std", "aspect_ratio": "21:9"}),
            1,
        );
        assert_eq!(std["resolution"], "1k");
        assert_eq!(std["aspect_ratio"], "21:9");
        assert!(std.get("callback_url").is_none());
    }

    #[test]
    fn reference_image_by_url_with_strength_and_pass_through_fields() {
        // kling-v1-5: a typed reference, with its fidelities.
        let body = native_as(
            "kling-v1-5",
            "kling-v1-5",
            &json!({
                "model": "kling-v1-5",
                "prompt": "p",
                "image": "https://img.example/ref.png",
                "strength": 0.7,
                "image_reference": "subject",
                "human_fidelity": 0.3
            }),
            1,
        );
        assert_eq!(
            body,
            json!({
                "model_name": "kling-v1-5",
                "prompt": "p",
                "image": "https://img.example/ref.png",
                "image_fidelity": 0.7,
                "n": 1,
                "aspect_ratio": "1:1",
                "image_reference": "subject",
                "human_fidelity": 0.3
            })
        );
        // kling-v1: a plain reference image.
        let body = native_as(
            "kling-v1",
            "kling-v1",
            &json!({"model": "kling-v1", "prompt": "p", "image": "https://img.example/ref.png",
                    "strength": 0.2}),
            1,
        );
        assert_eq!(
            body,
            json!({"model_name": "kling-v1", "prompt": "p", "image": "https://img.example/ref.png",
                   "image_fidelity": 0.2, "n": 1, "aspect_ratio": "1:1"})
        );
    }

    #[test]
    fn reference_image_bytes_go_as_raw_base64_with_the_default_fidelity() {
        for given in [b64(PNG), format!("data:image/png;base64,{}", b64(PNG))] {
            let body = native_as(
                "kling-v1",
                "kling-v1",
                &json!({"model": "kling-v1", "prompt": "p", "image": given}),
                1,
            );
            assert_eq!(body["image"], b64(PNG));
            assert_eq!(body["image_fidelity"], 0.5);
        }
    }

    /// The 400's `details`.
    fn details(r: Result<NativeRequest, GatewayError>) -> Value {
        let e = r.unwrap_err();
        assert_eq!(e.status(), 400);
        serde_json::from_slice::<Value>(&e.body()).unwrap()["details"].clone()
    }

    #[test]
    fn refuses_what_kling_cannot_take() {
        let d = details(build_as(
            "kling-v1",
            "kling-v1",
            &json!({"model": "kling-v1", "prompt": "p", "negative_prompt": "x",
                    "image": "https://img.example/a.png"}),
            1,
        ));
        assert!(
            d["negative_prompt"].as_str().unwrap().contains("image"),
            "{d}"
        );
        let webp = b64(b"RIFF\0\0\0\0WEBPVP8 data");
        let d = details(build_as(
            "kling-v1",
            "kling-v1",
            &json!({"model": "kling-v1", "prompt": "p", "image": webp}),
            1,
        ));
        assert!(d["image"].as_str().unwrap().contains("image/webp"), "{d}");
    }

    #[test]
    fn kling_v1_5_takes_a_reference_image_only_typed() {
        let d = details(build_as(
            "kling-v1-5",
            "kling-v1-5",
            &json!({"model": "kling-v1-5", "prompt": "p", "image": "https://img.example/a.png"}),
            1,
        ));
        let why = d["image_reference"].as_str().unwrap();
        assert!(why.contains("subject") && why.contains("face"), "{d}");
        let d = details(build_as(
            "kling-v1-5",
            "kling-v1-5",
            &json!({"model": "kling-v1-5", "prompt": "p", "image_reference": "face"}),
            1,
        ));
        assert!(
            d["image_reference"].as_str().unwrap().contains("image"),
            "{d}"
        );
        // Text-to-image needs neither.
        let body = native_as(
            "kling-v1-5",
            "kling-v1-5",
            &json!({"model": "kling-v1-5", "prompt": "p", "aspect_ratio": "21:9"}),
            1,
        );
        assert_eq!(body["aspect_ratio"], "21:9");
    }

    #[test]
    fn each_family_refuses_what_its_models_cannot_do() {
        let refused = |model: &str, body: &str| {
            support::image_refusal(
                model,
                model_family(model),
                support::target(kling(), model),
                body.as_bytes(),
            )
        };
        // kling-v2-1 (and kling-v2): no plain reference image on this endpoint.
        let r = refused(
            "kling-v2-1",
            r#"{"model":"kling-v2-1","prompt":"p","image":"https://img.example/a.png"}"#,
        );
        assert!(r.get("image").is_some(), "{r}");
        let r = refused(
            "kling-v2-1",
            r#"{"model":"kling-v2-1","prompt":"p","image_reference":"face"}"#,
        );
        assert!(r.get("image_reference").is_some(), "{r}");
        // kling-v1 and kling-v1-5 make 1K only; kling-v1 has no 21:9.
        for model in ["kling-v1", "kling-v1-5"] {
            let body = format!(r#"{{"model":"{model}","prompt":"p","quality":"pro"}}"#);
            assert!(refused(model, &body).get("quality").is_some(), "{model}");
        }
        let r = refused(
            "kling-v1",
            r#"{"model":"kling-v1","prompt":"p","aspect_ratio":"21:9"}"#,
        );
        assert!(r.get("aspect_ratio").is_some(), "{r}");
        let r = refused(
            "kling-v1",
            r#"{"model":"kling-v1","prompt":"p","image_reference":"face"}"#,
        );
        assert!(r.get("image_reference").is_some(), "{r}");
    }

    fn model_family(model: &str) -> &'static str {
        match model {
            "kling-v1" => "kling-v1",
            "kling-v1-5" => "kling-v1-5",
            _ => "kling",
        }
    }

    #[test]
    fn a_watermark_asks_for_klings_watermarked_copies() {
        let body = native(
            &json!({"model": "kling-v2-1", "prompt": "p", "watermark": true}),
            1,
        );
        assert_eq!(body["watermark_info"], json!({"enabled": true}));
        let body = native(&json!({"model": "kling-v2-1", "prompt": "p"}), 1);
        assert!(body.get("watermark_info").is_none(), "{body}");
        // The finished task delivers the watermarked copies when the task says it made them.
        let done = poll(&task(
            "succeed",
            json!({"watermark_info": {"enabled": true}, "task_result": {"images": [
                {"index": 0, "url": "https://cdn.klingai.com/a.png",
                 "watermark_url": "https://cdn.klingai.com/a-wm.png"}
            ]}}),
        ))
        .unwrap();
        let Poll::Done(images) = done else {
            panic!("not done")
        };
        assert_eq!(
            images.images[0].data,
            ImageData::Url("https://cdn.klingai.com/a-wm.png".into())
        );
        // Asked for but missing: never the plain image instead.
        let e = poll(&task(
            "succeed",
            json!({"watermark_info": {"enabled": true}, "task_result": {"images": [
                {"index": 0, "url": "https://cdn.klingai.com/a.png"}
            ]}}),
        ))
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
        assert!(e.message.contains("watermark_url"), "{}", e.message);
        // Not asked for: the plain image.
        let done = poll(&task(
            "succeed",
            json!({"watermark_info": {"enabled": false}, "task_result": {"images": [
                {"index": 0, "url": "https://cdn.klingai.com/a.png",
                 "watermark_url": "https://cdn.klingai.com/a-wm.png"}
            ]}}),
        ))
        .unwrap();
        let Poll::Done(images) = done else {
            panic!("not done")
        };
        assert_eq!(
            images.images[0].data,
            ImageData::Url("https://cdn.klingai.com/a.png".into())
        );
    }

    #[test]
    fn poll_path_carries_the_task_id_encoded() {
        let t = |id: &str| NativeTask {
            provider: "kling".into(),
            id: id.into(),
            polling_url: None,
        };
        let r = poll_request(&t("822953089408827433"));
        assert_eq!(r.method, http::Method::GET);
        assert_eq!(r.path, "/v1/images/generations/822953089408827433");
        assert!(r.body.is_empty());
        assert_eq!(
            poll_request(&t("a/../b?c")).path,
            "/v1/images/generations/a%2F..%2Fb%3Fc"
        );
    }

    // ---- answers ----

    #[test]
    fn submit_answer_is_the_task() {
        match submit(&task("submitted", json!({}))).unwrap() {
            ImageAnswer::Task(t) => assert_eq!(
                t,
                NativeTask {
                    provider: "kling".into(),
                    id: "822953089408827433".into(),
                    polling_url: None
                }
            ),
            other => panic!("{other:?}"),
        }
        // A numeric id is taken as its digits.
        let numeric = envelope(json!({"task_id": 42, "task_status": "submitted"}));
        assert!(matches!(submit(&numeric).unwrap(), ImageAnswer::Task(t) if t.id == "42"));
    }

    #[test]
    fn submit_answer_without_a_usable_task_is_a_bad_response() {
        for answer in [
            envelope(json!({"task_status": "submitted"})),
            envelope(json!({"task_id": "../x", "task_status": "submitted"})),
            envelope(json!({"task_id": "", "task_status": "submitted"})),
            json!({"code": 0, "message": "SUCCEED"}),
            json!({"code": "zero", "data": {"task_id": "1"}}),
        ] {
            let e = submit(&answer).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse, "{answer}");
            assert!(!e.retryable());
        }
    }

    #[test]
    fn nonzero_code_inside_a_200_is_classified() {
        let cases = [
            (1301, UpstreamErrorKind::ContentPolicy, Some(400)),
            (1201, UpstreamErrorKind::InvalidRequest, Some(400)),
            (1102, UpstreamErrorKind::Failure, Some(429)),
            (1303, UpstreamErrorKind::RateLimited, Some(429)),
            (1004, UpstreamErrorKind::AuthRejected, Some(401)),
            (5000, UpstreamErrorKind::Failure, Some(500)),
            (7777, UpstreamErrorKind::Failure, None),
        ];
        for (code, kind, status) in cases {
            let answer = json!({"code": code, "message": "why", "request_id": "r-1", "data": null});
            let e = submit(&answer).unwrap_err();
            assert_eq!((e.kind, e.status), (kind, status), "code {code}");
            assert_eq!(e.message, format!("why (code {code}, request r-1)"));
            // The same envelope on a poll is the same error.
            assert_eq!(poll(&answer).unwrap_err().kind, kind);
        }
    }

    #[test]
    fn poll_states() {
        assert!(matches!(
            poll(&task("submitted", json!({}))).unwrap(),
            Poll::Queued
        ));
        assert!(matches!(
            poll(&task("processing", json!({}))).unwrap(),
            Poll::Running
        ));
        let done = poll(&task(
            "succeed",
            json!({"task_result": {"images": [
                {"index": 2, "url": "https://cdn.klingai.com/c.png"},
                {"index": 0, "url": "https://cdn.klingai.com/a.png"},
                {"index": 1, "url": "https://cdn.klingai.com/b.png"}
            ]}}),
        ))
        .unwrap();
        let Poll::Done(images) = done else {
            panic!("not done")
        };
        assert_eq!(images.created, Some(1_764_235_825));
        let urls: Vec<ImageData> = images.images.into_iter().map(|i| i.data).collect();
        assert_eq!(
            urls,
            ["a", "b", "c"]
                .map(|n| ImageData::Url(format!("https://cdn.klingai.com/{n}.png")))
                .to_vec()
        );
    }

    #[test]
    fn unreadable_poll_answers_are_bad_responses() {
        for answer in [
            task("succeed", json!({"task_result": {"images": []}})),
            task(
                "succeed",
                json!({"task_result": {"images": [{"index": 0, "url": ""}]}}),
            ),
            task("succeed", json!({})),
            task("cancelled", json!({})),
            envelope(json!({"task_id": "1"})),
        ] {
            let e = poll(&answer).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse, "{answer}");
        }
        let e = poll_response(&kling(), &http::HeaderMap::new(), b"<html>").unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    }

    #[test]
    fn failed_tasks_are_policy_refusals_or_failures() {
        for msg in [
            "Failure to pass the risk control system",
            "The content contains sensitive information",
            "图片内容违规",
            "触发风控",
        ] {
            let e = poll(&task("failed", json!({"task_status_msg": msg}))).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy, "{msg}");
            assert!(e.message.contains(msg));
            assert!(!e.retryable());
        }
        for msg in ["internal error, please try again", ""] {
            let e = poll(&task("failed", json!({"task_status_msg": msg}))).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::Failure, "{msg}");
            assert_eq!(e.status, None, "{msg}");
        }
        // Already failed in the submit answer.
        let e = submit(&task(
            "failed",
            json!({"task_status_msg": "prompt is risky"}),
        ))
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
    }

    // ---- errors ----

    #[test]
    fn error_envelopes_are_classified_by_code() {
        use UpstreamErrorKind::*;
        let cases = [
            (401, 1000, AuthRejected, 401, false),
            (401, 1004, AuthRejected, 401, false),
            (429, 1101, Failure, 429, false),
            (429, 1102, Failure, 429, false),
            (403, 1103, Failure, 403, false),
            (400, 1200, InvalidRequest, 400, false),
            (400, 1201, InvalidRequest, 400, false),
            (404, 1203, Failure, 404, false),
            (400, 1300, Failure, 400, false),
            (400, 1301, ContentPolicy, 400, false),
            (429, 1302, RateLimited, 429, true),
            (429, 1303, RateLimited, 429, true),
            (429, 1304, AuthRejected, 429, false),
            (500, 5000, Failure, 500, true),
            (503, 5001, Failure, 503, true),
            (504, 5002, Failure, 504, true),
            // The code decides, not an odd HTTP status.
            (500, 1102, Failure, 429, false),
        ];
        for (status, code, kind, kept, retryable) in cases {
            let e = error_response(&kling(), status, &error(code, "m"));
            assert_eq!(e.kind, kind, "{status}/{code}");
            assert_eq!(e.status, Some(kept), "{status}/{code}");
            assert_eq!(e.retryable(), retryable, "{status}/{code}");
            assert_eq!(e.message, format!("m (code {code}, request r-9)"));
        }
    }

    #[test]
    fn a_model_kling_does_not_serve_is_an_unknown_model() {
        for (status, code, message) in [
            (404, 1203, "model is not found"),
            (404, 1203, "The requested Model kling-v9 does not exist"),
            (400, 1201, "model_name value is invalid"),
        ] {
            let e = error_response(&kling(), status, &error(code, message));
            assert_eq!(e.kind, UpstreamErrorKind::UnknownModel, "{code} {message}");
            assert!(!e.retryable());
            assert!(e.message.contains(message), "{}", e.message);
        }
        // The same codes about something else keep their class.
        let e = error_response(&kling(), 404, &error(1203, "task not found"));
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        let e = error_response(&kling(), 400, &error(1201, "n must be between 1 and 9"));
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        // Inside a 200 too.
        let answer = json!({"code": 1203, "message": "model not found", "request_id": "r-1"});
        assert_eq!(
            submit(&answer).unwrap_err().kind,
            UpstreamErrorKind::UnknownModel
        );
    }

    #[test]
    fn errors_without_a_known_code_fall_back_on_the_status() {
        let e = error_response(&kling(), 502, b"<html>bad gateway</html>");
        assert_eq!((e.kind, e.status), (UpstreamErrorKind::Failure, Some(502)));
        assert_eq!(e.message, "HTTP 502");
        let e = error_response(&kling(), 429, &error(9999, "slow down"));
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
        assert_eq!(e.message, "slow down (code 9999, request r-9)");
        let e = error_response(&kling(), 400, br#"{"message": "bad"}"#);
        assert_eq!(
            (e.kind, e.message.as_str()),
            (UpstreamErrorKind::InvalidRequest, "bad")
        );
    }

    #[test]
    fn provider_text_is_redacted() {
        let e = error_response(
            &kling(),
            401,
            &error(1002, &format!("token of {ACCESS_KEY} is invalid")),
        );
        assert!(!e.message.contains(ACCESS_KEY), "{}", e.message);
        let e = poll(&task(
            "failed",
            json!({"task_status_msg": format!("account {ACCESS_KEY} failed")}),
        ))
        .unwrap_err();
        assert!(!e.message.contains(ACCESS_KEY), "{}", e.message);
    }
}
