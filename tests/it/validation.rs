//! Every class of bad input gets a precise error in the spec's shape, before any provider is called.

use crate::support;
use serde_json::{json, Value};
use support::fake::{FakeProvider, Reply};
use support::{client, post, TestGateway, KEY};

fn details(resp: &client::Response) -> serde_json::Map<String, Value> {
    assert_eq!(resp.status, 400, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "validation_error", "{body}");
    body["details"].as_object().cloned().unwrap_or_default()
}

fn setup() -> (FakeProvider, TestGateway) {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    (fake, gw)
}

#[test]
fn malformed_bodies() {
    let (fake, gw) = setup();
    for body in [
        &b"{not json"[..],
        b"[1,2]",
        b"",
        b"{\"model\":\"tts-1\",\"model\":\"tts-1\"}",
    ] {
        let resp = client::request(
            gw.addr,
            "POST",
            "/api/v1/audio/speech",
            &support::auth(),
            body,
        );
        let d = details(&resp);
        assert!(d.contains_key("body"), "{d:?}");
    }
    assert!(fake.requests().is_empty());
}

#[test]
fn every_bad_field_is_listed_not_only_the_first() {
    let (fake, gw) = setup();
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-1", "input": 5, "speed": 3, "response_format": "ogg", "stream_format": "sse",
                "instructions": "calm", "retries": 99, "colour": "blue"}),
    );
    let d = details(&resp);
    for field in [
        "input",
        "speed",
        "response_format",
        "stream_format",
        "instructions",
        "retries",
        "colour",
    ] {
        assert!(d.contains_key(field), "{field} missing from {d:?}");
    }
    assert!(d["speed"].as_str().unwrap().contains("0.25, 0.5, 1, 2, 4"));
    assert!(d["instructions"].as_str().unwrap().contains("tts-1"));
    assert!(d["retries"].as_str().unwrap().contains("0 to 3"));
    assert!(fake.requests().is_empty());
}

#[test]
fn missing_required_fields_and_unknown_models() {
    let (_fake, gw) = setup();
    let d = details(&post(&gw, "/api/v1/audio/speech", &json!({})));
    assert!(d.contains_key("model") && d.contains_key("input"), "{d:?}");
    let d = details(&post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2"}),
    ));
    assert!(d.contains_key("prompt"), "{d:?}");
    let d = details(&post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "q"}),
    ));
    assert!(d.contains_key("documents"), "{d:?}");
    let d = details(&post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "gpt-9", "query": "q", "documents": ["a"]}),
    ));
    assert!(
        d["model"].as_str().unwrap().contains("rerank-v3.5"),
        "{d:?}"
    );
    // A model of another operation is named as such.
    let d = details(&post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "tts-1", "query": "q", "documents": ["a"]}),
    ));
    assert!(
        d["model"].as_str().unwrap().contains("does not serve"),
        "{d:?}"
    );
}

#[test]
fn image_fields_the_model_cannot_honour() {
    let (fake, gw) = setup();
    let d = details(&post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "a cat", "size": "1000x1000",
                "n": 11, "quality": "hd", "style_preset": "anime", "negative_prompt": "dogs",
                "watermark": true,
                "extra_body": {"sequential_image_generation": "auto", "sequential_image_generation_options": {"max_images": 3}}}),
    ));
    for field in [
        "size",
        "n",
        "quality",
        "style_preset",
        "negative_prompt",
        "watermark",
        "extra_body.sequential_image_generation",
        "extra_body.sequential_image_generation_options",
    ] {
        assert!(d.contains_key(field), "{field} missing from {d:?}");
    }
    assert!(d["size"].as_str().unwrap().contains("multiples of 16"));
    assert!(d["quality"]
        .as_str()
        .unwrap()
        .contains("auto, low, medium, high"));
    let d = details(&post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "p", "size": "1024x1024", "aspect_ratio": "16:9", "strength": 2}),
    ));
    assert!(
        d.contains_key("aspect_ratio") && d.contains_key("strength"),
        "{d:?}"
    );
    let d = details(&post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "p", "n": 0, "response_format": "file"}),
    ));
    assert!(
        d.contains_key("n") && d.contains_key("response_format"),
        "{d:?}"
    );
    assert!(fake.requests().is_empty());
}

#[test]
fn rerank_bounds() {
    let (_fake, gw) = setup();
    let d = details(&post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "", "documents": [], "top_n": 0}),
    ));
    assert!(
        d.contains_key("query") && d.contains_key("documents") && d.contains_key("top_n"),
        "{d:?}"
    );
    let d = details(&post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a", " ", 3]}),
    ));
    assert!(d.contains_key("documents"), "{d:?}");
    // A `top_n` above the number of documents is not an error (it asks for all of them); 0,
    // negative and fractional ones are.
    let d = details(&post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a", ""], "top_n": 3}),
    ));
    assert!(
        d.contains_key("documents[1]") && !d.contains_key("top_n"),
        "{d:?}"
    );
    for bad in [json!(-1), json!(0), json!(1.5), json!("2")] {
        let d = details(&post(
            &gw,
            "/api/v1/rerank",
            &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a"], "top_n": bad}),
        ));
        assert!(
            d["top_n"].as_str().unwrap().contains("at least 1"),
            "{bad}: {d:?}"
        );
    }
    let d = details(&post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["a"], "return_documents": "no"}),
    ));
    assert_eq!(d["return_documents"], "must be true or false", "{d:?}");
    // Cohere v2 takes up to 10,000 documents.
    let docs: Vec<String> = (0..10_001).map(|i| format!("doc {i}")).collect();
    let d = details(&post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-v3.5", "query": "q", "documents": docs}),
    ));
    assert!(d["documents"].as_str().unwrap().contains("10000"), "{d:?}");
}

#[test]
fn native_fields_pass_through_and_others_are_refused() {
    let (fake, gw) = setup();
    fake.push(Reply::json(200, json!({"created": 1, "data": [{"b64_json": "iVBORw0KGgo=", "revised_prompt": "a cat, painted"}]})));
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "a cat", "moderation": "low", "user": "u-42",
                "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests()[0].json();
    assert_eq!(sent["moderation"], "low");
    assert_eq!(sent["user"], "u-42");
    let d = details(&post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "a cat", "seed": 7}),
    ));
    assert!(
        d["seed"]
            .as_str()
            .unwrap()
            .contains("moderation, output_compression, user"),
        "{d:?}"
    );
}

#[test]
fn size_limits_give_413() {
    let (fake, gw) = setup();
    // Declared too large: refused from Content-Length, before the body is read.
    let head = format!(
        "POST /api/v1/audio/speech HTTP/1.1\r\nHost: x\r\nService-API-Key: {KEY}\r\nContent-Type: application/json\r\nContent-Length: 70000\r\nExpect: 100-continue\r\n\r\n"
    );
    let resp = client::raw(gw.addr, head.as_bytes());
    assert_eq!(resp.status, 413);
    assert!(
        !resp.saw_continue,
        "100 Continue sent for a body that will be refused"
    );
    assert_eq!(resp.json()["code"], "payload_too_large");
    // Chunked, no length: counted as it arrives.
    let big = "x".repeat(70_000);
    let chunked = format!(
        "POST /api/v1/audio/speech HTTP/1.1\r\nHost: x\r\nService-API-Key: {KEY}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{big}\r\n0\r\n\r\n",
        big.len()
    );
    let resp = client::raw(gw.addr, chunked.as_bytes());
    assert_eq!(resp.status, 413);
    // Speech input longer than the model allows.
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-1", "input": "a".repeat(4097)}),
    );
    assert_eq!(resp.status, 413);
    assert_eq!(resp.json()["code"], "input_too_long");
    assert!(fake.requests().is_empty());
}

#[test]
fn expect_100_continue_is_answered() {
    let (fake, gw) = setup();
    fake.push(Reply::bytes(200, "audio/mpeg", b"ID3audio".to_vec()));
    let body = json!({"model": "tts-1", "input": "hi"}).to_string();
    let mut stream = client::connect(gw.addr);
    use std::io::{Read, Write};
    let head = format!(
        "POST /api/v1/audio/speech HTTP/1.1\r\nHost: x\r\nService-API-Key: {KEY}\r\nContent-Length: {}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    // The gateway must answer 100 before we send the body.
    let mut first = [0u8; 25];
    stream.read_exact(&mut first).unwrap();
    assert!(
        first.starts_with(b"HTTP/1.1 100"),
        "{}",
        String::from_utf8_lossy(&first)
    );
    stream.write_all(body.as_bytes()).unwrap();
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).unwrap();
    let text = String::from_utf8_lossy(&rest);
    assert!(
        text.contains("200 OK") && text.contains("ID3audio"),
        "{text}"
    );
}

#[test]
fn unknown_paths_and_methods() {
    let (_fake, gw) = setup();
    let resp = client::request(
        gw.addr,
        "POST",
        "/api/v1/chat/completions",
        &support::auth(),
        b"{}",
    );
    assert_eq!(resp.status, 404);
    assert_eq!(resp.json()["code"], "not_found");
    let resp = client::request(gw.addr, "GET", "/api/v1/rerank", &support::auth(), b"");
    assert_eq!(resp.status, 405);
    assert_eq!(resp.json()["code"], "method_not_allowed");
    assert_eq!(resp.header("allow"), Some("POST"));
}

#[test]
fn a_disabled_provider_says_so() {
    let (fake, gw) = setup();
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-off", "input": "hi"}),
    );
    assert_eq!(resp.status, 503);
    let body = resp.json();
    assert_eq!(body["code"], "model_unavailable");
    assert!(
        body["message"].as_str().unwrap().contains("no API key"),
        "{body}"
    );
    assert!(fake.requests().is_empty());
}

/// The standard gateway plus models whose capabilities the config overrides with the rule kinds a
/// family's list alone cannot express.
fn setup_with_overrides() -> (FakeProvider, TestGateway) {
    let fake = FakeProvider::start();
    let url = fake.base_url();
    let gw = TestGateway::start_with(|ports| {
        support::config(&url, ports)
            + r#"
    gpt-image-ruled:
      family: gpt-image
      capabilities: {sizes: {min_side: 512, max_side: 2048, multiple_of: 16, max_pixels: 2097152}, default_quality: high}
      targets: [{provider: openai, model: gpt-image-1, lifecycle: {still_available: true}}]
    tts-bytes:
      family: openai-tts
      capabilities: {input_limit: {max: 10, unit: bytes}, voices: [alloy, echo], default_voice: echo}
      targets: [{provider: openai, model: tts-1}]
    rerank-tokens:
      family: cohere-rerank
      capabilities: {query_limit: {max: 5, unit: tokens}}
      targets: [{provider: cohere, model: rerank-v3.5}]
    stable-ruled:
      family: stable-image-core
      capabilities: {sizes: {max_side: 2048}}
      targets: [{provider: stability, model: core}]
"#
    });
    (fake, gw)
}

#[test]
fn a_size_rule_accepts_sizes_beyond_the_list() {
    let (fake, gw) = setup_with_overrides();
    fake.push(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": "iVBORw0KGgo="}]}),
    ));
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-ruled", "prompt": "a cat", "size": "1280x720", "response_format": "b64_json"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests()[0].json();
    assert_eq!(sent["size"], "1280x720");
    assert_eq!(sent["quality"], "high", "the model's default quality");
    // Listed sizes still pass; sizes outside the rule name the list and the rule.
    for (size, why) in [
        ("1280x721", "not a multiple of 16"),
        ("2048x2048", "more than 2^21 pixels"),
        ("496x512", "a side below 512"),
        ("01280x720", "not the one spelling adapters send"),
    ] {
        let d = details(&post(
            &gw,
            "/api/v1/images/generations",
            &json!({"model": "gpt-image-ruled", "prompt": "a cat", "size": size}),
        ));
        let msg = d["size"].as_str().unwrap_or_default();
        assert!(
            msg.contains("1024x1536, auto, or any WxH with sides 512–2048 px, multiples of 16, at most 2097152 pixels"),
            "{size} ({why}): {d:?}"
        );
    }
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn a_ruled_size_without_a_ratio_is_the_callers_400_for_a_ratio_only_provider() {
    // Stability takes only an aspect ratio: a size the rule allows but the family's ratio table
    // lacks cannot be sent, and says so rather than failing inside the gateway.
    let (fake, gw) = setup_with_overrides();
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "stable-ruled", "prompt": "a cat", "size": "1000x700"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let msg = details(&resp)["size"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        msg.contains("takes only an aspect ratio") && msg.contains("1344x768"),
        "{msg}"
    );
    assert!(fake.requests().is_empty());
}

#[test]
fn a_byte_limit_counts_utf8_bytes() {
    let (fake, gw) = setup_with_overrides();
    fake.push(Reply::bytes(200, "audio/mpeg", b"ID3audio".to_vec()));
    // Five characters, ten bytes: at the limit.
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-bytes", "input": "ééééé"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        fake.requests()[0].json()["voice"],
        "echo",
        "the model's default voice"
    );
    // Six characters, twelve bytes: over it.
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-bytes", "input": "éééééé"}),
    );
    assert_eq!(resp.status, 413, "{}", resp.text());
    let body = resp.json();
    assert_eq!(body["code"], "input_too_long");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("12 bytes, the limit is 10"),
        "{body}"
    );
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn a_voice_list_refuses_other_voices_by_name() {
    let (fake, gw) = setup_with_overrides();
    let d = details(&post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-bytes", "input": "hi", "voice": "nova"}),
    ));
    assert_eq!(d["voice"], "model tts-bytes accepts: alloy, echo", "{d:?}");
    fake.push(Reply::bytes(200, "audio/mpeg", b"ID3audio".to_vec()));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-bytes", "input": "hi", "voice": "alloy"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    // A model without a list takes any voice.
    fake.push(Reply::bytes(200, "audio/mpeg", b"ID3audio".to_vec()));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-1", "input": "hi", "voice": "nova"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
}

#[test]
fn a_token_limit_counts_tokens() {
    let (fake, gw) = setup_with_overrides();
    // Five words, five tokens (cl100k): at the limit, though 24 characters.
    fake.push(Reply::json(
        200,
        json!({"results": [{"index": 0, "relevance_score": 0.5}]}),
    ));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-tokens", "query": "the cat sat on the", "documents": ["a"]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let d = details(&post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "rerank-tokens", "query": "the cat sat on the mat", "documents": ["a"]}),
    ));
    assert_eq!(
        d["query"], "is 6 tokens; model rerank-tokens accepts at most 5",
        "{d:?}"
    );
    assert_eq!(fake.requests().len(), 1);
}

/// OpenAI's SDKs send unset parameters as `null`, and the OpenAPI document says `null` means
/// absent: a `null` under any name — one the API does not define, or one the model does not take
/// natively — is accepted and never reaches the provider, and a known field sent as `null` gets
/// its default. For every operation.
#[test]
fn null_is_absent_for_every_field() {
    let (fake, gw) = setup();
    let png = support::image_conformance::png(64, 1);
    fake.push(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": support::image_conformance::b64(&png)}]}),
    ));
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "p", "style": null, "negative_prompt": null,
                "n": null, "size": null, "quality": null, "response_format": "b64_json",
                "output_format": null, "background": null, "extra_body": null, "async": null,
                "complexity": null, "moderation": null, "user": null}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests()[0].json();
    // The defaults, and nothing that was `null`.
    assert_eq!(
        sent,
        json!({"model": "gpt-image-2", "prompt": "p", "n": 1, "size": "1024x1024",
               "output_format": "png"})
    );

    fake.push(Reply::bytes(200, "audio/mpeg", b"ID3audio".to_vec()));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-1", "input": "hi", "voice": null, "speed": null, "stream_format": null,
                "instructions": null, "response_format": null, "retries": null,
                "language_code": null}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = fake.requests()[1].json();
    assert_eq!(sent["voice"], "alloy", "{sent}");
    assert_eq!(sent["response_format"], "mp3", "{sent}");
    assert_eq!(sent["speed"], 1.0, "{sent}");
    for absent in ["stream_format", "instructions", "language_code", "retries"] {
        assert!(
            sent.get(absent).is_none(),
            "{absent} reached OpenAI: {sent}"
        );
    }

    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "local-bm25", "query": "capital of France",
                "documents": ["Paris is the capital of France", "pears"],
                "top_n": null, "return_documents": null, "max_chunks_per_doc": null}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["results"].as_array().unwrap().len(), 2);

    // A required field sent as `null` is still missing, and says so.
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "local-bm25", "query": null, "documents": ["a"]}),
    );
    assert_eq!(details(&resp)["query"], "is required (got null)");
}
