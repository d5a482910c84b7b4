//! The Gemini adapter's translation, answers and errors, without a network.

use super::*;
use crate::providers::test_support as support;
use serde_json::json;

const KEY: &str = "AIzaSy-gemini-secret-0001";
const PRO: &str = "gemini-3-pro-image";
const FLASH: &str = "gemini-3.1-flash-image";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
const JPEG: &[u8] = b"\xFF\xD8\xFF\xE0\0\x10JFIF\0\x01";
const GIF: &[u8] = b"GIF89a\x01\0\x01\0\0\0\0";

fn gemini() -> std::sync::Arc<Provider> {
    support::provider_at("gemini", KEY, "https://generativelanguage.googleapis.com")
}

fn target(native: &str) -> Target {
    support::target(gemini(), native)
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The native request for a public body of `family`.
fn native(family: &str, model: &str, body: &Value) -> (String, Value) {
    let bytes = serde_json::to_vec(body).unwrap();
    let req = support::image_request("m", family, target(model), &bytes);
    validate(&req.model.targets[0], &req).unwrap();
    let out = image_request(&req.model.targets[0], &req, 1).unwrap();
    assert_eq!(out.content_type, "application/json");
    (out.path, serde_json::from_slice(&out.body).unwrap())
}

fn answer(body: &Value) -> Result<NativeImages, UpstreamError> {
    let req = support::image_request(
        "m",
        "gemini-image",
        target(PRO),
        br#"{"model":"m","prompt":"p"}"#,
    );
    let bytes = serde_json::to_vec(body).unwrap();
    image_response(&gemini(), &req, &http::HeaderMap::new(), &bytes)
}

fn image_part(bytes: &[u8], mime: &str) -> Value {
    json!({"inlineData": {"mimeType": mime, "data": b64(bytes)}})
}

#[test]
fn a_pixel_size_is_sent_as_its_ratio_and_tier() {
    let (path, body) = native(
        "gemini-image",
        PRO,
        &json!({"model": "m", "prompt": "a lighthouse", "size": "2752x1536",
                "image": [b64(PNG), format!("data:image/jpeg;base64,{}", b64(JPEG))]}),
    );
    assert_eq!(path, "/v1beta/models/gemini-3-pro-image:generateContent");
    assert_eq!(
        body,
        json!({
            "contents": [{"role": "user", "parts": [
                {"text": "a lighthouse"},
                {"inlineData": {"mimeType": "image/png", "data": b64(PNG)}},
                {"inlineData": {"mimeType": "image/jpeg", "data": b64(JPEG)}}
            ]}],
            "generationConfig": {
                "responseModalities": ["IMAGE"],
                "imageConfig": {"aspectRatio": "16:9", "imageSize": "2K"}
            }
        })
    );
}

#[test]
fn ratios_and_tiers_map_for_every_listed_size() {
    for (family, model) in [
        ("gemini-image", PRO),
        ("gemini-flash-image", FLASH),
        ("gemini-2.5-flash-image", "gemini-2.5-flash-image"),
    ] {
        let Some(crate::caps::Caps::Images(caps)) = crate::caps::family(family) else {
            panic!("{family} is not an image family");
        };
        for size in caps.sizes {
            let (_, body) = native(
                family,
                model,
                &json!({"model": "m", "prompt": "p", "size": size}),
            );
            let config = &body["generationConfig"]["imageConfig"];
            if let Some((w, h)) = parse_size(size) {
                let ratio = config["aspectRatio"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{family} {size}"));
                let (rw, rh) = ratio.split_once(':').unwrap();
                let (rw, rh): (f64, f64) = (rw.parse().unwrap(), rh.parse().unwrap());
                let off = (f64::from(w) / f64::from(h)) / (rw / rh) - 1.0;
                assert!(off.abs() <= RATIO_TOLERANCE, "{family} {size} -> {ratio}");
            } else {
                assert_eq!(config, &json!({"imageSize": size}), "{family} {size}");
            }
        }
        // Each aspect ratio reaches Gemini as itself.
        for (ratio, _) in caps.aspect_ratios {
            let (_, body) = native(
                family,
                model,
                &json!({"model": "m", "prompt": "p", "aspect_ratio": ratio}),
            );
            assert_eq!(
                body["generationConfig"]["imageConfig"]["aspectRatio"], *ratio,
                "{family}"
            );
        }
    }
}

#[test]
fn tiers_follow_the_pixel_count() {
    let tier = |family: &str, size: &str| {
        native(
            family,
            PRO,
            &json!({"model": "m", "prompt": "p", "size": size}),
        )
        .1["generationConfig"]["imageConfig"]
            .clone()
    };
    assert_eq!(
        tier("gemini-image", "1376x768"),
        json!({"aspectRatio": "16:9", "imageSize": "1K"})
    );
    assert_eq!(
        tier("gemini-image", "6336x2688"),
        json!({"aspectRatio": "21:9", "imageSize": "4K"})
    );
    assert_eq!(
        tier("gemini-flash-image", "368x2944"),
        json!({"aspectRatio": "1:8", "imageSize": "1K"})
    );
    assert_eq!(
        tier("gemini-flash-image", "512"),
        json!({"imageSize": "512"})
    );
    // No size named: the default tier alone, so an edit keeps its reference image's shape.
    let (_, body) = native("gemini-image", PRO, &json!({"model": "m", "prompt": "p"}));
    assert_eq!(
        body["generationConfig"]["imageConfig"],
        json!({"imageSize": "1K"})
    );
    // A model with one tier is sent no tier.
    assert_eq!(
        tier("gemini-2.5-flash-image", "1344x768"),
        json!({"aspectRatio": "16:9"})
    );
}

#[test]
fn sizes_a_model_cannot_make_are_refused_naming_the_sizes() {
    let refusal = |family: &str, size: &str| {
        support::image_refusal(
            "m",
            family,
            target(PRO),
            &serde_json::to_vec(&json!({"model": "m", "prompt": "p", "size": size})).unwrap(),
        )["size"]
            .as_str()
            .unwrap_or_else(|| panic!("{family} accepted {size}"))
            .to_string()
    };
    for size in ["4K", "4096x4096", "2048x2048", "1024x1536"] {
        let m = refusal("gemini-2.5-flash-image", size);
        assert!(m.contains("1024x1024") && m.contains("1344x768"), "{m}");
    }
    // 512 and the extreme ratios are Flash's alone.
    for size in ["512", "512x2048"] {
        assert!(refusal("gemini-image", size).contains("4K"));
    }
}

#[test]
fn an_overridden_size_gemini_cannot_be_sent_is_the_callers_400() {
    let caps = crate::caps::builtin()
        .unwrap()
        .with_overrides(
            "gemini-image",
            &serde_yaml::from_str("{sizes: {list: [1K, 1000x100, 1024x1024, 256x256, 512x2048]}, aspect_ratios: {\"1:1\": 1024x1024}}").unwrap(),
            "m",
        )
        .unwrap();
    let mut catalog = crate::catalog::Catalog::default();
    catalog.insert(crate::catalog::Model::new("m", caps, vec![target(PRO)]));
    for (size, why) in [
        ("1000x100", "none of Gemini's aspect ratios"),
        ("256x256", "512 image"),
        ("512x2048", "1:4 image, and this model takes 1:1"),
    ] {
        let body = serde_json::to_vec(&json!({"model": "m", "prompt": "p", "size": size})).unwrap();
        let req = crate::api::images::parse(&body, &catalog, 0).unwrap();
        let err = validate(&req.model.targets[0], &req).unwrap_err();
        assert_eq!(err.status(), 400);
        let details: Value =
            serde_json::from_slice::<Value>(&err.body()).unwrap()["details"].clone();
        let m = details["size"].as_str().unwrap();
        assert!(
            m.contains(why) && m.contains("accepts: 1K, 1000x100"),
            "{m}"
        );
    }
}

#[test]
fn a_gif_reference_is_refused_before_sending() {
    let bytes =
        serde_json::to_vec(&json!({"model": "m", "prompt": "p", "image": [b64(PNG), b64(GIF)]}))
            .unwrap();
    let req = support::image_request("m", "gemini-image", target(PRO), &bytes);
    let err = image_request(&req.model.targets[0], &req, 1).unwrap_err();
    assert_eq!(err.status(), 400);
    let body: Value = serde_json::from_slice(&err.body()).unwrap();
    assert_eq!(
        body["details"]["image"],
        "item 1 is image/gif; model m takes PNG, JPEG or WebP reference images"
    );
}

#[test]
fn reads_the_image_skipping_thoughts_and_text() {
    let got = answer(&json!({
        "candidates": [{
            "content": {"role": "model", "parts": [
                {"text": "Planning the composition", "thought": true},
                {"inlineData": {"mimeType": "image/png", "data": b64(b"draft")}, "thought": true},
                {"text": "Here is your lighthouse."},
                image_part(PNG, "image/png"),
                image_part(JPEG, "image/jpeg")
            ]},
            "finishReason": "STOP",
            "index": 0
        }],
        "usageMetadata": {
            "promptTokenCount": 12,
            "candidatesTokenCount": 1290,
            "thoughtsTokenCount": 200,
            "totalTokenCount": 1502,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 12}],
            "candidatesTokensDetails": [{"modality": "IMAGE", "tokenCount": 1290}]
        },
        "modelVersion": "gemini-3-pro-image"
    }))
    .unwrap();
    assert_eq!(
        got.images,
        vec![NativeImage::new(ImageData::Base64(b64(PNG).into()))]
    );
    let facts = got.facts.unwrap();
    assert_eq!(facts.output_format.as_deref(), Some("png"));
    let usage = facts.usage.unwrap();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.total_tokens),
        (12, 1490, 1502)
    );
    assert_eq!(
        usage.input_tokens_details,
        BTreeMap::from([("text_tokens".into(), 12)])
    );
    assert_eq!(
        usage.output_tokens_details,
        BTreeMap::from([
            ("image_tokens".into(), 1290),
            ("reasoning_tokens".into(), 200)
        ])
    );
}

#[test]
fn the_format_is_what_the_bytes_are() {
    // Gemini 3 Pro Image has labelled JPEG bytes `image/png`.
    let got =
        answer(&json!({"candidates": [{"content": {"parts": [image_part(JPEG, "image/png")]}}]}))
            .unwrap();
    assert_eq!(got.facts.unwrap().output_format.as_deref(), Some("jpg"));
    // snake_case, as the SDKs also read it.
    let got = answer(&json!({"candidates": [{"content": {"parts": [
        {"inline_data": {"mime_type": "image/webp", "data": b64(b"not an image at all")}}
    ]}}]}))
    .unwrap();
    assert_eq!(got.facts.unwrap().output_format.as_deref(), Some("webp"));
}

#[test]
fn safety_refusals_are_content_policy() {
    for body in [
        json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {"promptTokenCount": 9}}),
        json!({"candidates": [], "promptFeedback": {"blockReason": "SAFETY", "blockReasonMessage": "unsafe"}}),
        json!({"candidates": [{"finishReason": "IMAGE_SAFETY", "content": {"parts": []}}]}),
        json!({"candidates": [{"finishReason": "IMAGE_PROHIBITED_CONTENT"}]}),
        json!({"candidates": [{"finishReason": "SAFETY", "content": {"parts": [{"text": "I can't help with that."}]}}]}),
        json!({"candidates": [{"finishReason": "IMAGE_RECITATION"}]}),
    ] {
        let e = answer(&body).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::ContentPolicy, "{body}");
        assert!(!e.retryable());
    }
    let e = answer(
        &json!({"promptFeedback": {"blockReason": "SAFETY", "blockReasonMessage": "unsafe"}}),
    )
    .unwrap_err();
    assert_eq!(e.message, "Gemini blocked the prompt (SAFETY): unsafe");
    let e = answer(&json!({"candidates": [{"finishReason": "IMAGE_SAFETY",
        "finishMessage": "The image was filtered."}]}))
    .unwrap_err();
    assert_eq!(
        e.message,
        "Gemini withheld the image (IMAGE_SAFETY): The image was filtered."
    );
}

#[test]
fn no_image_for_another_reason_is_a_bad_answer_quoting_the_model() {
    let e = answer(&json!({"candidates": [{"finishReason": "NO_IMAGE",
        "content": {"parts": [{"text": "Which lighthouse do you mean? Key AIzaSy-gemini-secret-0001"}]}}]}))
    .unwrap_err();
    assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    assert!(!e.retryable());
    assert_eq!(
        e.message,
        "Gemini answered no image (finishReason NO_IMAGE): Which lighthouse do you mean? Key [redacted]"
    );
    for body in [
        json!({"candidates": [{"finishReason": "STOP", "content": {"parts": [{"text": "ok"}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"inlineData": {"mimeType": "image/png", "data": ""}}]}}]}),
        json!({"usageMetadata": {}}),
        json!({"candidates": "nope"}),
    ] {
        assert_eq!(
            answer(&body).unwrap_err().kind,
            UpstreamErrorKind::BadResponse,
            "{body}"
        );
    }
}

#[test]
fn maps_errors() {
    let p = gemini();
    let e = |status: u16, google: &str, message: &str| {
        let body = json!({"error": {"code": status, "message": message, "status": google}});
        error_response(&p, status, &serde_json::to_vec(&body).unwrap())
    };
    let cases = [
        (
            400,
            "INVALID_ARGUMENT",
            UpstreamErrorKind::InvalidRequest,
            false,
        ),
        (
            400,
            "FAILED_PRECONDITION",
            UpstreamErrorKind::Failure,
            false,
        ),
        (
            403,
            "PERMISSION_DENIED",
            UpstreamErrorKind::AuthRejected,
            false,
        ),
        (404, "NOT_FOUND", UpstreamErrorKind::UnknownModel, false),
        (
            429,
            "RESOURCE_EXHAUSTED",
            UpstreamErrorKind::RateLimited,
            true,
        ),
        (500, "INTERNAL", UpstreamErrorKind::Failure, true),
        (503, "UNAVAILABLE", UpstreamErrorKind::Failure, true),
        (504, "DEADLINE_EXCEEDED", UpstreamErrorKind::Timeout, true),
    ];
    for (status, google, kind, retryable) in cases {
        let err = e(status, google, "something");
        assert_eq!((err.kind, err.retryable()), (kind, retryable), "{google}");
        assert_eq!(err.status, Some(status));
        assert_eq!(err.message, "something");
    }
    // A bad key: 400 INVALID_ARGUMENT, said only in `details`; the key itself never repeated.
    let body = json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
        "message": format!("API key not valid. Please pass a valid API key. ({KEY})"),
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                     "domain": "googleapis.com"}]}});
    let err = error_response(&p, 400, &serde_json::to_vec(&body).unwrap());
    assert_eq!(err.kind, UpstreamErrorKind::AuthRejected);
    assert!(!err.message.contains(KEY), "{}", err.message);
    // A list holding the envelope, and a body that is not Google's.
    let err = error_response(
        &p,
        429,
        br#"[{"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}]"#,
    );
    assert_eq!(
        (err.kind, err.message.as_str()),
        (UpstreamErrorKind::RateLimited, "quota")
    );
    let err = error_response(&p, 502, b"<html>bad gateway</html>");
    assert_eq!(
        (err.kind, err.message.as_str()),
        (UpstreamErrorKind::Failure, "HTTP 502")
    );
}
