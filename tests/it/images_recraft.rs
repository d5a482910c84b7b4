//! Recraft images end to end against a fake Recraft: the shared conformance cases for V4.1 and
//! V3, then what is Recraft's own: each model generation's own sizes, V3's styles and negative
//! prompt, up to six images a call, and vector models whose SVG is passed on as Recraft made it
//! (Recraft's link, or Recraft's base64), never downloaded or hosted.

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{
    self as conformance, b64, fake_url, image_conformance, png, unb64, Answers, ImageCase,
};
use support::{post, TestGateway, PROVIDER_KEY};

const PATH: &str = "/v1/images/generations";

// ---- native answers --------------------------------------------------------------------------

/// Recraft's answer linking to each image on the fake's own host.
fn url_answer(images: &[Vec<u8>], fake: &FakeProvider) -> Reply {
    let data: Vec<Value> = (0..images.len())
        .map(|i| {
            json!({"image_id": format!("0000000{i}-1234-4abc-9def-1111111111aa"),
                "url": fake_url(fake, &format!("images/{i}"))})
        })
        .collect();
    Reply::json(
        200,
        json!({"created": 1_764_230_400, "credits": 35, "data": data}),
    )
}

fn error(status: u16, code: &str, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"code": code, "message": format!("{message} ({PROVIDER_KEY})")}),
    )
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            error(400, "invalid_size", "invalid size"),
            400,
            "invalid_request",
        ),
        (
            error(401, "unauthorized", "invalid token"),
            502,
            "upstream_auth_failed",
        ),
        (
            error(400, "invalid_model", "unknown model"),
            503,
            "model_unavailable",
        ),
        (
            error(400, "not_enough_credits", "not enough API units"),
            502,
            "upstream_error",
        ),
        (error(429, "rate_limited", "slow down"), 429, "rate_limited"),
        (
            Reply::bytes(502, "text/html", b"<html>bad gateway</html>".to_vec()),
            502,
            "upstream_error",
        ),
        // A 200 without images is an answer the gateway cannot use.
        (
            Reply::json(200, json!({"created": 1, "data": []})),
            502,
            "upstream_bad_response",
        ),
    ]
}

// ---- reading native requests -----------------------------------------------------------------

fn native_n(req: &Recorded) -> u64 {
    req.json()["n"]
        .as_u64()
        .expect("no n in the native request")
}

fn check_v4_full(req: &Recorded) {
    assert_eq!(req.path, PATH);
    conformance::assert_bearer(req);
    assert_eq!(
        req.json(),
        json!({
            "model": "recraftv4_1",
            "prompt": conformance::PROMPT,
            "n": 2,
            "size": "1280x896",
            "response_format": "b64_json",
            "controls": {"colors": [{"rgb": [255, 142, 60]}], "no_text": true},
            "style_id": "123e4567-e89b-12d3-a456-426614174000"
        })
    );
}

fn check_v3_full(req: &Recorded) {
    assert_eq!(req.path, PATH);
    conformance::assert_bearer(req);
    assert_eq!(
        req.json(),
        json!({
            "model": "recraftv3",
            "prompt": conformance::PROMPT,
            "n": 1,
            "size": "1820x1024",
            "response_format": "b64_json",
            "style": "digital_illustration",
            "negative_prompt": "blurry",
            "substyle": "pixel_art",
            "controls": {"artistic_level": 3}
        })
    );
}

// ---- conformance -----------------------------------------------------------------------------

image_conformance!(
    v4_1_conformance,
    ImageCase {
        model: "recraft-v4.1",
        base: json!({}),
        full: json!({
            "aspect_ratio": "14:10",
            "n": 2,
            "output_format": "png",
            "controls": {"colors": [{"rgb": [255, 142, 60]}], "no_text": true},
            "style_id": "123e4567-e89b-12d3-a456-426614174000"
        }),
        check_full: check_v4_full,
        answer: url_answer,
        answers: Answers::Url,
        sizes: &[
            "1024x1024",
            "1536x768",
            "768x1536",
            "1280x832",
            "832x1280",
            "1216x896",
            "896x1216",
            "1152x896",
            "896x1152",
            "832x1344",
            "1280x896",
            "896x1280",
            "1344x768",
            "768x1344",
        ],
        rejected_sizes: &["1820x1024", "2048x2048", "1365x1024", "auto"],
        qualities: &[],
        rejected_qualities: &["hd", "standard"],
        max_n: 10,
        per_call_n: 6,
        native_n: Some(native_n),
        rejected: vec![
            ("negative_prompt", json!("blurry")),
            ("style_preset", json!("digital_illustration")),
            ("strength", json!(0.5)),
            ("mask", json!(b64(&png(100, 9)))),
            ("background", json!("transparent")),
            ("watermark", json!(true)),
            ("output_format", json!("svg")),
            ("aspect_ratio", json!("21:9")),
            ("substyle", json!("pixel_art")),
            ("extra_body.sequential_image_generation", json!("auto")),
        ],
        reference: None,
        errors,
    }
);

image_conformance!(
    v3_conformance,
    ImageCase {
        model: "recraft-v3",
        base: json!({}),
        full: json!({
            "size": "1820x1024",
            "n": 1,
            "style_preset": "digital_illustration",
            "negative_prompt": "blurry",
            "substyle": "pixel_art",
            "controls": {"artistic_level": 3}
        }),
        check_full: check_v3_full,
        answer: url_answer,
        answers: Answers::Url,
        sizes: &[
            "1024x1024",
            "1365x1024",
            "1024x1365",
            "1536x1024",
            "1024x1536",
            "1820x1024",
            "1024x1820",
            "1024x2048",
            "2048x1024",
            "1434x1024",
            "1024x1434",
            "1024x1280",
            "1280x1024",
            "1024x1707",
            "1707x1024",
        ],
        rejected_sizes: &["1280x896", "1344x768", "auto"],
        qualities: &[],
        rejected_qualities: &["hd"],
        max_n: 10,
        per_call_n: 6,
        native_n: Some(native_n),
        rejected: vec![
            ("style_preset", json!("vector_illustration")),
            ("output_format", json!("jpg")),
            ("watermark", json!(true)),
            ("aspect_ratio", json!("14:10")),
            ("steps", json!(20)),
        ],
        reference: None,
        errors,
    }
);

// ---- Recraft's own behaviour -----------------------------------------------------------------

fn generate(gw: &TestGateway, body: Value) -> support::client::Response {
    post(gw, "/api/v1/images/generations", &body)
}

const SVG: &[u8] = br#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><rect width="10" height="10"/></svg>"#;

#[test]
fn ten_images_are_calls_of_six_and_four() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let six: Vec<Vec<u8>> = (0..6).map(|i| png(64, i)).collect();
    let four: Vec<Vec<u8>> = (6..10).map(|i| png(64, i)).collect();
    // The calls run concurrently: each is answered with the images it asked for.
    let (mut of_six, mut of_four) = (
        Some(url_answer(&six, &fake)),
        Some(url_answer(&four, &fake)),
    );
    fake.set_handler(move |r| match native_n(r) {
        6 => of_six.take(),
        _ => of_four.take(),
    });
    let resp = generate(
        &gw,
        json!({"model": "recraft-v4.1", "prompt": "p", "n": 10}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["data"].as_array().unwrap().len(), 10);
    let mut ns: Vec<u64> = fake.requests().iter().map(native_n).collect();
    ns.sort_unstable();
    assert_eq!(ns, [4, 6]);
}

#[test]
fn pro_models_take_their_2k_sizes() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(url_answer(&[png(64, 1)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "recraft-v4.1-pro", "prompt": "p", "aspect_ratio": "16:9"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests()[0].json();
    assert_eq!(
        (sent["model"].as_str(), sent["size"].as_str()),
        (Some("recraftv4_1_pro"), Some("2688x1536"))
    );
    // The default is the 2K square; a 1K size is refused.
    fake.push(url_answer(&[png(64, 1)], &fake));
    let resp = generate(&gw, json!({"model": "recraft-v4.1-pro", "prompt": "p"}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests()[1].json()["size"], "2048x2048");
    let resp = generate(
        &gw,
        json!({"model": "recraft-v4.1-pro", "prompt": "p", "size": "1024x1024"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]["size"]
        .as_str()
        .unwrap()
        .contains("2048x2048"));
    assert_eq!(fake.requests().len(), 2);
}

#[test]
fn vector_links_are_recrafts_own_and_never_downloaded() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(url_answer(&[SVG.to_vec()], &fake));
    let resp = generate(
        &gw,
        json!({"model": "recraft-v4.1-vector", "prompt": "a fox logo"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let url = resp.json()["data"][0]["url"].as_str().unwrap().to_string();
    assert_eq!(url, fake_url(&fake, "images/0"));
    let sent = fake.requests();
    assert_eq!(sent.len(), 1, "nothing downloaded");
    assert_eq!(
        sent[0].json(),
        json!({"model": "recraftv4_1_vector", "prompt": "a fox logo", "n": 1,
            "size": "1024x1024", "response_format": "url"})
    );
}

#[test]
fn vector_base64_comes_from_recraft() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"created": 1_764_230_400, "data": [{"image_id": "x", "b64_json": b64(SVG)}]}),
    ));
    let resp = generate(
        &gw,
        json!({"model": "recraft-v4.1-vector", "prompt": "p", "output_format": "svg",
            "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        unb64(resp.json()["data"][0]["b64_json"].as_str().unwrap()),
        SVG
    );
    let sent = fake.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].json()["response_format"], "b64_json");
    // A raster format from a vector model is a 400.
    let resp = generate(
        &gw,
        json!({"model": "recraft-v4.1-vector", "prompt": "p", "output_format": "png"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]["output_format"]
        .as_str()
        .unwrap()
        .contains("svg"));
}

/// A model Recraft does not know: 503 `model_unavailable` naming the public and native model,
/// not retried.
#[test]
fn a_model_recraft_does_not_serve_is_named() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(error(
        400,
        "invalid_model",
        "model recraftv4_1 is not available",
    ));
    let resp = generate(
        &gw,
        json!({"model": "recraft-v4.1", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 503, "{}", resp.text());
    let message = resp.json()["message"].as_str().unwrap().to_string();
    assert!(message.contains("recraftv4_1"), "{message}");
    assert!(!message.contains(PROVIDER_KEY));
    assert_eq!(fake.requests().len(), 1, "not retried");
}

/// Recraft V4.1 Flash (`recraftv4_1_flash`, default `recraft-v4.1-flash`): V4.1's sizes and
/// controls at 1K, but no style, so a `style_id` is refused with a 400 before anything is sent.
#[test]
fn v4_1_flash_takes_v4_1s_sizes_and_controls_but_no_style() {
    let fake = FakeProvider::start();
    let url = fake.base_url();
    let gw = TestGateway::start_with(|ports| {
        support::config(&url, ports)
            + "    recraft-v4.1-flash: {family: recraft-v4-flash, targets: [{provider: recraft, model: recraftv4_1_flash}]}\n"
    });
    fake.push(url_answer(&[png(64, 1)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "recraft-v4.1-flash", "prompt": "p", "aspect_ratio": "16:9",
               "controls": {"no_text": true}}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests()[0].json();
    assert_eq!(sent["model"], "recraftv4_1_flash");
    assert_eq!(sent["size"], "1344x768");
    assert_eq!(sent["controls"], json!({"no_text": true}));
    let resp = generate(
        &gw,
        json!({"model": "recraft-v4.1-flash", "prompt": "p",
               "style_id": "123e4567-e89b-12d3-a456-426614174000"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert_eq!(resp.json()["code"], "validation_error");
    assert_eq!(
        fake.requests().len(),
        1,
        "a refused request reached Recraft"
    );
}
