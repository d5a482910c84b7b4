//! MiniMax image generation (`image-01`, `image-01-live`) through `POST /v1/image_generation`.
//!
//! JSON body: `model`, `prompt`, the size as `aspect_ratio` (one of eight ratios, each a fixed
//! pixel size) or, for a `WxH` only the family's size rule allows (`image-01`: sides 512–2048 px,
//! multiples of 8), as `width` and `height`; `n` (up to 9 in one call); `response_format`
//! (`url`, links valid for 24 hours, or `base64`: the caller's choice is passed on, so neither a
//! download nor hosting is needed); `subject_reference` (one `character` reference, a URL or a data
//! URL that MiniMax fetches itself); `aigc_watermark` when the caller names `watermark`; and the
//! caller's pass-through fields (`seed`, `prompt_optimizer`).
//!
//! The answer is `{"id", "data": {"image_urls" | "image_base64": [...]}, "metadata":
//! {"success_count", "failed_count"}, "base_resp"}`; like every MiniMax answer it may be an error
//! with HTTP 200, so `base_resp` is checked first (mapped in [`super`]). Images the provider could
//! not make (`failed_count`) are simply absent; an answer with none is an error.

use serde::{Deserialize, Serialize};

use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError};
use crate::common::images::{ImageData, NativeImage, NativeImages};
use crate::common::native::{json_with_extra, NativeRequest};
use crate::providers::parse_answer;
use crate::upstream::provider::{bad_answer, Provider};

use super::{check_base_resp, BaseResp};

// ---- constants -------------------------------------------------------------------------------

const IMAGES_PATH: &str = "/v1/image_generation";

/// The only `subject_reference` type MiniMax documents.
const REFERENCE_TYPE: &str = "character";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct ImagesBody<'a> {
    model: &'a str,
    prompt: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    aspect_ratio: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    width: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    height: Option<u32>,
    response_format: &'static str,
    n: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    subject_reference: Option<[SubjectReference<'a>; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    aigc_watermark: Option<bool>,
}

#[derive(Serialize)]
struct SubjectReference<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    image_file: &'a str,
}

#[derive(Deserialize)]
struct ImagesAnswer {
    #[serde(default)]
    data: Option<AnswerData>,
    #[serde(default)]
    metadata: Option<Metadata>,
    #[serde(default)]
    base_resp: Option<BaseResp>,
}

#[derive(Deserialize)]
struct AnswerData {
    #[serde(default)]
    image_urls: Option<Vec<String>>,
    #[serde(default)]
    image_base64: Option<Vec<String>>,
}

/// Counts MiniMax reports as strings (`"1"`) in its examples; numbers are read too.
#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    failed_count: Option<serde_json::Value>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn image_request(
    target: &Target,
    req: &ImageRequest<'_>,
    n: u64,
) -> Result<NativeRequest, GatewayError> {
    // The gateway never asks one call for more than the family's `per_call_n` (9).
    if n == 0 || n > req.caps.per_call_n {
        return Err(GatewayError::Internal(format!(
            "minimax asked for {n} images in one call; the family allows {}",
            req.caps.per_call_n
        )));
    }
    let (aspect_ratio, width, height) = match req.aspect_ratio() {
        Some(ratio) => (Some(ratio), None, None),
        // A size only the family's rule allows: MiniMax's custom width and height.
        None => {
            let (w, h) = pixels(&req.size).ok_or_else(|| {
                GatewayError::field(
                    "size",
                    format!(
                        "model {} takes WIDTHxHEIGHT or one of its sizes, not {}",
                        req.model.name, req.size
                    ),
                )
            })?;
            (None, Some(w), Some(h))
        }
    };
    let reference = req.image.as_ref().map(|i| i.url_or_data_url());
    let body = ImagesBody {
        model: &target.native_model,
        prompt: req.prompt.as_str(),
        aspect_ratio,
        width,
        height,
        response_format: if req.response_format == "b64_json" {
            "base64"
        } else {
            "url"
        },
        n,
        subject_reference: reference.as_deref().map(|image_file| {
            [SubjectReference {
                kind: REFERENCE_TYPE,
                image_file,
            }]
        }),
        aigc_watermark: req.watermark_given.then_some(req.watermark),
    };
    Ok(NativeRequest::post_json(
        IMAGES_PATH,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

/// `WxH` as numbers.
fn pixels(size: &str) -> Option<(u32, u32)> {
    let (w, h) = size.split_once('x')?;
    Some((w.parse().ok()?, h.parse().ok()?))
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn image_response(
    provider: &Provider,
    _req: &ImageRequest<'_>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<NativeImages, UpstreamError> {
    let answer: ImagesAnswer = parse_answer(provider, body)?;
    check_base_resp(provider, answer.base_resp.as_ref())?;
    let data = answer.data.unwrap_or(AnswerData {
        image_urls: None,
        image_base64: None,
    });
    let images: Vec<NativeImage> = match (data.image_base64, data.image_urls) {
        (Some(b64), _) if !b64.is_empty() => b64
            .into_iter()
            .map(|b| item(provider, b, |s| ImageData::Base64(s.into())))
            .collect::<Result<_, _>>()?,
        (_, Some(urls)) => urls
            .into_iter()
            .map(|u| item(provider, u, ImageData::Url))
            .collect::<Result<_, _>>()?,
        _ => Vec::new(),
    };
    if images.is_empty() {
        let failed = answer
            .metadata
            .and_then(|m| m.failed_count)
            .map(|c| match c {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            })
            .unwrap_or_else(|| "?".to_string());
        return Err(bad_answer(
            provider,
            format!("answer holds no images ({failed} failed)"),
        ));
    }
    // MiniMax reports no creation time; the gateway uses its own clock.
    Ok(NativeImages {
        created: None,
        images,
        ..Default::default()
    })
}

fn item(
    provider: &Provider,
    value: String,
    wrap: fn(String) -> ImageData,
) -> Result<NativeImage, UpstreamError> {
    if value.is_empty() {
        return Err(bad_answer(provider, "an image of the answer is empty"));
    }
    Ok(NativeImage::new(wrap(value)))
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::common::error::UpstreamErrorKind;
    use crate::providers::test_support as support;

    const KEY: &str = "sk-minimax-secret-42";

    fn provider() -> Arc<Provider> {
        support::provider_at("minimax", KEY, "https://api.minimax.io")
    }

    fn request<'a>(family: &str, body: &'a [u8]) -> ImageRequest<'a> {
        let t = support::target(provider(), "image-01");
        support::image_request("image-01", family, t, body)
    }

    fn native(req: &ImageRequest<'_>, n: u64) -> serde_json::Value {
        let native = image_request(&req.model.targets[0], req, n).unwrap();
        assert_eq!(native.path, IMAGES_PATH);
        assert_eq!(native.content_type, "application/json");
        serde_json::from_slice(&native.body).unwrap()
    }

    #[test]
    fn builds_a_full_request() {
        let req = request(
            "minimax-image",
            br#"{"model":"image-01","prompt":"a cat","aspect_ratio":"16:9","n":4,
                "image":"https://img.example/face.jpg","watermark":true,
                "response_format":"b64_json","seed":7,"prompt_optimizer":true}"#,
        );
        assert_eq!(
            native(&req, 4),
            json!({
                "model": "image-01",
                "prompt": "a cat",
                "aspect_ratio": "16:9",
                "response_format": "base64",
                "n": 4,
                "subject_reference": [{"type": "character", "image_file": "https://img.example/face.jpg"}],
                "aigc_watermark": true,
                "seed": 7,
                "prompt_optimizer": true
            })
        );
    }

    #[test]
    fn sizes_become_a_ratio_or_width_and_height() {
        let req = request(
            "minimax-image",
            br#"{"model":"image-01","prompt":"p","size":"1248x832"}"#,
        );
        assert_eq!(
            native(&req, 1),
            json!({"model": "image-01", "prompt": "p", "aspect_ratio": "3:2",
                "response_format": "url", "n": 1})
        );
        let req = request(
            "minimax-image",
            br#"{"model":"image-01","prompt":"p","size":"2048x512","watermark":false}"#,
        );
        assert_eq!(
            native(&req, 2),
            json!({"model": "image-01", "prompt": "p", "width": 2048, "height": 512,
                "response_format": "url", "n": 2, "aigc_watermark": false})
        );
        // Outside the rule: refused before any call.
        let t = || support::target(provider(), "image-01");
        for size in ["2056x512", "1020x1021", "504x1024"] {
            let body = format!(r#"{{"model":"image-01","prompt":"p","size":"{size}"}}"#);
            let refused = support::image_refusal("image-01", "minimax-image", t(), body.as_bytes());
            assert!(refused.get("size").is_some(), "{size}: {refused}");
        }
        // image-01-live takes ratios only.
        let refused = support::image_refusal(
            "image-01",
            "minimax-image-live",
            t(),
            br#"{"model":"image-01","prompt":"p","size":"2048x512"}"#,
        );
        assert!(refused.get("size").is_some(), "{refused}");
        assert!(image_request(&req.model.targets[0], &req, 10).is_err());
    }

    #[test]
    fn reads_urls_and_base64() {
        let p = provider();
        let req = request("minimax-image", br#"{"model":"image-01","prompt":"p"}"#);
        let body = json!({"id": "x", "data": {"image_urls": ["https://a.example/1.jpeg", "https://a.example/2.jpeg"]},
            "metadata": {"success_count": "2", "failed_count": "0"},
            "base_resp": {"status_code": 0, "status_msg": "success"}});
        let got = image_response(
            &p,
            &req,
            &http::HeaderMap::new(),
            body.to_string().as_bytes(),
        )
        .unwrap();
        assert_eq!(got.images.len(), 2);
        assert!(
            matches!(&got.images[1].data, ImageData::Url(u) if u == "https://a.example/2.jpeg")
        );
        let body = json!({"data": {"image_base64": ["/9j/AAAA"]}, "base_resp": {"status_code": 0}});
        let got = image_response(
            &p,
            &req,
            &http::HeaderMap::new(),
            body.to_string().as_bytes(),
        )
        .unwrap();
        assert!(matches!(&got.images[0].data, ImageData::Base64(b) if b.as_str() == "/9j/AAAA"));
    }

    #[test]
    fn in_band_errors_and_empty_answers_fail() {
        let p = provider();
        let req = request("minimax-image", br#"{"model":"image-01","prompt":"p"}"#);
        let read = |body: serde_json::Value| {
            image_response(
                &p,
                &req,
                &http::HeaderMap::new(),
                body.to_string().as_bytes(),
            )
            .unwrap_err()
        };
        let e = read(json!({"data": null,
            "base_resp": {"status_code": 1026, "status_msg": format!("sensitive {KEY}")}}));
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        assert!(!e.message.contains(KEY));
        let e = read(json!({"base_resp": {"status_code": 1002, "status_msg": "rate limit"}}));
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
        let e = read(json!({"data": {"image_urls": []},
            "metadata": {"success_count": "0", "failed_count": "2"},
            "base_resp": {"status_code": 0, "status_msg": "success"}}));
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
        assert!(e.message.contains("2 failed"), "{}", e.message);
        let e = read(json!({"data": {"image_urls": [""]}, "base_resp": {"status_code": 0}}));
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    }
}
