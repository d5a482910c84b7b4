//! Volcengine Ark images (Seedream 4.0/4.5/5.0/3.0, SeedEdit 3.0) end to end against a fake Ark: the shared
//! conformance cases, then what is Ark's own: per-image errors inside a 200 answer, the watermark
//! sent off explicitly, fan-out for `n`, sequential sets, reference images as URL or data URL, and
//! `b64_json` asked natively.

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{
    self as conformance, b64, fake_url, image_conformance, png, unb64, Answers, ImageCase,
};
use support::{config, post, TestGateway, PROVIDER_KEY};

const PATH: &str = "/api/v3/images/generations";
const SEEDREAM_4: &str = "doubao-seedream-4-0-250828";
const SEEDEDIT_3: &str = "doubao-seededit-3-0-i2i-250628";
/// The image SeedEdit cases edit unless a test gives another (Ark downloads it, not the gateway).
const SOURCE_URL: &str = "https://img.example/source.png";

// ---- native answers --------------------------------------------------------------------------

/// Ark's answer linking to each image on the fake's own host (whoever wants the bytes pushes
/// them as the fake's next replies).
fn url_answer(images: &[Vec<u8>], fake: &FakeProvider) -> Reply {
    let data: Vec<Value> = (0..images.len())
        .map(|i| json!({"url": fake_url(fake, &format!("{i}.jpeg")), "size": "2048x2048"}))
        .collect();
    answer(data)
}

/// Ark's answer carrying each image as base64.
fn b64_answer(images: &[Vec<u8>], _fake: &FakeProvider) -> Reply {
    let data = images
        .iter()
        .map(|img| json!({"b64_json": b64(img), "size": "1024x1024"}))
        .collect();
    answer(data)
}

fn answer(data: Vec<Value>) -> Reply {
    let n = data.len();
    Reply::json(
        200,
        json!({
            "model": SEEDREAM_4,
            "created": 1757469067,
            "data": data,
            "usage": {"generated_images": n, "output_tokens": 16384 * n, "total_tokens": 16384 * n}
        }),
    )
}

fn ark_error(status: u16, code: &str) -> Reply {
    Reply::json(
        status,
        json!({"error": {
            "code": code,
            "message": format!("{code}: rejected with key {PROVIDER_KEY}. Request id: 0217"),
            "param": "prompt",
            "type": "BadRequest"
        }}),
    )
}

fn item_error(code: &str) -> Reply {
    answer(vec![
        json!({"error": {"code": code, "message": "the image was not made"}}),
    ])
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (ark_error(400, "InvalidParameter"), 400, "invalid_request"),
        (ark_error(400, "MissingParameter"), 400, "invalid_request"),
        (
            ark_error(400, "InputTextSensitiveContentDetected"),
            400,
            "content_policy_violation",
        ),
        (
            ark_error(400, "InputTextRiskDetection"),
            400,
            "content_policy_violation",
        ),
        (
            ark_error(401, "AuthenticationError"),
            502,
            "upstream_auth_failed",
        ),
        (
            ark_error(404, "InvalidEndpointOrModel.NotFound"),
            503,
            "model_unavailable",
        ),
        (ark_error(404, "ModelNotOpen"), 503, "model_unavailable"),
        (
            ark_error(429, "RateLimitExceeded.EndpointRPMExceeded"),
            429,
            "rate_limited",
        ),
        (ark_error(429, "QuotaExceeded"), 502, "upstream_error"),
        (ark_error(403, "AccountOverdueError"), 502, "upstream_error"),
        (
            ark_error(500, "InternalServiceError"),
            502,
            "upstream_error",
        ),
        (
            item_error("OutputImageSensitiveContentDetected"),
            400,
            "content_policy_violation",
        ),
        (
            item_error("InternalServiceError"),
            502,
            "upstream_bad_response",
        ),
    ]
}

// ---- reading native requests -----------------------------------------------------------------

fn check_seedream_full(req: &Recorded) {
    assert_eq!(req.path, PATH);
    conformance::assert_bearer(req);
    assert_eq!(
        req.json(),
        json!({
            "model": SEEDREAM_4,
            "prompt": conformance::PROMPT,
            "size": "2560x1440",
            "image": "https://img.example/ref.png",
            "response_format": "b64_json",
            "watermark": true,
            "sequential_image_generation": "disabled",
            "optimize_prompt_options": {"mode": "standard"}
        })
    );
}

fn check_seededit_full(req: &Recorded) {
    assert_eq!(req.path, PATH);
    assert_eq!(
        req.json(),
        json!({
            "model": SEEDEDIT_3,
            "prompt": conformance::PROMPT,
            "size": "adaptive",
            "image": SOURCE_URL,
            "response_format": "b64_json",
            "watermark": true,
            "seed": 42,
            "guidance_scale": 5.5
        })
    );
}

// ---- conformance -----------------------------------------------------------------------------

image_conformance!(
    seedream_4_conformance,
    ImageCase {
        model: "seedream-4",
        base: json!({}),
        full: json!({
            "image": "https://img.example/ref.png",
            "aspect_ratio": "16:9",
            "n": 1,
            "output_format": "jpg",
            "watermark": true,
            "extra_body": {"sequential_image_generation": "disabled"},
            "optimize_prompt_options": {"mode": "standard"}
        }),
        check_full: check_seedream_full,
        answer: url_answer,
        answers: Answers::Url,
        sizes: &["1K", "2K", "4K", "2048x2048", "1440x2560", "3024x1296"],
        rejected_sizes: &["1024x768", "4096x200", "8K", "2048*2048", "adaptive"],
        qualities: &[],
        rejected_qualities: &["hd", "standard", "auto"],
        max_n: 10,
        per_call_n: 1,
        native_n: None,
        rejected: vec![
            ("negative_prompt", json!("blurry")),
            ("strength", json!(0.5)),
            ("mask", json!(b64(&png(100, 9)))),
            ("style_preset", json!("anime")),
            ("background", json!("transparent")),
            ("output_format", json!("png")),
            ("aspect_ratio", json!("5:4")),
            ("seed", json!(7)),
            ("guidance_scale", json!(2.5)),
            ("stream", json!(true)),
            ("extra_body.layer_decomposition", json!(true)),
            ("extra_body.sequential_image_generation", json!("always")),
            ("extra_body.sequential_image_generation_options", json!([3])),
        ],
        reference: Some(conformance::json_reference),
        errors,
    }
);

image_conformance!(
    seededit_3_conformance,
    ImageCase {
        model: "seededit-3",
        base: json!({"image": SOURCE_URL}),
        full: json!({
            "size": "adaptive",
            "n": 1,
            "output_format": "jpg",
            "watermark": true,
            "seed": 42,
            "guidance_scale": 5.5
        }),
        check_full: check_seededit_full,
        answer: b64_answer,
        answers: Answers::Inline,
        sizes: &["adaptive"],
        rejected_sizes: &["1024x1024", "2K"],
        qualities: &[],
        rejected_qualities: &["hd"],
        max_n: 10,
        per_call_n: 1,
        native_n: None,
        rejected: vec![
            ("aspect_ratio", json!("1:1")),
            ("negative_prompt", json!("blurry")),
            ("strength", json!(0.3)),
            ("mask", json!(b64(&png(100, 9)))),
            ("output_format", json!("webp")),
            ("optimize_prompt_options", json!({"mode": "fast"})),
            ("extra_body.sequential_image_generation", json!("auto")),
        ],
        reference: Some(conformance::json_reference),
        errors,
    }
);

// ---- Ark's own behaviour ---------------------------------------------------------------------

fn generate(gw: &TestGateway, body: Value) -> support::client::Response {
    post(gw, "/api/v1/images/generations", &body)
}

#[test]
fn a_refused_image_inside_a_set_refuses_the_request_without_retrying() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(answer(vec![
        json!({"url": fake_url(&fake, "0.jpeg"), "size": "2048x2048"}),
        json!({"error": {"code": "OutputImageSensitiveContentDetected",
                         "message": "The generated image may contain sensitive content."}}),
        json!({"url": fake_url(&fake, "2.jpeg"), "size": "2048x2048"}),
    ]));
    let resp = generate(
        &gw,
        json!({"model": "seedream-4", "prompt": "p", "retries": 2,
               "extra_body": {"sequential_image_generation": "auto"}}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "content_policy_violation");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("image 2 of 3"), "{message}");
    assert!(message.contains("sensitive content"), "{message}");
    assert_eq!(fake.requests().len(), 1, "moderation is not retried");
}

#[test]
fn the_watermark_is_turned_off_unless_asked() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(url_answer(&[png(64, 1)], &fake));
    let resp = generate(&gw, json!({"model": "seedream-4", "prompt": "p"}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        fake.requests()[0].json(),
        json!({
            "model": SEEDREAM_4,
            "prompt": "p",
            "size": "2048x2048",
            "response_format": "url",
            "watermark": false
        })
    );
}

#[test]
fn n_fans_out_one_image_per_call() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for i in 0..3 {
        fake.push(b64_answer(&[png(64, i)], &fake));
    }
    let resp = generate(
        &gw,
        json!({"model": "seedream-4", "prompt": "p", "n": 3, "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let data = resp.json()["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 3);
    let mut got: Vec<Vec<u8>> = data
        .iter()
        .map(|d| unb64(d["b64_json"].as_str().unwrap()))
        .collect();
    got.sort();
    let mut want: Vec<Vec<u8>> = (0..3).map(|i| png(64, i)).collect();
    want.sort();
    assert_eq!(got, want);
    let sent = fake.requests();
    assert_eq!(sent.len(), 3, "one native call per image");
    for req in &sent {
        let native = req.json();
        assert!(native.get("n").is_none() && native.get("stream").is_none());
        assert_eq!(native["response_format"], "b64_json");
    }
}

#[test]
fn a_sequential_set_comes_from_one_call() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let images: Vec<Vec<u8>> = (0..4).map(|i| png(64, 20 + i)).collect();
    fake.push(b64_answer(&images, &fake));
    let resp = generate(
        &gw,
        json!({
            "model": "seedream-4",
            "prompt": "four panels of a story",
            "response_format": "b64_json",
            "extra_body": {
                "sequential_image_generation": "auto",
                "sequential_image_generation_options": {"max_images": 4}
            }
        }),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let data = resp.json()["data"].as_array().unwrap().clone();
    let got: Vec<Vec<u8>> = data
        .iter()
        .map(|d| unb64(d["b64_json"].as_str().unwrap()))
        .collect();
    assert_eq!(got, images, "the whole set, in order");
    let sent = fake.requests();
    assert_eq!(sent.len(), 1);
    let native = sent[0].json();
    assert_eq!(native["sequential_image_generation"], "auto");
    assert_eq!(
        native["sequential_image_generation_options"],
        json!({"max_images": 4})
    );
}

#[test]
fn a_sequential_set_with_n_is_refused() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let resp = generate(
        &gw,
        json!({"model": "seedream-4", "prompt": "p", "n": 3,
               "extra_body": {"sequential_image_generation": "auto"}}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "validation_error");
    assert!(
        body["details"]["n"]
            .as_str()
            .unwrap()
            .contains("max_images"),
        "{body}"
    );
    let resp = generate(
        &gw,
        json!({"model": "seedream-4", "prompt": "p",
               "extra_body": {"sequential_image_generation_options": {"max_images": 20}}}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]
        .get("extra_body.sequential_image_generation_options.max_images")
        .is_some());
    assert!(fake.requests().is_empty(), "a refused request reached Ark");
}

#[test]
fn reference_images_go_as_url_or_data_url() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let url = "https://img.example/photos/ref.jpg?sig=a%2Bb&x=1";
    fake.push(b64_answer(&[png(64, 1)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "seededit-3", "prompt": "p", "image": url}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests()[0].json()["image"], url);

    let big = png(70_000, 3);
    fake.push(b64_answer(&[png(64, 2)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "seedream-4", "prompt": "p", "image": b64(&big)}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        fake.requests()[1].json()["image"],
        format!("data:image/png;base64,{}", b64(&big))
    );
}

#[test]
fn b64_json_is_asked_natively_and_not_downloaded() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let img = png(500, 7);
    fake.push(b64_answer(std::slice::from_ref(&img), &fake));
    let resp = generate(
        &gw,
        json!({"model": "seedream-4", "prompt": "p", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        unb64(resp.json()["data"][0]["b64_json"].as_str().unwrap()),
        img
    );
    let sent = fake.requests();
    assert_eq!(sent.len(), 1, "nothing downloaded");
    assert_eq!(sent[0].json()["response_format"], "b64_json");
}

/// The test config plus models of the other Ark families.
fn config_with_more_families(fake_url: &str, ports: (u16, u16)) -> String {
    let mut yaml = config(fake_url, ports);
    yaml.push_str(
        "    seedream-5: {family: seedream-5, targets: [{provider: ark, model: doubao-seedream-5-0-260128, lifecycle: {still_available: true}}]}\n\
         \x20   seedream-4.5: {family: seedream-4.5, targets: [{provider: ark, model: doubao-seedream-4-5-251128, lifecycle: {still_available: true}}]}\n\
         \x20   seedream-3: {family: seedream-3, targets: [{provider: ark, model: doubao-seedream-3-0-t2i-250415}]}\n",
    );
    yaml
}

#[test]
fn seedream_5_chooses_its_output_format_and_3_takes_seeds() {
    let fake = FakeProvider::start();
    let base = fake.base_url();
    let gw = TestGateway::start_with(|ports| config_with_more_families(&base, ports));
    fake.set_handler(ark_contract);
    fake.push(b64_answer(&[png(64, 1)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "seedream-5", "prompt": "p", "size": "3K", "tools": [{"type": "web_search"}]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let native = fake.requests()[0].json();
    assert_eq!(native["output_format"], "png");
    assert_eq!(native["size"], "3K");
    assert_eq!(native["tools"], json!([{"type": "web_search"}]));

    fake.push(b64_answer(&[png(64, 2)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "seedream-3", "prompt": "p", "aspect_ratio": "16:9", "seed": 3}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let native = fake.requests()[1].json();
    assert_eq!(native["size"], "1280x720");
    assert_eq!(native["seed"], 3);
    assert!(native.get("output_format").is_none());
}

#[test]
fn each_seedream_takes_the_pixel_sizes_its_range_allows() {
    let fake = FakeProvider::start();
    let base = fake.base_url();
    let gw = TestGateway::start_with(|ports| config_with_more_families(&base, ports));
    fake.set_handler(ark_contract);
    // Inside each model's total-pixel range and 1:16–16:1: sent as asked.
    for (model, size) in [
        ("seedream-4", "1280x720"),
        ("seedream-4", "4096x4096"),
        ("seedream-4", "4000x1000"),
        ("seedream-4.5", "2560x1440"),
        ("seedream-4.5", "2848x1600"),
        ("seedream-5", "3136x1344"),
        ("seedream-5", "3226x3225"),
    ] {
        fake.push(b64_answer(&[png(64, 1)], &fake));
        let resp = generate(&gw, json!({"model": model, "prompt": "p", "size": size}));
        assert_eq!(resp.status, 200, "{model} {size}: {}", resp.text());
        assert_eq!(fake.requests().last().unwrap().json()["size"], size);
    }
    let sent = fake.requests().len();
    // Outside: the caller's 400 naming the size, nothing sent.
    for (model, size) in [
        ("seedream-4", "1024x720"),    // below 1280x720 pixels
        ("seedream-4", "4097x4096"),   // above 4096x4096 pixels
        ("seedream-4", "4096x200"),    // wider than 16:1
        ("seedream-4.5", "1K"),        // 4.5's smallest output is 2560x1440
        ("seedream-4.5", "2048x1600"), // below 2560x1440 pixels
        ("seedream-5", "4K"),
        ("seedream-5", "4096x4096"), // above 5.0's 3226x3226
    ] {
        let resp = generate(&gw, json!({"model": model, "prompt": "p", "size": size}));
        assert_eq!(resp.status, 400, "{model} {size}: {}", resp.text());
        assert!(
            resp.json()["details"]["size"].is_string(),
            "{model} {size}: {}",
            resp.text()
        );
    }
    assert_eq!(fake.requests().len(), sent);

    // `aspect_ratio` means each model's own recommended 2K size.
    for (model, want) in [
        ("seedream-4", "2560x1440"),
        ("seedream-4.5", "2848x1600"),
        ("seedream-5", "2848x1600"),
    ] {
        fake.push(b64_answer(&[png(64, 1)], &fake));
        let resp = generate(
            &gw,
            json!({"model": model, "prompt": "p", "aspect_ratio": "16:9"}),
        );
        assert_eq!(resp.status, 200, "{model}: {}", resp.text());
        assert_eq!(
            fake.requests().last().unwrap().json()["size"],
            want,
            "{model}"
        );
    }
}

#[test]
fn a_model_ark_does_not_serve_is_named() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        404,
        json!({"error": {"code": "InvalidEndpointOrModel.NotFound",
                         "message": format!("The model or endpoint {SEEDREAM_4} does not exist or you do not have access to it. Request id: 0217"),
                         "param": "", "type": "NotFound"}}),
    ));
    let resp = generate(
        &gw,
        json!({"model": "seedream-4", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 503, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "model_unavailable");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("seedream-4"), "{message}");
    assert!(message.contains(SEEDREAM_4), "{message}");
    assert_eq!(fake.requests().len(), 1, "not retried");
}

// ---- Seedream 5.0 Pro, layer decomposition, several references --------------------------------

const SEEDREAM_5_LITE: &str = "doubao-seedream-5-0-260128";
const SEEDREAM_5_PRO: &str = "doubao-seedream-5-0-pro-260628";

/// The test config plus Seedream 5.0 lite and Pro.
fn config_with_seedream_5(fake_url: &str, ports: (u16, u16)) -> String {
    let mut yaml = config(fake_url, ports);
    yaml.push_str(&format!(
        "    seedream-5: {{family: seedream-5, targets: [{{provider: ark, model: {SEEDREAM_5_LITE}, lifecycle: {{still_available: true}}}}]}}\n\
         \x20   seedream-5-pro: {{family: seedream-5-pro, targets: [{{provider: ark, model: {SEEDREAM_5_PRO}}}]}}\n",
    ));
    yaml
}

/// Ark's current refusals, as the fake's first word on every request: a `400 InvalidParameter`
/// where the real Ark refuses, `None` (the scripted answer) where it accepts. Layer decomposition
/// exists only on 5.0 Pro and needs exactly one reference image and a resolution tier; Pro takes
/// no sets or `tools` and at most 10 references, the others 14.
fn ark_contract(req: &Recorded) -> Option<Reply> {
    let body = req.json();
    let model = body["model"].as_str().unwrap_or_default();
    let pro = model.contains("-5-0-pro-");
    let refs = match &body["image"] {
        Value::Null => 0,
        Value::String(_) => 1,
        Value::Array(a) => a.len(),
        _ => return Some(ark_error(400, "InvalidParameter")),
    };
    let refuse = |param: &str, why: &str| {
        Some(Reply::json(
            400,
            json!({"error": {"code": "InvalidParameter",
                             "message": format!("the parameter `{param}` {why}"),
                             "param": param, "type": "BadRequest"}}),
        ))
    };
    if refs > if pro { 10 } else { 14 } {
        return refuse("image", "holds too many images");
    }
    if pro && (body.get("sequential_image_generation").is_some() || body.get("tools").is_some()) {
        return refuse(
            "sequential_image_generation",
            "is not supported by the model",
        );
    }
    if let Some(layers) = body.get("layer_decomposition") {
        if !pro {
            return refuse("layer_decomposition", "is not supported by the model");
        }
        let size = body["size"].as_str().unwrap_or_default();
        if layers == &json!(true) && (refs != 1 || size.contains('x')) {
            return refuse(
                "layer_decomposition",
                "needs one image and a resolution tier",
            );
        }
    }
    None
}

/// Ark's answer to a layer decomposition: the background plate, then each layer, every item
/// saying where it sits.
fn layers_answer(fake: &FakeProvider) -> Reply {
    Reply::json(
        200,
        json!({
            "model": SEEDREAM_5_PRO,
            "created": 1784000000,
            "data": [
                {"url": fake_url(fake, "0.png"), "size": "2048x2048", "output_format": "png",
                 "z_index": 0, "name": "background", "description": "the beach without the people",
                 "bounding_box": {"absolute": [0, 0, 2048, 2048], "normalized": [0, 0, 1000, 1000]}},
                {"url": fake_url(fake, "1.png"), "size": "2048x2048", "output_format": "png",
                 "z_index": 1, "name": "umbrella", "description": "a red beach umbrella",
                 "bounding_box": {"absolute": [120, 300, 900, 1400], "normalized": [59, 146, 439, 684]}},
                {"url": fake_url(fake, "2.png"), "size": "2048x2048", "output_format": "png",
                 "z_index": 2, "name": "title", "description": "the headline text",
                 "bounding_box": {"absolute": [200, 80, 1850, 260], "normalized": [98, 39, 903, 127]}}
            ],
            "usage": {"generated_images": 3, "output_tokens": 49152, "total_tokens": 49152}
        }),
    )
}

/// The public `layer` of each `data[]` item `layers_answer` gives.
fn expected_layers() -> Vec<Value> {
    vec![
        json!({"z_index": 0, "name": "background", "description": "the beach without the people",
               "bounding_box": {"absolute": [0, 0, 2048, 2048], "normalized": [0, 0, 1000, 1000]}}),
        json!({"z_index": 1, "name": "umbrella", "description": "a red beach umbrella",
               "bounding_box": {"absolute": [120, 300, 900, 1400], "normalized": [59, 146, 439, 684]}}),
        json!({"z_index": 2, "name": "title", "description": "the headline text",
               "bounding_box": {"absolute": [200, 80, 1850, 260], "normalized": [98, 39, 903, 127]}}),
    ]
}

#[test]
fn layer_decomposition_on_5_pro_returns_each_layers_place() {
    let fake = FakeProvider::start();
    let base = fake.base_url();
    let gw = TestGateway::start_with(|ports| config_with_seedream_5(&base, ports));
    fake.set_handler(ark_contract);
    fake.push(layers_answer(&fake));
    let resp = generate(
        &gw,
        json!({"model": "seedream-5-pro", "prompt": "separate the umbrella and the title",
               "image": "https://img.example/poster.png",
               "extra_body": {"layer_decomposition": true}}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let data = resp.json()["data"].as_array().unwrap().clone();
    let layers: Vec<Value> = data.iter().map(|d| d["layer"].clone()).collect();
    assert_eq!(layers, expected_layers());
    assert_eq!(
        data[1]["url"],
        fake_url(&fake, "1.png"),
        "links passed through"
    );
    let sent = fake.requests();
    assert_eq!(sent.len(), 1, "one call makes every layer");
    assert_eq!(
        sent[0].json(),
        json!({
            "model": SEEDREAM_5_PRO,
            "prompt": "separate the umbrella and the title",
            "size": "2K",
            "image": "https://img.example/poster.png",
            "response_format": "url",
            "output_format": "png",
            "watermark": false,
            "layer_decomposition": true
        })
    );

    // An ordinary image carries no `layer`.
    fake.push(url_answer(&[png(64, 1)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "seedream-5-pro", "prompt": "p", "size": "1424x800"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(
        resp.json()["data"][0].get("layer").is_none(),
        "{}",
        resp.text()
    );
    assert_eq!(fake.requests()[1].json()["size"], "1424x800");
}

#[test]
fn an_async_decomposition_keeps_the_layers_in_the_task() {
    let fake = FakeProvider::start();
    let base = fake.base_url();
    let gw = TestGateway::start_with(|ports| config_with_seedream_5(&base, ports));
    fake.set_handler(ark_contract);
    fake.push(layers_answer(&fake));
    let id = support::tasks::start(
        &gw,
        json!({"model": "seedream-5-pro", "prompt": "separate every element", "async": true,
               "image": "https://img.example/poster.png", "size": "1K",
               "extra_body": {"layer_decomposition": true}}),
    );
    let done = support::tasks::finished(&gw, &id);
    assert_eq!(done["task_status"], "succeed", "{done}");
    let layers: Vec<Value> = done["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["layer"].clone())
        .collect();
    assert_eq!(layers, expected_layers());
    assert_eq!(fake.requests()[0].json()["size"], "1K");
}

#[test]
fn layer_decomposition_is_refused_where_ark_would_refuse_it() {
    let fake = FakeProvider::start();
    let base = fake.base_url();
    let gw = TestGateway::start_with(|ports| config_with_seedream_5(&base, ports));
    fake.set_handler(ark_contract);
    let one = "https://img.example/poster.png";
    let two = json!([one, "https://img.example/logo.png"]);
    for (body, field, says) in [
        // 5.0 lite has no layer decomposition, nor has 4.0.
        (
            json!({"model": "seedream-5", "image": one}),
            "extra_body.layer_decomposition",
            "accepts",
        ),
        (
            json!({"model": "seedream-4", "image": one}),
            "extra_body.layer_decomposition",
            "accepts",
        ),
        // Pro: one reference image, a resolution tier.
        (
            json!({"model": "seedream-5-pro"}),
            "extra_body.layer_decomposition",
            "exactly one reference `image`",
        ),
        (
            json!({"model": "seedream-5-pro", "image": two}),
            "extra_body.layer_decomposition",
            "2 were given",
        ),
        (
            json!({"model": "seedream-5-pro", "image": one, "size": "2048x2048"}),
            "size",
            "resolution tier (1K, 1.5K, 2K)",
        ),
        (
            json!({"model": "seedream-5-pro", "image": one, "aspect_ratio": "16:9"}),
            "size",
            "not the pixel size 2816x1584",
        ),
    ] {
        let mut request = body.clone();
        request["prompt"] = json!("separate every element");
        request["extra_body"] = json!({"layer_decomposition": true});
        let resp = generate(&gw, request);
        assert_eq!(resp.status, 400, "{body}: {}", resp.text());
        let answer = resp.json();
        assert_eq!(answer["code"], "validation_error", "{body}");
        let detail = answer["details"][field].as_str().unwrap_or_default();
        assert!(detail.contains(says), "{body}: {answer}");
    }
    // Pro makes no sets, so a set is refused by name before any layer rule.
    let resp = generate(
        &gw,
        json!({"model": "seedream-5-pro", "prompt": "p", "image": one,
               "extra_body": {"layer_decomposition": true, "sequential_image_generation": "auto"}}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]
        .get("extra_body.sequential_image_generation")
        .is_some());
    assert!(fake.requests().is_empty(), "a refused request reached Ark");
}

#[test]
fn several_reference_images_go_as_arks_image_array() {
    let fake = FakeProvider::start();
    let base = fake.base_url();
    let gw = TestGateway::start_with(|ports| config_with_seedream_5(&base, ports));
    fake.set_handler(ark_contract);
    let img = png(300, 4);
    let refs = json!([
        "https://img.example/person.png",
        b64(&img),
        "https://img.example/room.png"
    ]);
    for model in ["seedream-4", "seedream-5", "seedream-5-pro"] {
        let before = fake.requests().len();
        fake.push(b64_answer(&[png(64, 5)], &fake));
        let resp = generate(
            &gw,
            json!({"model": model, "prompt": "the person from image 1 in the room of image 3",
                   "image": refs}),
        );
        assert_eq!(resp.status, 200, "{model}: {}", resp.text());
        assert_eq!(
            fake.requests()[before].json()["image"],
            json!([
                "https://img.example/person.png",
                format!("data:image/png;base64,{}", b64(&img)),
                "https://img.example/room.png"
            ]),
            "{model}"
        );
    }
    let sent = fake.requests().len();
    // Past each model's count (Pro 10, the others 14), and a set past 15 images with them.
    let urls = |n: usize| -> Vec<String> {
        (0..n)
            .map(|i| format!("https://img.example/{i}.png"))
            .collect()
    };
    for (model, n) in [("seedream-5-pro", 11), ("seedream-4", 15)] {
        let resp = generate(
            &gw,
            json!({"model": model, "prompt": "p", "image": urls(n)}),
        );
        assert_eq!(resp.status, 400, "{model}: {}", resp.text());
        assert!(resp.json()["details"]["image"]
            .as_str()
            .unwrap()
            .contains("at most"));
    }
    let resp = generate(
        &gw,
        json!({"model": "seedream-5", "prompt": "p", "image": urls(12),
               "extra_body": {"sequential_image_generation": "auto",
                              "sequential_image_generation_options": {"max_images": 4}}}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(
        resp.json()["details"]["extra_body.sequential_image_generation_options.max_images"]
            .as_str()
            .unwrap()
            .contains("from 1 to 3")
    );
    assert_eq!(fake.requests().len(), sent, "refused requests reached Ark");
}

// ---- Ark's tenth deprecation batch: the shut-down Seedream models move to 5.0 Pro -------------

/// 2026-11-24 00:00 UTC: the first day Ark no longer serves Seedream 4.0, 4.5 and 5.0 lite (end
/// of service 14:00 UTC+8; the lifecycle data holds days).
const NOV_24: i64 = 1_795_478_400;

/// The test config plus Seedream 4.0 and 5.0 Pro as the default config names them: 4.0 moves to
/// its successor, Pro.
fn config_with_successor(fake_url: &str, ports: (u16, u16)) -> String {
    let mut yaml = config(fake_url, ports);
    yaml.push_str(&format!(
        "    seedream-4.0: {{family: seedream, successor: seedream-5.0-pro, targets: [{{provider: ark, model: {SEEDREAM_4}}}]}}\n\
         \x20   seedream-5.0-pro: {{family: seedream-5-pro, targets: [{{provider: ark, model: {SEEDREAM_5_PRO}}}]}}\n",
    ));
    yaml
}

#[test]
fn seedream_4_0_after_arks_shutdown_is_served_by_seedream_5_0_pro() {
    let fake = FakeProvider::start();
    let base = fake.base_url();
    // The day before the shutdown: 4.0 still serves, and says it is deprecated.
    let clock = switchyard::internals::caps::lifecycle::Clock::manual(NOV_24 - 12 * 3600);
    let gw = TestGateway::start_at(|ports| config_with_successor(&base, ports), clock.clone());
    fake.set_handler(ark_contract);
    fake.push(b64_answer(&[png(64, 1)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "seedream-4.0", "prompt": "p", "size": "2K", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests()[0].json()["model"], SEEDREAM_4);
    assert_eq!(
        resp.header("deprecation"),
        Some("@1790035200"),
        "2026-09-22"
    );
    assert_eq!(resp.header("sunset"), Some("Tue, 24 Nov 2026 00:00:00 GMT"));
    let link = resp.header("link").unwrap_or_default().to_string();
    assert!(
        link.contains("</api/v1/models/seedream-5.0-pro>; rel=\"successor-version\"")
            && link.contains("model-deprecation-notice>; rel=\"sunset\""),
        "{link}"
    );
    assert_eq!(resp.header("switchyard-served-model"), None);

    // From the shutdown on, Pro serves `seedream-4.0`, and the answer says so.
    clock.set(NOV_24);
    fake.push(b64_answer(&[png(64, 2)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "seedream-4.0", "prompt": "p", "size": "2K", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests()[1].json()["model"], SEEDREAM_5_PRO);
    assert_eq!(
        resp.header("switchyard-served-model"),
        Some("seedream-5.0-pro")
    );
    assert_eq!(
        unb64(resp.json()["data"][0]["b64_json"].as_str().unwrap()),
        png(64, 2)
    );

    // Pro's family is narrower than 4.0's: a 4K image (which 4.0 made) is refused before
    // anything is sent, naming the sizes Pro takes.
    let resp = generate(
        &gw,
        json!({"model": "seedream-4.0", "prompt": "p", "size": "4K"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "validation_error");
    let size = body["details"]["size"].as_str().unwrap_or_default();
    assert!(size.contains("1K, 1.5K, 2K"), "{body}");
    assert_eq!(fake.requests().len(), 2, "a refused size reached Ark");
}

/// The default configuration keeps the names of Ark's shut-down Seedream models, each served by
/// Seedream 5.0 Pro, and loads after the shutdown (with a warning for each, not a refusal).
#[test]
fn the_default_config_moves_the_shut_down_seedream_models_to_5_0_pro() {
    let text = switchyard::config::DEFAULT_CONFIG;
    let config: Value = serde_yaml::from_str(text).unwrap();
    let models = &config["switchyard"]["models"];
    for name in ["seedream-4.0", "seedream-4.5", "seedream-5.0"] {
        assert_eq!(models[name]["successor"], "seedream-5.0-pro", "{name}");
    }
    assert_eq!(
        models["seedream-5.0-pro"]["targets"][0]["model"],
        SEEDREAM_5_PRO
    );
    let dec_2 = switchyard::internals::caps::lifecycle::Clock::manual(NOV_24 + 8 * 86_400);
    let settings = switchyard::internals::config::load_str_at(text, &|_| None, &dec_2)
        .unwrap_or_else(|e| panic!("{e:#?}"));
    for name in ["seedream-4.0", "seedream-4.5", "seedream-5.0"] {
        assert!(
            settings
                .gateway
                .warnings()
                .iter()
                .any(|w| w.contains(&format!(
                    "model `seedream-5.0-pro`, its successor, serves `{name}`'s requests"
                ))),
            "{name}: {:#?}",
            settings.gateway.warnings()
        );
    }
}
