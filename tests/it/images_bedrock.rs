//! Stability AI's models on Amazon Bedrock (`InvokeModel`, `POST /model/{modelId}/invoke`) through
//! the image conformance cases, against a fake that checks every request's AWS Signature Version
//! 4 by recomputing it from what it received (its own implementation of AWS's documented
//! algorithm, the model id in the path encoded once more as AWS signs every non-S3 path), and
//! what is Bedrock's own: the JSON body, one call per image, a filtered result refused.

use crate::support;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{
    self as conformance, b64, image_conformance, png, Answers, ImageCase,
};
use support::{post, TestGateway, AWS_ACCESS_KEY_ID, AWS_SECRET, AWS_SESSION_TOKEN};

const PATH: &str = "/model/stability.stable-image-ultra-v1%3A1/invoke";
const REGION: &str = "us-west-2";

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

fn mac(key: &[u8], data: &str) -> Vec<u8> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).unwrap();
    m.update(data.as_bytes());
    m.finalize().into_bytes().to_vec()
}

/// Each path segment as received, URI-encoded once more (AWS's rule for every service but S3).
fn canonical_path(path: &str) -> String {
    path.split('/')
        .map(|seg| {
            seg.bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The fake's side of SigV4 for signing name `bedrock`, with the session token.
fn assert_signed(req: &Recorded) {
    let date = req.header("x-amz-date").expect("x-amz-date");
    assert_eq!(req.header("x-amz-security-token"), Some(AWS_SESSION_TOKEN));
    let day = &date[..8];
    let signed = "content-type;host;x-amz-date;x-amz-security-token";
    let canonical = format!(
        "{}\n{}\n\ncontent-type:{}\nhost:{}\nx-amz-date:{date}\nx-amz-security-token:{AWS_SESSION_TOKEN}\n\n{signed}\n{}",
        req.method,
        canonical_path(&req.path),
        req.header("content-type").unwrap(),
        req.header("host").unwrap(),
        hex::encode(Sha256::digest(&req.body)),
    );
    let scope = format!("{day}/{REGION}/bedrock/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{date}\n{scope}\n{}",
        hex::encode(Sha256::digest(canonical.as_bytes()))
    );
    let k = mac(format!("AWS4{AWS_SECRET}").as_bytes(), day);
    let k = mac(&k, REGION);
    let k = mac(&k, "bedrock");
    let k = mac(&k, "aws4_request");
    let signature = hex::encode(mac(&k, &to_sign));
    assert_eq!(
        req.header("authorization"),
        Some(
            format!(
                "AWS4-HMAC-SHA256 Credential={AWS_ACCESS_KEY_ID}/{scope}, SignedHeaders={signed}, Signature={signature}"
            )
            .as_str()
        ),
        "the fake's signature differs from the gateway's"
    );
    assert!(!req.headers.iter().any(|(_, v)| v.contains(AWS_SECRET)));
    assert_eq!(req.header("service-api-key"), None);
}

// ---- native answers --------------------------------------------------------------------------

/// Bedrock's answer for Stability: one image per call.
fn answer(images: &[Vec<u8>], _fake: &FakeProvider) -> Reply {
    assert_eq!(
        images.len(),
        1,
        "Stability on Bedrock answers one image per call"
    );
    Reply::json(
        200,
        json!({"seeds": [2130420379u32], "finish_reasons": [null], "images": [b64(&images[0])]}),
    )
}

fn aws_error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::json(status, json!({"message": message})).with_header("x-amzn-ErrorType", kind)
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (
            aws_error(
                400,
                "ValidationException",
                "Malformed input request: #: extraneous key [quality] is not permitted",
            ),
            400,
            "invalid_request",
        ),
        (
            aws_error(
                403,
                "AccessDeniedException",
                "You don't have access to the model with the specified model ID.",
            ),
            503,
            "model_unavailable",
        ),
        (
            aws_error(
                403,
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            aws_error(429, "ThrottlingException", "Too many requests"),
            429,
            "rate_limited",
        ),
        (
            aws_error(500, "InternalServerException", "internal error"),
            502,
            "upstream_error",
        ),
        (
            Reply::json(200, json!({"finish_reasons": ["Filter reason: prompt"]})),
            400,
            "content_policy_violation",
        ),
        (
            Reply::json(
                200,
                json!({"seeds": [1], "finish_reasons": [null], "images": []}),
            ),
            502,
            "upstream_bad_response",
        ),
    ]
}

// ---- reading native requests -----------------------------------------------------------------

fn check_full(req: &Recorded) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, PATH);
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.header("accept"), Some("application/json"));
    assert_eq!(
        req.json(),
        json!({
            "prompt": conformance::PROMPT,
            "aspect_ratio": "21:9",
            "negative_prompt": "blurry, text",
            "output_format": "jpeg",
            "seed": 42,
        })
    );
    assert_signed(req);
}

fn rejected() -> Vec<(&'static str, Value)> {
    vec![
        ("watermark", json!(true)),
        ("quality", json!("hd")),
        ("background", json!("transparent")),
        ("mask", json!(b64(&png(100, 1)))),
        ("image", json!(b64(&png(2_000, 1)))),
        ("style_preset", json!("cinematic")),
        ("output_format", json!("webp")),
        ("aspect_ratio", json!("4:3")),
        ("strength", json!(0.5)),
        ("cfg_scale", json!(5)),
        ("extra_body.sequential_image_generation", json!("auto")),
    ]
}

image_conformance!(
    stable_image_ultra_conformance,
    ImageCase {
        model: "bedrock-stable-image-ultra",
        base: json!({}),
        full: json!({
            "negative_prompt": "blurry, text",
            "size": "1536x640",
            "n": 1,
            "output_format": "jpg",
            "seed": 42
        }),
        check_full,
        answer,
        answers: Answers::Inline,
        sizes: SIZES,
        rejected_sizes: &["1792x1024", "512x512", "auto"],
        qualities: &[],
        rejected_qualities: &["hd", "standard", "premium"],
        max_n: 10,
        per_call_n: 1,
        native_n: None,
        rejected: rejected(),
        reference: None,
        errors,
    }
);

// ---- Bedrock's own ---------------------------------------------------------------------------

/// `n` images are `n` signed calls with the defaults: 1:1 and PNG.
#[test]
fn n_images_are_one_signed_call_each() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for i in 0..3 {
        fake.push(answer(&[png(64, i)], &fake));
    }
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "bedrock-stable-image-ultra", "prompt": "p", "n": 3, "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["data"].as_array().unwrap().len(), 3);
    let sent = fake.requests();
    assert_eq!(sent.len(), 3);
    for req in &sent {
        assert_eq!(
            req.json(),
            json!({"prompt": "p", "aspect_ratio": "1:1", "output_format": "png"})
        );
        assert_signed(req);
    }
}

/// A configuration still naming Amazon's retired image families fails to load, saying why.
#[test]
fn retired_amazon_image_families_are_refused() {
    for family in ["bedrock-nova-canvas", "bedrock-titan-image"] {
        let yaml = format!(
            r#"
version: 1
switchyard:
  listeners: [{{name: main, address: "127.0.0.1:1"}}]
  providers:
    bedrock-image: {{kind: bedrock-image, region: us-east-1}}
  models:
    canvas: {{family: {family}, targets: [{{provider: bedrock-image, model: amazon.nova-canvas-v1:0}}]}}
"#
        );
        let err = switchyard::config::load_str(&yaml, &|_| None)
            .err()
            .unwrap_or_else(|| panic!("{family} loaded"));
        let text = err.join("\n");
        assert!(text.contains("bedrock-stability"), "{text}");
    }
}
