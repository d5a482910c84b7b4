//! Azure OpenAI images end to end against a fake Azure: gpt-image-2 through a deployment URL
//! (`azure`, with an api-version) and a GPT image model through the v1 URL (`azure-v1`), both
//! keyed with `api-key`. Then what is Azure's own: content-filter refusals as errors and inside a
//! 200 answer (the image's and the prompt's verdicts, both on each `data[]` item), verdicts beside
//! delivered images ignored, and a deployment that no longer exists named to the caller.

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{
    self as conformance, b64, form_parts, image_conformance, part, png, Answers, ImageCase,
    Reference,
};
use support::{post, TestGateway, PROVIDER_KEY};

const DEPLOYMENT_PATH: &str =
    "/openai/deployments/gpt-image-2-deployment/images/generations?api-version=2025-03-01-preview";
const V1_GENERATIONS: &str = "/openai/v1/images/generations";
const V1_EDITS: &str = "/openai/v1/images/edits";

// ---- native answers --------------------------------------------------------------------------

/// Azure's verdicts for an image nothing was filtered from.
fn clean_verdicts() -> Value {
    json!({
        "hate": {"filtered": false, "severity": "safe"},
        "self_harm": {"filtered": false, "severity": "safe"},
        "sexual": {"filtered": false, "severity": "safe"},
        "violence": {"filtered": false, "severity": "safe"}
    })
}

/// Azure's verdicts on a prompt nothing was filtered from.
fn clean_prompt_verdicts() -> Value {
    json!({
        "jailbreak": {"filtered": false, "detected": false},
        "profanity": {"filtered": false, "detected": false}
    })
}

fn answer(data: Vec<Value>) -> Reply {
    Reply::json(200, json!({"created": 1713833628, "data": data}))
}

/// GPT image on Azure: base64 with the image's and the prompt's verdicts on each item.
fn b64_answer(images: &[Vec<u8>], _fake: &FakeProvider) -> Reply {
    answer(
        images
            .iter()
            .map(|i| {
                json!({"b64_json": b64(i), "content_filter_results": clean_verdicts(),
                       "prompt_filter_results": clean_prompt_verdicts()})
            })
            .collect(),
    )
}

fn azure_error(status: u16, body: Value) -> Reply {
    Reply::json(status, json!({ "error": body }))
}

/// An answer whose only image the output filter withheld.
fn filtered_answer() -> Reply {
    answer(vec![json!({"content_filter_results": {
        "hate": {"filtered": false, "severity": "safe"},
        "violence": {"filtered": true, "severity": "high"}
    }})])
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            azure_error(
                400,
                json!({"code": "contentFilter", "message": "Your task failed as a result of our safety system."}),
            ),
            400,
            "content_policy_violation",
        ),
        (
            azure_error(
                400,
                json!({"code": "content_policy_violation", "type": "invalid_request_error",
                       "message": "Your request was rejected as a result of our safety system.",
                       "inner_error": {"code": "ResponsibleAIPolicyViolation",
                                       "content_filter_results": {"violence": {"filtered": true, "severity": "high"}}}}),
            ),
            400,
            "content_policy_violation",
        ),
        (
            azure_error(
                400,
                json!({"code": "content_filter", "message": "The response was filtered",
                       "innererror": {"code": "ResponsibleAIPolicyViolation"}}),
            ),
            400,
            "content_policy_violation",
        ),
        (filtered_answer(), 400, "content_policy_violation"),
        (
            azure_error(
                400,
                json!({"code": "invalid_request", "message": "Invalid size."}),
            ),
            400,
            "invalid_request",
        ),
        (
            azure_error(
                401,
                json!({"code": "401", "message": format!("Access denied due to invalid subscription key {PROVIDER_KEY}.")}),
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            azure_error(
                404,
                json!({"code": "DeploymentNotFound", "message": "The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."}),
            ),
            503,
            "model_unavailable",
        ),
        (
            azure_error(
                429,
                json!({"code": "429", "message": "Requests have exceeded the call rate limit."}),
            ),
            429,
            "rate_limited",
        ),
        (
            azure_error(
                500,
                json!({"code": "InternalServerError", "message": "oops"}),
            ),
            502,
            "upstream_error",
        ),
        (answer(vec![]), 502, "upstream_bad_response"),
    ]
}

// ---- reading native requests -----------------------------------------------------------------

fn native_n(req: &Recorded) -> u64 {
    req.json()["n"]
        .as_u64()
        .expect("no n in the native request")
}

fn reference(req: &Recorded) -> Reference {
    assert_eq!(req.path, V1_EDITS);
    Reference::Bytes(part(&form_parts(req), "image").data.clone())
}

/// The `image` file part of an edit sent to the deployment URL.
fn deployment_reference(req: &Recorded) -> Reference {
    assert_eq!(
        req.path,
        "/openai/deployments/gpt-image-2-deployment/images/edits?api-version=2025-03-01-preview"
    );
    Reference::Bytes(part(&form_parts(req), "image").data.clone())
}

/// Azure takes its key in `api-key`, never as a Bearer token.
fn check_auth(req: &Recorded) {
    assert_eq!(req.header("api-key"), Some(PROVIDER_KEY));
    assert!(req.header("authorization").is_none());
}

fn check_gpt_image_2_full(req: &Recorded) {
    assert_eq!(req.path, DEPLOYMENT_PATH);
    check_auth(req);
    assert_eq!(
        req.json(),
        json!({"model": "gpt-image-2-deployment", "prompt": conformance::PROMPT, "n": 1,
               "size": "2160x3840", "quality": "medium", "output_format": "png",
               "background": "auto"})
    );
}

fn check_gpt_image_full(req: &Recorded) {
    assert_eq!(req.path, V1_GENERATIONS);
    check_auth(req);
    assert_eq!(
        req.json(),
        json!({"model": "gpt-image-deployment", "prompt": conformance::PROMPT, "n": 1,
               "size": "1536x1024", "quality": "low", "output_format": "jpeg",
               "background": "opaque", "moderation": "auto"})
    );
}

// ---- conformance -----------------------------------------------------------------------------

image_conformance!(
    azure_gpt_image_2_deployment_conformance,
    ImageCase {
        model: "azure-gpt-image-2",
        base: json!({}),
        full: json!({"size": "2160x3840", "quality": "medium", "background": "auto"}),
        check_full: check_gpt_image_2_full,
        answer: b64_answer,
        answers: Answers::Inline,
        sizes: &["1024x1024", "1792x1024", "3840x1280", "auto"],
        rejected_sizes: &["512x512", "1000x1000", "3840x2176"],
        qualities: &["auto", "low", "medium", "high"],
        rejected_qualities: &["standard", "hd"],
        max_n: 10,
        per_call_n: 10,
        native_n: Some(native_n),
        rejected: vec![
            ("negative_prompt", json!("blurry")),
            ("watermark", json!(true)),
            ("style", json!("vivid")),
        ],
        reference: Some(deployment_reference),
        errors,
    }
);

image_conformance!(
    azure_gpt_image_v1_conformance,
    ImageCase {
        model: "azure-gpt-image",
        base: json!({}),
        full: json!({"aspect_ratio": "3:2", "quality": "low", "output_format": "jpg",
                 "background": "opaque", "moderation": "auto"}),
        check_full: check_gpt_image_full,
        answer: b64_answer,
        answers: Answers::Inline,
        sizes: &["1024x1024", "1536x1024", "1024x1536", "auto"],
        rejected_sizes: &["1792x1024", "256x256"],
        qualities: &["auto", "low", "medium", "high"],
        rejected_qualities: &["hd", "standard"],
        max_n: 10,
        per_call_n: 10,
        native_n: Some(native_n),
        rejected: vec![
            ("negative_prompt", json!("blurry")),
            ("style_preset", json!("anime")),
            ("watermark", json!(true)),
            ("style", json!("natural")),
        ],
        reference: Some(reference),
        errors,
    }
);

// ---- Azure's own behaviour -------------------------------------------------------------------

fn generate(gw: &TestGateway, body: Value) -> support::client::Response {
    post(gw, "/api/v1/images/generations", &body)
}

#[test]
fn a_filtered_image_is_refused_without_retrying() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(filtered_answer());
    let resp = generate(
        &gw,
        json!({"model": "azure-gpt-image-2", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "content_policy_violation");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("violence"), "{message}");
    assert_eq!(fake.requests().len(), 1, "moderation is not retried");
}

#[test]
fn content_filter_errors_are_not_retried() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(azure_error(
        400,
        json!({"code": "contentFilter", "message": "Your task failed as a result of our safety system."}),
    ));
    let resp = generate(
        &gw,
        json!({"model": "azure-gpt-image", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "content_policy_violation");
    assert!(body["message"].as_str().unwrap().contains("safety system"));
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn gpt_image_edits_go_to_the_v1_edits_url() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let image = png(80_000, 3);
    let mask = png(1_000, 4);
    fake.push(b64_answer(&[png(64, 1)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "azure-gpt-image", "prompt": "p", "image": b64(&image), "mask": b64(&mask),
               "background": "transparent", "output_format": "webp"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests();
    assert_eq!(sent[0].path, V1_EDITS);
    check_auth(&sent[0]);
    let parts = form_parts(&sent[0]);
    let texts: Vec<(String, String)> = parts
        .iter()
        .filter(|p| p.filename.is_none())
        .map(|p| (p.name.clone(), p.text()))
        .collect();
    let want: Vec<(String, String)> = [
        ("prompt", "p"),
        ("model", "gpt-image-deployment"),
        ("n", "1"),
        ("size", "1024x1024"),
        ("output_format", "webp"),
        ("background", "transparent"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(texts, want);
    assert_eq!(part(&parts, "image").data, image);
    assert_eq!(part(&parts, "mask").data, mask);
    assert_eq!(
        part(&parts, "mask").content_type.as_deref(),
        Some("image/png")
    );
}

/// The prompt's verdicts sit on each `data[]` item (Azure's `ImageResult`), not beside `data`: a
/// prompt filtered there is a content refusal naming the category.
#[test]
fn a_filtered_prompt_on_the_image_item_is_a_content_refusal() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(answer(vec![json!({
        "content_filter_results": clean_verdicts(),
        "prompt_filter_results": {"jailbreak": {"filtered": true, "detected": true},
                                  "profanity": {"filtered": false, "detected": false}}
    })]));
    let resp = generate(
        &gw,
        json!({"model": "azure-gpt-image", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "content_policy_violation");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("(jailbreak)"), "{message}");
    assert_eq!(fake.requests().len(), 1, "moderation is not retried");
}

/// A deployment that is gone (say, of a retired model) is the operator's problem: 503
/// `model_unavailable` naming the public model and the deployment, not retried.
#[test]
fn a_deployment_that_does_not_exist_is_named() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(azure_error(
        404,
        json!({"code": "DeploymentNotFound", "message": "The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."}),
    ));
    let resp = generate(
        &gw,
        json!({"model": "azure-gpt-image-2", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 503, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "model_unavailable");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("model azure-gpt-image-2 "), "{message}");
    assert!(message.contains("gpt-image-2-deployment"), "{message}");
    assert!(message.contains("provider azure"), "{message}");
    assert_eq!(fake.requests().len(), 1, "not retried");
}
