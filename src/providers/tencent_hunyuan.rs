//! Tencent Hunyuan image generation 3.0 (混元生图 3.0, HY-Image-V3.0) through Tencent Cloud's API
//! 3.0: `SubmitTextToImageJob` starts a job and `QueryTextToImageJob` reads it until it is done
//! (version 2022-12-29, service `aiart`, host `aiart.tencentcloudapi.com`), TC3-signed
//! (`providers/formats/tencent.rs`). Both are `POST /` with the action in `X-TC-Action`.
//!
//! This is the API Tencent ties to HunyuanImage 3.0: its `Revise` field points at the
//! HunyuanImage-3.0 prompt-rewriting code, and Tencent's OpenAI-compatible page maps its model
//! `HY-Image-V3.0` to this interface's `Prompt`, `Images`, `Resolution`. The older
//! `SubmitHunyuanImageJob` (`hunyuan`, 2023-09-01: fixed resolutions, styles, up to 4 images) is
//! not served: Tencent names no model for it.
//!
//! The submit body is `Prompt`, `Resolution` (the public `size` `WxH` as `W:H`, always sent; the
//! family lists the sizes Tencent lists, 37 of them with width and height in [512, 2048] and at
//! most 1024×1024 pixels), `Images` (up to 3 reference images: the caller's URL as is, or the bytes
//! as raw base64), `LogoAdd` (Tencent adds its "图片由 AI 生成" mark unless told `0`, so the public
//! `watermark` is always sent: `1` when asked, else `0`), then the caller's native fields (`Seed`,
//! `Revise`, `LogoParam`). No `n`: one image per job, and an account runs one job at a time by
//! default, so the family makes one image a request. No negative prompt on this interface.
//!
//! The submit answer is `{"Response": {"JobId", "RequestId"}}`; the query answer carries
//! `JobStatusCode` "1" waiting (public `pending`), "2" running (`running`), "4" failed
//! (`JobErrorCode`, `JobErrorMsg`) or "5" done (`ResultImage`: URLs valid for an hour, on Tencent's
//! object storage `*.myqcloud.com`; `ResultDetails` "Success" per image; `RevisedPrompt`). Errors
//! use the shared envelope, usually inside an HTTP 200.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::image_input::ImageInput;
use crate::common::images::{ImageAnswer, ImageData, NativeImage, NativeImages, NativeTask, Poll};
use crate::common::native::{json_with_extra, NativeRequest, PollRequest};
use crate::providers::formats::tencent;
use crate::upstream::provider::{bad_answer, Provider};

const SUBMIT: &str = "SubmitTextToImageJob";
const QUERY: &str = "QueryTextToImageJob";
const VERSION: &str = "2022-12-29";
const SERVICE: &str = "aiart";

/// A reference image's base64 must stay under 6 MB (so about 4.5 MB of bytes).
const MAX_IMAGE_BASE64: usize = 6 * 1024 * 1024;
/// The image types Tencent takes: jpg, jpeg, png, bmp, tiff, webp.
const IMAGE_TYPES: &[&str] = &[
    "image/png",
    "image/jpeg",
    "image/bmp",
    "image/tiff",
    "image/webp",
];
/// The longest job id accepted (the examples are about 70 characters).
const MAX_JOB_ID: usize = 256;

/// Where Tencent links its images: its object storage (`*.cos.ap-guangzhou.myqcloud.com`).
const RESULT_HOSTS: &[&str] = &["myqcloud.com", "*.myqcloud.com"];

#[derive(Serialize)]
struct SubmitBody<'a> {
    #[serde(rename = "Prompt")]
    prompt: &'a str,
    #[serde(rename = "Resolution")]
    resolution: String,
    #[serde(rename = "Images", skip_serializing_if = "Vec::is_empty")]
    images: Vec<Cow<'a, str>>,
    #[serde(rename = "LogoAdd")]
    logo_add: u8,
}

#[derive(Serialize)]
struct QueryBody<'a> {
    #[serde(rename = "JobId")]
    job_id: &'a str,
}

#[derive(Deserialize)]
struct Submitted {
    #[serde(rename = "JobId", default)]
    job_id: Option<String>,
}

#[derive(Deserialize)]
struct Job {
    #[serde(rename = "JobStatusCode", default)]
    status: Option<String>,
    #[serde(rename = "JobErrorCode", default)]
    error_code: Option<String>,
    #[serde(rename = "JobErrorMsg", default)]
    error_message: Option<String>,
    #[serde(rename = "ResultImage", default)]
    images: Option<Vec<String>>,
    #[serde(rename = "RevisedPrompt", default)]
    revised_prompt: Option<Vec<String>>,
}

// ---- translation to native -------------------------------------------------------------------

/// The submit request of one job (one image: the family's `per_call_n` is 1).
pub(crate) fn image_request(
    _target: &Target,
    req: &ImageRequest<'_>,
    _n: u64,
) -> Result<NativeRequest, GatewayError> {
    check(req)?;
    let images = req
        .image
        .iter()
        .chain(&req.more_images)
        .map(reference_image)
        .collect::<Result<Vec<_>, _>>()?;
    let body = SubmitBody {
        prompt: req.prompt.as_str(),
        resolution: resolution(&req.size)?,
        images,
        logo_add: u8::from(req.watermark),
    };
    Ok(tencent::api_request(
        SUBMIT,
        VERSION,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

/// Tencent's refusals the family table cannot express: reference images of a type or size it
/// does not take.
fn check(req: &ImageRequest<'_>) -> Result<(), GatewayError> {
    for input in req.image.iter().chain(&req.more_images) {
        if let ImageInput::Data { mime, bytes } = input {
            if !IMAGE_TYPES.contains(mime) {
                return Err(GatewayError::field(
                    "image",
                    format!(
                        "is {mime}; Tencent takes JPEG, PNG, BMP, TIFF or WebP reference images"
                    ),
                ));
            }
            if bytes.len().div_ceil(3) * 4 >= MAX_IMAGE_BASE64 {
                return Err(GatewayError::field(
                    "image",
                    "is larger than Tencent takes (its base64 must stay under 6 MB)",
                ));
            }
        }
    }
    Ok(())
}

/// `WxH` as Tencent's `W:H`.
fn resolution(size: &str) -> Result<String, GatewayError> {
    match size.split_once('x') {
        Some((w, h)) if !w.is_empty() && !h.is_empty() => Ok(format!("{w}:{h}")),
        // The family lists only `WxH` sizes, so this is a catalog bug.
        _ => Err(GatewayError::Internal(format!(
            "tencent-hunyuan cannot size `{size}`"
        ))),
    }
}

/// A reference image as Tencent takes it: the caller's URL, or the bytes as raw base64.
fn reference_image(input: &ImageInput) -> Result<Cow<'_, str>, GatewayError> {
    match input {
        ImageInput::Url(url) => Ok(Cow::Borrowed(url)),
        ImageInput::Data { .. } => input.base64().map(Cow::Owned).ok_or_else(|| {
            GatewayError::Internal("reference image bytes could not be encoded".into())
        }),
    }
}

/// The query request for `task`.
pub(crate) fn poll_request(task: &NativeTask) -> Result<NativeRequest, UpstreamError> {
    let body = serde_json::to_vec(&QueryBody { job_id: &task.id }).map_err(|e| {
        UpstreamError::new(
            UpstreamErrorKind::BadResponse,
            &task.provider,
            format!("job id could not be sent: {e}"),
        )
    })?;
    Ok(tencent::api_request(QUERY, VERSION, body))
}

// ---- translation back ------------------------------------------------------------------------

/// The submit answer: the job to poll.
pub(crate) fn image_response(
    provider: &Provider,
    _req: &ImageRequest<'_>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<ImageAnswer, UpstreamError> {
    let submitted: Submitted = tencent::answer(provider, body)?;
    let id = submitted
        .job_id
        .map(|id| id.trim().to_string())
        .filter(|id| !id.is_empty() && id.len() <= MAX_JOB_ID)
        .ok_or_else(|| bad_answer(provider, "answer has no usable JobId"))?;
    Ok(ImageAnswer::Task(NativeTask {
        provider: provider.name.clone(),
        id,
        polling_url: None,
    }))
}

/// One query's answer: the job's state, its images, or why it failed.
pub(crate) fn poll_response(
    provider: &Provider,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<Poll, UpstreamError> {
    let job: Job = tencent::answer(provider, body)?;
    match job.status.as_deref().map(str::trim) {
        Some("1") => Ok(Poll::Queued),
        Some("2") => Ok(Poll::Running),
        Some("5") => done(provider, job).map(Poll::Done),
        Some("4") => Err(job_failed(provider, &job)),
        Some(other) => Err(bad_answer(
            provider,
            format!("unknown JobStatusCode `{}`", provider.redact(other)),
        )),
        None => Err(bad_answer(provider, "answer has no JobStatusCode")),
    }
}

/// A finished job's images.
fn done(provider: &Provider, job: Job) -> Result<NativeImages, UpstreamError> {
    let urls: Vec<String> = job
        .images
        .unwrap_or_default()
        .into_iter()
        .filter(|u| !u.trim().is_empty())
        .collect();
    if urls.is_empty() {
        return Err(bad_answer(provider, "finished job holds no ResultImage"));
    }
    let revised = job
        .revised_prompt
        .and_then(|p| p.into_iter().next())
        .filter(|p| !p.trim().is_empty());
    let images = urls
        .into_iter()
        .map(|url| {
            let mut image = NativeImage::new(ImageData::Url(url));
            image.revised_prompt = revised.clone();
            image
        })
        .collect();
    Ok(NativeImages {
        images,
        ..Default::default()
    })
}

/// A job Tencent reports failed ("4"): its `JobErrorCode` classified like any Tencent error (a
/// moderation verdict is a content-policy refusal; no HTTP status is attached, so a failure read
/// in the submit answer may be retried).
fn job_failed(provider: &Provider, job: &Job) -> UpstreamError {
    let code = job.error_code.as_deref().map(str::trim).unwrap_or("");
    let mut err = tencent::code_error(provider, None, code, job.error_message.as_deref(), None);
    err.message = format!("the job failed: {}", err.message);
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Tencent Hunyuan image kind: TC3-signed for the `aiart` service; images, run as jobs.
pub(crate) fn kind(
    settings: &tencent::Settings,
    key: &str,
) -> Result<crate::providers::registry::Kind, String> {
    let auth = tencent::auth("tencent-hunyuan", settings, key, SERVICE)?;
    let images = crate::providers::registry::ImageFns {
        request: image_request,
        validate: |_, req| check(req),
        response: image_response,
        input_as_bytes: false,
        tasks: Some(crate::providers::registry::TaskFns {
            poll_request: |_, task| poll_request(task).map(PollRequest::Api),
            poll_response,
        }),
    };
    Ok(crate::providers::registry::images_kind(
        auth,
        tencent::error_response,
        RESULT_HOSTS,
        images,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::test_support as support;

    fn provider() -> std::sync::Arc<Provider> {
        support::provider("tencent-hunyuan", "AKIDexample")
    }

    #[test]
    fn resolutions() {
        assert_eq!(resolution("1024x1024").unwrap(), "1024:1024");
        assert_eq!(resolution("640x1408").unwrap(), "640:1408");
        assert!(resolution("1K").is_err());
    }

    #[test]
    fn submit_and_poll_answers() {
        let p = provider();
        let h = http::HeaderMap::new();
        let poll = |body: &str| poll_response(&p, &h, body.as_bytes());
        assert!(matches!(
            poll(r#"{"Response":{"JobStatusCode":"1","RequestId":"r"}}"#),
            Ok(Poll::Queued)
        ));
        assert!(matches!(
            poll(r#"{"Response":{"JobStatusCode":"2","RequestId":"r"}}"#),
            Ok(Poll::Running)
        ));
        let Ok(Poll::Done(images)) = poll(
            r#"{"Response":{"JobStatusCode":"5","ResultImage":["https://x.cos.ap-guangzhou.myqcloud.com/a.png"],"ResultDetails":["Success"],"RevisedPrompt":["a cat, detailed"],"RequestId":"r"}}"#,
        ) else {
            panic!("a finished job");
        };
        assert_eq!(images.images.len(), 1);
        assert_eq!(
            images.images[0].revised_prompt.as_deref(),
            Some("a cat, detailed")
        );
        let err = poll(r#"{"Response":{"JobStatusCode":"4","JobErrorCode":"OperationDenied.TextIllegalDetected","JobErrorMsg":"文本包含违法违规信息","RequestId":"r"}}"#).unwrap_err();
        assert_eq!(err.kind, UpstreamErrorKind::ContentPolicy);
        assert!(err.message.starts_with("the job failed"));
        let err = poll(r#"{"Response":{"JobStatusCode":"4","JobErrorCode":"FailedOperation.GenerateImageFailed","RequestId":"r"}}"#).unwrap_err();
        assert_eq!(err.kind, UpstreamErrorKind::Failure);
        assert!(
            poll(r#"{"Response":{"JobStatusCode":"5","ResultImage":[],"RequestId":"r"}}"#).is_err()
        );
        assert!(poll(r#"{"Response":{"JobStatusCode":"9","RequestId":"r"}}"#).is_err());

        let task = NativeTask {
            provider: "tencent-hunyuan".into(),
            id: "1259388371-1764399486-fd7b5e60-0".into(),
            polling_url: None,
        };
        let q = poll_request(&task).unwrap();
        assert_eq!(q.path, "/");
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&q.body).unwrap(),
            serde_json::json!({"JobId": "1259388371-1764399486-fd7b5e60-0"})
        );
    }
}
