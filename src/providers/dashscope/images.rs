//! Alibaba DashScope (百炼) Wan / Wanx text-to-image: an asynchronous task API.
//!
//! Submit: `POST /api/v1/services/aigc/text2image/image-synthesis` with `X-DashScope-Async:
//! enable` (the HTTP API refuses synchronous calls), body `{model, input{prompt, negative_prompt},
//! parameters{size "W*H", n, watermark, …pass-through}}`. `n` is always sent: DashScope's default
//! is 4 images, billed per image, so leaving it out would quietly quadruple a one-image request.
//! `watermark` is always sent too (its default differs between models). The answer is
//! `{"output":{"task_id","task_status":"PENDING"}}`.
//!
//! Poll: `GET /api/v1/tasks/{task_id}`. States: `PENDING` and `SUSPENDED` (queued / paused) →
//! queued, `RUNNING` → running, `SUCCEEDED` → `output.results[]` with one `url` per image (valid
//! 24 h) and its `actual_prompt` (the prompt after `prompt_extend` rewrote it, on by default; it
//! becomes the image's `revised_prompt`), `FAILED` → `output.code`/`output.message`, `CANCELED` and `UNKNOWN` (the task expired
//! after 24 h or never existed) → failures not worth retrying. A `SUCCEEDED` task may still carry
//! per-image failures (`{"code":"DataInspectionFailed",…}` in `results`); one failed image fails
//! the request, as with every provider: a result with fewer images than asked would be a silent
//! change.
//!
//! Errors are [`crate::providers::dashscope`]'s `{"request_id","code","message"}` envelope, sometimes with
//! HTTP 200; the same code table classifies them (`DataInspectionFailed` and
//! `IPInfringementSuspect` → content policy, an unknown model → the model is unavailable).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::common::error::GatewayError;

use crate::common::error::UpstreamError;

use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::common::error::UpstreamErrorKind;
use crate::common::images::ImageAnswer;
use crate::common::images::ImageData;
use crate::common::images::NativeImage;
use crate::common::images::NativeImages;
use crate::common::images::NativeTask;
use crate::common::images::Poll;
use crate::common::native::nested_with_extra;
use crate::common::native::NativeRequest;
use crate::providers::dashscope::{
    code_string, error_in_answer, names_a_missing_model, native_code,
};
use crate::providers::formats::errors::UNKNOWN_CODE_STATUS;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const SUBMIT_PATH: &str = "/api/v1/services/aigc/text2image/image-synthesis";
const TASKS_PATH: &str = "/api/v1/tasks/";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct SubmitBody<'a> {
    model: &'a str,
    input: Input<'a>,
    /// `Parameters` plus the caller's pass-through fields (`seed`, `prompt_extend`), which
    /// DashScope reads inside `parameters`.
    parameters: Box<RawValue>,
}

#[derive(Serialize)]
struct Input<'a> {
    prompt: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    negative_prompt: Option<&'a str>,
}

#[derive(Serialize)]
struct Parameters {
    size: String,
    n: u64,
    watermark: bool,
}

/// Submit and poll answers share this shape; an error envelope (with HTTP 200) has `code`.
#[derive(Deserialize)]
struct TaskResponse {
    #[serde(default)]
    output: Option<Output>,
    #[serde(default)]
    code: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Output {
    #[serde(default)]
    task_id: Option<String>,
    #[serde(default)]
    task_status: Option<String>,
    #[serde(default)]
    results: Vec<ResultItem>,
    #[serde(default)]
    code: Option<serde_json::Value>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct ResultItem {
    #[serde(default)]
    url: Option<String>,
    /// The prompt the image was made from after `prompt_extend` rewrote it (absent or equal to
    /// `orig_prompt` when it did not).
    #[serde(default)]
    actual_prompt: Option<String>,
    #[serde(default)]
    code: Option<serde_json::Value>,
    #[serde(default)]
    message: Option<String>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn image_request(
    target: &Target,
    req: &ImageRequest<'_>,
    n: u64,
) -> Result<NativeRequest, GatewayError> {
    if n == 0 || n > req.caps.per_call_n {
        return Err(GatewayError::Internal(format!(
            "dashscope asked for {n} images in one task; the family allows {}",
            req.caps.per_call_n
        )));
    }
    let parameters = Parameters {
        // DashScope writes sizes as `W*H`.
        size: req.size.replace('x', "*"),
        n,
        watermark: req.watermark,
    };
    let parameters = nested_with_extra(&parameters, &req.passthrough)?;
    let body = SubmitBody {
        model: &target.native_model,
        input: Input {
            prompt: req.prompt.as_str(),
            negative_prompt: req.negative_prompt.as_ref().map(|p| p.as_str()),
        },
        parameters,
    };
    let body = serde_json::to_vec(&body)
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    let mut native = NativeRequest::post_json(SUBMIT_PATH, body);
    native.headers.push((
        http::HeaderName::from_static("x-dashscope-async"),
        http::HeaderValue::from_static("enable"),
    ));
    Ok(native)
}

/// The request that reads task `task`.
pub(crate) fn poll_request(task: &NativeTask) -> NativeRequest {
    NativeRequest::get(format!("{TASKS_PATH}{}", task.id))
}

// ---- translation back ------------------------------------------------------------------------

/// The submit answer: the task to poll.
pub(crate) fn image_response(
    provider: &Provider,
    _req: &ImageRequest<'_>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<ImageAnswer, UpstreamError> {
    let parsed: TaskResponse = crate::providers::parse_answer(provider, body)?;
    in_band_error(provider, &parsed, body)?;
    let id = parsed
        .output
        .and_then(|o| o.task_id)
        .filter(|id| valid_task_id(id))
        .ok_or_else(|| {
            crate::upstream::provider::bad_answer(
                provider,
                "task answer has no usable output.task_id",
            )
        })?;
    Ok(ImageAnswer::Task(NativeTask {
        provider: provider.name.clone(),
        id,
        polling_url: None,
    }))
}

/// One poll's answer.
pub(crate) fn poll_response(
    provider: &Provider,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<Poll, UpstreamError> {
    let parsed: TaskResponse = crate::providers::parse_answer(provider, body)?;
    in_band_error(provider, &parsed, body)?;
    let Some(output) = parsed.output else {
        return Err(crate::upstream::provider::bad_answer(
            provider,
            "task answer has no output",
        ));
    };
    let status = output.task_status.as_deref().unwrap_or_default();
    match status {
        "PENDING" | "SUSPENDED" => Ok(Poll::Queued),
        "RUNNING" => Ok(Poll::Running),
        "SUCCEEDED" => succeeded(provider, output),
        "FAILED" => Err(task_error(
            provider,
            output.code.as_ref(),
            output.message,
            "the task failed",
        )),
        // Canceled from the console, or gone (tasks are kept 24 h): asking again changes nothing.
        "CANCELED" => Err(task_over(provider, "the task was canceled at the provider")),
        "UNKNOWN" => Err(task_over(
            provider,
            "the provider no longer knows the task (expired or never created)",
        )),
        other => Err(crate::upstream::provider::bad_answer(
            provider,
            format!("task is in an unknown state {other:?}"),
        )),
    }
}

fn succeeded(provider: &Provider, output: Output) -> Result<Poll, UpstreamError> {
    if output.results.is_empty() {
        return Err(crate::upstream::provider::bad_answer(
            provider,
            "finished task has no results",
        ));
    }
    let mut images = Vec::with_capacity(output.results.len());
    for item in output.results {
        match item.url.filter(|u| !u.is_empty()) {
            Some(url) => images.push(NativeImage {
                data: ImageData::Url(url),
                revised_prompt: item.actual_prompt.filter(|p| !p.trim().is_empty()),
                layer: None,
            }),
            None => {
                return Err(task_error(
                    provider,
                    item.code.as_ref(),
                    item.message,
                    "an image of the task failed",
                ))
            }
        }
    }
    Ok(Poll::Done(NativeImages {
        created: None,
        images,
        ..Default::default()
    }))
}

/// An error envelope that came with HTTP 200, classified like the error it is.
fn in_band_error(
    provider: &Provider,
    parsed: &TaskResponse,
    body: &[u8],
) -> Result<(), UpstreamError> {
    match error_in_answer(provider, parsed.code.as_ref(), body) {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

/// A failed task or image, classified by its code (`DataInspectionFailed` → content policy). No
/// HTTP status is attached: the verdict came inside a successful poll, and the provider's own
/// message is what tells the caller why.
fn task_error(
    provider: &Provider,
    code: Option<&serde_json::Value>,
    message: Option<String>,
    fallback: &str,
) -> UpstreamError {
    let code = code.and_then(code_string);
    let message = message
        .filter(|m| !m.trim().is_empty())
        .map(|m| provider.redact(&m));
    let missing_model = code
        .as_deref()
        .is_some_and(|c| names_a_missing_model(c, message.as_deref()));
    let message = message.unwrap_or_else(|| fallback.to_string());
    let message = match &code {
        Some(c) => format!("{message} ({c})"),
        None => message,
    };
    if missing_model {
        return UpstreamError::new(UpstreamErrorKind::UnknownModel, &provider.name, message)
            .with_status(404);
    }
    match code.as_deref().and_then(native_code) {
        Some((kind, status)) => {
            UpstreamError::new(kind, &provider.name, message).with_status(status)
        }
        None => UpstreamError::new(UpstreamErrorKind::Failure, &provider.name, message)
            .with_status(UNKNOWN_CODE_STATUS),
    }
}

fn task_over(provider: &Provider, message: &str) -> UpstreamError {
    // A 4xx-kept failure: `retryable()` is false for it.
    UpstreamError::new(UpstreamErrorKind::Failure, &provider.name, message).with_status(410)
}

/// Task ids go into a URL path: only the characters DashScope's ids use (a UUID) are accepted.
fn valid_task_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

// ---- error mapping ---------------------------------------------------------------------------
//
// Non-2xx answers go to `dashscope::error_response` (the dispatch routes every DashScope error
// there); its image cases are tested below.

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{json, Value};

    use super::*;
    use crate::providers::test_support as support;

    const KEY: &str = "sk-dashscope-secret-1234";

    fn provider() -> Arc<Provider> {
        support::provider_at("dashscope", KEY, "https://dashscope.aliyuncs.com")
    }

    fn wan(body: &[u8]) -> ImageRequest<'_> {
        let t = support::target(provider(), "wanx2.1-t2i-turbo");
        support::image_request("wan", "wan", t, body)
    }

    fn native(req: &ImageRequest<'_>, n: u64) -> (NativeRequest, Value) {
        let native = image_request(&req.model.targets[0], req, n).unwrap();
        let body = serde_json::from_slice(&native.body).unwrap();
        (native, body)
    }

    #[test]
    fn submit_is_asynchronous_and_always_names_n_and_watermark() {
        let body = br#"{"model":"wan","prompt":"a cat"}"#;
        let req = wan(body);
        let (native, sent) = native(&req, 1);
        assert_eq!(native.path, SUBMIT_PATH);
        assert!(native
            .headers
            .iter()
            .any(|(n, v)| n == "x-dashscope-async" && v == "enable"));
        assert_eq!(
            sent,
            json!({
                "model": "wanx2.1-t2i-turbo",
                "input": {"prompt": "a cat"},
                "parameters": {"size": "1024*1024", "n": 1, "watermark": false}
            })
        );
    }

    #[test]
    fn every_field_reaches_its_native_place() {
        let body = br#"{"model":"wan","prompt":"a cat","negative_prompt":"dogs","size":"1280x720","n":3,"watermark":true,"seed":42,"prompt_extend":false}"#;
        let req = wan(body);
        let (_, sent) = native(&req, 3);
        assert_eq!(sent["input"]["negative_prompt"], "dogs");
        assert_eq!(
            sent["parameters"],
            json!({"size": "1280*720", "n": 3, "watermark": true, "seed": 42, "prompt_extend": false})
        );
    }

    #[test]
    fn wan_2_5_is_sized_by_total_pixels_and_shape() {
        let t = || support::target(provider(), "wan2.5-t2i-preview");
        let req = support::image_request(
            "wan2.5",
            "wan-2.5",
            t(),
            br#"{"model":"wan2.5","prompt":"p"}"#,
        );
        let (_, sent) = native(&req, 1);
        assert_eq!(sent["parameters"]["size"], "1280*1280");
        let req = support::image_request(
            "wan2.5",
            "wan-2.5",
            t(),
            br#"{"model":"wan2.5","prompt":"p","size":"768x2700"}"#,
        );
        let (_, sent) = native(&req, 1);
        assert_eq!(sent["parameters"]["size"], "768*2700");
        // DashScope's recommended sizes, listed, pass even where they fall a little short of the
        // floor; any other size needs 1280x1280 to 1440x1440 pixels in total.
        for size in ["1104x1472", "1440x1440", "1280x1280", "1024x1600"] {
            let body = format!(r#"{{"model":"wan2.5","prompt":"p","size":"{size}"}}"#);
            let req = support::image_request("wan2.5", "wan-2.5", t(), body.as_bytes());
            let (_, sent) = native(&req, 1);
            assert_eq!(sent["parameters"]["size"], size.replace('x', "*"));
        }
        // More than 1440x1440 pixels; narrower than 1:4; fewer than 1280x1280 pixels (1024x1024
        // was accepted before the floor was pinned, and failed at DashScope).
        for size in ["1600x1600", "500x2100", "1024x1024", "768x768", "1200x1300"] {
            let body = format!(r#"{{"model":"wan2.5","prompt":"p","size":"{size}"}}"#);
            let refused = support::image_refusal("wan2.5", "wan-2.5", t(), body.as_bytes());
            assert!(refused.get("size").is_some(), "{size}: {refused}");
        }
    }

    #[test]
    fn submit_answer_is_the_task() {
        let req = wan(br#"{"model":"wan","prompt":"p"}"#);
        let answer = br#"{"request_id":"r1","output":{"task_id":"0385dc79-5ff8-4d82-bcb6-253f8fc4a2bd","task_status":"PENDING"}}"#;
        let p = provider();
        match image_response(&p, &req, &http::HeaderMap::new(), answer).unwrap() {
            ImageAnswer::Task(t) => {
                assert_eq!(t.id, "0385dc79-5ff8-4d82-bcb6-253f8fc4a2bd");
                assert_eq!(t.provider, "dashscope");
                assert_eq!(poll_request(&t).path, format!("/api/v1/tasks/{}", t.id));
            }
            ImageAnswer::Images(_) => panic!("expected a task"),
        }
        // An id that could not be put in a path is an unreadable answer.
        let bad = br#"{"output":{"task_id":"../../v1/x","task_status":"PENDING"}}"#;
        let e = image_response(&p, &req, &http::HeaderMap::new(), bad).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    }

    #[test]
    fn error_envelope_with_200_is_classified() {
        let req = wan(br#"{"model":"wan","prompt":"p"}"#);
        let answer = format!(
            r#"{{"request_id":"r","code":"InvalidApiKey","message":"Invalid API-key {KEY}"}}"#
        );
        let e = image_response(
            &provider(),
            &req,
            &http::HeaderMap::new(),
            answer.as_bytes(),
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);
        assert!(!e.message.contains(KEY));
    }

    fn poll(body: Value) -> Result<Poll, UpstreamError> {
        poll_response(
            &provider(),
            &http::HeaderMap::new(),
            body.to_string().as_bytes(),
        )
    }

    #[test]
    fn states_map_onto_queued_running_and_done() {
        let state = |s: &str| json!({"output": {"task_id": "t", "task_status": s}});
        assert!(matches!(poll(state("PENDING")), Ok(Poll::Queued)));
        assert!(matches!(poll(state("SUSPENDED")), Ok(Poll::Queued)));
        assert!(matches!(poll(state("RUNNING")), Ok(Poll::Running)));
        let done = poll(
            json!({"output": {"task_id": "t", "task_status": "SUCCEEDED",
            "results": [{"url": "https://a.oss.aliyuncs.com/1.png", "orig_prompt": "p",
                         "actual_prompt": "p, in soft morning light"},
                        {"url": "https://a.oss.aliyuncs.com/2.png"}],
            "task_metrics": {"TOTAL": 2, "SUCCEEDED": 2, "FAILED": 0}},
            "usage": {"image_count": 2}}),
        );
        match done {
            Ok(Poll::Done(images)) => assert_eq!(
                images.images,
                vec![
                    NativeImage {
                        data: ImageData::Url("https://a.oss.aliyuncs.com/1.png".into()),
                        revised_prompt: Some("p, in soft morning light".into()),
                        layer: None,
                    },
                    NativeImage::new(ImageData::Url("https://a.oss.aliyuncs.com/2.png".into())),
                ]
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn failures_are_classified_and_task_over() {
        let failed = poll(json!({"output": {"task_id": "t", "task_status": "FAILED",
            "code": "DataInspectionFailed", "message": "Output data may contain inappropriate content."}}))
        .unwrap_err();
        assert_eq!(failed.kind, UpstreamErrorKind::ContentPolicy);
        assert!(failed.message.contains("inappropriate"));
        let partial = poll(
            json!({"output": {"task_id": "t", "task_status": "SUCCEEDED",
            "results": [{"url": "https://a.oss.aliyuncs.com/1.png"},
                        {"code": "DataInspectionFailed", "message": "risky"}]}}),
        )
        .unwrap_err();
        assert_eq!(partial.kind, UpstreamErrorKind::ContentPolicy);
        let infringing = poll(json!({"output": {"task_id": "t", "task_status": "FAILED",
            "code": "IPInfringementSuspect", "message": "Input data is suspected of being involved in IP infringement."}}))
        .unwrap_err();
        assert_eq!(infringing.kind, UpstreamErrorKind::ContentPolicy);
        assert!(!infringing.retryable());
        let internal = poll(json!({"output": {"task_id": "t", "task_status": "FAILED",
            "code": "InternalError.Algo", "message": "algorithm error"}}))
        .unwrap_err();
        assert_eq!(internal.kind, UpstreamErrorKind::Failure);
        for s in ["CANCELED", "UNKNOWN"] {
            let e = poll(json!({"output": {"task_id": "t", "task_status": s}})).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::Failure, "{s}");
        }
        let odd = poll(json!({"output": {"task_id": "t", "task_status": "WAITING"}})).unwrap_err();
        assert_eq!(odd.kind, UpstreamErrorKind::BadResponse);
    }
}
