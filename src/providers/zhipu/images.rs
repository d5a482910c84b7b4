//! Zhipu AI / BigModel (智谱) image generation: CogView and GLM-Image through
//! `POST /api/paas/v4/images/generations`.
//!
//! One image per call and no `n` field: the family's `per_call_n` is 1, so the gateway fans a
//! larger `n` out into concurrent calls. The body is `model`, `prompt`, `size`, `quality` (only
//! when the caller chose one: `cogview-4-250304` defaults to `standard`, GLM-Image to `hd`, and
//! older CogView models take none), `watermark_enabled` and the caller's pass-through fields
//! (`user_id`). `watermark_enabled` is sent only when the caller named `watermark`: Zhipu marks
//! every image by default (visible and invisible marks, as China's rules for AI-generated content
//! require), and `false` is honoured only for accounts that signed Zhipu's disclaimer, so a
//! request that asked nothing must not depend on that privilege. A caller's explicit `false` is
//! sent as asked. Answers always carry a URL (`data[].url`); the gateway downloads it when the
//! caller asked for base64.
//!
//! Errors use the envelope of every Zhipu API (`{"error":{"code":"1301",…}}`), sometimes with
//! HTTP 200; both are classified by [`crate::providers::zhipu`]'s business-code table (1301 unsafe content is
//! a content-policy refusal).

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

const IMAGES_PATH: &str = "/api/paas/v4/images/generations";

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize)]
struct ImagesBody<'a> {
    model: &'a str,
    prompt: &'a str,
    size: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    quality: Option<&'a str>,
    /// Only the caller's own choice; absent, Zhipu's default (marked) applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    watermark_enabled: Option<bool>,
}

/// A success answer, or (with HTTP 200) an error envelope: both are read through this one shape.
#[derive(Deserialize)]
struct ImagesResponse {
    #[serde(default)]
    created: Option<i64>,
    #[serde(default)]
    data: Option<Vec<ImageItem>>,
    #[serde(default)]
    error: Option<serde_json::Value>,
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
    // The API makes exactly one image; the family's `per_call_n` of 1 makes the gateway fan out.
    if n != 1 {
        return Err(GatewayError::Internal(format!(
            "zhipu makes one image per call, asked for {n}"
        )));
    }
    let body = ImagesBody {
        model: &target.native_model,
        prompt: req.prompt.as_str(),
        size: &req.size,
        quality: req.quality,
        watermark_enabled: req.watermark_given.then_some(req.watermark),
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
    if let Some(err) =
        crate::providers::zhipu::error_in_answer(provider, parsed.error.as_ref(), body)
    {
        return Err(err);
    }
    let items = parsed.data.filter(|d| !d.is_empty()).ok_or_else(|| {
        crate::upstream::provider::bad_answer(provider, "image answer has no data")
    })?;
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
    Ok(NativeImages {
        created: parsed.created,
        images,
        ..Default::default()
    })
}

// ---- error mapping ---------------------------------------------------------------------------
//
// Non-2xx answers go to `zhipu::error_response` (the dispatch in `super` routes every Zhipu error
// there): the same envelope and business codes as every Zhipu API. Its image cases are tested
// below.

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::common::error::UpstreamErrorKind;
    use crate::providers::test_support as support;

    const KEY: &str = "zhipu-secret-abcdef.123456";

    fn provider() -> Arc<Provider> {
        support::provider_at("zhipu", KEY, "https://open.bigmodel.cn")
    }

    fn target(native: &str) -> Target {
        support::target(provider(), native)
    }

    fn cogview(body: &[u8]) -> ImageRequest<'_> {
        support::image_request("cogview-4", "cogview", target("cogview-4-250304"), body)
    }

    fn native_json(req: &ImageRequest<'_>) -> serde_json::Value {
        let native = image_request(&req.model.targets[0], req, 1).unwrap();
        assert_eq!(native.path, IMAGES_PATH);
        assert_eq!(native.content_type, "application/json");
        serde_json::from_slice(&native.body).unwrap()
    }

    #[test]
    fn builds_a_full_request() {
        let req = cogview(
            br#"{"model":"cogview-4","prompt":"a cat","size":"768x1344","quality":"hd","watermark":true,"n":3,"response_format":"b64_json","user_id":"user-123456"}"#,
        );
        assert_eq!(
            native_json(&req),
            serde_json::json!({
                "model": "cogview-4-250304",
                "prompt": "a cat",
                "size": "768x1344",
                "quality": "hd",
                "watermark_enabled": true,
                "user_id": "user-123456"
            })
        );
    }

    #[test]
    fn defaults_send_the_size_but_no_quality_or_watermark() {
        let req = cogview(br#"{"model":"cogview-4","prompt":"a cat"}"#);
        assert_eq!(
            native_json(&req),
            serde_json::json!({
                "model": "cogview-4-250304",
                "prompt": "a cat",
                "size": "1024x1024"
            })
        );
        // A caller's explicit `false` is sent as asked (honoured for accounts with the disclaimer).
        let req = cogview(br#"{"model":"cogview-4","prompt":"a cat","watermark":false}"#);
        assert_eq!(native_json(&req)["watermark_enabled"], false);
        let req = cogview(br#"{"model":"cogview-4","prompt":"a cat","aspect_ratio":"2:1"}"#);
        assert_eq!(native_json(&req)["size"], "1440x720");
    }

    #[test]
    fn asks_for_one_image_per_call_only() {
        let req = cogview(br#"{"model":"cogview-4","prompt":"a cat","n":4}"#);
        assert!(matches!(
            image_request(&req.model.targets[0], &req, 2),
            Err(GatewayError::Internal(_))
        ));
    }

    #[test]
    fn glm_image_has_its_own_sizes_and_only_hd() {
        let t = || target("glm-image");
        let req = support::image_request(
            "glm-image",
            "glm-image",
            t(),
            br#"{"model":"glm-image","prompt":"p","quality":"hd"}"#,
        );
        assert_eq!(
            native_json(&req),
            serde_json::json!({
                "model": "glm-image",
                "prompt": "p",
                "size": "1280x1280",
                "quality": "hd"
            })
        );
        let req = support::image_request(
            "glm-image",
            "glm-image",
            t(),
            br#"{"model":"glm-image","prompt":"p","aspect_ratio":"16:9"}"#,
        );
        assert_eq!(native_json(&req)["size"], "1728x960");
        let refused = support::image_refusal(
            "glm-image",
            "glm-image",
            t(),
            br#"{"model":"glm-image","prompt":"p","quality":"standard","size":"992x1024"}"#,
        );
        assert!(refused.get("quality").is_some(), "{refused}");
        assert!(refused.get("size").is_some(), "{refused}");
        // Custom sizes: sides 1024–2048 px, multiples of 32, at most 2^22 pixels.
        let req = support::image_request(
            "glm-image",
            "glm-image",
            t(),
            br#"{"model":"glm-image","prompt":"p","size":"2048x2048"}"#,
        );
        assert_eq!(native_json(&req)["size"], "2048x2048");
        for size in ["1040x1024", "2080x1024", "1024x960"] {
            let body = format!(r#"{{"model":"glm-image","prompt":"p","size":"{size}"}}"#);
            let refused = support::image_refusal("glm-image", "glm-image", t(), body.as_bytes());
            assert!(refused.get("size").is_some(), "{size}: {refused}");
        }
    }

    #[test]
    fn cogview_takes_custom_sizes_within_its_rule() {
        for size in ["512x512", "2048x1024", "1008x1008", "1600x1200"] {
            let body = format!(r#"{{"model":"cogview-4","prompt":"p","size":"{size}"}}"#);
            let req = cogview(body.as_bytes());
            assert_eq!(native_json(&req)["size"], size);
        }
        // Below 512, above 2048, not a multiple of 16, more than 2^21 pixels.
        for size in ["496x512", "2064x512", "1000x1000", "2048x1040"] {
            let body = format!(r#"{{"model":"cogview-4","prompt":"p","size":"{size}"}}"#);
            let refused = support::image_refusal(
                "cogview-4",
                "cogview",
                target("cogview-4-250304"),
                body.as_bytes(),
            );
            assert!(refused.get("size").is_some(), "{size}: {refused}");
        }
    }

    #[test]
    fn cogview_refuses_what_zhipu_cannot_do() {
        let refused = support::image_refusal(
            "cogview-4",
            "cogview",
            target("cogview-4-250304"),
            br#"{"model":"cogview-4","prompt":"p","negative_prompt":"x","image":"https://a.example/i.png","quality":"low","seed":1}"#,
        );
        for field in ["negative_prompt", "image", "quality", "seed"] {
            assert!(refused.get(field).is_some(), "{field}: {refused}");
        }
    }

    #[test]
    fn reads_url_answers() {
        let req = cogview(br#"{"model":"cogview-4","prompt":"p"}"#);
        let p = provider();
        let h = http::HeaderMap::new();
        let body = br#"{"created":1760000000,"data":[{"url":"https://aigc-files.bigmodel.cn/api/cogview/a.png"}],"content_filter":[{"role":"assistant","level":3}]}"#;
        let out = image_response(&p, &req, &h, body).unwrap();
        assert_eq!(
            out,
            NativeImages {
                created: Some(1760000000),
                images: vec![NativeImage::new(ImageData::Url(
                    "https://aigc-files.bigmodel.cn/api/cogview/a.png".into()
                ))],
                ..Default::default()
            }
        );

        for bad in [
            &br#"{"created":1,"data":[]}"#[..],
            br#"{"created":1}"#,
            br#"{"data":[{"url":""}]}"#,
            br#"{"data":[{"b64_json":"AAAA"}]}"#,
            b"not json",
        ] {
            let e = image_response(&p, &req, &h, bad).unwrap_err();
            assert_eq!(
                e.kind,
                UpstreamErrorKind::BadResponse,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn error_in_a_200_is_classified_by_its_code() {
        let req = cogview(br#"{"model":"cogview-4","prompt":"p"}"#);
        let p = provider();
        let h = http::HeaderMap::new();
        let cases: [(&[u8], UpstreamErrorKind); 4] = [
            (
                br#"{"error":{"code":"1301","message":"unsafe or sensitive content"}}"#,
                UpstreamErrorKind::ContentPolicy,
            ),
            (
                br#"{"error":{"code":"1214","message":"size invalid"}}"#,
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                br#"{"error":{"code":"1302","message":"High concurrency"}}"#,
                UpstreamErrorKind::RateLimited,
            ),
            (
                br#"{"error":{"code":"1113","message":"Your account is in arrears"}}"#,
                UpstreamErrorKind::Failure,
            ),
        ];
        for (body, kind) in cases {
            let e = image_response(&p, &req, &h, body).unwrap_err();
            assert_eq!(e.kind, kind, "{}", String::from_utf8_lossy(body));
        }
        // Arrears is the operator's problem and repeating will not help.
        let e = image_response(
            &p,
            &req,
            &h,
            br#"{"error":{"code":"1113","message":"arrears"}}"#,
        )
        .unwrap_err();
        assert!(!e.retryable());
        let ok = br#"{"error":null,"created":1,"data":[{"url":"https://x.bigmodel.cn/a.png"}]}"#;
        assert!(image_response(&p, &req, &h, ok).is_ok());
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let kind =
            |status: u16, body: &[u8]| crate::providers::zhipu::error_response(&p, status, body);

        let e = kind(
            400,
            br#"{"error":{"code":"1301","message":"System detected potentially unsafe or sensitive content in input or generation."}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy);
        assert_eq!(e.status, Some(400));
        assert!(!e.retryable());

        for code in ["1302", "1303"] {
            let body = format!(r#"{{"error":{{"code":"{code}","message":"rate"}}}}"#);
            let e = kind(429, body.as_bytes());
            assert_eq!(e.kind, UpstreamErrorKind::RateLimited, "{code}");
            assert!(e.retryable());
        }
        for code in ["1113", "1304", "1308"] {
            let body = format!(r#"{{"error":{{"code":"{code}","message":"quota"}}}}"#);
            let e = kind(429, body.as_bytes());
            assert_eq!(e.kind, UpstreamErrorKind::Failure, "{code}");
            assert!(!e.retryable(), "{code}");
        }
        for code in ["1000", "1001", "1002", "1003", "1004"] {
            let body = format!(r#"{{"error":{{"code":"{code}","message":"token {KEY}"}}}}"#);
            let e = kind(401, body.as_bytes());
            assert_eq!(e.kind, UpstreamErrorKind::AuthRejected, "{code}");
            assert!(!e.message.contains(KEY));
        }
        let e = kind(
            400,
            r#"{"error":{"code":"1211","message":"模型不存在，请检查模型代码。"}}"#.as_bytes(),
        );
        assert_eq!(e.kind, UpstreamErrorKind::UnknownModel);
        assert!(!e.retryable());

        let e = kind(
            400,
            br#"{"error":{"code":"1214","message":"Invalid size parameter"}}"#,
        );
        assert_eq!(e.kind, UpstreamErrorKind::InvalidRequest);
        assert_eq!(e.message, "Invalid size parameter");

        let e = kind(502, b"<html>bad gateway</html>");
        assert_eq!(e.kind, UpstreamErrorKind::Failure);
        assert_eq!(e.message, "HTTP 502");
        assert!(e.retryable());
    }
}
