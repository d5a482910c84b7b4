//! `POST /api/v1/images/edits` as OpenAI's SDKs send `images.edit` (multipart/form-data), the
//! `jpeg` spelling of `output_format`, and reading a synchronous answer's `task_id` back.
//!
//! The edit form is run as the generations request with `image`/`mask`: the same validation,
//! tasks and adapters, so the image reaches OpenAI as its own edit form byte for byte, Ark as a
//! data URL, and a model that takes no reference image is a 400 naming `image`.

use serde_json::{json, Value};

use crate::support;
use support::fake::{FakeProvider, Reply};
use support::image_conformance::{b64, data_url_bytes, form_parts, part, png, unb64, FormPart};
use support::tasks::{finished, task};
use support::{client, post, redis, TestGateway, KEY};

const BOUNDARY: &str = "sdk-boundary-4f1c";

/// A `multipart/form-data` body: `(name, Some((filename, content type)), data)` for a file part,
/// `(name, None, data)` for a text field.
/// One form part: name, `(filename, content type)` for a file, data.
type Part<'a> = (&'a str, Option<(&'a str, &'a str)>, &'a [u8]);

fn form(parts: &[Part<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, file, data) in parts {
        out.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        let head = match file {
            Some((filename, ct)) => format!(
                "Content-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\nContent-Type: {ct}\r\n\r\n"
            ),
            None => format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n"),
        };
        out.extend_from_slice(head.as_bytes());
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    out
}

fn edit(gw: &TestGateway, body: &[u8]) -> client::Response {
    let ct = format!("multipart/form-data; boundary={BOUNDARY}");
    client::request(
        gw.addr,
        "POST",
        "/api/v1/images/edits",
        &[("Service-API-Key", KEY), ("Content-Type", &ct)],
        body,
    )
}

fn gpt_answer(images: &[Vec<u8>]) -> Reply {
    let data: Vec<Value> = images.iter().map(|i| json!({"b64_json": b64(i)})).collect();
    Reply::json(200, json!({"created": 1713833628, "data": data}))
}

fn file(name: &str, filename: &str, content_type: &str, data: &[u8]) -> FormPart {
    FormPart {
        name: name.into(),
        filename: Some(filename.into()),
        content_type: Some(content_type.into()),
        data: data.to_vec(),
    }
}

fn text(name: &str, value: &str) -> FormPart {
    FormPart {
        name: name.into(),
        filename: None,
        content_type: None,
        data: value.as_bytes().to_vec(),
    }
}

#[test]
fn an_sdk_edit_form_reaches_openai_as_its_edit_form_byte_for_byte() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let image = [&[0xFF, 0xD8, 0xFF, 0xE0][..], &png(60_000, 3)[..]].concat();
    let mask = png(40_000, 4);
    let out = [png(300, 5), png(300, 6)];
    fake.push(gpt_answer(&out));
    let body = form(&[
        ("image", Some(("photo.jpg", "image/jpeg")), &image),
        ("mask", Some(("mask.png", "image/png")), &mask),
        ("prompt", None, b"add a lighthouse"),
        ("model", None, b"gpt-image-1"),
        ("n", None, b"2"),
        ("size", None, b"1536x1024"),
        ("quality", None, b"high"),
        ("response_format", None, b"b64_json"),
        ("output_format", None, b"jpeg"),
        ("background", None, b"opaque"),
        ("user", None, b"1234"),
        ("input_fidelity", None, b"high"),
        ("output_compression", None, b"80"),
    ]);
    let resp = edit(&gw, &body);
    assert_eq!(resp.status, 200, "{}", resp.text());
    let answer = resp.json();
    assert_eq!(answer["task_status"], "succeed");
    let got: Vec<Vec<u8>> = answer["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| unb64(d["b64_json"].as_str().unwrap()))
        .collect();
    assert_eq!(got, out);
    let sent = fake.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].path, "/v1/images/edits");
    assert_eq!(
        form_parts(&sent[0]),
        vec![
            file("image", "image.jpg", "image/jpeg", &image),
            file("mask", "mask.png", "image/png", &mask),
            text("prompt", "add a lighthouse"),
            text("model", "gpt-image-1"),
            text("n", "2"),
            text("size", "1536x1024"),
            text("quality", "high"),
            text("output_format", "jpeg"),
            text("background", "opaque"),
            text("input_fidelity", "high"),
            text("output_compression", "80"),
            text("user", "1234"),
        ]
    );
}

#[test]
fn several_images_reach_openai_as_image_array_parts() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let (a, b) = (png(3_000, 1), png(4_000, 2));
    let c = png(5_000, 3);
    // A URL among the files is downloaded by the gateway and sent as a file like the others.
    fake.push(Reply::bytes(200, "image/png", c.clone()));
    fake.push(gpt_answer(&[png(64, 9)]));
    let url = format!("{}/uploads/c.png", fake.base_url());
    let resp = edit(
        &gw,
        &form(&[
            ("image[]", Some(("a.png", "image/png")), &a),
            ("image[]", Some(("b.png", "image/png")), &b),
            ("image[]", None, url.as_bytes()),
            ("prompt", None, b"combine them"),
            ("model", None, b"gpt-image-2"),
        ]),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests();
    let edit = sent.iter().find(|r| r.method == "POST").unwrap();
    let parts = form_parts(edit);
    let images: Vec<&FormPart> = parts.iter().filter(|p| p.name == "image[]").collect();
    assert_eq!(
        images,
        [
            &file("image[]", "image.png", "image/png", &a),
            &file("image[]", "image-2.png", "image/png", &b),
            &file("image[]", "image-3.png", "image/png", &c),
        ]
    );
    assert!(parts.iter().all(|p| p.name != "image"), "one name per form");
}

#[test]
fn an_edit_reaches_a_json_provider_as_its_reference_image() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let image = png(5_000, 9);
    fake.push(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": b64(&png(64, 1))}]}),
    ));
    let body = form(&[
        ("image", Some(("in.png", "image/png")), &image),
        ("prompt", None, b"p"),
        ("model", None, b"seedream-4"),
        ("response_format", None, b"b64_json"),
        ("retries", None, b"1"),
    ]);
    let resp = edit(&gw, &body);
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests()[0].json();
    assert_eq!(data_url_bytes(sent["image"].as_str().unwrap()), image);
}

/// Seedream fuses several references: an SDK edit with `image[]` parts reaches Ark as its `image`
/// array of data URLs, in order.
#[test]
fn several_edit_images_reach_ark_as_its_image_array() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let (a, b) = (png(3_000, 21), png(4_000, 22));
    fake.push(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": b64(&png(64, 2))}]}),
    ));
    let body = form(&[
        ("image[]", Some(("a.png", "image/png")), &a),
        ("image[]", Some(("b.png", "image/png")), &b),
        ("prompt", None, b"the cat of image 1 on the sofa of image 2"),
        ("model", None, b"seedream-4"),
        ("response_format", None, b"b64_json"),
    ]);
    let resp = edit(&gw, &body);
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests()[0].json();
    let images: Vec<Vec<u8>> = sent["image"]
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {sent}"))
        .iter()
        .map(|i| data_url_bytes(i.as_str().unwrap()))
        .collect();
    assert_eq!(images, [a, b]);
}

#[test]
fn a_model_that_cannot_edit_or_too_many_images_are_400s_naming_image() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let image = png(1_000, 1);
    let resp = edit(
        &gw,
        &form(&[
            ("image", Some(("a.png", "image/png")), &image),
            ("prompt", None, b"p"),
            ("model", None, b"kling-v2-1"),
        ]),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "validation_error");
    assert!(
        body["details"]["image"]
            .as_str()
            .unwrap()
            .contains("model kling-v2-1 does not support image"),
        "{body}"
    );
    let resp = edit(
        &gw,
        &form(&[
            ("image[]", Some(("a.png", "image/png")), &image),
            ("image[]", Some(("b.png", "image/png")), &image),
            ("prompt", None, b"p"),
            // SeedEdit edits one image (Seedream 4.0 now takes up to 14).
            ("model", None, b"seededit-3"),
        ]),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert_eq!(
        resp.json()["details"]["image"],
        "model seededit-3 takes at most 1 reference image(s); 2 were given"
    );
    // No image at all, or the wrong field types, are named too.
    let resp = edit(
        &gw,
        &form(&[
            ("prompt", None, b"p"),
            ("model", None, b"gpt-image-1"),
            ("n", None, b"two"),
        ]),
    );
    let body = resp.json();
    assert_eq!(resp.status, 400, "{body}");
    assert!(body["details"]["image"].is_string(), "{body}");
    assert!(
        fake.requests().is_empty(),
        "a refused edit reached a provider"
    );
}

#[test]
fn malformed_oversized_and_misdirected_edits_are_refused() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let ct = format!("multipart/form-data; boundary={BOUNDARY}");
    let cut =
        format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nno end");
    let resp = edit(&gw, cut.as_bytes());
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]["body"].is_string());
    let resp = client::request(
        gw.addr,
        "POST",
        "/api/v1/images/edits",
        &[("Service-API-Key", KEY), ("Content-Type", "text/plain")],
        b"x",
    );
    assert_eq!(resp.status, 400);
    assert!(resp.json()["details"]["Content-Type"].is_string());
    // Over images_body_bytes (4 MiB in the test config), refused from Content-Length.
    let resp = client::request(
        gw.addr,
        "POST",
        "/api/v1/images/edits",
        &[
            ("Service-API-Key", KEY),
            ("Content-Type", &ct),
            ("Content-Length", "5000000"),
        ],
        b"",
    );
    assert_eq!(resp.status, 413);
    assert_eq!(resp.json()["code"], "payload_too_large");
    let resp = client::request(gw.addr, "GET", "/api/v1/images/edits", &auth_only(), b"");
    assert_eq!(resp.status, 405);
    assert_eq!(resp.header("allow"), Some("POST"));
    let resp = client::request(
        gw.addr,
        "POST",
        "/api/v1/images/edits",
        &[("Content-Type", &ct)],
        &form(&[("prompt", None, b"p")]),
    );
    assert_eq!(resp.status, 401);
}

fn auth_only() -> [(&'static str, &'static str); 1] {
    [("Service-API-Key", KEY)]
}

#[test]
fn an_async_edit_is_a_task() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let out = png(200, 7);
    fake.push(gpt_answer(std::slice::from_ref(&out)));
    let image = png(2_000, 2);
    let resp = edit(
        &gw,
        &form(&[
            ("image", Some(("a.png", "image/png")), &image),
            ("prompt", None, b"p"),
            ("model", None, b"gpt-image-2"),
            ("async", None, b"true"),
            ("response_format", None, b"b64_json"),
        ]),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["task_status"], "running");
    let id = resp.json()["task_id"].as_str().unwrap().to_string();
    let done = finished(&gw, &id);
    assert_eq!(done["task_status"], "succeed", "{done}");
    assert_eq!(unb64(done["data"][0]["b64_json"].as_str().unwrap()), out);
    let parts = form_parts(&fake.requests()[0]);
    assert_eq!(part(&parts, "image").data, image);
}

#[test]
fn jpeg_is_the_same_as_jpg() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(gpt_answer(&[vec![0xFF, 0xD8, 0xFF, 0xE0, 1, 2]]));
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "p", "output_format": "jpeg"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests()[0].json()["output_format"], "jpeg");
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "p", "output_format": "tiff"}),
    );
    assert_eq!(resp.status, 400);
    let detail = resp.json()["details"]["output_format"].clone();
    assert_eq!(
        detail,
        json!("must be one of png, jpg, webp, svg (jpeg is the same as jpg)")
    );
    // A family without JPEG refuses it however it is spelt, naming what it makes.
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "kolors", "prompt": "p", "output_format": "jpeg"}),
    );
    let body = resp.json();
    assert_eq!(resp.status, 400, "{body}");
    assert!(body["details"]["output_format"]
        .as_str()
        .unwrap()
        .starts_with("model kolors accepts:"));
}

#[test]
fn a_synchronous_answer_reads_back_as_its_task_for_its_creator() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let img = png(1_000, 8);
    fake.push(gpt_answer(std::slice::from_ref(&img)));
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "p"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let answer = resp.json();
    let id = answer["task_id"].as_str().unwrap();
    let read = task(&gw, id, KEY);
    assert_eq!(read.status, 200, "{}", read.text());
    assert_eq!(read.json(), answer, "the task reads as the answer did");
    let other = task(&gw, id, "hashed-secret-key");
    assert_eq!(other.status, 404, "another caller read the answer");
}

/// Inline images are not kept for reading back (the store would grow with traffic): the
/// `task_id` of a `b64_json` answer is informational.
#[test]
fn a_synchronous_b64_answer_is_not_kept() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(gpt_answer(&[png(1_000, 9)]));
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "p", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let answer = resp.json();
    assert!(answer["data"][0]["b64_json"].is_string());
    let read = task(&gw, answer["task_id"].as_str().unwrap(), KEY);
    assert_eq!(read.status, 404, "{}", read.text());
}

#[cfg(feature = "redis")]
#[test]
fn a_synchronous_answer_is_readable_through_another_instance() {
    let prefix = redis::run_prefix();
    let fake = FakeProvider::start();
    let a = redis::gateway(&fake, &prefix);
    let b = redis::gateway(&fake, &prefix);
    fake.push(gpt_answer(&[png(500, 1)]));
    let resp = post(
        &a,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "p"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let answer = resp.json();
    assert!(answer["data"][0]["url"].is_string(), "{answer}");
    let read = task(&b, answer["task_id"].as_str().unwrap(), KEY);
    assert_eq!(read.status, 200, "{}", read.text());
    assert_eq!(read.json(), answer);
}
