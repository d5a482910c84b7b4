//! MiniMax images (`image-01`) end to end against a fake MiniMax: the shared conformance cases,
//! then what is MiniMax's own: up to 9 images in one call, the caller's `response_format` passed
//! on (`base64` answers need no download), custom sizes as `width`/`height`, the reference image as
//! a `subject_reference`, and errors reported inside HTTP 200 answers.

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{
    self as conformance, b64, data_url_bytes, fake_url, image_conformance, png, Answers, ImageCase,
    Reference,
};
use support::{post, TestGateway, PROVIDER_KEY};

const PATH: &str = "/v1/image_generation";

// ---- native answers --------------------------------------------------------------------------

fn ok() -> Value {
    json!({"status_code": 0, "status_msg": "success"})
}

/// MiniMax's answer linking to each image on the fake's own host.
fn url_answer(images: &[Vec<u8>], fake: &FakeProvider) -> Reply {
    let urls: Vec<String> = (0..images.len())
        .map(|i| fake_url(fake, &format!("image_inference_output/{i}_aigc.jpeg")))
        .collect();
    Reply::json(
        200,
        json!({
            "id": "03ff3cd0820949eb8a410056b5f21d38",
            "data": {"image_urls": urls},
            "metadata": {"failed_count": "0", "success_count": images.len().to_string()},
            "base_resp": ok()
        }),
    )
}

/// MiniMax's answer carrying each image as base64.
fn base64_answer(images: &[Vec<u8>]) -> Reply {
    let list: Vec<String> = images.iter().map(|i| b64(i)).collect();
    Reply::json(
        200,
        json!({
            "id": "x",
            "data": {"image_base64": list},
            "metadata": {"failed_count": "0", "success_count": images.len().to_string()},
            "base_resp": ok()
        }),
    )
}

fn in_band(status: u16, code: u32, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"id": "", "data": null,
            "base_resp": {"status_code": code, "status_msg": format!("{message} ({PROVIDER_KEY})")}}),
    )
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            in_band(200, 1004, "login fail"),
            502,
            "upstream_auth_failed",
        ),
        (in_band(200, 2013, "invalid params"), 400, "invalid_request"),
        (
            in_band(200, 1026, "input new_sensitive"),
            400,
            "content_policy_violation",
        ),
        (
            in_band(200, 1008, "insufficient balance"),
            502,
            "upstream_error",
        ),
        (in_band(200, 1002, "rate limit"), 429, "rate_limited"),
        (in_band(500, 1024, "internal error"), 502, "upstream_error"),
        (
            Reply::bytes(401, "text/plain", b"Unauthorized".to_vec()),
            502,
            "upstream_auth_failed",
        ),
        // A success envelope with no images is an answer the gateway cannot use.
        (
            Reply::json(
                200,
                json!({"data": {"image_urls": []},
                    "metadata": {"failed_count": "1", "success_count": "0"}, "base_resp": ok()}),
            ),
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

fn subject_reference(req: &Recorded) -> Reference {
    let body = req.json();
    let refs = body["subject_reference"]
        .as_array()
        .expect("no subject_reference");
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0]["type"], "character");
    let image = refs[0]["image_file"].as_str().expect("no image_file");
    if image.starts_with("data:") {
        Reference::Bytes(data_url_bytes(image))
    } else {
        Reference::Url(image.to_string())
    }
}

fn check_full(req: &Recorded) {
    assert_eq!(req.path, PATH);
    conformance::assert_bearer(req);
    assert_eq!(
        req.json(),
        json!({
            "model": "image-01",
            "prompt": conformance::PROMPT,
            "aspect_ratio": "4:3",
            "response_format": "base64",
            "n": 2,
            "subject_reference": [{"type": "character", "image_file": "https://img.example/face.jpg"}],
            "aigc_watermark": true,
            "seed": 42,
            "prompt_optimizer": false
        })
    );
}

// ---- conformance -----------------------------------------------------------------------------

image_conformance!(
    image_01_conformance,
    ImageCase {
        model: "image-01",
        base: json!({}),
        full: json!({
            "size": "1152x864",
            "n": 2,
            "image": "https://img.example/face.jpg",
            "output_format": "jpg",
            "watermark": true,
            "seed": 42,
            "prompt_optimizer": false
        }),
        check_full,
        answer: url_answer,
        answers: Answers::Url,
        sizes: &[
            "1024x1024",
            "1280x720",
            "1152x864",
            "1248x832",
            "832x1248",
            "864x1152",
            "720x1280",
            "1344x576",
            "512x2048",
            "1536x1536",
        ],
        rejected_sizes: &["2056x1024", "500x500", "1024x1020", "auto", "1K"],
        qualities: &[],
        rejected_qualities: &["hd", "standard", "high"],
        max_n: 9,
        per_call_n: 9,
        native_n: Some(native_n),
        rejected: vec![
            ("negative_prompt", json!("blurry")),
            ("strength", json!(0.5)),
            ("mask", json!(b64(&png(100, 9)))),
            ("style_preset", json!("anime")),
            ("background", json!("transparent")),
            ("output_format", json!("png")),
            ("quality", json!("hd")),
            ("aspect_ratio", json!("5:4")),
            ("guidance_scale", json!(7.5)),
            ("width", json!(1024)),
            ("extra_body.sequential_image_generation", json!("auto")),
        ],
        reference: Some(subject_reference),
        errors,
    }
);

// ---- MiniMax's own behaviour -----------------------------------------------------------------

fn generate(gw: &TestGateway, body: Value) -> support::client::Response {
    post(gw, "/api/v1/images/generations", &body)
}

#[test]
fn nine_images_are_one_call() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let nine: Vec<Vec<u8>> = (0..9).map(|i| png(64, i)).collect();
    fake.push(url_answer(&nine, &fake));
    let resp = generate(&gw, json!({"model": "image-01", "prompt": "p", "n": 9}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    let data = resp.json()["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 9);
    // The links are MiniMax's own, passed through.
    assert!(data[8]["url"]
        .as_str()
        .unwrap()
        .ends_with("/results/image_inference_output/8_aigc.jpeg"));
    let sent = fake.requests();
    assert_eq!(sent.len(), 1, "nine images in one call");
    assert_eq!(
        sent[0].json(),
        json!({"model": "image-01", "prompt": "p", "aspect_ratio": "1:1",
            "response_format": "url", "n": 9})
    );
}

#[test]
fn base64_is_asked_for_and_returned_without_a_download() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let imgs = [png(500, 1), png(500, 2)];
    fake.push(base64_answer(&imgs));
    let resp = generate(
        &gw,
        json!({"model": "image-01", "prompt": "p", "n": 2, "size": "2048x1024",
            "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    for (i, img) in imgs.iter().enumerate() {
        assert_eq!(
            conformance::unb64(out["data"][i]["b64_json"].as_str().unwrap()),
            *img
        );
    }
    let sent = fake.requests();
    assert_eq!(sent.len(), 1, "no download");
    let body = sent[0].json();
    assert_eq!(body["response_format"], "base64");
    assert_eq!(
        (body["width"].as_u64(), body["height"].as_u64()),
        (Some(2048), Some(1024))
    );
    assert!(body.get("aspect_ratio").is_none());
}

#[test]
fn a_base64_reference_goes_as_a_data_url() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let face = png(2_000, 7);
    fake.push(url_answer(&[png(64, 1)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "image-01", "prompt": "p", "image": b64(&face)}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        fake.requests()[0].json()["subject_reference"][0]["image_file"],
        format!("data:image/png;base64,{}", b64(&face))
    );
}

#[test]
fn one_reference_only() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let resp = generate(
        &gw,
        json!({"model": "image-01", "prompt": "p",
            "image": ["https://img.example/a.jpg", "https://img.example/b.jpg"]}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"].get("image").is_some());
    assert!(fake.requests().is_empty());
}
