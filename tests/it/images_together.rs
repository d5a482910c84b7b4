//! Together AI images (FLUX) end to end against a fake Together: the shared conformance cases for
//! FLUX.1 [schnell] and FLUX.1 Kontext, then what is Together's own: pixel sizes as
//! `width`/`height`, up to four images a call, `base64` answers asked for when the caller wants
//! base64, `output_format` jpeg/png, and its codes for a model the account cannot use.

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{
    self as conformance, b64, data_url_bytes, fake_url, image_conformance, png, unb64, Answers,
    ImageCase, Reference,
};
use support::{post, TestGateway, PROVIDER_KEY};

const PATH: &str = "/v1/images/generations";
const SCHNELL: &str = "black-forest-labs/FLUX.1-schnell";
const KONTEXT: &str = "black-forest-labs/FLUX.1-kontext-pro";

// ---- native answers --------------------------------------------------------------------------

/// Together's answer linking to each image on the fake's own host.
fn url_answer(images: &[Vec<u8>], fake: &FakeProvider) -> Reply {
    let data: Vec<Value> = (0..images.len())
        .map(|i| json!({"index": i, "type": "url", "url": fake_url(fake, &format!("images/{i}.png"))}))
        .collect();
    Reply::json(
        200,
        json!({"id": "oFuwv7Y-2kFHot-99170ebf9e84e0ce-SJC", "model": SCHNELL, "object": "list", "data": data}),
    )
}

fn error(status: u16, code: Option<&str>, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"id": "x", "error": {"message": format!("{message} ({PROVIDER_KEY})"),
            "type": "invalid_request_error", "param": null, "code": code}}),
    )
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            error(
                400,
                None,
                "Input validation error: steps must be at most 12",
            ),
            400,
            "invalid_request",
        ),
        (
            error(401, Some("invalid_api_key"), "Invalid API key provided"),
            502,
            "upstream_auth_failed",
        ),
        (
            error(
                400,
                Some("model_not_available"),
                "Unable to access non-serverless model",
            ),
            503,
            "model_unavailable",
        ),
        (
            error(404, Some("model_not_found"), "Unable to access model"),
            503,
            "model_unavailable",
        ),
        (
            error(429, None, "You have reached the rate limit"),
            429,
            "rate_limited",
        ),
        (
            error(503, None, "The server is overloaded"),
            502,
            "upstream_error",
        ),
        (
            Reply::json(200, json!({"id": "x", "object": "list", "data": []})),
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

fn image_url(req: &Recorded) -> Reference {
    let image = req.json()["image_url"]
        .as_str()
        .expect("no image_url in the native request")
        .to_string();
    if image.starts_with("data:") {
        Reference::Bytes(data_url_bytes(&image))
    } else {
        Reference::Url(image)
    }
}

fn check_schnell_full(req: &Recorded) {
    assert_eq!(req.path, PATH);
    conformance::assert_bearer(req);
    assert_eq!(
        req.json(),
        json!({
            "model": SCHNELL,
            "prompt": conformance::PROMPT,
            "width": 1216,
            "height": 832,
            "n": 2,
            "response_format": "base64",
            "output_format": "jpeg",
            "seed": 42,
            "steps": 4,
            "disable_safety_checker": false
        })
    );
}

fn check_kontext_full(req: &Recorded) {
    assert_eq!(req.path, PATH);
    conformance::assert_bearer(req);
    assert_eq!(
        req.json(),
        json!({
            "model": KONTEXT,
            "prompt": conformance::PROMPT,
            "width": 768,
            "height": 1344,
            "n": 1,
            "response_format": "base64",
            "output_format": "png",
            "image_url": "https://img.example/room.jpg",
            "guidance_scale": 3.5
        })
    );
}

// ---- conformance -----------------------------------------------------------------------------

image_conformance!(
    schnell_conformance,
    ImageCase {
        model: "flux.1-schnell",
        base: json!({}),
        full: json!({
            "aspect_ratio": "3:2",
            "n": 2,
            "output_format": "jpg",
            "seed": 42,
            "steps": 4,
            "disable_safety_checker": false
        }),
        check_full: check_schnell_full,
        answer: url_answer,
        answers: Answers::Url,
        sizes: &[
            "1024x1024",
            "1344x768",
            "768x1344",
            "1152x896",
            "896x1152",
            "1216x832",
            "832x1216",
            "1440x1440",
            "256x1440",
            "512x512",
        ],
        rejected_sizes: &["1472x1024", "1000x1000", "224x224", "auto", "1K"],
        qualities: &[],
        rejected_qualities: &["hd", "high"],
        max_n: 10,
        per_call_n: 4,
        native_n: Some(native_n),
        rejected: vec![
            ("negative_prompt", json!("blurry")),
            ("strength", json!(0.5)),
            ("mask", json!(b64(&png(100, 9)))),
            ("style_preset", json!("anime")),
            ("background", json!("transparent")),
            ("watermark", json!(true)),
            ("output_format", json!("webp")),
            ("aspect_ratio", json!("21:9")),
            ("cfg", json!(4.0)),
            ("image_url", json!("https://img.example/a.png")),
            ("extra_body.sequential_image_generation", json!("auto")),
        ],
        reference: None,
        errors,
    }
);

image_conformance!(
    kontext_conformance,
    ImageCase {
        model: "flux.1-kontext-pro",
        base: json!({}),
        full: json!({
            "aspect_ratio": "9:16",
            "image": "https://img.example/room.jpg",
            "guidance_scale": 3.5
        }),
        check_full: check_kontext_full,
        answer: url_answer,
        answers: Answers::Url,
        sizes: &["1024x1024", "1344x768", "1440x1440"],
        rejected_sizes: &["2048x2048", "auto"],
        qualities: &[],
        rejected_qualities: &["hd"],
        max_n: 10,
        per_call_n: 4,
        native_n: Some(native_n),
        rejected: vec![
            ("negative_prompt", json!("blurry")),
            ("strength", json!(0.5)),
            ("mask", json!(b64(&png(100, 9)))),
        ],
        reference: Some(image_url),
        errors,
    }
);

// ---- Together's own behaviour ----------------------------------------------------------------

fn generate(gw: &TestGateway, body: Value) -> support::client::Response {
    post(gw, "/api/v1/images/generations", &body)
}

#[test]
fn base64_answers_need_no_download() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let imgs = [png(300, 1), png(300, 2), png(300, 3)];
    let data: Vec<Value> = imgs
        .iter()
        .enumerate()
        .map(|(i, img)| json!({"index": i, "type": "b64_json", "b64_json": b64(img)}))
        .collect();
    fake.push(Reply::json(
        200,
        json!({"id": "x", "model": SCHNELL, "object": "list", "data": data}),
    ));
    let resp = generate(
        &gw,
        json!({"model": "flux.1-schnell", "prompt": "p", "n": 3, "size": "512x1024",
            "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    for (i, img) in imgs.iter().enumerate() {
        assert_eq!(unb64(out["data"][i]["b64_json"].as_str().unwrap()), *img);
    }
    let sent = fake.requests();
    assert_eq!(sent.len(), 1, "one call, no download");
    let body = sent[0].json();
    assert_eq!(
        (
            body["width"].as_u64(),
            body["height"].as_u64(),
            body["n"].as_u64()
        ),
        (Some(512), Some(1024), Some(3))
    );
    assert_eq!(body["response_format"], "base64");
}

#[test]
fn nine_images_are_three_calls() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // The calls run concurrently: each is answered with the images it asked for.
    let mut answers: Vec<(u64, Reply)> = [0..4u8, 4..8, 8..9]
        .into_iter()
        .map(|batch| {
            let imgs: Vec<Vec<u8>> = batch.map(|i| png(64, i)).collect();
            (imgs.len() as u64, url_answer(&imgs, &fake))
        })
        .collect();
    fake.set_handler(move |r| {
        if r.method != "POST" {
            return None;
        }
        let at = answers.iter().position(|(n, _)| *n == native_n(r))?;
        Some(answers.remove(at).1)
    });
    let resp = generate(
        &gw,
        json!({"model": "flux.1-schnell", "prompt": "p", "n": 9}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["data"].as_array().unwrap().len(), 9);
    let mut ns: Vec<u64> = fake.requests().iter().map(native_n).collect();
    ns.sort_unstable();
    assert_eq!(ns, [1, 4, 4]);
}

/// A model the account cannot use on the serverless API: 503 `model_unavailable` naming the
/// public and native model, not retried.
#[test]
fn a_model_together_does_not_serve_is_named() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(error(
        400,
        Some("model_not_available"),
        "Unable to access non-serverless model black-forest-labs/FLUX.1-schnell",
    ));
    let resp = generate(
        &gw,
        json!({"model": "flux.1-schnell", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 503, "{}", resp.text());
    let message = resp.json()["message"].as_str().unwrap().to_string();
    assert!(message.contains(SCHNELL), "{message}");
    assert!(!message.contains(PROVIDER_KEY));
    assert_eq!(fake.requests().len(), 1, "not retried");
}
