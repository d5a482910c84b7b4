//! What a request cost, as a caller and an operator see it: the `Switchyard-Cost` header on the
//! answer, the access line's `cost`, `currency` and `cost_basis`, rerank's `metadata.cost` and the
//! `switchyard_cost_nanos_total` counter — for a representative request of each pricing kind,
//! through the gateway binary, against a fake answer carrying the provider's documented usage
//! fields and a figure computed here by hand from the built-in prices (`src/caps/prices.yaml`).

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};

use crate::logs::Binary;
use crate::support::fake::{FakeProvider, Recorded, Reply};
use crate::support::image_conformance::{b64, fake_url, png};
use crate::support::{client, free_port, wait_listening, KEY};

/// The test configuration with FLUX.2 [pro] added, access lines in `format`, and a metrics
/// listener (in a build with metrics).
fn yaml(fake: &str, port: u16, metrics: u16, format: &str) -> String {
    let metrics = if cfg!(feature = "metrics") {
        format!("  metrics: {{address: \"127.0.0.1:{metrics}\"}}\n")
    } else {
        String::new()
    };
    crate::support::config(fake, (port, free_port()))
        .replacen(
            "switchyard:\n",
            &format!("switchyard:\n  access_log: {{format: {format}}}\n{metrics}"),
            1,
        )
        .replacen(
            "  models:\n",
            "  models:\n    flux-2-pro: {family: flux-2, targets: [{provider: bfl, model: flux-2-pro}]}\n    flux-2-any: {family: flux-2, targets: [{provider: bfl, model: flux-2-pro}, {provider: bfl, model: flux-2-max, weight: 0}]}\n",
            1,
        )
}

struct Gw {
    bin: Binary,
    metrics: SocketAddr,
}

fn start(fake: &FakeProvider, format: &str) -> Gw {
    let m = free_port();
    let base = fake.base_url();
    let bin = Binary::start(|port| yaml(&base, port, m, format), "warn,access=info");
    let metrics: SocketAddr = format!("127.0.0.1:{m}").parse().unwrap();
    if cfg!(feature = "metrics") {
        wait_listening(metrics);
    }
    Gw { bin, metrics }
}

fn post(gw: &Gw, path: &str, body: Value) -> client::Response {
    let resp = client::post_json(gw.bin.addr, path, &[("Service-API-Key", KEY)], &body);
    assert_eq!(resp.status, 200, "{}", resp.text());
    resp
}

fn cost_header(resp: &client::Response) -> &str {
    resp.header("switchyard-cost")
        .unwrap_or_else(|| panic!("no Switchyard-Cost header: {:?}", resp.headers))
}

/// The JSON access lines written so far, once there are at least `n`.
fn access_lines(gw: &Gw, n: usize) -> Vec<Value> {
    let text = gw.bin.output_when("the access lines", |t| {
        t.lines().filter(|l| l.contains(" access] ")).count() >= n
    });
    text.lines()
        .filter_map(|l| l.split_once(" access] ").map(|(_, json)| json))
        .map(|json| serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}")))
        .collect()
}

/// The access line's cost fields: `(cost, currency, cost_basis)`.
fn logged(line: &Value) -> (Value, Value, Value) {
    (
        line["cost"].clone(),
        line["currency"].clone(),
        line["cost_basis"].clone(),
    )
}

/// `switchyard_cost_nanos_total{model, key="tester", currency="USD"}` is `nanos` (a series
/// that is absent counts 0). A request is counted as it is logged, just after its answer is out,
/// so the counter is read until it arrives (within 5 s). Nothing to check in a build without
/// metrics.
fn assert_counted(gw: &Gw, model: &str, nanos: u64) {
    if cfg!(feature = "metrics") {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut seen = cost_nanos(gw, model);
        while seen != nanos && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            seen = cost_nanos(gw, model);
        }
        assert_eq!(seen, nanos, "switchyard_cost_nanos_total of {model}");
    }
}

fn cost_nanos(gw: &Gw, model: &str) -> u64 {
    let text = client::request(gw.metrics, "GET", "/metrics", &[], b"").text();
    let series = format!(
        "switchyard_cost_nanos_total{{currency=\"USD\",key=\"tester\",model=\"{model}\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |v| v.trim().parse().unwrap())
}

fn mp3(n: usize) -> Vec<u8> {
    let mut v = vec![0xFF, 0xF3, 0x44, 0xC4];
    v.extend((0..n - 4).map(|i| (i * 31 % 251) as u8));
    v
}

/// `tts-1` bills $15 per 1M characters: "hello world" is 11 characters, $0.000165 — exact at
/// the head, from the gateway's count.
#[test]
fn character_priced_speech_costs_its_characters() {
    let fake = FakeProvider::start();
    fake.push(Reply::bytes(200, "audio/mpeg", mp3(64)));
    let gw = start(&fake, "json");
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        json!({"model": "tts-1", "input": "hello world", "voice": "alloy"}),
    );
    assert_eq!(cost_header(&resp), "0.000165 USD; basis=gateway");
    let lines = access_lines(&gw, 1);
    assert_eq!(
        logged(&lines[0]),
        (json!("0.000165"), json!("USD"), json!("gateway"))
    );
    assert_counted(&gw, "tts-1", 165_000);
}

/// The text access line says it too.
#[test]
fn the_text_access_line_carries_the_cost() {
    let fake = FakeProvider::start();
    fake.push(Reply::bytes(200, "audio/mpeg", mp3(64)));
    let gw = start(&fake, "text");
    post(
        &gw,
        "/api/v1/audio/speech",
        json!({"model": "tts-1", "input": "hello world", "voice": "alloy"}),
    );
    let text = gw
        .bin
        .output_when("the access line", |t| t.contains(" access] "));
    let line = text.lines().find(|l| l.contains(" access] ")).unwrap();
    assert!(line.contains(" cost=0.000165 USD"), "{line}");
}

/// `gpt-4o-mini-tts` bills $0.60 per 1M text tokens in and $12 per 1M audio tokens out. The head
/// goes out before the audio ends: its header is the text tokens by the gateway's count, marked
/// an estimate. The stream's closing event reports 10 in and 40 out: the access line and the
/// counter carry 10 × 0.6 + 40 × 12 = 486 millionths of a dollar, the provider's figures.
#[test]
fn token_priced_speech_is_an_estimate_at_the_head_and_exact_in_the_log() {
    let fake = FakeProvider::start();
    let audio = base64::engine::general_purpose::STANDARD.encode(mp3(64));
    let delta = json!({"type": "speech.audio.delta", "audio": audio});
    let done = json!({"type": "speech.audio.done",
                      "usage": {"input_tokens": 10, "output_tokens": 40, "total_tokens": 50}});
    fake.push(Reply::sse(vec![
        (Duration::ZERO, format!("data: {delta}\n\n")),
        (Duration::from_millis(20), format!("data: {done}\n\n")),
    ]));
    let gw = start(&fake, "json");
    let input = "hello world";
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        json!({"model": "gpt-4o-mini-tts", "input": input, "voice": "alloy", "stream_format": "sse"}),
    );
    assert!(resp.text().contains("speech.audio.done"));
    // 600 nano-dollars per text token.
    let tokens = switchyard::internals::tokens::count(input) as u64;
    let head = format!("{}", tokens * 600);
    let head = format!("0.{:0>9}", head);
    let head = head.trim_end_matches('0');
    assert_eq!(
        cost_header(&resp),
        format!("{head} USD; basis=gateway; estimate")
    );
    let lines = access_lines(&gw, 1);
    assert_eq!(
        logged(&lines[0]),
        (json!("0.000486"), json!("USD"), json!("provider"))
    );
    assert_eq!(lines[0]["cost_note"], Value::Null);
    assert_counted(&gw, "gpt-4o-mini-tts", 486_000);
}

/// Gemini 3.8 Flash TTS bills $0.50 per 1M text tokens in and $9 per 1M audio tokens out; its
/// stream's last event reports 9 in and 75 out: 9 × 0.5 + 75 × 9 = 679.5 millionths of a dollar
/// in the access line and the counter, the provider's figures (the head's is an estimate).
#[test]
fn gemini_speech_is_billed_from_the_streams_usage() {
    let fake = FakeProvider::start();
    let piece = base64::engine::general_purpose::STANDARD.encode([1u8, 0, 2, 0]);
    let audio = json!({"candidates": [{"content": {"parts": [{"inlineData":
        {"mimeType": "audio/L16;codec=pcm;rate=24000", "data": piece}}]}}]});
    let last = json!({"candidates": [{"content": {"parts": []}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 75, "totalTokenCount": 84}});
    fake.push(Reply::sse(vec![
        (Duration::ZERO, format!("data: {audio}\r\n\r\n")),
        (Duration::from_millis(20), format!("data: {last}\r\n\r\n")),
    ]));
    let gw = start(&fake, "json");
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        json!({"model": "gemini-3.8-flash-tts", "input": "hello world", "response_format": "wav"}),
    );
    assert!(cost_header(&resp).ends_with(" USD; basis=gateway; estimate"));
    let lines = access_lines(&gw, 1);
    assert_eq!(
        logged(&lines[0]),
        (json!("0.0006795"), json!("USD"), json!("provider"))
    );
    assert_counted(&gw, "gemini-3.8-flash-tts", 679_500);
}

/// `gpt-image-2` bills tokens by kind: the answer's usage (10 text and 40 image tokens in, 2,100
/// image tokens out) is 10 × $5 + 40 × $8 + 2,100 × $30 per 1M = $0.06337, the provider's figures.
#[test]
fn gpt_image_2_costs_the_tokens_openai_reports() {
    let fake = FakeProvider::start();
    fake.push(Reply::json(
        200,
        json!({"created": 1713833628, "data": [{"b64_json": b64(&png(64, 1))}],
               "size": "1024x1024", "quality": "high",
               "usage": {"total_tokens": 2150, "input_tokens": 50, "output_tokens": 2100,
                         "input_tokens_details": {"text_tokens": 10, "image_tokens": 40},
                         "output_tokens_details": {"image_tokens": 2100}}}),
    ));
    let gw = start(&fake, "json");
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        json!({"model": "gpt-image-2", "prompt": "p", "size": "1024x1024", "quality": "high",
               "response_format": "b64_json"}),
    );
    assert_eq!(cost_header(&resp), "0.06337 USD; basis=provider");
    let lines = access_lines(&gw, 1);
    assert_eq!(
        logged(&lines[0]),
        (json!("0.06337"), json!("USD"), json!("provider"))
    );
    assert_counted(&gw, "gpt-image-2", 63_370_000);
}

/// Without token usage in the answer, `gpt-image-2` costs OpenAI's per-image figure for the
/// size and quality: 2 low 1024x1024 images are 2 × $0.006, one high is $0.211.
#[test]
fn image_cost_follows_size_and_quality() {
    let fake = FakeProvider::start();
    let answer = |n: u8| {
        let data: Vec<Value> = (0..n)
            .map(|i| json!({"b64_json": b64(&png(64, i))}))
            .collect();
        Reply::json(200, json!({"created": 1, "data": data}))
    };
    fake.push(answer(2));
    fake.push(answer(1));
    fake.push(answer(1));
    let gw = start(&fake, "json");
    let ask = |quality: &str, size: &str, n: u8| {
        let resp = post(
            &gw,
            "/api/v1/images/generations",
            json!({"model": "gpt-image-2", "prompt": "p", "size": size, "quality": quality,
                   "n": n, "response_format": "b64_json"}),
        );
        cost_header(&resp).to_string()
    };
    assert_eq!(ask("low", "1024x1024", 2), "0.012 USD; basis=gateway");
    assert_eq!(ask("high", "1024x1024", 1), "0.211 USD; basis=gateway");
    assert_eq!(ask("high", "1024x1536", 1), "0.165 USD; basis=gateway");
    assert_counted(&gw, "gpt-image-2", 388_000_000);
}

/// Answer as BFL does: a task with its polling URL, `Ready` at the first poll, then the sample.
fn bfl(fake: &FakeProvider) {
    bfl_failing_pro_after(fake, usize::MAX);
}

/// As [`bfl`], but FLUX.2 [pro] answers a 500 once it has taken `ok` generations (FLUX.2 [max]
/// never fails).
fn bfl_failing_pro_after(fake: &FakeProvider, ok: usize) {
    let base = fake.base_url();
    let results = fake_url(fake, "");
    let pro_calls = std::sync::atomic::AtomicUsize::new(0);
    fake.set_handler(move |req: &Recorded| {
        let model = req.path.strip_prefix("/v1/flux-2-");
        if req.method == "POST" && matches!(model, Some("pro" | "max")) {
            if model == Some("pro")
                && pro_calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= ok
            {
                return Some(Reply::json(500, json!({"detail": "busy"})));
            }
            let id = format!("t{}", req.json()["width"]);
            return Some(Reply::json(
                200,
                json!({"id": id, "polling_url": format!("{base}/v1/get_result?id={id}")}),
            ));
        }
        if let Some(id) = req.path.strip_prefix("/v1/get_result?id=") {
            return Some(Reply::json(
                200,
                json!({"id": id, "status": "Ready", "result": {"sample": format!("{results}{id}.png")}}),
            ));
        }
        if req.path.starts_with("/results/") {
            return Some(Reply::bytes(200, "image/png", png(3000, 7)));
        }
        None
    });
}

/// FLUX.2 [pro] bills $0.03 for an image's first megapixel and $0.015 for each started one after
/// it: 1024x1024 is one megapixel ($0.03), 1440x1440 (2,073,600 px) starts two ($0.045).
#[test]
fn flux_2_costs_its_megapixels() {
    let fake = FakeProvider::start();
    bfl(&fake);
    let gw = start(&fake, "json");
    let ask = |size: &str| {
        let resp = post(
            &gw,
            "/api/v1/images/generations",
            json!({"model": "flux-2-pro", "prompt": "p", "size": size, "response_format": "b64_json"}),
        );
        cost_header(&resp).to_string()
    };
    assert_eq!(ask("1024x1024"), "0.03 USD; basis=gateway");
    assert_eq!(ask("1440x1440"), "0.045 USD; basis=gateway");
    let lines = access_lines(&gw, 2);
    let costs: Vec<Value> = lines.iter().map(|l| l["cost"].clone()).collect();
    assert_eq!(costs, [json!("0.03"), json!("0.045")]);
}

/// A PNG's signature and header chunk for a `w`×`h` image: all the gateway reads of an input
/// image to price it (BFL's fake takes the bytes as they are).
fn png_header(w: u32, h: u32) -> String {
    let mut v = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    v.extend_from_slice(&w.to_be_bytes());
    v.extend_from_slice(&h.to_be_bytes());
    v.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    base64::engine::general_purpose::STANDARD.encode(v)
}

/// FLUX.2 [pro] bills each started megapixel of an input image at $0.015: an edit of a
/// 1536×1024 image (1.5 MP, two started) into a 1024x1024 one is $0.03 + 2 × $0.015; a
/// reference given by URL is not measured, and the cost says it leaves it out.
#[test]
fn flux_2_edits_cost_their_input_megapixels() {
    let fake = FakeProvider::start();
    bfl(&fake);
    let gw = start(&fake, "json");
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        json!({"model": "flux-2-pro", "prompt": "p", "size": "1024x1024",
               "image": png_header(1536, 1024), "response_format": "b64_json"}),
    );
    assert_eq!(cost_header(&resp), "0.06 USD; basis=gateway");
    let by_url = fake_url(&fake, "ref.png");
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        json!({"model": "flux-2-pro", "prompt": "p", "size": "1024x1024",
               "image": [png_header(1024, 1024), by_url], "response_format": "b64_json"}),
    );
    assert_eq!(cost_header(&resp), "0.045 USD; basis=gateway; estimate");
    let lines = access_lines(&gw, 2);
    let note = lines[1]["cost_note"].as_str().unwrap_or_default();
    assert!(
        note.contains("1 input image(s) given by URL"),
        "{}",
        lines[1]
    );
}

/// Each native call of a fan-out is priced at the target that served it: two FLUX.2 images,
/// one made by [pro] ($0.03) and one, after [pro] failed, by [max] ($0.07), cost $0.10 — not
/// twice either price.
#[test]
fn a_fan_out_served_by_two_targets_costs_each_at_its_own_price() {
    let fake = FakeProvider::start();
    bfl_failing_pro_after(&fake, 1);
    let gw = start(&fake, "json");
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        json!({"model": "flux-2-any", "prompt": "p", "size": "1024x1024", "n": 2,
               "retries": 1, "response_format": "b64_json"}),
    );
    assert_eq!(resp.json()["data"].as_array().map(Vec::len), Some(2));
    assert_eq!(cost_header(&resp), "0.1 USD; basis=gateway");
    assert_counted(&gw, "flux-2-any", 100_000_000);
}

fn cohere(search_units: Option<u64>) -> Reply {
    let mut answer = json!({"id": "abc", "results": [
        {"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]});
    if let Some(units) = search_units {
        answer["meta"] =
            json!({"api_version": {"version": "2"}, "billed_units": {"search_units": units}});
    }
    Reply::json(200, answer)
}

/// Cohere bills search units ($2 per 1,000): the answer's `meta.billed_units.search_units` (3
/// here, as reported) is $0.006, the provider's figure; without it the gateway reads the rule —
/// two short documents are one search, $0.002. Never 0; in the header, `metadata.cost` and the
/// access line alike.
#[test]
fn cohere_rerank_costs_its_search_units() {
    let fake = FakeProvider::start();
    fake.push(cohere(Some(3)));
    fake.push(cohere(None));
    let gw = start(&fake, "json");
    let body = json!({"model": "rerank-v3.5", "query": "q", "documents": ["a", "b"]});
    let billed = post(&gw, "/api/v1/rerank", body.clone());
    assert_eq!(cost_header(&billed), "0.006 USD; basis=provider");
    assert_eq!(
        billed.json()["metadata"]["cost"],
        json!({"amount": "0.006", "currency": "USD", "basis": "provider"})
    );
    let counted = post(&gw, "/api/v1/rerank", body);
    assert_eq!(cost_header(&counted), "0.002 USD; basis=gateway");
    assert_eq!(
        counted.json()["metadata"]["cost"],
        json!({"amount": "0.002", "currency": "USD", "basis": "gateway"})
    );
    let lines = access_lines(&gw, 2);
    assert_eq!(
        logged(&lines[0]),
        (json!("0.006"), json!("USD"), json!("provider"))
    );
    assert_eq!(
        logged(&lines[1]),
        (json!("0.002"), json!("USD"), json!("gateway"))
    );
    assert_counted(&gw, "rerank-v3.5", 8_000_000);
}

/// Voyage bills tokens ($0.05 per 1M for rerank-2.5): its billed `usage.total_tokens` of 1,234
/// is $0.0000617, the provider's figure.
#[test]
fn voyage_rerank_costs_its_billed_tokens() {
    let fake = FakeProvider::start();
    fake.push(Reply::json(
        200,
        json!({"object": "list", "model": "rerank-2.5", "usage": {"total_tokens": 1234},
               "data": [{"relevance_score": 0.9, "index": 0}, {"relevance_score": 0.2, "index": 1}]}),
    ));
    let gw = start(&fake, "json");
    let resp = post(
        &gw,
        "/api/v1/rerank",
        json!({"model": "voyage-rerank-2.5", "query": "q", "documents": ["a", "b"]}),
    );
    assert_eq!(cost_header(&resp), "0.0000617 USD; basis=provider");
    assert_eq!(resp.json()["metadata"]["cost"]["amount"], "0.0000617");
    let lines = access_lines(&gw, 1);
    assert_eq!(
        logged(&lines[0]),
        (json!("0.0000617"), json!("USD"), json!("provider"))
    );
}

/// A model with no price (`local-bm25` is declared unpriced) costs `unknown`, never 0: the
/// header says why, the access line has no figure but a note, and nothing is counted.
#[test]
fn an_unpriced_model_costs_unknown_never_zero() {
    let fake = FakeProvider::start();
    let gw = start(&fake, "json");
    let resp = post(
        &gw,
        "/api/v1/rerank",
        json!({"model": "local-bm25", "query": "fox", "documents": ["a fox", "a dog"]}),
    );
    assert_eq!(cost_header(&resp), "unknown; reason=unpriced");
    assert!(resp.json()["metadata"].get("cost").is_none());
    let lines = access_lines(&gw, 1);
    assert_eq!(logged(&lines[0]), (Value::Null, Value::Null, Value::Null));
    assert!(lines[0]["cost_note"].is_string(), "{}", lines[0]);
    assert_counted(&gw, "local-bm25", 0);
}

/// Raw audio from a token-priced model reports no tokens: the header's estimate (text tokens by
/// the gateway's count) is all there is, and the access line says what it leaves out.
#[test]
fn raw_audio_from_a_token_priced_model_says_what_its_cost_leaves_out() {
    let fake = FakeProvider::start();
    fake.push(Reply::bytes(200, "audio/mpeg", mp3(64)));
    let gw = start(&fake, "json");
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        json!({"model": "gpt-4o-mini-tts", "input": "hello world", "voice": "alloy"}),
    );
    assert!(
        cost_header(&resp).ends_with(" USD; basis=gateway; estimate"),
        "{}",
        cost_header(&resp)
    );
    let lines = access_lines(&gw, 1);
    assert_eq!(lines[0]["cost_basis"], "gateway");
    let note = lines[0]["cost_note"].as_str().unwrap_or_default();
    assert!(note.contains("audio output tokens"), "{}", lines[0]);
}

/// An asynchronous image task is accepted before its images exist: its answer says so, and its
/// cost is counted once the task has made them.
#[test]
fn an_accepted_image_task_has_no_cost_yet() {
    let fake = FakeProvider::start();
    fake.set_default(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": b64(&png(64, 1))}]}),
    ));
    let gw = start(&fake, "json");
    let resp = post(
        &gw,
        "/api/v1/images/generations",
        json!({"model": "gpt-image-2", "prompt": "p", "quality": "low", "size": "1024x1024",
               "async": true}),
    );
    assert_eq!(cost_header(&resp), "unknown; reason=asynchronous");
    // Its images are priced when the task has made them: one low 1024x1024 image, $0.006.
    assert_counted(&gw, "gpt-image-2", 6_000_000);
}
