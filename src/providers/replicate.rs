//! Replicate: official image models run as predictions (a natively asynchronous API).
//!
//! Submit: `POST /v1/models/{owner}/{name}/predictions` (the native model is `owner/name`, e.g.
//! `black-forest-labs/flux-schnell`) with `Authorization: Bearer <token>` and the body
//! `{"input": {…}}`, whose fields are the model's own input schema: `prompt`, `aspect_ratio` (a
//! ratio such as `16:9`; FLUX1.1 [pro] also takes `custom` with `width`/`height`), `num_outputs`
//! (only for models that make several images per run; the family's `per_call_n` above 1 says so),
//! `output_format` (`webp`|`jpg`|`png`, the public names unchanged) and the caller's pass-through
//! fields (`seed`, `output_quality`, …, as each family lists). The request carries
//! `Prefer: wait=5`: Replicate then holds the answer up to 5 seconds, so a fast model (FLUX
//! schnell runs in about a second) answers with its output at once and a slow one with the
//! prediction still running, which is then polled. 5 seconds stays far below the account's read
//! timeout (120 s by default).
//!
//! Both the submit answer and a poll answer are a prediction object:
//! `{"id","status","output","error","urls":{"get","cancel",…},…}`. The prediction is polled at
//! `GET /v1/predictions/{id}` on the provider's base URL (never at the `urls.get` link, so the
//! token goes nowhere but the configured host). States:
//! - `starting` (waiting for or booting a worker) → queued; `processing` → running. A status this
//!   adapter does not know is taken as still running: the gateway's deadline still ends it.
//! - `succeeded` → the images: `output` is one URL (FLUX1.1 [pro]) or a list of URLs (FLUX
//!   schnell), links on `replicate.delivery` (the default result hosts), downloaded by the gateway
//!   when the caller asked for base64.
//! - `failed` → the prediction's `error` text for the caller; a text saying the content was
//!   flagged (NSFW, sensitive, safety) is a content-policy refusal, anything else a provider
//!   failure. `canceled` and `aborted` (canceled by someone else, or stopped before it started)
//!   are failures too. Each is final: a new prediction would be a new paid run.
//!
//! Errors (submit or poll): problem-details JSON, `{"title","detail","status"}` (422 "Input
//! validation failed" with the schema's complaint in `detail`); 401 (bad token), 402 (no credit:
//! the gateway's account, not retried), 404 (no such model: the configured native model is not
//! served), 429 (rate limited: retried), 5xx (retried). The detail text is shown to the caller,
//! with the account's token redacted.
//!
//! Facts and sources: `docs/providers/replicate.md`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::images::ImageAnswer;
use crate::common::images::ImageData;
use crate::common::images::NativeImage;
use crate::common::images::NativeImages;
use crate::common::images::NativeTask;
use crate::common::images::Poll;
use crate::common::native::json_with_extra;
use crate::common::native::NativeRequest;
use crate::common::native::PollRequest;
use crate::providers::formats::fastapi;
use crate::upstream::provider::Provider;

/// Where Replicate serves prediction outputs (the default `result_hosts`).
const RESULT_HOSTS: &[&str] = &["replicate.delivery", "*.replicate.delivery"];

/// How long Replicate may hold the submission open for the output (seconds, 1–60 allowed).
const PREFER_WAIT: &str = "wait=5";

/// Longest provider text quoted in an error message.
const MAX_QUOTED: usize = 300;

// ---- wire types ------------------------------------------------------------------------------

/// The fields of `input` the adapter sets itself; the caller's pass-through fields follow.
#[derive(Serialize)]
struct Input<'a> {
    prompt: &'a str,
    aspect_ratio: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    width: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    height: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    num_outputs: Option<u64>,
    output_format: &'a str,
}

/// A prediction, as both the submit and the poll answer carry it. Loose where the shape depends
/// on the model (`output`) or is not promised (`error`, `detail`).
#[derive(Deserialize)]
struct Prediction {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    output: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
    /// A problem-details body that came with a 2xx (never seen; read so it can say why).
    #[serde(default)]
    detail: Option<Value>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn image_request(
    target: &Target,
    req: &ImageRequest<'_>,
    n: u64,
) -> Result<NativeRequest, GatewayError> {
    let per_call = req.caps.per_call_n;
    if n == 0 || n > per_call {
        return Err(GatewayError::Internal(format!(
            "replicate asked for {n} images in one call; the model makes at most {per_call}"
        )));
    }
    let (aspect_ratio, width, height) = size(req)?;
    let input = Input {
        prompt: req.prompt.as_str(),
        aspect_ratio,
        width,
        height,
        // A model that makes one image per run has no `num_outputs` in its schema.
        num_outputs: (per_call > 1).then_some(n),
        output_format: req.output_format,
    };
    let input = json_with_extra(&input, &req.passthrough)?;
    // `{"input": {…}}`: the model's input object, wrapped as the predictions API takes it.
    let mut body = Vec::with_capacity(input.len() + 10);
    body.extend_from_slice(b"{\"input\":");
    body.extend_from_slice(&input);
    body.push(b'}');
    let mut native = NativeRequest::post_json(predictions_path(&target.native_model)?, body);
    native.headers.push((
        http::header::HeaderName::from_static("prefer"),
        http::HeaderValue::from_static(PREFER_WAIT),
    ));
    Ok(native)
}

/// `/v1/models/{owner}/{name}/predictions`; the native model must be `owner/name` (a version
/// pin `owner/name:version` belongs to the community-model endpoint, which this adapter does not
/// serve).
fn predictions_path(native_model: &str) -> Result<String, GatewayError> {
    let valid = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    match native_model.split_once('/') {
        Some((owner, name)) if valid(owner) && valid(name) => {
            Ok(format!("/v1/models/{owner}/{name}/predictions"))
        }
        _ => Err(GatewayError::Internal(format!(
            "replicate model {native_model:?} is not owner/name"
        ))),
    }
}

/// The `aspect_ratio` (and, for `custom`, the pixels) that `req.size` means: the family's ratio
/// for a listed size, else `custom` with the size itself (only families whose size rule lets a
/// size without a ratio through, FLUX1.1 [pro]'s, ever get here with one).
fn size<'r>(
    req: &'r ImageRequest<'_>,
) -> Result<(&'r str, Option<u32>, Option<u32>), GatewayError> {
    if let Some(ratio) = req.aspect_ratio() {
        return Ok((ratio, None, None));
    }
    let (w, h) = pixels(&req.size)?;
    Ok(("custom", Some(w), Some(h)))
}

/// `WxH` as numbers; validation let only such sizes through, so anything else is a catalog bug.
fn pixels(size: &str) -> Result<(u32, u32), GatewayError> {
    size.split_once('x')
        .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
        .filter(|(w, h): &(u32, u32)| *w > 0 && *h > 0)
        .ok_or_else(|| GatewayError::Internal(format!("replicate size {size:?} is not WxH")))
}

// ---- translation back ------------------------------------------------------------------------

/// The submit answer: the output at once (the model finished within `Prefer: wait`), the
/// prediction to poll, or its failure.
pub(crate) fn image_response(
    provider: &Provider,
    _req: &ImageRequest<'_>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<ImageAnswer, UpstreamError> {
    let p: Prediction = crate::providers::parse_answer(provider, body)?;
    let id =
        p.id.as_deref()
            .map(str::trim)
            .filter(|i| !i.is_empty())
            .map(str::to_owned);
    match read(provider, &p)? {
        Poll::Done(images) => Ok(ImageAnswer::Images(images)),
        Poll::Queued | Poll::Running => match id {
            Some(id) => Ok(ImageAnswer::Task(NativeTask {
                provider: provider.name.clone(),
                id,
                polling_url: None,
            })),
            None => Err(crate::upstream::provider::bad_answer(
                provider,
                "prediction answer has no id",
            )),
        },
    }
}

pub(crate) fn poll_request(
    _provider: &Provider,
    task: &NativeTask,
) -> Result<PollRequest, UpstreamError> {
    Ok(PollRequest::Api(NativeRequest::get(format!(
        "/v1/predictions/{}",
        path_escape(&task.id)
    ))))
}

pub(crate) fn poll_response(
    provider: &Provider,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<Poll, UpstreamError> {
    let p: Prediction = crate::providers::parse_answer(provider, body)?;
    read(provider, &p)
}

/// A prediction's state: waiting, running, its images, or its (final) failure.
fn read(provider: &Provider, p: &Prediction) -> Result<Poll, UpstreamError> {
    let Some(status) = p.status.as_deref().map(str::trim) else {
        let why = p
            .detail
            .as_ref()
            .and_then(fastapi::detail_text)
            .map(|d| format!(": {}", quote(provider, &d)))
            .unwrap_or_default();
        return Err(crate::upstream::provider::bad_answer(
            provider,
            format!("prediction answer has no status{why}"),
        ));
    };
    match status {
        "starting" => Ok(Poll::Queued),
        "processing" => Ok(Poll::Running),
        "succeeded" => output(provider, p.output.as_ref()).map(Poll::Done),
        "failed" => Err(failed(provider, p.error.as_ref())),
        "canceled" | "aborted" => Err(UpstreamError::new(
            UpstreamErrorKind::Failure,
            &provider.name,
            format!("the prediction was {status} before it finished"),
        )),
        // A state added later: still working; the gateway's deadline ends a task that never does.
        _ => Ok(Poll::Running),
    }
}

/// A succeeded prediction's images: `output` is one URL or a list of them.
fn output(provider: &Provider, output: Option<&Value>) -> Result<NativeImages, UpstreamError> {
    let urls: Vec<&str> = match output {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let urls: Vec<&str> = urls
        .into_iter()
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .collect();
    if urls.is_empty() {
        return Err(crate::upstream::provider::bad_answer(
            provider,
            "succeeded prediction has no output URL",
        ));
    }
    Ok(NativeImages {
        created: None,
        images: urls
            .into_iter()
            .map(|u| NativeImage::new(ImageData::Url(u.to_string())))
            .collect(),
        ..Default::default()
    })
}

/// A failed prediction: a content-policy refusal when its error says the content was flagged,
/// else a provider failure; either way with the error's text.
fn failed(provider: &Provider, error: Option<&Value>) -> UpstreamError {
    let text = match error {
        Some(Value::String(s)) => Some(s.trim().to_string()),
        Some(v @ (Value::Object(_) | Value::Array(_))) => fastapi::detail_text(v),
        _ => None,
    }
    .filter(|t| !t.is_empty());
    let policy = text.as_deref().is_some_and(is_policy_reason);
    let message = match &text {
        Some(t) => format!("the prediction failed: {}", quote(provider, t)),
        None => "the prediction failed".to_string(),
    };
    let kind = if policy {
        UpstreamErrorKind::ContentPolicy
    } else {
        UpstreamErrorKind::Failure
    };
    UpstreamError::new(kind, &provider.name, message)
}

/// Whether a failed prediction's error says its safety checker refused the content (FLUX's
/// models on Replicate say "NSFW content detected" or that the output was flagged as sensitive).
fn is_policy_reason(reason: &str) -> bool {
    let lower = reason.to_ascii_lowercase();
    ["nsfw", "sensitive", "safety", "content policy", "flagged"]
        .iter()
        .any(|w| lower.contains(w))
}

/// Percent-encode a prediction id for a path segment (Replicate's ids are lowercase letters and
/// digits; anything else is escaped so it cannot change the path).
fn path_escape(s: &str) -> String {
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

/// Replicate's problem-details body: `detail` says what went wrong, `title` names the problem.
#[derive(Deserialize)]
struct Problem {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    detail: Option<Value>,
}

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let text = serde_json::from_slice::<Problem>(body).ok().and_then(|p| {
        let detail = p.detail.as_ref().and_then(fastapi::detail_text);
        let title = p.title.filter(|t| !t.trim().is_empty());
        match (title, detail) {
            (Some(t), Some(d)) => Some(format!("{}: {d}", t.trim())),
            (t, d) => d.or(t),
        }
    });
    let message = text
        .map(|m| quote(provider, &m))
        .unwrap_or_else(|| format!("HTTP {status}"));
    // `from_status` reads Replicate's statuses as they are meant: 401/403 the gateway's token,
    // 402 (no credit) a non-retryable failure, 422 the request, 429 a rate limit, 5xx retryable.
    let mut err = UpstreamError::from_status(&provider.name, status, message);
    // Each model is its own path, so a 404 is a model Replicate does not serve (retired,
    // misspelt, or not an official model). A prediction is never polled before it exists.
    if status == 404 {
        err.kind = UpstreamErrorKind::UnknownModel;
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Replicate kind: Bearer token, images only, predictions polled by id.
pub(crate) fn kind(key: &str) -> Result<crate::providers::registry::Kind, String> {
    let auth = crate::providers::registry::keyed(key, crate::upstream::provider::Auth::bearer)?;
    let images = crate::providers::registry::ImageFns {
        request: image_request,
        validate: crate::providers::registry::no_checks,
        response: image_response,
        input_as_bytes: false,
        tasks: Some(crate::providers::registry::TaskFns {
            poll_request,
            poll_response,
        }),
    };
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

    const KEY: &str = "r8_secret_token_0123456789";

    fn replicate() -> Arc<Provider> {
        support::provider_at("replicate", KEY, "https://api.replicate.com")
    }

    fn schnell(body: &[u8]) -> ImageRequest<'_> {
        let t = support::target(replicate(), "black-forest-labs/flux-schnell");
        support::image_request("flux-schnell", "replicate-flux-schnell", t, body)
    }

    fn pro(body: &[u8]) -> ImageRequest<'_> {
        let t = support::target(replicate(), "black-forest-labs/flux-1.1-pro");
        support::image_request("flux-1.1-pro", "replicate-flux-pro", t, body)
    }

    fn native(req: &ImageRequest<'_>, n: u64) -> (NativeRequest, Value) {
        let r = image_request(&req.model.targets[0], req, n).unwrap();
        let body = serde_json::from_slice(&r.body).unwrap();
        (r, body)
    }

    fn poll(body: Value) -> Result<Poll, UpstreamError> {
        poll_response(
            &replicate(),
            &http::HeaderMap::new(),
            &serde_json::to_vec(&body).unwrap(),
        )
    }

    #[test]
    fn schnell_sends_the_ratio_count_format_and_pass_through_fields() {
        let req = schnell(
            br#"{"model":"flux-schnell","prompt":"a fox","size":"1344x768","n":3,"output_format":"jpg","seed":7,"go_fast":false}"#,
        );
        let (r, body) = native(&req, 3);
        assert_eq!(r.method, http::Method::POST);
        assert_eq!(
            r.path,
            "/v1/models/black-forest-labs/flux-schnell/predictions"
        );
        assert!(r
            .headers
            .iter()
            .any(|(k, v)| k.as_str() == "prefer" && v == "wait=5"));
        assert_eq!(
            body,
            json!({"input": {"prompt": "a fox", "aspect_ratio": "16:9", "num_outputs": 3,
                             "output_format": "jpg", "seed": 7, "go_fast": false}})
        );
        let req = schnell(br#"{"model":"flux-schnell","prompt":"p","aspect_ratio":"9:21"}"#);
        assert_eq!(
            native(&req, 1).1,
            json!({"input": {"prompt": "p", "aspect_ratio": "9:21", "num_outputs": 1, "output_format": "png"}})
        );
        assert!(matches!(
            image_request(&req.model.targets[0], &req, 5),
            Err(GatewayError::Internal(_))
        ));
    }

    #[test]
    fn schnell_refuses_what_it_cannot_do() {
        let t = || support::target(replicate(), "black-forest-labs/flux-schnell");
        let refused = support::image_refusal(
            "flux-schnell",
            "replicate-flux-schnell",
            t(),
            br#"{"model":"flux-schnell","prompt":"p","image":"https://a.example/i.png","size":"1000x1000","quality":"hd","negative_prompt":"x","guidance":3}"#,
        );
        for field in ["image", "size", "quality", "negative_prompt", "guidance"] {
            assert!(refused.get(field).is_some(), "{field}: {refused}");
        }
    }

    #[test]
    fn pro_sends_a_ratio_or_custom_pixels_and_no_count() {
        let req = pro(br#"{"model":"flux-1.1-pro","prompt":"p","size":"896x1152","safety_tolerance":3,"prompt_upsampling":true}"#);
        let (r, body) = native(&req, 1);
        assert_eq!(
            r.path,
            "/v1/models/black-forest-labs/flux-1.1-pro/predictions"
        );
        assert_eq!(
            body,
            json!({"input": {"prompt": "p", "aspect_ratio": "3:4", "output_format": "png",
                             "safety_tolerance": 3, "prompt_upsampling": true}})
        );
        // A size the ratio table does not name, within the size rule: `custom`.
        let req = pro(
            br#"{"model":"flux-1.1-pro","prompt":"p","size":"1280x640","output_format":"webp"}"#,
        );
        assert_eq!(
            native(&req, 1).1,
            json!({"input": {"prompt": "p", "aspect_ratio": "custom", "width": 1280, "height": 640, "output_format": "webp"}})
        );
        assert!(matches!(
            image_request(&req.model.targets[0], &req, 2),
            Err(GatewayError::Internal(_))
        ));
        let t = || support::target(replicate(), "black-forest-labs/flux-1.1-pro");
        for size in ["1000x1000", "128x128", "2048x2048"] {
            let body = format!(r#"{{"model":"flux-1.1-pro","prompt":"p","size":"{size}"}}"#);
            let refused =
                support::image_refusal("flux-1.1-pro", "replicate-flux-pro", t(), body.as_bytes());
            assert!(refused.get("size").is_some(), "{size}: {refused}");
        }
    }

    #[test]
    fn only_owner_name_models_are_sent() {
        assert!(predictions_path("black-forest-labs/flux-schnell").is_ok());
        for bad in ["flux", "a/b/c", "a/", "/b", "a/b:1234", "a/b?x=1", "../x/y"] {
            assert!(predictions_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn reads_the_submit_answer() {
        let req = schnell(br#"{"model":"flux-schnell","prompt":"p"}"#);
        let p = replicate();
        let h = http::HeaderMap::new();
        let started = json!({"id": "gm3qorzdhgbfurvjtvhg6dckhu", "model": "black-forest-labs/flux-schnell",
            "status": "starting", "output": null, "error": null,
            "urls": {"get": "https://api.replicate.com/v1/predictions/gm3qorzdhgbfurvjtvhg6dckhu"}});
        match image_response(&p, &req, &h, &serde_json::to_vec(&started).unwrap()).unwrap() {
            ImageAnswer::Task(t) => assert_eq!(
                t,
                NativeTask {
                    provider: "replicate".into(),
                    id: "gm3qorzdhgbfurvjtvhg6dckhu".into(),
                    polling_url: None
                }
            ),
            other => panic!("{other:?}"),
        }
        // Finished within `Prefer: wait`: the images at once.
        let done = json!({"id": "x", "status": "succeeded",
            "output": ["https://replicate.delivery/xezq/a/out-0.webp", "https://replicate.delivery/xezq/a/out-1.webp"]});
        match image_response(&p, &req, &h, &serde_json::to_vec(&done).unwrap()).unwrap() {
            ImageAnswer::Images(i) => assert_eq!(i.images.len(), 2),
            other => panic!("{other:?}"),
        }
        let e = image_response(&p, &req, &h, br#"{"status":"processing"}"#).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
        let e = image_response(
            &p,
            &req,
            &h,
            br#"{"id":"x","status":"failed","error":"boom"}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(e.message.contains("boom"), "{}", e.message);
        let e = image_response(&p, &req, &h, b"<html>").unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    }

    #[test]
    fn polls_by_id_on_the_base_url() {
        let task = |id: &str| NativeTask {
            provider: "replicate".into(),
            id: id.into(),
            polling_url: None,
        };
        match poll_request(&replicate(), &task("abc123")).unwrap() {
            PollRequest::Api(r) => {
                assert_eq!(r.method, http::Method::GET);
                assert_eq!(r.path, "/v1/predictions/abc123");
            }
            other => panic!("{other:?}"),
        }
        match poll_request(&replicate(), &task("a/../b?c")).unwrap() {
            PollRequest::Api(r) => assert_eq!(r.path, "/v1/predictions/a%2F..%2Fb%3Fc"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reads_prediction_states() {
        assert!(matches!(
            poll(json!({"id": "t", "status": "starting"})),
            Ok(Poll::Queued)
        ));
        assert!(matches!(
            poll(json!({"id": "t", "status": "processing", "logs": "50%"})),
            Ok(Poll::Running)
        ));
        assert!(matches!(
            poll(json!({"id": "t", "status": "some_future_state"})),
            Ok(Poll::Running)
        ));
        match poll(json!({"id": "t", "status": "succeeded", "output": "https://replicate.delivery/x/out.webp"}))
            .unwrap()
        {
            Poll::Done(images) => assert_eq!(
                images.images,
                vec![NativeImage::new(ImageData::Url(
                    "https://replicate.delivery/x/out.webp".into()
                ))]
            ),
            other => panic!("{other:?}"),
        }
        for bad in [
            json!({"id": "t", "status": "succeeded", "output": null}),
            json!({"id": "t", "status": "succeeded", "output": []}),
            json!({"id": "t", "status": "succeeded", "output": {"image": 1}}),
            json!({"id": "t"}),
            json!({"detail": "odd"}),
        ] {
            let e = poll(bad.clone()).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse, "{bad}");
        }
    }

    #[test]
    fn failed_predictions_are_classified_and_final() {
        let e = poll(json!({"id": "t", "status": "failed",
            "error": "NSFW content detected. Try running it again, or try a different prompt."}))
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        assert!(e.message.contains("NSFW content detected"), "{}", e.message);
        let e = poll(json!({"id": "t", "status": "failed", "error": format!("CUDA out of memory near {KEY}")}))
            .unwrap_err();
        assert_eq!((e.kind, e.status), (UpstreamErrorKind::Failure, None));
        assert!(e.message.contains("CUDA out of memory"), "{}", e.message);
        assert!(!e.message.contains(KEY));
        for status in ["canceled", "aborted"] {
            let e = poll(json!({"id": "t", "status": status})).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::Failure);
            assert!(e.message.contains(status), "{}", e.message);
        }
    }

    #[test]
    fn maps_http_errors() {
        let p = replicate();
        let e = error_response(
            &p,
            422,
            br#"{"title":"Input validation failed","detail":"- input.num_outputs: Must be less than or equal to 4","status":422}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(
            e.message,
            "Input validation failed: - input.num_outputs: Must be less than or equal to 4"
        );
        for (status, kind, retryable) in [
            (401, UpstreamErrorKind::AuthRejected, false),
            (402, UpstreamErrorKind::Failure, false),
            (404, UpstreamErrorKind::UnknownModel, false),
            (429, UpstreamErrorKind::RateLimited, true),
            (500, UpstreamErrorKind::Failure, true),
            (503, UpstreamErrorKind::Failure, true),
        ] {
            let body =
                format!(r#"{{"detail":"status {status} for token {KEY}","status":{status}}}"#);
            let e = error_response(&p, status, body.as_bytes());
            assert_eq!((e.kind, e.retryable()), (kind, retryable), "{status}");
            assert!(
                e.message.contains(&format!("status {status}")),
                "{}",
                e.message
            );
            assert!(!e.message.contains(KEY));
        }
        assert_eq!(error_response(&p, 502, b"<html>").message, "HTTP 502");
    }

    #[test]
    fn outputs_may_be_downloaded_from_replicate_delivery() {
        let kind = kind(KEY).unwrap();
        assert_eq!(kind.result_hosts, RESULT_HOSTS);
    }
}
