//! Ideogram 3.0 images end to end against a fake Ideogram: the shared conformance cases, then
//! what is Ideogram's own: the key in `Api-Key`, a multipart form, its resolutions, `quality` as
//! `rendering_speed`, up to eight images a call, the reference image as a character reference
//! file, an image withheld by its safety check, and 422 as a content-policy refusal.

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{
    self as conformance, b64, fake_url, form_parts, image_conformance, names, part, png, Answers,
    ImageCase, Reference,
};
use support::{post, TestGateway, PROVIDER_KEY};

const PATH: &str = "/v1/ideogram-v3/generate";

// ---- native answers --------------------------------------------------------------------------

/// Ideogram's answer linking to each image on the fake's own host.
fn url_answer(images: &[Vec<u8>], fake: &FakeProvider) -> Reply {
    let data: Vec<Value> = (0..images.len())
        .map(|i| {
            json!({"url": fake_url(fake, &format!("api/images/ephemeral/{i}.png")),
                "prompt": conformance::PROMPT, "resolution": "1024x1024",
                "is_image_safe": true, "seed": 12345, "style_type": "GENERAL"})
        })
        .collect();
    Reply::json(
        200,
        json!({"created": "2026-11-27T08:00:00.000000+00:00", "data": data}),
    )
}

fn error(status: u16, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"error": format!("{message} ({PROVIDER_KEY})")}),
    )
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            Reply::json(
                400,
                json!({"detail": [{"loc": ["body", "resolution"], "msg": "invalid resolution"}]}),
            ),
            400,
            "invalid_request",
        ),
        (error(401, "Unauthorized"), 502, "upstream_auth_failed"),
        (
            error(422, "Prompt or provided image failed the safety checks"),
            400,
            "content_policy_violation",
        ),
        (
            Reply::json(404, json!({"detail": "Not Found"})),
            503,
            "model_unavailable",
        ),
        (error(429, "Too many requests"), 429, "rate_limited"),
        (error(500, "Internal error"), 502, "upstream_error"),
        (
            Reply::json(200, json!({"created": "x", "data": []})),
            502,
            "upstream_bad_response",
        ),
    ]
}

// ---- reading native requests -----------------------------------------------------------------

fn text(req: &Recorded, name: &str) -> Option<String> {
    form_parts(req)
        .into_iter()
        .find(|p| p.name == name && p.filename.is_none())
        .map(|p| p.text())
}

fn native_n(req: &Recorded) -> u64 {
    text(req, "num_images")
        .expect("no num_images in the native form")
        .parse()
        .unwrap()
}

fn character_reference(req: &Recorded) -> Reference {
    let parts = form_parts(req);
    let file = part(&parts, "character_reference_images");
    assert!(file.filename.is_some(), "not a file part");
    Reference::Bytes(file.data.clone())
}

fn assert_api_key(req: &Recorded) {
    assert_eq!(req.header("api-key"), Some(PROVIDER_KEY));
    assert!(req.header("authorization").is_none());
}

fn check_full(req: &Recorded) {
    assert_eq!(req.path, PATH);
    assert_api_key(req);
    let parts = form_parts(req);
    let mut got = names(&parts);
    // The pass-through fields come last, in the caller's order.
    got[7..].sort_unstable();
    assert_eq!(
        got,
        [
            "prompt",
            "resolution",
            "num_images",
            "rendering_speed",
            "style_type",
            "negative_prompt",
            "character_reference_images",
            "magic_prompt",
            "seed"
        ]
    );
    let text = |n: &str| part(&parts, n).text();
    assert_eq!(text("prompt"), conformance::PROMPT);
    assert_eq!(text("resolution"), "1280x800");
    assert_eq!(text("num_images"), "2");
    assert_eq!(text("rendering_speed"), "TURBO");
    assert_eq!(text("style_type"), "REALISTIC");
    assert_eq!(text("negative_prompt"), "blurry");
    assert_eq!(text("seed"), "42");
    assert_eq!(text("magic_prompt"), "OFF");
    let file = part(&parts, "character_reference_images");
    assert_eq!(file.content_type.as_deref(), Some("image/png"));
    assert_eq!(file.data, png(2_000, 8));
}

// ---- conformance -----------------------------------------------------------------------------

image_conformance!(
    v3_conformance,
    ImageCase {
        model: "ideogram-v3",
        base: json!({}),
        full: json!({
            "aspect_ratio": "16:10",
            "n": 2,
            "quality": "low",
            "style_preset": "realistic",
            "negative_prompt": "blurry",
            "image": b64(&png(2_000, 8)),
            "output_format": "png",
            "seed": 42,
            "magic_prompt": "OFF"
        }),
        check_full,
        answer: url_answer,
        answers: Answers::Url,
        sizes: &[
            "1024x1024",
            "1312x736",
            "736x1312",
            "512x1536",
            "1536x640",
            "896x1120",
            "960x1088",
        ],
        rejected_sizes: &["2048x2048", "1344x1344", "1024x1000", "auto"],
        qualities: &["low", "medium", "high"],
        rejected_qualities: &["hd", "standard", "auto"],
        max_n: 10,
        per_call_n: 8,
        native_n: Some(native_n),
        rejected: vec![
            ("strength", json!(0.5)),
            ("mask", json!(b64(&png(100, 9)))),
            ("style_preset", json!("anime")),
            ("background", json!("transparent")),
            ("watermark", json!(true)),
            ("output_format", json!("jpg")),
            ("aspect_ratio", json!("21:9")),
            ("rendering_speed", json!("TURBO")),
            ("extra_body.sequential_image_generation", json!("auto")),
        ],
        reference: Some(character_reference),
        errors,
    }
);

// ---- Ideogram's own behaviour ----------------------------------------------------------------

fn generate(gw: &TestGateway, body: Value) -> support::client::Response {
    post(gw, "/api/v1/images/generations", &body)
}

#[test]
fn eight_images_are_one_call_and_the_defaults_send_no_speed() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let eight: Vec<Vec<u8>> = (0..8).map(|i| png(64, i)).collect();
    fake.push(url_answer(&eight, &fake));
    let resp = generate(&gw, json!({"model": "ideogram-v3", "prompt": "p", "n": 8}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["data"].as_array().unwrap().len(), 8);
    let sent = fake.requests();
    assert_eq!(sent.len(), 1);
    assert_api_key(&sent[0]);
    assert_eq!(
        names(&form_parts(&sent[0])),
        ["prompt", "resolution", "num_images"]
    );
    assert_eq!(text(&sent[0], "num_images").as_deref(), Some("8"));
    assert_eq!(text(&sent[0], "resolution").as_deref(), Some("1024x1024"));
}

#[test]
fn an_image_withheld_by_the_safety_check_is_a_content_policy_refusal() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"created": "x", "data": [{"prompt": "p", "resolution": "1024x1024",
            "is_image_safe": false, "seed": 1}]}),
    ));
    let resp = generate(&gw, json!({"model": "ideogram-v3", "prompt": "p"}));
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert_eq!(resp.json()["code"], "content_policy_violation");
}

#[test]
fn a_url_reference_is_downloaded_and_sent_as_a_file() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let host = FakeProvider::start();
    let face = png(5_000, 4);
    host.set_default(Reply::bytes(200, "image/png", face.clone()));
    fake.push(url_answer(&[png(64, 1)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "ideogram-v3", "prompt": "p",
            "image": format!("{}/faces/me.png", host.base_url())}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        character_reference(&fake.requests()[0]),
        Reference::Bytes(face)
    );
    let fetched = host.requests();
    assert_eq!(fetched.len(), 1);
    assert!(
        fetched[0].header("api-key").is_none(),
        "the key left for the image host"
    );
}
