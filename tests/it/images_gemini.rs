//! Google's Gemini image models (Nano Banana) end to end against a fake Gemini API: the shared
//! conformance cases for Gemini 3 Pro Image and 3.1 Flash Image, then what is Gemini's own: sizes
//! sent as `imageConfig` ratio and tier, a tier a model cannot make refused before anything is
//! sent, safety blocks as content-policy refusals (not retried), `n` as one call per image with the
//! usage summed, retries on 429/503, JPEG answers reported and hosted as JPEG, edits through
//! `/images/edits`, the key only in `x-goog-api-key` and never in the log.
//!
//! The fake speaks `POST /v1beta/models/{model}:generateContent` as Google documents it: the
//! `contents[].parts[]` request, `candidates[].content.parts[].inlineData` answers with
//! `usageMetadata`, `promptFeedback.blockReason` and `finishReason` refusals, and Google's
//! `{"error": {"code", "message", "status"}}` errors.

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{
    self as conformance, b64, get_hosted, image_conformance, png, unb64, Answers, ImageCase,
    Reference,
};
use support::{post, TestGateway, KEY, PROVIDER_KEY};

const GENERATE: &str = "/api/v1/images/generations";
const PRO_PATH: &str = "/v1beta/models/gemini-3-pro-image:generateContent";
const FLASH_PATH: &str = "/v1beta/models/gemini-3.1-flash-image:generateContent";

/// The standard test gateway: its configuration has a Gemini account on the fake and the models
/// `gemini-3-pro-image`, `gemini-3.1-flash-image` and `gemini-2.5-flash-image`.
fn start(fake: &FakeProvider) -> TestGateway {
    TestGateway::start(fake)
}

// ---- native answers --------------------------------------------------------------------------

/// Gemini's answer carrying one image, as `mime` (with a thought part and text around it, as the
/// thinking models answer).
pub(crate) fn success_as(img: &[u8], mime: &str) -> Value {
    json!({
        "candidates": [{
            "content": {"role": "model", "parts": [
                {"text": "Composing a lighthouse scene.", "thought": true},
                {"text": "Here is the image."},
                {"inlineData": {"mimeType": mime, "data": b64(img)}}
            ]},
            "finishReason": "STOP",
            "index": 0
        }],
        "usageMetadata": {
            "promptTokenCount": 10,
            "candidatesTokenCount": 1120,
            "thoughtsTokenCount": 100,
            "totalTokenCount": 1230,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 10}],
            "candidatesTokensDetails": [{"modality": "IMAGE", "tokenCount": 1120}]
        },
        "modelVersion": "gemini-3-pro-image",
        "responseId": "resp-1"
    })
}

/// One image per call, so one image per reply.
pub(crate) fn answer(images: &[Vec<u8>], _fake: &FakeProvider) -> Reply {
    assert_eq!(images.len(), 1, "Gemini answers one image per call");
    Reply::json(200, success_as(&images[0], "image/png"))
}

pub(crate) fn google_error(status: u16, google: &str, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"error": {"code": status, "message": message, "status": google}}),
    )
}

pub(crate) fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            google_error(
                400,
                "INVALID_ARGUMENT",
                "Request contains an invalid argument.",
            ),
            400,
            "invalid_request",
        ),
        (
            Reply::json(
                400,
                json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                    "message": format!("API key not valid. Please pass a valid API key. {PROVIDER_KEY}"),
                    "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                 "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}),
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            google_error(
                403,
                "PERMISSION_DENIED",
                "Method doesn't allow unregistered callers.",
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            google_error(
                400,
                "FAILED_PRECONDITION",
                "User location is not supported for the API use.",
            ),
            502,
            "upstream_error",
        ),
        (
            google_error(
                429,
                "RESOURCE_EXHAUSTED",
                "Resource has been exhausted (e.g. check quota).",
            ),
            429,
            "rate_limited",
        ),
        (
            google_error(500, "INTERNAL", "An internal error has occurred."),
            502,
            "upstream_error",
        ),
        (
            google_error(503, "UNAVAILABLE", "The model is overloaded."),
            502,
            "upstream_error",
        ),
        (
            Reply::json(
                200,
                json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
                       "usageMetadata": {"promptTokenCount": 8, "totalTokenCount": 8}}),
            ),
            400,
            "content_policy_violation",
        ),
        (
            Reply::json(
                200,
                json!({"candidates": [{"finishReason": "IMAGE_SAFETY", "content": {"parts": []}}]}),
            ),
            400,
            "content_policy_violation",
        ),
        (
            Reply::json(
                200,
                json!({"candidates": [{"finishReason": "NO_IMAGE",
                    "content": {"parts": [{"text": "I can only describe lighthouses."}]}}]}),
            ),
            502,
            "upstream_bad_response",
        ),
    ]
}

// ---- reading native requests -----------------------------------------------------------------

/// The parts of a native request's one user turn.
fn parts(req: &Recorded) -> Vec<Value> {
    let body = req.json();
    assert_eq!(body["contents"].as_array().map(Vec::len), Some(1), "{body}");
    assert_eq!(body["contents"][0]["role"], "user");
    body["contents"][0]["parts"].as_array().unwrap().clone()
}

/// The bytes of each `inlineData` part, in order, with their declared type.
pub(crate) fn inline_images(req: &Recorded) -> Vec<(String, Vec<u8>)> {
    parts(req)
        .iter()
        .filter_map(|p| {
            let blob = p.get("inlineData")?;
            Some((
                blob["mimeType"].as_str().unwrap().to_string(),
                unb64(blob["data"].as_str().unwrap()),
            ))
        })
        .collect()
}

pub(crate) fn reference(req: &Recorded) -> Reference {
    let images = inline_images(req);
    assert_eq!(images.len(), 1, "one reference image");
    assert_eq!(images[0].0, "image/png");
    Reference::Bytes(images[0].1.clone())
}

pub(crate) fn image_config(req: &Recorded) -> Value {
    req.json()["generationConfig"]["imageConfig"].clone()
}

/// Credentials: the provider key in `x-goog-api-key` and nowhere else; the caller's not at all.
fn check_auth(req: &Recorded) {
    assert_eq!(req.header("x-goog-api-key"), Some(PROVIDER_KEY));
    assert!(req.header("authorization").is_none(), "Authorization sent");
    assert!(!req.path.contains("key="), "key in the URL: {}", req.path);
    for (name, value) in &req.headers {
        assert!(
            !value.contains(KEY),
            "the caller's key reached Gemini in {name}"
        );
    }
}

pub(crate) fn full_image() -> Vec<u8> {
    png(3_000, 7)
}

fn check_pro_full(req: &Recorded) {
    assert_eq!(req.path, PRO_PATH);
    check_auth(req);
    assert!(req
        .header("content-type")
        .unwrap()
        .starts_with("application/json"));
    assert_eq!(
        req.json(),
        json!({
            "contents": [{"role": "user", "parts": [
                {"text": conformance::PROMPT},
                {"inlineData": {"mimeType": "image/png", "data": b64(&full_image())}}
            ]}],
            "generationConfig": {
                "responseModalities": ["IMAGE"],
                "imageConfig": {"aspectRatio": "16:9", "imageSize": "2K"}
            }
        })
    );
}

fn check_flash_full(req: &Recorded) {
    assert_eq!(req.path, FLASH_PATH);
    check_auth(req);
    assert_eq!(parts(req)[0], json!({"text": conformance::PROMPT}));
    assert_eq!(
        image_config(req),
        json!({"aspectRatio": "8:1", "imageSize": "1K"})
    );
    assert_eq!(
        req.json()["generationConfig"]["responseModalities"],
        json!(["IMAGE"])
    );
}

// ---- conformance -----------------------------------------------------------------------------

pub(crate) fn rejected() -> Vec<(&'static str, Value)> {
    vec![
        ("quality", json!("high")),
        ("style_preset", json!("cinematic")),
        ("background", json!("transparent")),
        ("negative_prompt", json!("blurry")),
        ("mask", json!(b64(&png(100, 1)))),
        ("strength", json!(0.5)),
        ("watermark", json!(true)),
        ("output_format", json!("jpg")),
        ("aspect_ratio", json!("7:3")),
        ("extra_body.thinking_level", json!("high")),
        ("temperature", json!(0.4)),
    ]
}

image_conformance!(
    gemini_3_pro_image_conformance,
    ImageCase {
        model: "gemini-3-pro-image",
        base: json!({}),
        full: json!({"size": "2752x1536", "image": b64(&full_image()), "n": 1, "output_format": "png"}),
        check_full: check_pro_full,
        answer,
        answers: Answers::Inline,
        sizes: &[
            "1K",
            "2K",
            "4K",
            "1024x1024",
            "1376x768",
            "3168x1344",
            "3072x5504"
        ],
        rejected_sizes: &["512", "512x2048", "1792x1024", "auto", "2k"],
        qualities: &[],
        rejected_qualities: &["hd", "high", "auto"],
        max_n: 4,
        per_call_n: 1,
        native_n: None,
        rejected: rejected(),
        reference: Some(reference),
        errors,
    }
);

image_conformance!(
    gemini_3_1_flash_image_conformance,
    ImageCase {
        model: "gemini-3.1-flash-image",
        base: json!({}),
        full: json!({"aspect_ratio": "8:1"}),
        check_full: check_flash_full,
        answer,
        answers: Answers::Inline,
        sizes: &["512", "1K", "4K", "2944x368", "720x5760", "1584x672"],
        rejected_sizes: &["256x256", "1792x1024", "8K"],
        qualities: &[],
        rejected_qualities: &["standard"],
        max_n: 4,
        per_call_n: 1,
        native_n: None,
        rejected: rejected(),
        reference: Some(reference),
        errors,
    }
);

// ---- Gemini's own ----------------------------------------------------------------------------

fn generate(gw: &TestGateway, body: Value) -> support::client::Response {
    post(gw, GENERATE, &body)
}

#[test]
fn aspect_ratio_and_image_size_reach_gemini() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    let cases = [
        (
            json!({"aspect_ratio": "9:16"}),
            json!({"aspectRatio": "9:16", "imageSize": "1K"}),
        ),
        (json!({"size": "4K"}), json!({"imageSize": "4K"})),
        (
            json!({"size": "4800x3584"}),
            json!({"aspectRatio": "4:3", "imageSize": "4K"}),
        ),
        (
            json!({"size": "2528x1696", "aspect_ratio": "3:2"}),
            // The ratio and the size agree only when the size is the ratio's 1K size.
            Value::Null,
        ),
        (json!({}), json!({"imageSize": "1K"})),
    ];
    for (extra, want) in cases {
        let mut body = json!({"model": "gemini-3-pro-image", "prompt": "p"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let before = fake.requests().len();
        if want.is_null() {
            let resp = generate(&gw, body);
            assert_eq!(resp.status, 400, "{extra}: {}", resp.text());
            assert!(resp.json()["details"]["aspect_ratio"].is_string());
            assert_eq!(fake.requests().len(), before);
            continue;
        }
        fake.push(answer(&[png(100, 1)], &fake));
        let resp = generate(&gw, body);
        assert_eq!(resp.status, 200, "{extra}: {}", resp.text());
        assert_eq!(image_config(&fake.requests()[before]), want, "{extra}");
    }
    // Gemini 2.5 Flash Image has one tier: the ratio goes alone.
    fake.push(answer(&[png(100, 2)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "gemini-2.5-flash-image", "prompt": "p", "size": "1344x768"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests().pop().unwrap();
    assert_eq!(
        sent.path,
        "/v1beta/models/gemini-2.5-flash-image:generateContent"
    );
    assert_eq!(image_config(&sent), json!({"aspectRatio": "16:9"}));
}

#[test]
fn a_tier_the_model_cannot_make_is_refused_naming_the_sizes() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    for size in ["4K", "2K", "4096x4096", "5504x3072"] {
        let resp = generate(
            &gw,
            json!({"model": "gemini-2.5-flash-image", "prompt": "p", "size": size}),
        );
        assert_eq!(resp.status, 400, "{size}: {}", resp.text());
        let body = resp.json();
        assert_eq!(body["code"], "validation_error");
        let details = body["details"]["size"].as_str().unwrap();
        assert!(
            details.contains("model gemini-2.5-flash-image accepts: 1024x1024")
                && details.contains("1344x768"),
            "{details}"
        );
    }
    // Pro has no 512 tier.
    let resp = generate(
        &gw,
        json!({"model": "gemini-3-pro-image", "prompt": "p", "size": "512"}),
    );
    assert_eq!(resp.status, 400);
    assert!(resp.json()["details"]["size"]
        .as_str()
        .unwrap()
        .contains("1K, 2K, 4K"));
    assert!(fake.requests().is_empty(), "a refused size reached Gemini");
}

#[test]
fn a_safety_block_is_a_content_policy_refusal_not_retried() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    fake.push(Reply::json(
        200,
        json!({"candidates": [{"finishReason": "IMAGE_SAFETY",
            "finishMessage": "Unable to show the generated image: it may violate our policies.",
            "content": {"parts": [{"text": "I can't make that image."}]}}],
            "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9}}),
    ));
    let resp = generate(
        &gw,
        json!({"model": "gemini-3-pro-image", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "content_policy_violation");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("IMAGE_SAFETY"), "{message}");
    assert!(message.contains("I can't make that image."), "{message}");
    assert_eq!(fake.requests().len(), 1, "a refusal is not retried");

    fake.push(Reply::json(
        200,
        json!({"promptFeedback": {"blockReason": "SAFETY"}}),
    ));
    let resp = generate(
        &gw,
        json!({"model": "gemini-3-pro-image", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 400);
    assert_eq!(resp.json()["code"], "content_policy_violation");
    assert!(resp.json()["message"]
        .as_str()
        .unwrap()
        .contains("blocked the prompt (SAFETY)"));
    assert_eq!(fake.requests().len(), 2);
}

#[test]
fn n_is_one_call_per_image_with_the_usage_summed() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    let images = [png(400, 31), png(400, 32)];
    for img in &images {
        fake.push(Reply::json(200, success_as(img, "image/png")));
    }
    let resp = generate(
        &gw,
        json!({"model": "gemini-3.1-flash-image", "prompt": "p", "n": 2, "size": "2752x1536",
               "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    let mut got: Vec<Vec<u8>> = out["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| unb64(d["b64_json"].as_str().unwrap()))
        .collect();
    got.sort();
    let mut want = images.to_vec();
    want.sort();
    assert_eq!(got, want);
    let sent = fake.requests();
    assert_eq!(sent.len(), 2, "two native calls");
    assert_eq!(sent[0].json(), sent[1].json(), "the same request twice");
    for req in &sent {
        assert_eq!(req.path, FLASH_PATH);
        check_auth(req);
        assert!(req.json()["generationConfig"]
            .get("candidateCount")
            .is_none());
    }
    assert_eq!(
        out["usage"],
        json!({
            "input_tokens": 20,
            "output_tokens": 2440,
            "total_tokens": 2460,
            "input_tokens_details": {"text_tokens": 20},
            "output_tokens_details": {"image_tokens": 2240, "reasoning_tokens": 200}
        })
    );
    assert_eq!(out["output_format"], "png");
    // More than the family allows is the caller's 400, before any call.
    let resp = generate(
        &gw,
        json!({"model": "gemini-3.1-flash-image", "prompt": "p", "n": 5}),
    );
    assert_eq!(resp.status, 400);
    assert_eq!(fake.requests().len(), 2);
}

#[test]
fn rate_limits_and_outages_are_retried() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    let img = png(200, 40);
    fake.push(google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded."));
    fake.push(google_error(503, "UNAVAILABLE", "The model is overloaded."));
    fake.push(Reply::json(200, success_as(&img, "image/png")));
    let resp = generate(
        &gw,
        json!({"model": "gemini-3-pro-image", "prompt": "p", "retries": 2,
               "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        unb64(resp.json()["data"][0]["b64_json"].as_str().unwrap()),
        img
    );
    let sent = fake.requests();
    assert_eq!(sent.len(), 3);
    assert!(sent.iter().all(|r| r.json() == sent[0].json()));
    // A request Gemini refuses is not sent again.
    fake.push(google_error(
        400,
        "INVALID_ARGUMENT",
        "Unable to process input image.",
    ));
    let resp = generate(
        &gw,
        json!({"model": "gemini-3-pro-image", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 400);
    assert_eq!(resp.json()["code"], "invalid_request");
    assert!(resp.json()["message"]
        .as_str()
        .unwrap()
        .contains("Unable to process input image."));
    assert_eq!(fake.requests().len(), 4);
}

#[test]
fn an_unknown_model_is_the_operators_problem() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    fake.push(google_error(
        404,
        "NOT_FOUND",
        "models/gemini-3-pro-image is not found for API version v1beta, or is not supported for generateContent.",
    ));
    let resp = generate(
        &gw,
        json!({"model": "gemini-3-pro-image", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 503, "{}", resp.text());
    assert_eq!(resp.json()["code"], "model_unavailable");
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn a_jpeg_answer_is_reported_and_hosted_as_jpeg() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0];
    jpeg.extend((0..500).map(|i| i as u8));
    // Labelled PNG, as Gemini 3 Pro Image has been seen to.
    fake.push(Reply::json(200, success_as(&jpeg, "image/png")));
    let resp = generate(
        &gw,
        json!({"model": "gemini-3-pro-image", "prompt": "p", "response_format": "url"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    assert_eq!(out["output_format"], "jpg");
    let file = get_hosted(&gw, out["data"][0]["url"].as_str().unwrap());
    assert_eq!(file.status, 200);
    assert_eq!(file.header("content-type"), Some("image/jpeg"));
    assert_eq!(file.body, jpeg);
}

#[test]
#[cfg(feature = "multipart")]
fn edits_send_every_reference_image_inline() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    let refs = [png(5_000, 50), png(6_000, 51), png(7_000, 52)];
    fake.push(answer(&[png(100, 53)], &fake));
    let boundary = "gemini-edit-boundary";
    let mut form = Vec::new();
    let text = |form: &mut Vec<u8>, name: &str, value: &str| {
        form.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    };
    text(&mut form, "model", "gemini-3-pro-image");
    text(&mut form, "prompt", "put the cat on the sofa");
    text(&mut form, "size", "2K");
    for (i, img) in refs.iter().enumerate() {
        form.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"image[]\"; filename=\"r{i}.png\"\r\nContent-Type: image/png\r\n\r\n")
                .as_bytes(),
        );
        form.extend_from_slice(img);
        form.extend_from_slice(b"\r\n");
    }
    form.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let content_type = format!("multipart/form-data; boundary={boundary}");
    let mut headers = support::auth().to_vec();
    headers.push(("Content-Type", content_type.as_str()));
    let resp = support::client::request(gw.addr, "POST", "/api/v1/images/edits", &headers, &form);
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = &fake.requests()[0];
    check_auth(sent);
    assert_eq!(
        parts(sent)[0],
        json!({"text": "put the cat on the sofa"}),
        "the prompt comes first"
    );
    let got: Vec<Vec<u8>> = inline_images(sent).into_iter().map(|(_, b)| b).collect();
    assert_eq!(got, refs.to_vec());
    assert_eq!(image_config(sent), json!({"imageSize": "2K"}));
}

#[test]
fn reference_images_gemini_cannot_read_or_too_many_are_refused() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    let gif = b64(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;");
    let resp = generate(
        &gw,
        json!({"model": "gemini-3-pro-image", "prompt": "p", "image": gif}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]["image"]
        .as_str()
        .unwrap()
        .contains("PNG, JPEG or WebP"));
    let four: Vec<String> = (0..4).map(|i| b64(&png(100, i))).collect();
    let resp = generate(
        &gw,
        json!({"model": "gemini-2.5-flash-image", "prompt": "p", "image": four}),
    );
    assert_eq!(resp.status, 400);
    assert!(resp.json()["details"]["image"]
        .as_str()
        .unwrap()
        .contains("at most 3 reference image(s)"));
    assert!(fake.requests().is_empty());
}

/// The gateway binary at `trace`: the Gemini key (sent in `x-goog-api-key`, and quoted back by a
/// refusal) appears nowhere in its log.
#[test]
fn the_gemini_key_never_reaches_the_log() {
    const GEMINI_KEY: &str = "AIzaSy-gemini-LOGTEST-7c8d9e";
    const CLIENT: &str = "client-LOGTEST-gemini-1a2b";
    let fake = FakeProvider::start();
    fake.set_handler(|req| {
        Some(if req.json()["contents"][0]["parts"][0]["text"] == "fail" {
            google_error(
                400,
                "INVALID_ARGUMENT",
                &format!(
                    "API key not valid: {}",
                    req.header("x-goog-api-key").unwrap_or_default()
                ),
            )
        } else {
            Reply::json(200, success_as(&png(300, 60), "image/png"))
        })
    });
    let base = fake.base_url();
    let gw = crate::logs::Binary::start(
        |port| {
            format!(
                r#"
version: 1
threads: 2
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners: [{{name: main, address: "127.0.0.1:{port}"}}]
  retries: {{max: 0}}
  auth:
    api_keys: [{{name: caller, key: "{CLIENT}"}}]
  providers:
    gemini: {{kind: gemini, api_key: "{GEMINI_KEY}", base_url: "{base}"}}
  models:
    nano-banana-pro: {{family: gemini-image, targets: [{{provider: gemini, model: gemini-3-pro-image}}]}}
"#
            )
        },
        "trace",
    );
    let auth = ("Authorization", format!("Bearer {CLIENT}"));
    for (prompt, status) in [("a fox", 200), ("fail", 400)] {
        let resp = support::client::post_json(
            gw.addr,
            GENERATE,
            &[(auth.0, auth.1.as_str())],
            &json!({"model": "nano-banana-pro", "prompt": prompt, "response_format": "b64_json"}),
        );
        assert_eq!(resp.status, status, "{prompt}: {}", resp.text());
        assert!(!resp.text().contains(GEMINI_KEY));
    }
    let sent = fake.requests();
    assert_eq!(sent.len(), 2);
    assert!(sent
        .iter()
        .all(|r| r.header("x-goog-api-key") == Some(GEMINI_KEY)
            && r.header("authorization").is_none()));
    let text = gw.output_when("two access lines", |t| {
        t.lines().filter(|l| l.contains(" access] ")).count() >= 2
    });
    assert!(
        text.contains("Writing request header:"),
        "no request dump at trace"
    );
    for secret in [GEMINI_KEY, CLIENT] {
        assert!(!text.contains(secret), "{secret} is in the log:\n{text}");
    }
}

/// `switchyard check-providers` asks the Gemini API's model list (every page, with the key in
/// `x-goog-api-key`) and names a configured model it no longer lists, such as a shut-down preview;
/// the key is never printed.
#[test]
fn check_providers_reads_the_model_list() {
    const GEMINI_KEY: &str = "AIzaSy-gemini-CHECK-5f6a7b";
    let fake = FakeProvider::start();
    fake.set_handler(|r| {
        if r.header("x-goog-api-key") != Some(GEMINI_KEY) {
            return Some(google_error(403, "PERMISSION_DENIED", "bad key"));
        }
        Some(match r.path.as_str() {
            "/v1beta/models?pageSize=1000" => Reply::json(
                200,
                json!({"models": [{"name": "models/gemini-3-pro-image", "displayName": "Nano Banana Pro",
                                   "supportedGenerationMethods": ["generateContent", "countTokens"]}],
                       "nextPageToken": "page-2"}),
            ),
            "/v1beta/models?pageSize=1000&pageToken=page-2" => Reply::json(
                200,
                json!({"models": [{"name": "models/gemini-3.1-flash-image", "displayName": "Nano Banana 2"}]}),
            ),
            other => google_error(404, "NOT_FOUND", &format!("no {other}")),
        })
    });
    let dir = std::env::temp_dir().join(format!(
        "switchyard-gemini-check-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("conf.yaml");
    std::fs::write(
        &file,
        format!(
            r#"
switchyard:
  listeners: [{{name: a, address: "127.0.0.1:1"}}]
  providers:
    gemini: {{kind: gemini, api_key: "${{CHECK_GEMINI_KEY}}", base_url: "{base}"}}
  models:
    nano-banana-pro: {{family: gemini-image, targets: [{{provider: gemini, model: gemini-3-pro-image}}]}}
    nano-banana-2: {{family: gemini-flash-image, targets: [{{provider: gemini, model: gemini-3.1-flash-image}}]}}
    old-banana: {{family: gemini-flash-image, targets: [{{provider: gemini, model: gemini-3.1-flash-image-preview, lifecycle: {{still_available: true}}}}]}}
"#,
            base = fake.base_url()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["check-providers", "--json", "-c", file.to_str().unwrap()])
        .env_clear()
        .env("RUST_LOG", "trace")
        .env("CHECK_GEMINI_KEY", GEMINI_KEY)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stdout.contains(GEMINI_KEY) && !stderr.contains(GEMINI_KEY),
        "the key was printed"
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let findings = report["findings"].as_array().unwrap();
    let unknown: Vec<&Value> = findings
        .iter()
        .filter(|f| f["status"] == "model_unknown")
        .collect();
    assert_eq!(unknown.len(), 1, "{report}");
    assert_eq!(unknown[0]["model"], "gemini-3.1-flash-image-preview");
    assert_eq!(unknown[0]["account"], "gemini");
    let asked: Vec<String> = fake.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        asked,
        [
            "/v1beta/models?pageSize=1000",
            "/v1beta/models?pageSize=1000&pageToken=page-2"
        ]
    );
}

// ---- December 2026: 3.1 Flash Image deprecated, Nano Banana 2.1 its replacement ---------------

const BANANA_21_PATH: &str = "/v1beta/models/gemini-nano-banana-2.1:generateContent";

/// The standard test gateway plus `gemini-nano-banana-2.1`, as the default config offers it.
fn start_with_banana_21(fake: &FakeProvider) -> TestGateway {
    let url = fake.base_url();
    TestGateway::start_with(|ports| {
        support::config(&url, ports)
            + "    gemini-nano-banana-2.1: {family: gemini-nano-banana-2.1, targets: [{provider: gemini, model: gemini-nano-banana-2.1}]}\n"
    })
}

/// Google deprecated `gemini-3.1-flash-image` on 2026-10-06 with no shutdown date: its answers
/// say so (`Deprecation`, and `Link` to the notice and to the gateway's model serving the
/// replacement) but name no `Sunset`, and it keeps serving.
#[test]
fn gemini_3_1_flash_image_answers_say_it_is_deprecated_without_a_sunset() {
    let fake = FakeProvider::start();
    let gw = start_with_banana_21(&fake);
    fake.push(answer(&[png(100, 1)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "gemini-3.1-flash-image", "prompt": "p", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests()[0].path, FLASH_PATH);
    assert_eq!(
        resp.header("deprecation"),
        Some("@1791244800"),
        "2026-10-06"
    );
    assert_eq!(resp.header("sunset"), None, "no shutdown date announced");
    let link = resp.header("link").unwrap_or_default().to_string();
    assert!(
        link.contains("</api/v1/models/gemini-nano-banana-2.1>; rel=\"successor-version\"")
            && link.contains("<https://ai.google.dev/gemini-api/docs/changelog>; rel=\"sunset\""),
        "{link}"
    );
    // The model list shows the deprecation and the replacement, with no shutdown date.
    let list =
        support::client::request(gw.addr, "GET", "/api/v1/models", &support::auth(), b"").json();
    let flash = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "gemini-3.1-flash-image")
        .unwrap()
        .clone();
    assert_eq!(flash["lifecycle"]["deprecated"], "2026-10-06", "{flash}");
    assert_eq!(
        flash["lifecycle"]["replacement"],
        json!(["gemini-nano-banana-2.1"])
    );
    assert!(flash["lifecycle"].get("shutdown").is_none(), "{flash}");
}

/// Nano Banana 2.1 makes 1K, 2K and 4K at 3.1 Flash Image's 14 ratios, but no 512 tier: a 512
/// request is refused with a 400 before anything is sent.
#[test]
fn nano_banana_2_1_refuses_the_512_tier_and_takes_the_extreme_ratios() {
    let fake = FakeProvider::start();
    let gw = start_with_banana_21(&fake);
    let resp = generate(
        &gw,
        json!({"model": "gemini-nano-banana-2.1", "prompt": "p", "size": "512"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "validation_error");
    let details = body["details"]["size"].as_str().unwrap_or_default();
    assert!(
        details.contains("model gemini-nano-banana-2.1 accepts: 1K, 2K, 4K"),
        "{body}"
    );
    assert!(fake.requests().is_empty(), "a refused size reached Gemini");

    for (extra, want) in [
        (json!({"size": "4K"}), json!({"imageSize": "4K"})),
        (
            json!({"aspect_ratio": "8:1"}),
            json!({"aspectRatio": "8:1", "imageSize": "1K"}),
        ),
    ] {
        let mut body = json!({"model": "gemini-nano-banana-2.1", "prompt": "p"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let before = fake.requests().len();
        fake.push(answer(&[png(100, 2)], &fake));
        let resp = generate(&gw, body);
        assert_eq!(resp.status, 200, "{extra}: {}", resp.text());
        let sent = &fake.requests()[before];
        assert_eq!(sent.path, BANANA_21_PATH);
        assert_eq!(image_config(sent), want, "{extra}");
        assert_eq!(resp.header("deprecation"), None, "2.1 is not being retired");
    }
}
