//! Zhipu images (CogView-4, GLM-Image) end to end against a fake Zhipu: the shared conformance
//! cases, then what is Zhipu's own: one image per call (fan-out for `n`, all or error), the
//! watermark sent only when the caller names it, custom sizes within each family's rule, URL
//! answers downloaded for `b64_json`, and the business-code errors (1301 moderation, 1211 unknown
//! model) whether they come with an error status or inside a 200.

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Recorded, Reply};
use support::image_conformance::{
    self as conformance, b64, fake_url, image_conformance, png, unb64, Answers, ImageCase,
};
use support::{config, post, TestGateway, PROVIDER_KEY};

const PATH: &str = "/api/paas/v4/images/generations";
const COGVIEW_4: &str = "cogview-4-250304";

// ---- native answers --------------------------------------------------------------------------

/// Zhipu's answer linking to its one image on the fake's own host (whoever wants the bytes
/// pushes them as the fake's next replies).
fn url_answer(images: &[Vec<u8>], fake: &FakeProvider) -> Reply {
    let data: Vec<Value> = (0..images.len())
        .map(|i| json!({"url": fake_url(fake, &format!("{i}.png"))}))
        .collect();
    Reply::json(
        200,
        json!({
            "created": 1760000000,
            "data": data,
            "content_filter": [{"role": "assistant", "level": 3}]
        }),
    )
}

fn zhipu_error(status: u16, code: &str) -> Reply {
    Reply::json(
        status,
        json!({"error": {
            "code": code,
            "message": format!("{code}: refused for key {PROVIDER_KEY}")
        }}),
    )
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    vec![
        (zhipu_error(400, "1214"), 400, "invalid_request"),
        (zhipu_error(400, "1301"), 400, "content_policy_violation"),
        (zhipu_error(401, "1002"), 502, "upstream_auth_failed"),
        (zhipu_error(401, "1000"), 502, "upstream_auth_failed"),
        (zhipu_error(429, "1302"), 429, "rate_limited"),
        (zhipu_error(429, "1303"), 429, "rate_limited"),
        // Arrears and used-up quotas are the operator's problem.
        (zhipu_error(429, "1113"), 502, "upstream_error"),
        (zhipu_error(429, "1304"), 502, "upstream_error"),
        (zhipu_error(429, "1308"), 502, "upstream_error"),
        (zhipu_error(400, "1211"), 503, "model_unavailable"),
        (zhipu_error(500, "500"), 502, "upstream_error"),
        // The same envelope inside a 200 is classified by its code.
        (zhipu_error(200, "1301"), 400, "content_policy_violation"),
        (zhipu_error(200, "1214"), 400, "invalid_request"),
        (
            Reply::json(200, json!({"created": 1, "data": []})),
            502,
            "upstream_bad_response",
        ),
    ]
}

// ---- reading native requests -----------------------------------------------------------------

fn check_cogview_full(req: &Recorded) {
    assert_eq!(req.path, PATH);
    conformance::assert_bearer(req);
    assert_eq!(
        req.json(),
        json!({
            "model": COGVIEW_4,
            "prompt": conformance::PROMPT,
            "size": "864x1152",
            "quality": "hd",
            "watermark_enabled": true,
            "user_id": "user-123456"
        })
    );
}

// ---- conformance -----------------------------------------------------------------------------

image_conformance!(
    cogview_4_conformance,
    ImageCase {
        model: "cogview-4",
        base: json!({}),
        full: json!({
            "aspect_ratio": "3:4",
            "quality": "hd",
            "n": 1,
            "output_format": "png",
            "watermark": true,
            "user_id": "user-123456"
        }),
        check_full: check_cogview_full,
        answer: url_answer,
        answers: Answers::Url,
        sizes: &[
            "1024x1024",
            "768x1344",
            "864x1152",
            "1344x768",
            "1152x864",
            "1440x720",
            "720x1440",
        ],
        // Custom sizes must keep to sides 512–2048 px, multiples of 16, at most 2^21 pixels.
        rejected_sizes: &[
            "2048x2048",
            "1000x1000",
            "496x512",
            "2064x512",
            "1024*1024",
            "auto",
        ],
        qualities: &["standard", "hd"],
        rejected_qualities: &["auto", "low", "std", "pro"],
        max_n: 10,
        per_call_n: 1,
        native_n: None,
        rejected: vec![
            ("negative_prompt", json!("blurry")),
            ("strength", json!(0.5)),
            ("mask", json!(b64(&png(100, 9)))),
            ("style_preset", json!("anime")),
            ("background", json!("transparent")),
            ("output_format", json!("jpg")),
            ("aspect_ratio", json!("16:9")),
            ("seed", json!(7)),
            ("request_id", json!("r-1")),
            ("extra_body.sequential_image_generation", json!("auto")),
        ],
        reference: None,
        errors,
    }
);

// ---- Zhipu's own behaviour -------------------------------------------------------------------

fn generate(gw: &TestGateway, body: Value) -> support::client::Response {
    post(gw, "/api/v1/images/generations", &body)
}

#[test]
fn n_fans_out_one_image_per_call_without_n() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for i in 0..3 {
        fake.push(url_answer(&[png(64, i)], &fake));
    }
    let resp = generate(
        &gw,
        json!({"model": "cogview-4", "prompt": "p", "n": 3, "size": "1344x768"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["created"], 1760000000);
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    for d in data {
        let url = d["url"].as_str().unwrap();
        assert!(url.starts_with(&fake.base_url()), "{url}");
    }
    let sent = fake.requests();
    assert_eq!(sent.len(), 3, "one native call per image");
    for req in &sent {
        assert_eq!(req.path, PATH);
        let native = req.json();
        assert!(native.get("n").is_none(), "{native}");
        assert_eq!(native["size"], "1344x768");
    }
}

#[test]
fn one_failed_call_fails_the_whole_request() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(url_answer(&[png(64, 1)], &fake));
    fake.push(zhipu_error(500, "500"));
    fake.push(url_answer(&[png(64, 2)], &fake));
    let resp = generate(&gw, json!({"model": "cogview-4", "prompt": "p", "n": 3}));
    assert_eq!(resp.status, 502, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "upstream_error");
    assert!(body.get("data").is_none(), "partial result: {body}");
}

/// Zhipu marks images unless told otherwise, and `watermark_enabled: false` is honoured only for
/// accounts that signed its disclaimer: a request that names no watermark sends none (Zhipu's
/// default applies and no account privilege is needed); a caller's explicit choice, either way,
/// is sent as asked.
#[test]
fn the_watermark_is_sent_only_when_the_caller_names_it() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for (asked, sent) in [
        (None, None),
        (Some(false), Some(false)),
        (Some(true), Some(true)),
    ] {
        fake.push(url_answer(&[png(64, 1)], &fake));
        let mut body = json!({"model": "cogview-4", "prompt": "p"});
        if let Some(w) = asked {
            body["watermark"] = json!(w);
        }
        let resp = generate(&gw, body);
        assert_eq!(resp.status, 200, "{}", resp.text());
        let mut want = json!({"model": COGVIEW_4, "prompt": "p", "size": "1024x1024"});
        if let Some(w) = sent {
            want["watermark_enabled"] = json!(w);
        }
        assert_eq!(fake.requests().last().unwrap().json(), want, "{asked:?}");
    }
}

/// CogView takes any size within its rule, not only the recommended ones; outside the rule the
/// caller's 400 names `size` and nothing is sent.
#[test]
fn cogview_takes_custom_sizes_within_its_rule() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(url_answer(&[png(64, 1)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "cogview-4", "prompt": "p", "size": "1600x1200"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests()[0].json()["size"], "1600x1200");

    let resp = generate(
        &gw,
        json!({"model": "cogview-4", "prompt": "p", "size": "2048x1040"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let size = resp.json()["details"]["size"].as_str().unwrap().to_string();
    assert!(size.contains("multiples of 16"), "{size}");
    assert_eq!(fake.requests().len(), 1);
}

/// A model Zhipu does not serve (1211 "model does not exist"): 503 `model_unavailable` naming the
/// public and native model, not retried.
#[test]
fn a_model_the_provider_no_longer_serves_is_named() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        400,
        json!({"error": {"code": "1211", "message": "模型不存在，请检查模型代码。"}}),
    ));
    let resp = generate(
        &gw,
        json!({"model": "cogview-4", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 503, "{}", resp.text());
    let out = resp.json();
    assert_eq!(out["code"], "model_unavailable");
    let message = out["message"].as_str().unwrap();
    assert!(message.contains("model cogview-4 "), "{message}");
    assert!(
        message.contains(&format!(
            "provider zhipu does not serve its configured model {COGVIEW_4}"
        )),
        "{message}"
    );
    assert!(message.contains("模型不存在"), "{message}");
    assert_eq!(fake.requests().len(), 1, "not retried");
}

#[test]
fn b64_json_downloads_each_url_from_the_provider_host() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let images = [png(2_000, 1), png(3_000, 2)];
    for img in &images {
        fake.push(url_answer(std::slice::from_ref(img), &fake));
    }
    // Every call's answer links to `0.png`; the downloads come after both calls, in any order,
    // so both serve the same bytes.
    fake.set_default(Reply::bytes(200, "image/png", images[0].clone()));
    let resp = generate(
        &gw,
        json!({"model": "cogview-4", "prompt": "p", "n": 2, "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let data = resp.json()["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 2);
    for d in &data {
        assert!(d.get("url").is_none());
        assert_eq!(unb64(d["b64_json"].as_str().unwrap()), images[0]);
    }
    let sent = fake.requests();
    let downloads: Vec<&Recorded> = sent.iter().filter(|r| r.method == "GET").collect();
    assert_eq!(downloads.len(), 2);
    for d in downloads {
        assert_eq!(d.path, "/results/0.png");
        assert!(
            d.header("authorization").is_none(),
            "download carried the key"
        );
    }
}

#[test]
fn moderation_is_a_content_policy_violation_and_not_retried() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        400,
        json!({"error": {"code": "1301", "message": "系统检测到输入或生成内容可能包含不安全或敏感内容"}}),
    ));
    let resp = generate(
        &gw,
        json!({"model": "cogview-4", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "content_policy_violation");
    assert!(
        body["message"].as_str().unwrap().contains("敏感内容"),
        "{body}"
    );
    assert_eq!(fake.requests().len(), 1, "moderation is not retried");

    // The same refusal inside a 200.
    fake.push(zhipu_error(200, "1301"));
    let resp = generate(
        &gw,
        json!({"model": "cogview-4", "prompt": "p", "retries": 2}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert_eq!(resp.json()["code"], "content_policy_violation");
    assert_eq!(fake.requests().len(), 2, "moderation is not retried");
}

#[test]
fn rate_limits_are_retried() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(zhipu_error(429, "1302"));
    fake.push(url_answer(&[png(64, 1)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "cogview-4", "prompt": "p", "retries": 1}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests().len(), 2);
}

/// The test config plus a GLM-Image model.
fn config_with_glm_image(fake_url: &str, ports: (u16, u16)) -> String {
    let mut yaml = config(fake_url, ports);
    yaml.push_str(
        "    glm-image: {family: glm-image, targets: [{provider: zhipu, model: glm-image}]}\n",
    );
    yaml
}

#[test]
fn glm_image_has_its_own_sizes_and_only_hd() {
    let fake = FakeProvider::start();
    let base = fake.base_url();
    let gw = TestGateway::start_with(|ports| config_with_glm_image(&base, ports));
    fake.push(url_answer(&[png(64, 1)], &fake));
    let resp = generate(&gw, json!({"model": "glm-image", "prompt": "p"}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        fake.requests()[0].json(),
        json!({
            "model": "glm-image",
            "prompt": "p",
            "size": "1280x1280"
        })
    );

    fake.push(url_answer(&[png(64, 2)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "glm-image", "prompt": "p", "aspect_ratio": "9:16", "quality": "hd"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let native = fake.requests()[1].json();
    assert_eq!(native["size"], "960x1728");
    assert_eq!(native["quality"], "hd");

    // A custom size within GLM-Image's rule (sides 1024–2048 px, multiples of 32, ≤ 2^22 pixels).
    fake.push(url_answer(&[png(64, 3)], &fake));
    let resp = generate(
        &gw,
        json!({"model": "glm-image", "prompt": "p", "size": "2048x1536"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests()[2].json()["size"], "2048x1536");

    let resp = generate(
        &gw,
        json!({"model": "glm-image", "prompt": "p", "size": "1024x1008", "quality": "standard"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let details = &resp.json()["details"];
    assert!(details.get("size").is_some() && details.get("quality").is_some());
    assert_eq!(fake.requests().len(), 3, "a refused request reached Zhipu");
}
