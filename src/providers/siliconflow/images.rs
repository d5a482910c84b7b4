//! SiliconFlow (硅基流动) image generation: Kolors, Qwen-Image and Qwen-Image-Edit through
//! `POST /v1/images/generations`.
//!
//! JSON body: `model`, `prompt`, `negative_prompt`, `image_size` (the public `size`; left out for
//! the edit models, whose output keeps the reference image's size and whose family size is
//! `auto`), `batch_size` (only for families that batch natively, i.e. Kolors with up to 4 images
//! per call; Qwen-Image makes one and the gateway fans out), `image` (the reference image as the
//! caller's URL or a data URL: SiliconFlow fetches URLs itself) and the caller's pass-through
//! fields (`seed`, `num_inference_steps`, `guidance_scale` / `cfg`). Answers are
//! `{"images":[{"url"}],"timings":{…},"seed":…}` with URLs valid for an hour; the gateway
//! downloads them when the caller asked for base64.
//!
//! Errors are [`crate::providers::siliconflow`]'s `{"code","message","data"}` envelope (or a plain-text 401),
//! mapped there. SiliconFlow documents no content-moderation code for images, so a refusal is
//! classified by its HTTP status.

use serde::{Deserialize, Serialize};

use crate::common::error::GatewayError;

use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::common::error::UpstreamError;
use crate::common::images::ImageData;
use crate::common::images::NativeImage;
use crate::common::images::NativeImages;
use crate::common::native::json_with_extra;
use crate::common::native::NativeRequest;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

const IMAGES_PATH: &str = "/v1/images/generations";

/// The family size that means "the provider picks it" (edit models keep the input's size), sent
/// as no `image_size` at all.
const SIZE_AUTO: &str = "auto";

/// Longest provider message quoted in an unreadable answer's error.
const MAX_QUOTED_MESSAGE: usize = 200;

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct ImagesBody<'a> {
    model: &'a str,
    prompt: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    negative_prompt: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    image_size: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    batch_size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    image: Option<&'a str>,
}

/// A success answer; `message` is read so an error envelope that came with HTTP 200 can say why.
#[derive(Deserialize)]
struct ImagesResponse {
    /// `images` in SiliconFlow's reference; `data` tolerated for the OpenAI-style spelling.
    #[serde(default, alias = "data")]
    images: Option<Vec<ImageItem>>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct ImageItem {
    #[serde(default)]
    url: Option<String>,
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn image_request(
    target: &Target,
    req: &ImageRequest<'_>,
    n: u64,
) -> Result<NativeRequest, GatewayError> {
    // The gateway never asks one call for more than the family's `per_call_n`.
    if n == 0 || n > req.caps.per_call_n {
        return Err(GatewayError::Internal(format!(
            "siliconflow asked for {n} images in one call; the family allows {}",
            req.caps.per_call_n
        )));
    }
    let image = req.image.as_ref().map(|i| i.url_or_data_url());
    let body = ImagesBody {
        model: &target.native_model,
        prompt: req.prompt.as_str(),
        negative_prompt: req.negative_prompt.as_ref().map(|p| p.as_str()),
        image_size: (req.size != SIZE_AUTO).then_some(&*req.size),
        // Only Kolors batches (`per_call_n` 4); other models refuse or ignore `batch_size`.
        batch_size: (req.caps.per_call_n > 1).then_some(n),
        image: image.as_deref(),
    };
    Ok(NativeRequest::post_json(
        IMAGES_PATH,
        json_with_extra(&body, &req.passthrough)?,
    ))
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn image_response(
    provider: &Provider,
    _req: &ImageRequest<'_>,
    _headers: &http::HeaderMap,
    body: &[u8],
) -> Result<NativeImages, UpstreamError> {
    let parsed: ImagesResponse = crate::providers::parse_answer(provider, body)?;
    let Some(items) = parsed.images.filter(|i| !i.is_empty()) else {
        return Err(crate::upstream::provider::bad_answer(
            provider,
            no_images_message(provider, parsed.message),
        ));
    };
    let images = items
        .into_iter()
        .map(|item| match item.url.filter(|u| !u.is_empty()) {
            Some(url) => Ok(NativeImage::new(ImageData::Url(url))),
            None => Err(crate::upstream::provider::bad_answer(
                provider,
                "image answer item has no url",
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    // SiliconFlow reports no creation time; the gateway uses its own clock.
    Ok(NativeImages {
        created: None,
        images,
        ..Default::default()
    })
}

/// Why an answer without images is unusable, quoting the provider's own reason when it gave one
/// (an error envelope with HTTP 200).
fn no_images_message(provider: &Provider, message: Option<String>) -> String {
    match message
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
    {
        Some(m) => {
            let mut m = provider.redact(&m);
            if m.chars().count() > MAX_QUOTED_MESSAGE {
                m = m.chars().take(MAX_QUOTED_MESSAGE).collect::<String>() + "…";
            }
            format!("image answer has no images: {m}")
        }
        None => "image answer has no images".to_string(),
    }
}

// ---- error mapping ---------------------------------------------------------------------------
//
// Non-2xx answers go to `crate::providers::siliconflow::error_response` (the dispatch in `super` routes every
// SiliconFlow error there). Its image cases are tested below.

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use base64::Engine;

    use super::*;
    use crate::common::error::UpstreamErrorKind;
    use crate::providers::test_support as support;

    const KEY: &str = "sk-sf-secret-123456";
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    fn provider() -> Arc<Provider> {
        support::provider_at("siliconflow", KEY, "https://api.siliconflow.cn")
    }

    fn kolors(body: &[u8]) -> ImageRequest<'_> {
        let t = support::target(provider(), "Kwai-Kolors/Kolors");
        support::image_request("kolors", "kolors", t, body)
    }

    fn qwen(body: &[u8]) -> ImageRequest<'_> {
        let t = support::target(provider(), "Qwen/Qwen-Image");
        support::image_request("qwen-image", "qwen-image", t, body)
    }

    fn qwen_edit(body: &[u8]) -> ImageRequest<'_> {
        let t = support::target(provider(), "Qwen/Qwen-Image-Edit-2509");
        support::image_request("qwen-image-edit", "qwen-image-edit", t, body)
    }

    fn native_json(req: &ImageRequest<'_>, n: u64) -> serde_json::Value {
        let native = image_request(&req.model.targets[0], req, n).unwrap();
        assert_eq!(native.path, IMAGES_PATH);
        assert_eq!(native.content_type, "application/json");
        serde_json::from_slice(&native.body).unwrap()
    }

    #[test]
    fn builds_a_full_kolors_request() {
        let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
        let body = format!(
            r#"{{"model":"kolors","prompt":"a cat","negative_prompt":"dogs","size":"960x1280","n":6,"image":"{b64}","response_format":"b64_json","seed":42,"num_inference_steps":30,"guidance_scale":7.5}}"#
        );
        let req = kolors(body.as_bytes());
        assert_eq!(
            native_json(&req, 4),
            serde_json::json!({
                "model": "Kwai-Kolors/Kolors",
                "prompt": "a cat",
                "negative_prompt": "dogs",
                "image_size": "960x1280",
                "batch_size": 4,
                "image": format!("data:image/png;base64,{b64}"),
                "seed": 42,
                "num_inference_steps": 30,
                "guidance_scale": 7.5
            })
        );
        // The fan-out's remainder call asks for the rest.
        assert_eq!(native_json(&req, 2)["batch_size"], 2);
    }

    #[test]
    fn kolors_defaults_and_url_reference() {
        let req = kolors(
            br#"{"model":"kolors","prompt":"p","image":"https://img.example/ref.png?x=1&y=2"}"#,
        );
        assert_eq!(
            native_json(&req, 1),
            serde_json::json!({
                "model": "Kwai-Kolors/Kolors",
                "prompt": "p",
                "image_size": "1024x1024",
                "batch_size": 1,
                "image": "https://img.example/ref.png?x=1&y=2"
            })
        );
        let req = kolors(br#"{"model":"kolors","prompt":"p","aspect_ratio":"9:16"}"#);
        assert_eq!(native_json(&req, 1)["image_size"], "720x1280");
        assert!(matches!(
            image_request(&req.model.targets[0], &req, 5),
            Err(GatewayError::Internal(_))
        ));
        assert!(matches!(
            image_request(&req.model.targets[0], &req, 0),
            Err(GatewayError::Internal(_))
        ));
    }

    #[test]
    fn qwen_image_sends_no_batch_size() {
        let req = qwen(
            br#"{"model":"qwen-image","prompt":"p","negative_prompt":"n","aspect_ratio":"16:9","n":3,"cfg":4.0}"#,
        );
        assert_eq!(
            native_json(&req, 1),
            serde_json::json!({
                "model": "Qwen/Qwen-Image",
                "prompt": "p",
                "negative_prompt": "n",
                "image_size": "1664x928",
                "cfg": 4.0
            })
        );
        assert!(image_request(&req.model.targets[0], &req, 2).is_err());
        let refused = support::image_refusal(
            "qwen-image",
            "qwen-image",
            support::target(provider(), "Qwen/Qwen-Image"),
            br#"{"model":"qwen-image","prompt":"p","image":"https://a.example/i.png","guidance_scale":3,"size":"1024x1024"}"#,
        );
        for field in ["image", "guidance_scale", "size"] {
            assert!(refused.get(field).is_some(), "{field}: {refused}");
        }
    }

    #[test]
    fn qwen_image_edit_sends_the_image_and_no_size() {
        let req = qwen_edit(
            br#"{"model":"qwen-image-edit","prompt":"make it blue","image":"https://img.example/a.png","image2":"https://img.example/b.png","seed":7}"#,
        );
        assert_eq!(
            native_json(&req, 1),
            serde_json::json!({
                "model": "Qwen/Qwen-Image-Edit-2509",
                "prompt": "make it blue",
                "image": "https://img.example/a.png",
                "image2": "https://img.example/b.png",
                "seed": 7
            })
        );
        let t = || support::target(provider(), "Qwen/Qwen-Image-Edit-2509");
        let refused = support::image_refusal(
            "qwen-image-edit",
            "qwen-image-edit",
            t(),
            br#"{"model":"qwen-image-edit","prompt":"p"}"#,
        );
        assert!(refused.get("image").is_some(), "{refused}");
        let refused = support::image_refusal(
            "qwen-image-edit",
            "qwen-image-edit",
            t(),
            br#"{"model":"qwen-image-edit","prompt":"p","image":"https://a.example/i.png","size":"1024x1024"}"#,
        );
        assert!(refused.get("size").is_some(), "{refused}");
    }

    #[test]
    fn reads_url_answers() {
        let req = kolors(br#"{"model":"kolors","prompt":"p","n":2}"#);
        let p = provider();
        let h = http::HeaderMap::new();
        let body = br#"{"images":[{"url":"https://sc-maas.oss-cn-shanghai.aliyuncs.com/outputs/a.png"},{"url":"https://sc-maas.oss-cn-shanghai.aliyuncs.com/outputs/b.png"}],"timings":{"inference":1.23},"seed":123}"#;
        let out = image_response(&p, &req, &h, body).unwrap();
        assert_eq!(out.created, None);
        assert_eq!(
            out.images,
            vec![
                NativeImage::new(ImageData::Url(
                    "https://sc-maas.oss-cn-shanghai.aliyuncs.com/outputs/a.png".into()
                )),
                NativeImage::new(ImageData::Url(
                    "https://sc-maas.oss-cn-shanghai.aliyuncs.com/outputs/b.png".into()
                )),
            ]
        );
        let body = br#"{"data":[{"url":"https://x.siliconflow.cn/a.png"}]}"#;
        assert_eq!(image_response(&p, &req, &h, body).unwrap().images.len(), 1);
    }

    #[test]
    fn unusable_answers_are_bad_responses() {
        let req = kolors(br#"{"model":"kolors","prompt":"p"}"#);
        let p = provider();
        let h = http::HeaderMap::new();
        for bad in [
            &br#"{"images":[]}"#[..],
            br#"{"timings":{}}"#,
            br#"{"images":[{"url":""}]}"#,
            b"<html></html>",
        ] {
            let e = image_response(&p, &req, &h, bad).unwrap_err();
            assert_eq!(
                e.kind,
                UpstreamErrorKind::BadResponse,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // An error envelope with HTTP 200 keeps its reason, secrets redacted.
        let e = image_response(
            &p,
            &req,
            &h,
            br#"{"code":50505,"message":"overloaded for sk-sf-secret-123456","data":null}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
        assert!(e.message.contains("overloaded"), "{}", e.message);
        assert!(!e.message.contains(KEY));
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let e = crate::providers::siliconflow::error_response(
            &p,
            400,
            br#"{"code":20015,"message":"The parameter is invalid. Please check again.","data":null}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "The parameter is invalid. Please check again.");

        let e = crate::providers::siliconflow::error_response(&p, 401, b"Invalid token");
        assert_eq!(e.kind, UpstreamErrorKind::AuthRejected);

        let e = crate::providers::siliconflow::error_response(
            &p,
            403,
            br#"{"code":30001,"message":"Sorry, your account balance is insufficient","data":null}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(!e.retryable());

        let e = crate::providers::siliconflow::error_response(
            &p,
            429,
            br#"{"code":50603,"message":"IPM limit reached.","data":null}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::RateLimited);

        let e = crate::providers::siliconflow::error_response(
            &p,
            503,
            br#"{"code":50505,"message":"Model service overloaded. Please try again later.","data":null}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert!(e.retryable());
    }
}
