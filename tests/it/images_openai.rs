//! OpenAI images (gpt-image-1, gpt-image-2, gpt-image-2.6-*) end to end against a fake OpenAI: the
//! shared conformance cases, then what is OpenAI's own: GPT image base64 hosted for `url` callers,
//! edits as multipart forms (image and mask file parts, byte for byte), reference URLs downloaded
//! by the gateway and sent as files, the image types edits take, and the retired DALL·E families.

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{
    self as conformance, b64, form_parts, get_hosted, image_conformance, names, part, png, unb64,
    Answers, FormPart, ImageCase, Reference,
};
use support::{post, TestGateway, PROVIDER_KEY};

const GENERATIONS: &str = "/v1/images/generations";
const EDITS: &str = "/v1/images/edits";

// ---- native answers --------------------------------------------------------------------------

/// A GPT image answer: base64 only, with the GPT image extras.
fn b64_answer(images: &[Vec<u8>], _fake: &FakeProvider) -> Reply {
    let data: Vec<Value> = images.iter().map(|i| json!({"b64_json": b64(i)})).collect();
    Reply::json(
        200,
        json!({
            "created": 1713833628,
            "data": data,
            "background": "opaque",
            "output_format": "png",
            "size": "1024x1024",
            "quality": "high",
            "usage": {"total_tokens": 100, "input_tokens": 50, "output_tokens": 50,
                      "input_tokens_details": {"text_tokens": 10, "image_tokens": 40}}
        }),
    )
}

fn openai_error(status: u16, kind: &str, code: Value, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
    )
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            openai_error(
                400,
                "invalid_request_error",
                json!("content_policy_violation"),
                "Your request was rejected as a result of our safety system.",
            ),
            400,
            "content_policy_violation",
        ),
        (
            openai_error(
                400,
                "image_generation_user_error",
                json!("moderation_blocked"),
                "Your request was rejected by the safety system.",
            ),
            400,
            "content_policy_violation",
        ),
        (
            openai_error(
                400,
                "invalid_request_error",
                Value::Null,
                "Invalid value for 'size'.",
            ),
            400,
            "invalid_request",
        ),
        (
            openai_error(
                401,
                "invalid_request_error",
                json!("invalid_api_key"),
                &format!("Incorrect API key provided: {PROVIDER_KEY}."),
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            openai_error(
                429,
                "requests",
                json!("rate_limit_exceeded"),
                "Rate limit reached",
            ),
            429,
            "rate_limited",
        ),
        (
            openai_error(
                429,
                "insufficient_quota",
                json!("insufficient_quota"),
                "You exceeded your current quota.",
            ),
            502,
            "upstream_error",
        ),
        (
            openai_error(
                400,
                "invalid_request_error",
                json!("billing_hard_limit_reached"),
                "Billing hard limit has been reached",
            ),
            502,
            "upstream_error",
        ),
        (
            openai_error(
                404,
                "invalid_request_error",
                json!("model_not_found"),
                "The model `x` does not exist or you do not have access to it.",
            ),
            503,
            "model_unavailable",
        ),
        (
            openai_error(500, "server_error", Value::Null, "The server had an error"),
            502,
            "upstream_error",
        ),
        (
            Reply::json(200, json!({"created": 1, "data": []})),
            502,
            "upstream_bad_response",
        ),
        (
            Reply::json(
                200,
                json!({"created": 1, "data": [{"revised_prompt": "x"}]}),
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

/// The `image` file part of an edits form.
fn reference(req: &Recorded) -> Reference {
    assert_eq!(req.path, EDITS);
    Reference::Bytes(part(&form_parts(req), "image").data.clone())
}

fn check_auth(req: &Recorded) {
    conformance::assert_bearer(req);
}

fn check_gpt_image_2_full(req: &Recorded) {
    assert_eq!(req.path, GENERATIONS);
    check_auth(req);
    assert_eq!(
        req.json(),
        json!({"model": "gpt-image-2", "prompt": conformance::PROMPT, "n": 1, "size": "3840x2160",
               "quality": "high", "output_format": "jpeg", "background": "opaque",
               "output_compression": 80, "moderation": "low", "user": "user-2"})
    );
}

fn check_gpt_image_full(req: &Recorded) {
    assert_eq!(req.path, GENERATIONS);
    check_auth(req);
    assert_eq!(
        req.json(),
        json!({"model": "gpt-image-1", "prompt": conformance::PROMPT, "n": 1, "size": "1024x1536",
               "quality": "medium", "output_format": "webp", "background": "transparent",
               "output_compression": 60, "moderation": "low", "user": "user-g"})
    );
}

// ---- conformance -----------------------------------------------------------------------------

// gpt-image-2: the listed sizes and any WxH its rule allows (multiples of 16, long side at most
// 3840 px and 3 times the short one, 655,360–8,294,400 pixels).
image_conformance!(
    gpt_image_2_conformance,
    ImageCase {
        model: "gpt-image-2",
        base: json!({}),
        full: json!({"size": "3840x2160", "quality": "high", "output_format": "jpg",
                 "background": "opaque", "output_compression": 80, "moderation": "low",
                 "user": "user-2"}),
        check_full: check_gpt_image_2_full,
        answer: b64_answer,
        answers: Answers::Inline,
        sizes: &[
            "1024x1024",
            "1536x1024",
            "1024x1536",
            "auto",
            "2048x1152",
            "2160x3840",
            "1792x1024",
            "3840x1280",
            "1280x3840",
            "1024x640",
        ],
        rejected_sizes: &[
            "256x256",
            "768x768",
            "1000x1000",
            "4096x1024",
            "3856x1296",
            "3840x2176",
            "3840x1264",
        ],
        qualities: &["auto", "low", "medium", "high"],
        rejected_qualities: &["standard", "hd"],
        max_n: 10,
        per_call_n: 10,
        native_n: Some(native_n),
        rejected: vec![
            ("negative_prompt", json!("blurry")),
            ("strength", json!(0.4)),
            ("style_preset", json!("anime")),
            ("watermark", json!(true)),
            ("aspect_ratio", json!("4:3")),
            ("style", json!("vivid")),
            ("complexity", json!("low")),
            ("extra_body.seed", json!(1)),
        ],
        reference: Some(reference),
        errors,
    }
);

image_conformance!(
    gpt_image_1_conformance,
    ImageCase {
        model: "gpt-image-1",
        base: json!({}),
        full: json!({"aspect_ratio": "2:3", "quality": "medium", "output_format": "webp",
                 "background": "transparent", "output_compression": 60, "moderation": "low",
                 "user": "user-g"}),
        check_full: check_gpt_image_full,
        answer: b64_answer,
        answers: Answers::Inline,
        sizes: &["1024x1024", "1536x1024", "1024x1536", "auto"],
        rejected_sizes: &["256x256", "1792x1024", "2048x2048"],
        qualities: &["auto", "low", "medium", "high"],
        rejected_qualities: &["standard", "hd"],
        max_n: 10,
        per_call_n: 10,
        native_n: Some(native_n),
        rejected: vec![
            ("negative_prompt", json!("blurry")),
            ("strength", json!(0.4)),
            ("style_preset", json!("anime")),
            ("watermark", json!(true)),
            ("aspect_ratio", json!("16:9")),
            ("style", json!("vivid")),
            ("extra_body.seed", json!(1)),
        ],
        reference: Some(reference),
        errors,
    }
);

// ---- OpenAI's own behaviour ------------------------------------------------------------------

fn generate(gw: &TestGateway, body: Value) -> support::client::Response {
    post(gw, "/api/v1/images/generations", &body)
}

#[test]
fn gpt_image_base64_is_hosted_for_url_callers() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let images = [png(20_000, 1), png(30_000, 2)];
    fake.push(b64_answer(&images, &fake));
    let resp = generate(
        &gw,
        json!({"model": "gpt-image-1", "prompt": "p", "n": 2, "response_format": "url"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["created"], 1713833628);
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    for (item, img) in data.iter().zip(&images) {
        assert!(item.get("b64_json").is_none());
        let url = item["url"].as_str().unwrap();
        assert!(
            url.starts_with(&format!("http://{}/api/v1/files/", gw.addr)),
            "{url}"
        );
        let file = get_hosted(&gw, url);
        assert_eq!(file.status, 200, "{}", file.text());
        assert_eq!(file.header("content-type"), Some("image/png"));
        assert_eq!(&file.body, img, "hosted bytes differ");
    }
    let sent = fake.requests();
    assert_eq!(sent.len(), 1, "one native call for n=2");
    let native = sent[0].json();
    assert!(
        native.get("response_format").is_none(),
        "GPT image models refuse response_format: {native}"
    );
    assert_eq!(native["n"], 2);
    assert_eq!(native["output_format"], "png");
}

fn text(name: &str, value: &str) -> FormPart {
    FormPart {
        name: name.into(),
        filename: None,
        content_type: None,
        data: value.as_bytes().to_vec(),
    }
}

fn file(name: &str, filename: &str, content_type: &str, data: &[u8]) -> FormPart {
    FormPart {
        name: name.into(),
        filename: Some(filename.into()),
        content_type: Some(content_type.into()),
        data: data.to_vec(),
    }
}

#[test]
fn gpt_image_edits_send_output_format_not_response_format() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let image = [&[0xFF, 0xD8, 0xFF, 0xE0][..], &png(70_000, 3)[..]].concat();
    let mask = png(70_000, 4);
    let out = png(500, 5);
    fake.push(b64_answer(std::slice::from_ref(&out), &fake));
    let resp = generate(
        &gw,
        json!({"model": "gpt-image-1", "prompt": "p", "image": format!("data:image/jpeg;base64,{}", b64(&image)),
               "mask": b64(&mask), "quality": "high", "output_format": "jpg", "background": "opaque",
               "input_fidelity": "high", "output_compression": 70, "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        unb64(resp.json()["data"][0]["b64_json"].as_str().unwrap()),
        out
    );
    let sent = fake.requests();
    assert_eq!(sent[0].path, EDITS);
    assert_eq!(
        form_parts(&sent[0]),
        vec![
            file("image", "image.jpg", "image/jpeg", &image),
            file("mask", "mask.png", "image/png", &mask),
            text("prompt", "p"),
            text("model", "gpt-image-1"),
            text("n", "1"),
            text("size", "1024x1024"),
            text("quality", "high"),
            text("output_format", "jpeg"),
            text("background", "opaque"),
            text("input_fidelity", "high"),
            text("output_compression", "70"),
        ]
    );
}

#[test]
fn reference_urls_are_downloaded_and_sent_as_files() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let image = png(90_000, 11);
    let mask = png(2_000, 12);
    // The spine fetches both inputs (in order) before the adapter runs, then the edit is sent.
    fake.push(Reply::bytes(200, "image/png", image.clone()));
    fake.push(Reply::bytes(200, "image/png", mask.clone()));
    fake.push(b64_answer(&[png(64, 1)], &fake));
    let image_url = format!("{}/uploads/source.png", fake.base_url());
    let mask_url = format!("{}/uploads/mask.png", fake.base_url());
    let resp = generate(
        &gw,
        json!({"model": "gpt-image-1", "prompt": "p", "image": image_url, "mask": mask_url}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests();
    assert_eq!(sent.len(), 3, "two downloads and one edit");
    let downloads: Vec<&Recorded> = sent.iter().filter(|r| r.method == "GET").collect();
    let mut paths: Vec<&str> = downloads.iter().map(|r| r.path.as_str()).collect();
    paths.sort_unstable();
    assert_eq!(paths, ["/uploads/mask.png", "/uploads/source.png"]);
    for d in &downloads {
        assert!(
            d.header("authorization").is_none(),
            "download carried the key"
        );
    }
    let edit = sent.iter().find(|r| r.method == "POST").unwrap();
    assert_eq!(edit.path, EDITS);
    let parts = form_parts(edit);
    assert_eq!(
        names(&parts),
        [
            "image",
            "mask",
            "prompt",
            "model",
            "n",
            "size",
            "output_format"
        ]
    );
    assert_eq!(
        part(&parts, "image"),
        &file("image", "image.png", "image/png", &image)
    );
    assert_eq!(
        part(&parts, "mask"),
        &file("mask", "mask.png", "image/png", &mask)
    );
}

#[test]
fn edits_take_png_jpeg_or_webp_and_a_png_mask() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let gif = b"GIF89a\x01\x00\x01\x00".to_vec();
    let jpeg = [&[0xFF, 0xD8, 0xFF, 0xE0][..], &[1u8; 100][..]].concat();
    let resp = generate(
        &gw,
        json!({"model": "gpt-image-2", "prompt": "p", "image": b64(&gif)}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "validation_error");
    let detail = body["details"]["image"].as_str().unwrap();
    assert!(detail.contains("image/gif"), "{detail}");

    let resp = generate(
        &gw,
        json!({"model": "gpt-image-2", "prompt": "p", "image": b64(&png(100, 1)), "mask": b64(&jpeg)}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]["mask"]
        .as_str()
        .unwrap()
        .contains("PNG"));
    assert!(fake.requests().is_empty(), "a refused edit reached OpenAI");
}

#[test]
fn revised_prompts_reach_the_caller() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"created": 1700000001, "data": [{"b64_json": b64(&png(64, 1)), "revised_prompt": "a tall lighthouse"}]}),
    ));
    let resp = generate(
        &gw,
        json!({"model": "gpt-image-2", "prompt": "p", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["created"], 1700000001);
    assert_eq!(body["data"][0]["revised_prompt"], "a tall lighthouse");
    assert!(fake.requests()[0].json().get("response_format").is_none());
}

/// Image models OpenAI has shut down (deprecations page: gpt-image-1 on 2026-10-23; DALL·E 2
/// and 3 on 2026-05-12): it answers them 404 `model_not_found`.
const RETIRED: &[&str] = &["gpt-image-1", "dall-e-2", "dall-e-3"];

/// Make `fake` refuse a generation naming a retired model, as OpenAI does, whatever is queued.
fn refuse_retired_models(fake: &FakeProvider) {
    fake.set_handler(|req| {
        if req.method != "POST" || req.path != GENERATIONS {
            return None;
        }
        let model = req.json()["model"].as_str().map(str::to_string)?;
        RETIRED.contains(&model.as_str()).then(|| {
            openai_error(
                404,
                "invalid_request_error",
                json!("model_not_found"),
                &format!("The model `{model}` does not exist or you do not have access to it."),
            )
        })
    });
}

/// A retired model (the configuration still names it) is the operator's problem: the caller gets
/// 503 `model_unavailable` naming the public and the native model and OpenAI's own reason, and the
/// request is not retried into the same refusal.
#[test]
fn a_model_the_provider_no_longer_serves_is_named() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    refuse_retired_models(&fake);
    let resp = generate(
        &gw,
        json!({"model": "gpt-image-1", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 503, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "model_unavailable");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("model gpt-image-1 "), "{message}");
    assert!(message.contains("provider openai"), "{message}");
    assert!(message.contains("does not exist"), "{message}");
    assert_eq!(fake.requests().len(), 1, "not retried");
}

/// The 2.6 models take `complexity` natively; gpt-image-2 does not (its conformance case refuses
/// it).
#[test]
fn gpt_image_2_6_takes_complexity() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports)
            + "    gpt-image-2.6-sunburst: {family: gpt-image-2.6, targets: [{provider: openai, model: gpt-image-2.6-sunburst}]}\n"
    });
    fake.push(b64_answer(&[png(64, 1)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "gpt-image-2.6-sunburst", "prompt": "p", "size": "2560x1440",
               "complexity": "medium", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        fake.requests()[0].json(),
        json!({"model": "gpt-image-2.6-sunburst", "prompt": "p", "n": 1, "size": "2560x1440",
               "output_format": "png", "complexity": "medium"})
    );
}

/// DALL·E 2 and 3 are gone from OpenAI's API: a config that still names their families does not
/// load, and says what replaced them.
#[test]
fn a_config_naming_a_dall_e_family_says_it_was_retired() {
    for family in ["dall-e-2", "dall-e-3"] {
        let yaml = support::config("http://127.0.0.1:1", (1, 2))
            + &format!(
                "    old: {{family: {family}, targets: [{{provider: openai, model: {family}}}]}}\n"
            );
        let errors = match switchyard::config::load_str(&yaml, &|_| None) {
            Ok(_) => panic!("{family}: a retired family loaded"),
            Err(e) => format!("{e:#?}"),
        };
        assert!(
            errors.contains(&format!(
                "switchyard.models.old.family: family `{family}` was retired"
            )),
            "{errors}"
        );
        assert!(errors.contains("12 May 2026"), "{errors}");
        assert!(errors.contains("`gpt-image-2`"), "{errors}");
    }
}

/// The default configuration offers no OpenAI image model that OpenAI has shut down or shuts
/// down on 2026-12-01 (deprecations page), and every OpenAI image model it offers is served.
#[test]
fn the_default_config_offers_no_retired_openai_image_model() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/conf/switchyard.yaml"))
            .unwrap();
    let config: Value = serde_yaml::from_str(&text).unwrap();
    let models = config["switchyard"]["models"]
        .as_object()
        .expect("the default config lists models");
    let gone = [
        "gpt-image-1",
        "gpt-image-1.5",
        "gpt-image-1-mini",
        "chatgpt-image-latest",
    ];
    let mut openai_images = 0;
    for (name, model) in models {
        assert!(!gone.contains(&name.as_str()), "{name} is offered");
        for target in model["targets"].as_array().into_iter().flatten() {
            let native = target["model"].as_str().unwrap_or_default();
            assert!(!gone.contains(&native), "{name} targets {native}");
            if target["provider"] == "openai" && native.starts_with("gpt-image") {
                openai_images += 1;
            }
        }
    }
    assert!(
        openai_images >= 5,
        "the current GPT image models are offered"
    );
}

/// OpenAI's answer says what it billed (`usage`) and what it made (`output_format`, `size`,
/// `quality`, `background`); the caller gets all of it, JPEG spelled as the caller spelled it
/// (`jpg`, or `jpeg`), and an answer that says none of it adds nothing.
#[test]
fn the_answer_carries_openais_usage_and_what_it_made() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"created": 1713833628, "data": [{"b64_json": b64(&png(64, 1))}, {"b64_json": b64(&png(64, 2))}],
               "background": "opaque", "output_format": "jpeg", "size": "1536x1024", "quality": "medium",
               "usage": {"total_tokens": 2150, "input_tokens": 50, "output_tokens": 2100,
                         "input_tokens_details": {"text_tokens": 10, "image_tokens": 40},
                         "output_tokens_details": {"image_tokens": 2100}}}),
    ));
    let resp = generate(
        &gw,
        json!({"model": "gpt-image-2", "prompt": "p", "n": 2, "size": "auto", "output_format": "jpg",
               "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["data"].as_array().unwrap().len(), 2);
    assert_eq!(
        body["usage"],
        json!({"total_tokens": 2150, "input_tokens": 50, "output_tokens": 2100,
               "input_tokens_details": {"text_tokens": 10, "image_tokens": 40},
               "output_tokens_details": {"image_tokens": 2100}})
    );
    assert_eq!(body["output_format"], "jpg");
    assert_eq!(body["size"], "1536x1024");
    assert_eq!(body["quality"], "medium");
    assert_eq!(body["background"], "opaque");

    fake.push(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": b64(&png(64, 3))}]}),
    ));
    let resp = generate(
        &gw,
        json!({"model": "gpt-image-2", "prompt": "p", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let body = resp.json();
    for absent in ["usage", "output_format", "size", "quality", "background"] {
        assert!(body.get(absent).is_none(), "{absent}: {body}");
    }

    // A caller that spells it `jpeg`, as OpenAI's SDKs do, reads `jpeg` back.
    fake.push(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": b64(&png(64, 4))}], "output_format": "jpeg"}),
    ));
    let resp = generate(
        &gw,
        json!({"model": "gpt-image-2", "prompt": "p", "output_format": "jpeg",
               "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["output_format"], "jpeg");
}

/// OpenAI's spec: "`gpt-image-2` and `gpt-image-2-2026-04-21` ignore" `input_fidelity`. A field
/// the model ignores is refused rather than silently without effect (on the 2.6 models too: no
/// source says they honour it); the gpt-image family still takes it.
#[test]
fn input_fidelity_is_refused_where_the_model_ignores_it() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports)
            + "    gpt-image-2.6-flare: {family: gpt-image-2.6, targets: [{provider: openai, model: gpt-image-2.6-flare}]}\n"
    });
    for model in ["gpt-image-2", "gpt-image-2.6-flare"] {
        let resp = generate(
            &gw,
            json!({"model": model, "prompt": "p", "image": b64(&png(100, 1)), "input_fidelity": "high"}),
        );
        assert_eq!(resp.status, 400, "{}", resp.text());
        let detail = resp.json()["details"]["input_fidelity"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(detail.contains("unknown field"), "{detail}");
        assert!(!detail.contains("input_fidelity"), "{detail}");
    }
    assert!(
        fake.requests().is_empty(),
        "a refused request reached OpenAI"
    );
}

/// Azure OpenAI answers in OpenAI's shape, so its usage and output facts reach the caller too.
#[test]
fn azure_answers_carry_the_same_usage() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        200,
        json!({"created": 5, "data": [{"b64_json": b64(&png(64, 1))}], "size": "1024x1024",
               "output_format": "png", "quality": "low", "background": "opaque",
               "usage": {"input_tokens": 9, "output_tokens": 272, "total_tokens": 281}}),
    ));
    let resp = generate(
        &gw,
        json!({"model": "azure-gpt-image-2", "prompt": "p", "quality": "low",
               "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let body = resp.json();
    assert_eq!(
        body["usage"],
        json!({"input_tokens": 9, "output_tokens": 272, "total_tokens": 281})
    );
    assert_eq!(
        (
            &body["size"],
            &body["output_format"],
            &body["quality"],
            &body["background"]
        ),
        (
            &json!("1024x1024"),
            &json!("png"),
            &json!("low"),
            &json!("opaque")
        )
    );
    assert!(fake.requests()[0].path.contains("gpt-image-2-deployment"));
}
