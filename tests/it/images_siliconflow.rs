//! SiliconFlow images (Kolors, Qwen-Image, Qwen-Image-Edit) end to end against a fake
//! SiliconFlow: the shared conformance cases, then what is SiliconFlow's own: Kolors batches up to
//! four images per call (`batch_size`), Qwen-Image makes one per call, reference images go as the
//! caller's URL or a data URL, and the edit model sends no `image_size`.

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{
    self as conformance, b64, fake_url, image_conformance, png, Answers, ImageCase,
};
use support::{config, post, TestGateway, PROVIDER_KEY};

const PATH: &str = "/v1/images/generations";
const KOLORS: &str = "Kwai-Kolors/Kolors";
const QWEN_IMAGE: &str = "Qwen/Qwen-Image";

// ---- native answers --------------------------------------------------------------------------

/// SiliconFlow's answer linking to each image on the fake's own host (whoever wants the bytes
/// pushes them as the fake's next replies).
fn url_answer(images: &[Vec<u8>], fake: &FakeProvider) -> Reply {
    let list: Vec<Value> = (0..images.len())
        .map(|i| json!({"url": fake_url(fake, &format!("outputs/{i}.png"))}))
        .collect();
    Reply::json(
        200,
        json!({"images": list, "timings": {"inference": 1.23}, "seed": 4242}),
    )
}

fn sf_error(status: u16, code: u32, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"code": code, "message": format!("{message} ({PROVIDER_KEY})"), "data": null}),
    )
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            sf_error(400, 20015, "The parameter is invalid. Please check again."),
            400,
            "invalid_request",
        ),
        (
            Reply::bytes(401, "text/plain", b"Invalid token".to_vec()),
            502,
            "upstream_auth_failed",
        ),
        (
            sf_error(403, 30001, "Sorry, your account balance is insufficient"),
            502,
            "upstream_error",
        ),
        (
            sf_error(
                400,
                20012,
                "Model does not exist. Please check it carefully.",
            ),
            503,
            "model_unavailable",
        ),
        (
            sf_error(429, 50603, "IPM limit reached."),
            429,
            "rate_limited",
        ),
        (
            sf_error(
                503,
                50505,
                "Model service overloaded. Please try again later.",
            ),
            502,
            "upstream_error",
        ),
        // An error envelope inside a 200 has no images: an answer the gateway cannot use.
        (
            sf_error(200, 50505, "Model service overloaded."),
            502,
            "upstream_bad_response",
        ),
    ]
}

// ---- reading native requests -----------------------------------------------------------------

fn batch_size(req: &Recorded) -> u64 {
    req.json()["batch_size"]
        .as_u64()
        .expect("no batch_size in the native request")
}

fn check_kolors_full(req: &Recorded) {
    assert_eq!(req.path, PATH);
    conformance::assert_bearer(req);
    assert_eq!(
        req.json(),
        json!({
            "model": KOLORS,
            "prompt": conformance::PROMPT,
            "negative_prompt": "blurry",
            "image_size": "960x1280",
            "batch_size": 1,
            "image": "https://img.example/ref.png",
            "seed": 42,
            "num_inference_steps": 25,
            "guidance_scale": 7.5
        })
    );
}

fn check_qwen_full(req: &Recorded) {
    assert_eq!(req.path, PATH);
    assert_eq!(
        req.json(),
        json!({
            "model": QWEN_IMAGE,
            "prompt": conformance::PROMPT,
            "negative_prompt": "blurry",
            "image_size": "1664x928",
            "seed": 7,
            "num_inference_steps": 30,
            "cfg": 4.0
        })
    );
}

// ---- conformance -----------------------------------------------------------------------------

image_conformance!(
    kolors_conformance,
    ImageCase {
        model: "kolors",
        base: json!({}),
        full: json!({
            "negative_prompt": "blurry",
            "size": "960x1280",
            "n": 1,
            "image": "https://img.example/ref.png",
            "output_format": "png",
            "seed": 42,
            "num_inference_steps": 25,
            "guidance_scale": 7.5
        }),
        check_full: check_kolors_full,
        answer: url_answer,
        answers: Answers::Url,
        sizes: &["1024x1024", "960x1280", "768x1024", "720x1440", "720x1280"],
        rejected_sizes: &["1328x1328", "2048x2048", "1024*1024", "auto"],
        qualities: &[],
        rejected_qualities: &["hd", "standard", "auto"],
        max_n: 10,
        per_call_n: 4,
        native_n: Some(batch_size),
        rejected: vec![
            ("strength", json!(0.5)),
            ("mask", json!(b64(&png(100, 9)))),
            ("style_preset", json!("anime")),
            ("background", json!("transparent")),
            ("output_format", json!("jpg")),
            ("watermark", json!(true)),
            ("aspect_ratio", json!("16:9")),
            ("cfg", json!(4.0)),
            ("batch_size", json!(2)),
            ("extra_body.sequential_image_generation", json!("auto")),
        ],
        reference: Some(conformance::json_reference),
        errors,
    }
);

image_conformance!(
    qwen_image_conformance,
    ImageCase {
        model: "qwen-image",
        base: json!({}),
        full: json!({
            "negative_prompt": "blurry",
            "aspect_ratio": "16:9",
            "n": 1,
            "seed": 7,
            "num_inference_steps": 30,
            "cfg": 4.0
        }),
        check_full: check_qwen_full,
        answer: url_answer,
        answers: Answers::Url,
        sizes: &[
            "1328x1328",
            "1664x928",
            "928x1664",
            "1472x1140",
            "1140x1472",
            "1584x1056",
            "1056x1584",
        ],
        rejected_sizes: &["1024x1024", "960x1280", "auto"],
        qualities: &[],
        rejected_qualities: &["hd"],
        max_n: 10,
        per_call_n: 1,
        native_n: None,
        rejected: vec![
            ("strength", json!(0.5)),
            ("mask", json!(b64(&png(100, 9)))),
            ("watermark", json!(true)),
            ("output_format", json!("webp")),
            ("aspect_ratio", json!("21:9")),
            ("guidance_scale", json!(7.5)),
            ("extra_body.layer_decomposition", json!(true)),
        ],
        reference: None,
        errors,
    }
);

// ---- SiliconFlow's own behaviour -------------------------------------------------------------

fn generate(gw: &TestGateway, body: Value) -> support::client::Response {
    post(gw, "/api/v1/images/generations", &body)
}

#[test]
fn kolors_batches_up_to_four_per_call() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let four: Vec<Vec<u8>> = (0..4).map(|i| png(64, i)).collect();
    fake.push(url_answer(&four, &fake));
    let resp = generate(&gw, json!({"model": "kolors", "prompt": "p", "n": 4}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["data"].as_array().unwrap().len(), 4);
    let sent = fake.requests();
    assert_eq!(sent.len(), 1, "four images in one call");
    assert_eq!(batch_size(&sent[0]), 4);
}

#[test]
fn kolors_n_6_is_two_calls_of_4_and_2() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // The calls run concurrently: each is answered with the images it asked for.
    let four: Vec<Vec<u8>> = (0..4).map(|i| png(64, i)).collect();
    let two: Vec<Vec<u8>> = (4..6).map(|i| png(64, i)).collect();
    let (mut of_four, mut of_two) = (
        Some(url_answer(&four, &fake)),
        Some(url_answer(&two, &fake)),
    );
    fake.set_handler(move |r| match batch_size(r) {
        4 => of_four.take(),
        _ => of_two.take(),
    });
    let resp = generate(&gw, json!({"model": "kolors", "prompt": "p", "n": 6}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["data"].as_array().unwrap().len(), 6);
    let sent = fake.requests();
    assert_eq!(sent.len(), 2, "two native calls");
    let mut batches: Vec<u64> = sent.iter().map(batch_size).collect();
    batches.sort_unstable();
    assert_eq!(batches, [2, 4]);
}

#[test]
fn qwen_image_makes_one_image_per_call() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for i in 0..3 {
        fake.push(url_answer(&[png(64, i)], &fake));
    }
    let resp = generate(
        &gw,
        json!({"model": "qwen-image", "prompt": "p", "n": 3, "size": "928x1664"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["data"].as_array().unwrap().len(), 3);
    let sent = fake.requests();
    assert_eq!(sent.len(), 3);
    for req in &sent {
        assert_eq!(
            req.json(),
            json!({"model": QWEN_IMAGE, "prompt": "p", "image_size": "928x1664"})
        );
    }
}

#[test]
fn reference_images_go_as_url_or_data_url() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let url = "https://img.example/photos/ref.jpg?sig=a%2Bb&x=1";
    fake.push(url_answer(&[png(64, 1)], &fake));
    let resp = generate(&gw, json!({"model": "kolors", "prompt": "p", "image": url}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests()[0].json()["image"], url);

    let big = png(70_000, 3);
    fake.push(url_answer(&[png(64, 2)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "kolors", "prompt": "p", "image": b64(&big)}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        fake.requests()[1].json()["image"],
        format!("data:image/png;base64,{}", b64(&big))
    );
}

/// The test config plus a Qwen-Image-Edit model.
fn config_with_qwen_edit(fake_url: &str, ports: (u16, u16)) -> String {
    let mut yaml = config(fake_url, ports);
    yaml.push_str(
        "    qwen-image-edit: {family: qwen-image-edit, targets: [{provider: siliconflow, model: Qwen/Qwen-Image-Edit-2509}]}\n",
    );
    yaml
}

#[test]
fn qwen_image_edit_needs_an_image_and_sends_no_size() {
    let fake = FakeProvider::start();
    let base = fake.base_url();
    let gw = TestGateway::start_with(|ports| config_with_qwen_edit(&base, ports));
    fake.push(url_answer(&[png(64, 1)], &fake));
    let resp = generate(
        &gw,
        json!({
            "model": "qwen-image-edit",
            "prompt": "make the sky purple",
            "image": "https://img.example/a.png",
            "image2": "https://img.example/b.png",
            "negative_prompt": "text",
            "seed": 9
        }),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        fake.requests()[0].json(),
        json!({
            "model": "Qwen/Qwen-Image-Edit-2509",
            "prompt": "make the sky purple",
            "negative_prompt": "text",
            "image": "https://img.example/a.png",
            "image2": "https://img.example/b.png",
            "seed": 9
        })
    );

    let resp = generate(&gw, json!({"model": "qwen-image-edit", "prompt": "p"}));
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"].get("image").is_some());
    let resp = generate(
        &gw,
        json!({"model": "qwen-image-edit", "prompt": "p", "image": "https://img.example/a.png", "size": "1024x1024"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"].get("size").is_some());
    assert_eq!(
        fake.requests().len(),
        1,
        "a refused request reached SiliconFlow"
    );
}

/// A model SiliconFlow does not serve (code 20012 "Model does not exist"): 503 `model_unavailable`
/// naming the public and native model and SiliconFlow's reason, not retried.
#[test]
fn a_model_the_provider_no_longer_serves_is_named() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(sf_error(
        400,
        20012,
        "Model does not exist. Please check it carefully.",
    ));
    let resp = generate(&gw, json!({"model": "kolors", "prompt": "p", "retries": 2}));
    assert_eq!(resp.status, 503, "{}", resp.text());
    let out = resp.json();
    assert_eq!(out["code"], "model_unavailable");
    let message = out["message"].as_str().unwrap();
    assert!(message.contains("model kolors "), "{message}");
    assert!(
        message.contains(
            "provider siliconflow does not serve its configured model Kwai-Kolors/Kolors"
        ),
        "{message}"
    );
    assert!(message.contains("Model does not exist"), "{message}");
    assert_eq!(fake.requests().len(), 1, "not retried");
}
