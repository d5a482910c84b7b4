//! Stability AI Stable Image (Ultra, SD3.5) end to end against a fake Stability: the shared
//! conformance cases, then what is Stability's own: multipart forms, one native call per image
//! (concurrent, all or error), the `CONTENT_FILTERED` placeholder refused, reference images sent
//! as file parts with the default strength, and a size refused together with an image.

use std::time::Duration;

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{
    self as conformance, b64, form_parts, get_hosted, image_conformance, names, part, png, unb64,
    Answers, FormPart, ImageCase, Reference,
};
use support::{post, TestGateway, PROVIDER_KEY};

const ULTRA_PATH: &str = "/v2beta/stable-image/generate/ultra";
const SD3_PATH: &str = "/v2beta/stable-image/generate/sd3";
const GENERATE: &str = "/api/v1/images/generations";

const SIZES: &[&str] = &[
    "1024x1024",
    "1344x768",
    "1536x640",
    "832x1216",
    "1216x832",
    "896x1088",
    "1088x896",
    "768x1344",
    "640x1536",
];

// ---- native answers --------------------------------------------------------------------------

fn success(img: &[u8]) -> Value {
    json!({"image": b64(img), "finish_reason": "SUCCESS", "seed": 1_234_567})
}

/// Stability's JSON answer: one image per call, so one image per reply.
fn answer(images: &[Vec<u8>], _fake: &FakeProvider) -> Reply {
    assert_eq!(images.len(), 1, "Stability answers one image per call");
    Reply::json(200, success(&images[0]))
}

fn stability_error(status: u16, name: &str, error: &str) -> Reply {
    Reply::json(
        status,
        json!({"id": "a1b2c3d4e5f6", "name": name, "errors": [error]}),
    )
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            stability_error(400, "bad_request", "prompt: cannot be empty"),
            400,
            "invalid_request",
        ),
        (
            stability_error(
                403,
                "content_moderation",
                "Your request was flagged by our content moderation system.",
            ),
            400,
            "content_policy_violation",
        ),
        (
            stability_error(413, "payload_too_large", "image: exceeds 10MiB"),
            400,
            "invalid_request",
        ),
        (
            stability_error(
                422,
                "invalid_language",
                "English is the only supported language",
            ),
            400,
            "invalid_request",
        ),
        (
            stability_error(
                401,
                "unauthorized",
                &format!("authorization: bad key {PROVIDER_KEY}"),
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            stability_error(402, "payment_required", "insufficient credits"),
            502,
            "upstream_error",
        ),
        (
            stability_error(429, "rate_limit_exceeded", "too many requests"),
            429,
            "rate_limited",
        ),
        (
            stability_error(500, "internal_error", "unexpected error"),
            502,
            "upstream_error",
        ),
        (
            Reply::json(
                200,
                json!({"image": b64(&png(80, 9)), "finish_reason": "CONTENT_FILTERED", "seed": 1}),
            ),
            400,
            "content_policy_violation",
        ),
        (
            Reply::json(200, json!({"finish_reason": "SUCCESS", "seed": 1})),
            502,
            "upstream_bad_response",
        ),
    ]
}

// ---- reading native requests -----------------------------------------------------------------

fn reference(req: &Recorded) -> Reference {
    let parts = form_parts(req);
    let image = part(&parts, "image");
    assert!(image.filename.is_some(), "image is not a file part");
    // Stability refuses an image without strength (a number in [0, 1]): the spec's default fills
    // it in.
    let strength: f64 = part(&parts, "strength").text().parse().unwrap();
    assert!((0.0..=1.0).contains(&strength), "strength {strength}");
    assert!(
        !names(&parts).contains(&"aspect_ratio"),
        "aspect_ratio sent with an image"
    );
    Reference::Bytes(image.data.clone())
}

/// Text parts as (name, value), in order.
fn texts(parts: &[FormPart]) -> Vec<(String, String)> {
    parts
        .iter()
        .filter(|p| p.filename.is_none())
        .map(|p| (p.name.clone(), p.text()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn check_common(req: &Recorded, path: &str) {
    assert_eq!(req.path, path);
    conformance::assert_bearer(req);
    assert_eq!(req.header("accept"), Some("application/json"));
    assert!(req
        .header("content-type")
        .unwrap()
        .starts_with("multipart/form-data; boundary="));
}

fn check_ultra_full(req: &Recorded) {
    check_common(req, ULTRA_PATH);
    assert_eq!(
        texts(&form_parts(req)),
        pairs(&[
            ("prompt", conformance::PROMPT),
            ("negative_prompt", "blurry, text"),
            ("aspect_ratio", "21:9"),
            ("style_preset", "cinematic"),
            ("output_format", "webp"),
            ("seed", "42"),
        ])
    );
}

/// The reference image the SD3 full request edits.
fn sd3_full_image() -> Vec<u8> {
    png(2_000, 7)
}

fn check_sd3_full(req: &Recorded) {
    check_common(req, SD3_PATH);
    let parts = form_parts(req);
    let image = part(&parts, "image");
    assert_eq!(image.data, sd3_full_image());
    assert_eq!(image.content_type.as_deref(), Some("image/png"));
    assert_eq!(image.filename.as_deref(), Some("image.png"));
    assert_eq!(
        texts(&parts),
        pairs(&[
            ("prompt", conformance::PROMPT),
            ("negative_prompt", "blurry"),
            ("model", "sd3.5-large"),
            ("mode", "image-to-image"),
            // The public 0.35 (the reference's influence) on Stability's inverse scale.
            ("strength", "0.65"),
            ("style_preset", "photographic"),
            ("output_format", "jpeg"),
            ("cfg_scale", "5.5"),
            ("seed", "7"),
        ])
    );
}

// ---- conformance -----------------------------------------------------------------------------

fn rejected() -> Vec<(&'static str, Value)> {
    vec![
        ("watermark", json!(true)),
        ("quality", json!("hd")),
        ("background", json!("transparent")),
        ("mask", json!(b64(&png(100, 1)))),
        ("style_preset", json!("vivid")),
        ("aspect_ratio", json!("4:3")),
        ("extra_body.sequential_image_generation", json!("auto")),
        ("strength", json!(0.5)),
    ]
}

image_conformance!(
    stable_image_ultra_conformance,
    ImageCase {
        model: "stable-image-ultra",
        base: json!({}),
        full: json!({
            "negative_prompt": "blurry, text",
            "size": "1536x640",
            "n": 1,
            "style_preset": "cinematic",
            "output_format": "webp",
            "seed": 42
        }),
        check_full: check_ultra_full,
        answer,
        answers: Answers::Inline,
        sizes: SIZES,
        rejected_sizes: &["1792x1024", "512x512", "1024*1024", "auto"],
        qualities: &[],
        rejected_qualities: &["hd", "standard", "auto"],
        max_n: 10,
        per_call_n: 1,
        native_n: None,
        rejected: rejected(),
        reference: Some(reference),
        errors,
    }
);

/// [`rejected`] plus WebP output, which SD3.5 refuses.
fn sd3_rejected() -> Vec<(&'static str, Value)> {
    let mut rejected = rejected();
    rejected.push(("output_format", json!("webp")));
    rejected
}

image_conformance!(
    sd3_5_large_conformance,
    ImageCase {
        model: "sd3.5-large",
        base: json!({}),
        full: json!({
            "negative_prompt": "blurry",
            "image": b64(&sd3_full_image()),
            "strength": 0.35,
            "style_preset": "photographic",
            "output_format": "jpg",
            "cfg_scale": 5.5,
            "seed": "7"
        }),
        check_full: check_sd3_full,
        answer,
        answers: Answers::Inline,
        sizes: SIZES,
        rejected_sizes: &["1792x1024", "2048x2048"],
        qualities: &[],
        rejected_qualities: &["hd", "low"],
        max_n: 10,
        per_call_n: 1,
        native_n: None,
        rejected: sd3_rejected(),
        reference: Some(reference),
        errors,
    }
);

// ---- Stability's own -------------------------------------------------------------------------

/// A success answer whose body comes only after `delay` (the head goes out at once).
fn slow_success(img: &[u8], delay: Duration) -> Reply {
    Reply::chunked(
        200,
        "application/json",
        vec![(delay, serde_json::to_vec(&success(img)).unwrap())],
        false,
    )
}

#[test]
fn n_images_are_concurrent_native_calls() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let images: Vec<Vec<u8>> = (0..3).map(|i| png(500, 20 + i)).collect();
    let delay = Duration::from_millis(900);
    for img in &images {
        fake.push(slow_success(img, delay));
    }
    std::thread::scope(|s| {
        let call = s.spawn(|| {
            post(
                &gw,
                GENERATE,
                &json!({"model": "sd3.5-large", "prompt": "p", "n": 3, "response_format": "b64_json"}),
            )
        });
        // One after another, the second call could start only once the first answer ended.
        let seen = fake.wait_requests(3, delay * 2 / 3);
        assert_eq!(seen.len(), 3);
        let resp = call.join().unwrap();
        assert_eq!(resp.status, 200, "{}", resp.text());
        let mut got: Vec<Vec<u8>> = resp.json()["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| unb64(d["b64_json"].as_str().unwrap()))
            .collect();
        let mut want = images.clone();
        got.sort();
        want.sort();
        assert_eq!(got, want);
    });
    for req in fake.requests() {
        check_common(&req, SD3_PATH);
        let parts = form_parts(&req);
        assert_eq!(part(&parts, "mode").text(), "text-to-image");
        assert_eq!(part(&parts, "aspect_ratio").text(), "1:1");
        assert!(!names(&parts).contains(&"n"));
    }
}

#[test]
fn one_failed_call_fails_the_whole_request() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(200, success(&png(100, 1))));
    fake.push(stability_error(
        400,
        "bad_request",
        "seed: must be at most 4294967294",
    ));
    fake.push(Reply::json(200, success(&png(100, 2))));
    let resp = post(
        &gw,
        GENERATE,
        &json!({"model": "stable-image-ultra", "prompt": "p", "n": 3, "response_format": "url"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "invalid_request");
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("seed: must be at most 4294967294"));
    assert!(
        body.get("data").is_none(),
        "partial result delivered: {body}"
    );
}

#[test]
fn a_filtered_image_is_never_delivered() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let blurred = png(300, 3);
    fake.push(Reply::json(
        200,
        json!({"image": b64(&blurred), "finish_reason": "CONTENT_FILTERED", "seed": 9}),
    ));
    let resp = post(
        &gw,
        GENERATE,
        &json!({"model": "stable-image-ultra", "prompt": "p", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert_eq!(resp.json()["code"], "content_policy_violation");
    assert!(!resp.text().contains(&b64(&blurred)));
    assert_eq!(fake.requests().len(), 1, "a refusal is not retried");
}

#[test]
fn reference_images_are_file_parts_with_the_default_strength() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let reference = png(80_000, 11);
    let host = FakeProvider::start();
    host.set_default(Reply::bytes(200, "image/png", reference.clone()));
    let url = format!("{}/images/reference.png", host.base_url());
    for (model, path, given) in [
        ("stable-image-ultra", ULTRA_PATH, b64(&reference)),
        ("sd3.5-large", SD3_PATH, url.clone()),
    ] {
        let before = fake.requests().len();
        fake.push(Reply::json(200, success(&png(100, 12))));
        let resp = post(
            &gw,
            GENERATE,
            &json!({"model": model, "prompt": "p", "image": given, "response_format": "b64_json"}),
        );
        assert_eq!(resp.status, 200, "{model}: {}", resp.text());
        let sent = &fake.requests()[before];
        check_common(sent, path);
        let parts = form_parts(sent);
        let image = part(&parts, "image");
        assert_eq!(image.data, reference, "{model}: reference bytes");
        assert_eq!(image.content_type.as_deref(), Some("image/png"));
        assert_eq!(part(&parts, "strength").text(), "0.5");
        assert!(!names(&parts).contains(&"aspect_ratio"));
        if model == "sd3.5-large" {
            assert_eq!(part(&parts, "mode").text(), "image-to-image");
        }
    }
    assert_eq!(host.requests().len(), 1, "the URL was downloaded once");
}

/// The public `strength` is the reference image's influence (higher = follow it more, as Kling's
/// `image_fidelity`); Stability's `strength` is how far to move away from it (0 = the input
/// unchanged, 1 = as if no image were given), so the fake must receive `1 − strength`.
#[test]
fn strength_is_sent_on_stabilitys_inverse_scale() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let image = b64(&png(200, 14));
    for (model, path) in [
        ("stable-image-ultra", ULTRA_PATH),
        ("sd3.5-large", SD3_PATH),
    ] {
        for (public, native) in [("0.9", "0.1"), ("0.2", "0.8"), ("1", "0"), ("0", "1")] {
            let before = fake.requests().len();
            fake.push(Reply::json(200, success(&png(100, 15))));
            let strength: f64 = public.parse().unwrap();
            let resp = post(
                &gw,
                GENERATE,
                &json!({"model": model, "prompt": "p", "image": image, "strength": strength}),
            );
            assert_eq!(resp.status, 200, "{model} {public}: {}", resp.text());
            let sent = &fake.requests()[before];
            check_common(sent, path);
            assert_eq!(
                part(&form_parts(sent), "strength").text(),
                native,
                "{model}: public strength {public}"
            );
        }
    }
}

#[test]
fn a_size_with_an_image_is_refused() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let image = b64(&png(200, 13));
    for (model, extra) in [
        ("stable-image-ultra", json!({"size": "1344x768"})),
        ("sd3.5-large", json!({"aspect_ratio": "16:9"})),
        ("sd3.5-large", json!({"size": "1024x1024"})),
    ] {
        let mut body = json!({"model": model, "prompt": "p", "image": image});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let resp = post(&gw, GENERATE, &body);
        assert_eq!(resp.status, 400, "{model} {extra}: {}", resp.text());
        let out = resp.json();
        assert_eq!(out["code"], "validation_error");
        assert!(out["details"]["size"].is_string(), "{out}");
    }
    assert!(fake.requests().is_empty());
}

#[test]
fn url_results_are_hosted_by_the_gateway() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let img = png(5_000, 14);
    fake.push(Reply::json(200, success(&img)));
    let resp = post(
        &gw,
        GENERATE,
        &json!({"model": "stable-image-ultra", "prompt": "p", "response_format": "url"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    let url = out["data"][0]["url"].as_str().unwrap();
    assert!(url.contains("/api/v1/files/"), "{url}");
    let file = get_hosted(&gw, url);
    assert_eq!(file.status, 200);
    assert_eq!(file.header("content-type"), Some("image/png"));
    assert_eq!(file.body, img);
}

/// A model Stability no longer serves, still configured (SD3.0 `sd3-large`, replaced by SD3.5):
/// Stability's 400 faulting the `model` form field, which only the configuration sets, is 503
/// `model_unavailable` naming both models, not retried; and today's SD3.5 models go out as named.
#[test]
fn a_model_stability_no_longer_serves_is_named() {
    let fake = FakeProvider::start();
    let base = fake.base_url();
    let gw = TestGateway::start_with(|ports| {
        support::config(&base, ports)
            + "    sd3-large: {family: stability-sd3, targets: [{provider: stability, model: sd3-large}]}\n"
            + "    sd3.5-flash: {family: stability-sd3, targets: [{provider: stability, model: sd3.5-flash}]}\n"
    });
    fake.push(stability_error(
        400,
        "bad_request",
        "model: must be one of sd3.5-large, sd3.5-large-turbo, sd3.5-medium, sd3.5-flash",
    ));
    let resp = post(
        &gw,
        GENERATE,
        &json!({"model": "sd3-large", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 503, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "model_unavailable");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("model sd3-large "), "{message}");
    assert!(message.contains("provider stability"), "{message}");
    assert!(message.contains("must be one of"), "{message}");
    assert_eq!(fake.requests().len(), 1, "not retried");
    assert_eq!(
        part(&form_parts(&fake.requests()[0]), "model").text(),
        "sd3-large"
    );

    fake.push(Reply::json(200, success(&png(100, 3))));
    let resp = post(
        &gw,
        GENERATE,
        &json!({"model": "sd3.5-flash", "prompt": "p"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = &fake.requests()[1];
    check_common(sent, SD3_PATH);
    assert_eq!(part(&form_parts(sent), "model").text(), "sd3.5-flash");
}
