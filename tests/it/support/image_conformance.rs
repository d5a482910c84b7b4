//! The image conformance cases every provider passes, in one place.
//!
//! A provider's test file describes its wire format in an [`ImageCase`] (how its fake answers with
//! given images, how its native request carries `n` and the reference image, what a full-featured
//! request must become, its native error shapes) and invokes [`image_conformance!`], which makes one
//! `#[test]` per case (`images_openai::gpt_image_2_conformance::native_errors`, …), each against its
//! own fake provider and gateway. The cases and their assertions are the same for every provider:
//! - a full-featured request reaches the provider in its native form (the case's `check_full`);
//! - `response_format: url` and `b64_json` both work, whatever the provider answers: provider URLs
//!   are passed through or downloaded (without credentials), base64 is passed through or hosted
//!   under `/api/v1/files/{id}` and served byte-identical with its content type;
//! - every accepted size and quality is accepted, every refused one is a 400 naming the field;
//! - `n` is honoured natively or by fan-out (the right number of native calls and images), and
//!   more than the family allows is a 400;
//! - each unsupported field is a 400 whose `details` names it;
//! - a reference image given as base64 (> 64 KiB) and as a URL reaches the provider in its form;
//! - each native error shape becomes the public status and code.
//!
//! Also here: [`png`] (test image bytes) and [`form_parts`] (a `multipart/form-data` parser for
//! asserting what multipart providers received).

use base64::Engine;
use serde_json::{json, Value};

use super::fake::{FakeProvider, Recorded, Reply};
use super::{client, post, TestGateway};

/// The prompt every case sends.
pub const PROMPT: &str = "a lighthouse at dusk";

/// The fake's native success answer carrying `images` (one native call's worth).
pub type AnswerFn = fn(images: &[Vec<u8>], fake: &FakeProvider) -> Reply;
/// Reads from a recorded native request how many images it asked for.
pub type NativeNFn = fn(req: &Recorded) -> u64;
/// Reads from a recorded native request the reference image it carries.
pub type ReferenceFn = fn(req: &Recorded) -> Reference;
/// Asserts the native request a full-featured public request produced.
pub type CheckFn = fn(req: &Recorded);
/// Native error answers with the public `(status, code)` each must become.
pub type ErrorsFn = fn() -> Vec<(Reply, u16, &'static str)>;

/// How a native request carried the reference image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// The caller's URL, unchanged (the provider downloads it).
    Url(String),
    /// The image bytes (a file part, base64 or a data URL, decoded by the extractor).
    Bytes(Vec<u8>),
}

/// What form a provider's success answer carries its images in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answers {
    /// Links on the provider's host (the fake's own base URL in tests).
    Url,
    /// Base64 (or raw bytes) in the answer itself.
    Inline,
}

/// One model's wire format, as the conformance cases need it.
pub struct ImageCase {
    /// Public model name in the test config.
    pub model: &'static str,
    /// Fields every request to this model must carry besides `model` and `prompt` (e.g. the
    /// reference `image` of an editing model); usually `json!({})`.
    pub base: Value,
    /// A request using every public field this model supports (merged over `base`; without
    /// `response_format`), and the assertion on the native request it must produce.
    pub full: Value,
    pub check_full: CheckFn,
    pub answer: AnswerFn,
    pub answers: Answers,
    pub sizes: &'static [&'static str],
    pub rejected_sizes: &'static [&'static str],
    pub qualities: &'static [&'static str],
    pub rejected_qualities: &'static [&'static str],
    /// The most images one request may ask for, and the most one native call returns.
    pub max_n: u64,
    pub per_call_n: u64,
    /// How the native request says how many images it wants (`None`: it cannot; one per call).
    pub native_n: Option<NativeNFn>,
    /// Public fields (with a value) this model must refuse with a 400 naming the field.
    pub rejected: Vec<(&'static str, Value)>,
    /// How the native request carries a reference image (`None`: the model takes none).
    pub reference: Option<ReferenceFn>,
    pub errors: ErrorsFn,
}

/// `n` bytes that sniff as PNG (signature, then a pattern varying with `seed`).
pub fn png(n: usize, seed: u8) -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n".to_vec();
    v.extend((0..n.saturating_sub(8)).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    v
}

pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn unb64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .unwrap_or_else(|e| panic!("not base64 ({e}): {s:.60}"))
}

/// Bytes of a `data:<type>;base64,...` URL.
pub fn data_url_bytes(s: &str) -> Vec<u8> {
    let (_, data) = s
        .split_once(";base64,")
        .unwrap_or_else(|| panic!("not a base64 data URL: {s:.60}"));
    unb64(data)
}

/// The reference image of a JSON native request whose `image` field holds a URL or a data URL
/// (Ark, SiliconFlow).
pub fn json_reference(req: &Recorded) -> Reference {
    let image = req.json()["image"]
        .as_str()
        .expect("no image in the native request")
        .to_string();
    if image.starts_with("data:") {
        Reference::Bytes(data_url_bytes(&image))
    } else {
        Reference::Url(image)
    }
}

/// The native request carries the provider key as a Bearer token (and so not the caller's).
pub fn assert_bearer(req: &Recorded) {
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {}", super::PROVIDER_KEY).as_str())
    );
}

/// A link on the fake's own host (so the gateway may download it as a provider result).
pub fn fake_url(fake: &FakeProvider, name: &str) -> String {
    format!("{}/results/{name}", fake.base_url())
}

/// One part of a `multipart/form-data` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormPart {
    pub name: String,
    pub filename: Option<String>,
    pub content_type: Option<String>,
    pub data: Vec<u8>,
}

impl FormPart {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.data).into_owned()
    }
}

/// The parts of a recorded `multipart/form-data` request, in order (panics on a malformed form).
pub fn form_parts(req: &Recorded) -> Vec<FormPart> {
    let ct = req.header("content-type").expect("no content-type");
    let boundary = ct
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))
        .unwrap_or_else(|| panic!("not multipart: {ct}"))
        .trim_matches('"');
    let delim = format!("--{boundary}").into_bytes();
    let body = &req.body;
    let find = |from: usize, pat: &[u8]| {
        body[from..]
            .windows(pat.len())
            .position(|w| w == pat)
            .map(|p| p + from)
    };
    let mut parts = Vec::new();
    let mut at = find(0, &delim).expect("no first boundary") + delim.len();
    loop {
        if body[at..].starts_with(b"--") {
            break;
        }
        assert!(
            body[at..].starts_with(b"\r\n"),
            "boundary not followed by CRLF"
        );
        at += 2;
        let head_end = find(at, b"\r\n\r\n").expect("part without head");
        let head = String::from_utf8_lossy(&body[at..head_end]).into_owned();
        let data_start = head_end + 4;
        let mut end_pat = b"\r\n".to_vec();
        end_pat.extend_from_slice(&delim);
        let data_end = find(data_start, &end_pat).expect("part without end");
        let mut name = String::new();
        let mut filename = None;
        let mut content_type = None;
        for line in head.split("\r\n") {
            let lower = line.to_ascii_lowercase();
            if lower.starts_with("content-disposition:") {
                for attr in line.split(';').skip(1) {
                    let (k, v) = attr.trim().split_once('=').expect("bad attribute");
                    let v = v.trim_matches('"').to_string();
                    match k {
                        "name" => name = v,
                        "filename" => filename = Some(v),
                        _ => {}
                    }
                }
            } else if lower.starts_with("content-type:") {
                content_type = Some(line["content-type:".len()..].trim().to_string());
            }
        }
        parts.push(FormPart {
            name,
            filename,
            content_type,
            data: body[data_start..data_end].to_vec(),
        });
        at = data_end + end_pat.len();
    }
    parts
}

/// The part named `name` (panics when absent).
pub fn part<'p>(parts: &'p [FormPart], name: &str) -> &'p FormPart {
    parts
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no form part {name}; parts: {:?}", names(parts)))
}

pub fn names(parts: &[FormPart]) -> Vec<&str> {
    parts.iter().map(|p| p.name.as_str()).collect()
}

/// `base` with `extra`'s fields laid over it, plus `model` and `prompt`.
fn body(case: &ImageCase, extra: &Value) -> Value {
    let mut b = json!({"model": case.model, "prompt": PROMPT});
    for layer in [&case.base, extra] {
        if let Some(o) = layer.as_object() {
            for (k, v) in o {
                b[k] = v.clone();
            }
        }
    }
    b
}

fn generate(gw: &TestGateway, case: &ImageCase, extra: Value) -> client::Response {
    post(gw, "/api/v1/images/generations", &body(case, &extra))
}

/// GET a gateway-hosted link; returns the response.
pub fn get_hosted(gw: &TestGateway, url: &str) -> client::Response {
    let prefix = format!("http://{}", gw.addr);
    let path = url
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{url} is not a link to this gateway ({prefix})"));
    assert!(path.starts_with("/api/v1/files/"), "{url}");
    client::request(gw.addr, "GET", path, &[], b"")
}

fn ok(resp: &client::Response, what: &str) -> Value {
    assert_eq!(resp.status, 200, "{what}: {}", resp.text());
    resp.json()
}

fn refused(resp: &client::Response, field: &str, what: &str) -> String {
    assert_eq!(resp.status, 400, "{what} accepted: {}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "validation_error", "{what}");
    body["details"][field]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: details do not name {field}: {body}"))
        .to_string()
}

/// One `#[test]` per conformance case for one model:
/// `image_conformance!(gpt_image_2_conformance, ImageCase { .. })`, at module level, defines the
/// module `gpt_image_2_conformance` with the tests `full_request`, `response_formats`,
/// `sizes_and_qualities`, `image_counts`, `rejected_fields`, `reference_image` and
/// `native_errors`. Each test evaluates the case expression, in the scope of the module that
/// invoked the macro, and runs its case.
macro_rules! image_conformance {
    ($name:ident, $case:expr $(,)?) => {
        mod $name {
            mod case {
                #[allow(unused_imports)]
                use super::super::*;

                pub fn case() -> $crate::support::image_conformance::ImageCase {
                    $case
                }
            }

            #[test]
            fn full_request() {
                $crate::support::image_conformance::full_request(&case::case());
            }

            #[test]
            fn cost() {
                $crate::support::image_conformance::cost(&case::case());
            }

            #[test]
            fn response_formats() {
                $crate::support::image_conformance::response_formats(&case::case());
            }

            #[test]
            fn sizes_and_qualities() {
                $crate::support::image_conformance::sizes_and_qualities(&case::case());
            }

            #[test]
            fn image_counts() {
                $crate::support::image_conformance::image_counts(&case::case());
            }

            #[test]
            fn rejected_fields() {
                $crate::support::image_conformance::rejected_fields(&case::case());
            }

            #[test]
            fn reference_image() {
                $crate::support::image_conformance::reference_image(&case::case());
            }

            #[test]
            fn native_errors() {
                $crate::support::image_conformance::native_errors(&case::case());
            }
        }
    };
}
pub(crate) use image_conformance;

pub fn full_request(case: &ImageCase) {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let img = png(300, 1);
    let mut full = case.full.clone();
    full["response_format"] = json!("b64_json");
    // As the provider answers: each call with the images it asked for (all `img` here), each
    // URL answer's images downloaded next.
    let n = full["n"].as_u64().unwrap_or(1);
    let per_call = case.per_call_n.max(1);
    let mut left = n;
    while left > 0 {
        let this_call = vec![img.clone(); left.min(per_call) as usize];
        fake.push((case.answer)(&this_call, &fake));
        if case.answers == Answers::Url {
            for _ in 0..this_call.len() {
                fake.push(Reply::bytes(200, "image/png", img.clone()));
            }
        }
        left -= this_call.len() as u64;
    }
    let out = ok(&generate(&gw, case, full), "full request");
    assert_eq!(out["data"].as_array().map(Vec::len), Some(n as usize));
    assert_eq!(unb64(out["data"][0]["b64_json"].as_str().unwrap()), img);
    let sent = fake.requests();
    assert_eq!(sent[0].method, "POST");
    for (name, value) in &sent[0].headers {
        assert!(
            !value.contains(super::KEY),
            "the caller's key reached the provider in {name}"
        );
    }
    (case.check_full)(&sent[0]);
}

pub fn response_formats(case: &ImageCase) {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let img = png(70_000, 2);

    // url
    fake.push((case.answer)(std::slice::from_ref(&img), &fake));
    let out = ok(
        &generate(&gw, case, json!({"response_format": "url"})),
        "url",
    );
    assert_eq!(out["task_status"], "succeed");
    assert!(uuid::Uuid::parse_str(out["task_id"].as_str().unwrap()).is_ok());
    assert!(out["created"].as_i64().unwrap() > 0);
    let url = out["data"][0]["url"].as_str().expect("no url").to_string();
    assert!(out["data"][0].get("b64_json").is_none());
    match case.answers {
        Answers::Url => assert!(
            url.starts_with(&fake.base_url()),
            "provider URL not passed through: {url}"
        ),
        Answers::Inline => {
            let file = get_hosted(&gw, &url);
            assert_eq!(file.status, 200, "{}", file.text());
            assert_eq!(file.header("content-type"), Some("image/png"));
            assert_eq!(file.body, img, "hosted image differs");
            // Unguessable and expiring: another id is a 404 in the Error shape.
            let other = client::request(
                gw.addr,
                "GET",
                "/api/v1/files/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                &[],
                b"",
            );
            assert_eq!(other.status, 404);
            assert_eq!(other.json()["code"], "not_found");
        }
    }

    // b64_json
    let before = fake.requests().len();
    fake.push((case.answer)(std::slice::from_ref(&img), &fake));
    if case.answers == Answers::Url {
        fake.push(Reply::bytes(200, "image/png", img.clone()));
    }
    let out = ok(
        &generate(&gw, case, json!({"response_format": "b64_json"})),
        "b64_json",
    );
    assert!(out["data"][0].get("url").is_none());
    assert_eq!(unb64(out["data"][0]["b64_json"].as_str().unwrap()), img);
    if case.answers == Answers::Url {
        let sent = fake.requests();
        let download = &sent[before + 1];
        assert_eq!(download.method, "GET");
        assert!(download.path.starts_with("/results/"), "{}", download.path);
        for h in ["authorization", "api-key", "x-key", "service-api-key"] {
            assert!(
                download.header(h).is_none(),
                "download carried credentials ({h})"
            );
        }
    }
}

pub fn sizes_and_qualities(case: &ImageCase) {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let img = png(100, 3);
    for size in case.sizes {
        fake.push((case.answer)(std::slice::from_ref(&img), &fake));
        ok(
            &generate(&gw, case, json!({"size": size})),
            &format!("size {size}"),
        );
    }
    for size in case.rejected_sizes {
        let msg = refused(
            &generate(&gw, case, json!({"size": size})),
            "size",
            &format!("size {size}"),
        );
        if let Some(first) = case.sizes.first() {
            assert!(
                msg.contains(first),
                "size details do not list the sizes: {msg}"
            );
        }
    }
    for q in case.qualities {
        fake.push((case.answer)(std::slice::from_ref(&img), &fake));
        ok(
            &generate(&gw, case, json!({"quality": q})),
            &format!("quality {q}"),
        );
    }
    for q in case.rejected_qualities {
        refused(
            &generate(&gw, case, json!({"quality": q})),
            "quality",
            &format!("quality {q}"),
        );
    }
}

pub fn image_counts(case: &ImageCase) {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // Two full native calls' worth when the family allows it, else as many as it allows.
    let n = (case.per_call_n * 2).min(case.max_n);
    let per_call = case.per_call_n.min(n);
    let calls = n.div_ceil(per_call);
    // The calls are sent side by side, so when they differ in size (10 as 6 + 4) each is answered
    // by what it asked for, not in the order the fake happens to receive them.
    let sizes_differ = !n.is_multiple_of(per_call);
    let mut by_size: std::collections::HashMap<u64, Vec<Reply>> = Default::default();
    let mut expected = Vec::new();
    for c in 0..calls {
        let k = per_call.min(n - c * per_call);
        let imgs: Vec<Vec<u8>> = (0..k).map(|i| png(64, (c * 10 + i) as u8)).collect();
        let reply = (case.answer)(&imgs, &fake);
        match case.native_n {
            Some(_) if sizes_differ => by_size.entry(k).or_default().push(reply),
            _ => fake.push(reply),
        }
        expected.extend(imgs);
    }
    if let (Some(native_n), true) = (case.native_n, sizes_differ) {
        fake.set_handler(move |r| {
            if r.method != "POST" {
                return None;
            }
            by_size
                .get_mut(&native_n(r))
                .and_then(|replies| replies.pop())
        });
    }
    let out = ok(
        &generate(&gw, case, json!({"n": n, "response_format": "url"})),
        &format!("n {n}"),
    );
    let data = out["data"].as_array().unwrap();
    assert_eq!(data.len() as u64, n, "images returned for n={n}");
    let sent = fake.requests();
    let native: Vec<&Recorded> = sent.iter().filter(|r| r.method == "POST").collect();
    assert_eq!(native.len() as u64, calls, "native calls for n={n}");
    if let Some(native_n) = case.native_n {
        let total: u64 = native.iter().map(|r| native_n(r)).sum();
        assert_eq!(total, n, "images asked natively");
    }
    refused(
        &generate(&gw, case, json!({"n": case.max_n + 1})),
        "n",
        "n above the family's maximum",
    );
}

pub fn rejected_fields(case: &ImageCase) {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for (field, value) in &case.rejected {
        let mut extra = json!({});
        // A dotted `extra_body.key` is sent nested.
        match field.split_once('.') {
            Some((outer, inner)) => extra[outer] = json!({ inner: value }),
            None => extra[*field] = value.clone(),
        }
        refused(&generate(&gw, case, extra), field, field);
    }
    assert!(
        fake.requests().is_empty(),
        "a refused request reached the provider"
    );
}

pub fn reference_image(case: &ImageCase) {
    let Some(extract) = case.reference else {
        let img = b64(&png(100, 4));
        let fake = FakeProvider::start();
        let gw = TestGateway::start(&fake);
        refused(
            &generate(&gw, case, json!({"image": img})),
            "image",
            "image on a model without reference images",
        );
        return;
    };
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let out_img = png(100, 5);
    // Base64 larger than 64 KiB, raw and as a data URL.
    let reference = png(90_000, 6);
    for given in [
        b64(&reference),
        format!("data:image/png;base64,{}", b64(&reference)),
    ] {
        let before = fake.requests().len();
        fake.push((case.answer)(std::slice::from_ref(&out_img), &fake));
        ok(
            &generate(&gw, case, json!({"image": given})),
            "base64 reference image",
        );
        let sent = fake.requests();
        assert_eq!(
            extract(&sent[before]),
            Reference::Bytes(reference.clone()),
            "reference image bytes"
        );
    }
    // A URL on another server: passed through (that server sees nothing), or downloaded by the
    // gateway and sent as bytes.
    let host = FakeProvider::start();
    host.set_default(Reply::bytes(200, "image/png", reference.clone()));
    let url = format!("{}/images/reference.png", host.base_url());
    let before = fake.requests().len();
    fake.push((case.answer)(std::slice::from_ref(&out_img), &fake));
    ok(
        &generate(&gw, case, json!({"image": url})),
        "URL reference image",
    );
    let sent = fake.requests();
    assert_eq!(sent.len(), before + 1, "one native request");
    match extract(&sent[before]) {
        Reference::Url(u) => {
            assert_eq!(u, url, "reference URL changed");
            assert!(
                host.requests().is_empty(),
                "the gateway fetched a URL the provider takes"
            );
        }
        Reference::Bytes(b) => {
            assert_eq!(b, reference, "downloaded reference image differs");
            let fetched = host.requests();
            assert_eq!(fetched.len(), 1, "reference downloads");
            assert_eq!(fetched[0].method, "GET");
            assert!(fetched[0].header("authorization").is_none());
            assert!(fetched[0].header("service-api-key").is_none());
        }
    }
}

pub fn native_errors(case: &ImageCase) {
    let fake = FakeProvider::start();
    let mut gw = TestGateway::start(&fake);
    for (reply, status, code) in (case.errors)() {
        fake.push(reply);
        let resp = generate(&gw, case, json!({}));
        assert_eq!(resp.status, status, "{code}: {}", resp.text());
        let body = resp.json();
        assert_eq!(body["code"], code, "{body}");
        assert!(
            !resp.text().contains(super::PROVIDER_KEY),
            "provider key leaked"
        );
        // A model-gone answer retires the target for hours (the next rows would not reach the
        // fake): the next row starts on a fresh gateway.
        if code == "model_unavailable" {
            gw = TestGateway::start(&fake);
        }
    }
}

/// What one image at the model's defaults costs, on its `Switchyard-Cost` header: the figure
/// computed by hand in [`super::costs`] from the model's price and what the fake's answer reports.
pub fn cost(case: &ImageCase) {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let img = png(300, 1);
    fake.push((case.answer)(std::slice::from_ref(&img), &fake));
    if case.answers == Answers::Url {
        fake.push(Reply::bytes(200, "image/png", img));
    }
    let resp = generate(&gw, case, json!({"response_format": "b64_json"}));
    ok(&resp, "one image");
    super::costs::assert_cost(case.model, &resp);
}
