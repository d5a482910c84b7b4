//! The response cache (issue 29), end to end through real listeners and a fake provider: hits
//! never reach the provider and answer what the miss answered, byte for byte; what must not be
//! kept is not; identical requests in flight make one provider call; the caller's
//! `Cache-Control`; the memory bound; purges; entries in Redis shared by instances.

#[cfg(feature = "metrics")]
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::support;
use base64::Engine;
use serde_json::json;
use support::fake::{FakeProvider, Reply};
use support::{client, TestGateway, KEY};
#[cfg(feature = "metrics")]
use support::{free_port, wait_listening};

/// Cache-enabled models appended to the standard test config, and the cache's own section.
fn config(fake: &FakeProvider, ports: (u16, u16), cache: &str) -> String {
    let mut c = support::config(&fake.base_url(), ports);
    c.push_str(
        "    tts-cached: {family: openai-tts-instruct, targets: [{provider: openai, model: gpt-4o-mini-tts}], cache: {ttl_seconds: 600}}\n\
         \x20   tts-shared: {family: openai-tts-instruct, targets: [{provider: openai, model: gpt-4o-mini-tts}], cache: {ttl_seconds: 600, shared: true}}\n\
         \x20   rerank-cached: {family: cohere-rerank, targets: [{provider: cohere, model: rerank-v3.5}], cache: {ttl_seconds: 600}}\n\
         \x20   image-cached: {family: gpt-image, targets: [{provider: openai, model: gpt-image-1, lifecycle: {still_available: true}}], cache: {ttl_seconds: 600}}\n",
    );
    c.push_str(cache);
    c
}

fn start(fake: &FakeProvider) -> TestGateway {
    TestGateway::start_with(|ports| config(fake, ports, ""))
}

/// Raw audio in `n` pieces of 1000 bytes, `gap` apart.
fn audio(n: u8, gap: Duration) -> (Vec<u8>, Reply) {
    let pieces: Vec<Vec<u8>> = (0..n).map(|i| vec![i.wrapping_mul(7); 1000]).collect();
    let reply = Reply::chunked(
        200,
        "audio/mpeg",
        pieces
            .iter()
            .enumerate()
            .map(|(i, p)| (if i == 0 { Duration::ZERO } else { gap }, p.clone()))
            .collect(),
        false,
    );
    (pieces.concat(), reply)
}

/// OpenAI's SSE speech stream of `pieces`, closed by its done event unless `cut`.
fn openai_sse(pieces: &[Vec<u8>], cut: bool) -> Reply {
    let mut events: Vec<(Duration, String)> = pieces
        .iter()
        .map(|p| {
            let ev = json!({"type": "speech.audio.delta", "audio": base64::engine::general_purpose::STANDARD.encode(p)});
            (Duration::ZERO, format!("data: {ev}\n\n"))
        })
        .collect();
    if !cut {
        let done = json!({"type": "speech.audio.done", "usage": {"input_tokens": 3, "output_tokens": 9, "total_tokens": 12}});
        events.push((Duration::ZERO, format!("data: {done}\n\n")));
    }
    Reply::sse(events)
}

fn speech_as(
    gw: &TestGateway,
    key: &str,
    extra: &[(&str, &str)],
    body: &serde_json::Value,
) -> client::Response {
    let mut headers = vec![("Service-API-Key", key)];
    headers.extend_from_slice(extra);
    client::post_json(gw.addr, "/api/v1/audio/speech", &headers, body)
}

fn speech(gw: &TestGateway, body: &serde_json::Value) -> client::Response {
    speech_as(gw, KEY, &[], body)
}

fn cache_of(r: &client::Response) -> Option<&str> {
    r.header("switchyard-cache")
}

#[test]
fn a_second_identical_speech_request_is_served_from_the_cache() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    let (whole, reply) = audio(3, Duration::ZERO);
    fake.push(reply);
    let body = json!({"model": "tts-cached", "input": "Welcome to Switchyard", "voice": "alloy"});
    let first = speech(&gw, &body);
    assert_eq!(first.status, 200, "{}", first.text());
    assert!(first.complete);
    assert_eq!(first.body, whole);
    assert_eq!(cache_of(&first), Some("miss"));
    // An omitted `speed` and `speed: 1` are one request; `retries` does not change the answer.
    let second = speech(
        &gw,
        &json!({"model": "tts-cached", "input": "Welcome to Switchyard", "voice": "alloy", "speed": 1, "retries": 0}),
    );
    assert_eq!(second.status, 200, "{}", second.text());
    assert!(second.complete);
    assert_eq!(second.body, whole, "a hit is byte-identical");
    assert_eq!(cache_of(&second), Some("hit"));
    assert!(second.header("age").is_some());
    for h in [
        "content-type",
        "cache-control",
        "transfer-encoding",
        "switchyard-cache-key",
    ] {
        assert_eq!(first.header(h), second.header(h), "{h}");
    }
    assert_eq!(
        fake.requests().len(),
        1,
        "the hit did not reach the provider"
    );
    // Another voice is another answer.
    let (other, reply) = audio(2, Duration::ZERO);
    fake.push(reply);
    let third = speech(
        &gw,
        &json!({"model": "tts-cached", "input": "Welcome to Switchyard", "voice": "nova"}),
    );
    assert_eq!(cache_of(&third), Some("miss"));
    assert_eq!(third.body, other);
    assert_eq!(fake.requests().len(), 2);
}

#[test]
fn an_sse_hit_has_the_misses_events() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    let pieces = vec![vec![1u8; 300], vec![2u8; 300]];
    fake.push(openai_sse(&pieces, false));
    let body =
        json!({"model": "tts-cached", "input": "Press one for sales", "stream_format": "sse"});
    let first = speech(&gw, &body);
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(cache_of(&first), Some("miss"));
    let second = speech(&gw, &body);
    assert_eq!(cache_of(&second), Some("hit"));
    assert_eq!(second.header("content-type"), Some("text/event-stream"));
    assert_eq!(second.body, first.body, "the same events, byte for byte");
    assert_eq!(client::sse_events(&second.body).len(), 3);
    assert_eq!(fake.requests().len(), 1);
    // The raw-audio variant of the request shares the entry: the audio its events carried.
    let raw = speech(
        &gw,
        &json!({"model": "tts-cached", "input": "Press one for sales"}),
    );
    assert_eq!(raw.status, 200, "{}", raw.text());
    assert_eq!(cache_of(&raw), Some("hit"));
    assert_eq!(raw.header("content-type"), Some("audio/mpeg"));
    assert_eq!(raw.body, pieces.concat());
    assert!(raw.complete);
    assert_eq!(fake.requests().len(), 1);
}

/// The audio the gateway's SSE events carry, and the closing event's usage.
fn audio_of(events: &[u8]) -> (Vec<u8>, serde_json::Value) {
    let mut audio = Vec::new();
    let mut done = serde_json::Value::Null;
    for ev in client::sse_events(events) {
        let v: serde_json::Value = serde_json::from_str(&ev).unwrap();
        match v["type"].as_str() {
            Some("speech.audio.delta") => audio.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(v["audio"].as_str().unwrap())
                    .unwrap(),
            ),
            Some("speech.audio.done") => done = v["usage"].clone(),
            other => panic!("unexpected event {other:?}"),
        }
    }
    (audio, done)
}

#[test]
fn a_raw_miss_serves_the_sse_variant_as_events() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    // 40 KB of audio: more than one re-framed event.
    let pieces: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 1000]).collect();
    let whole = pieces.concat();
    fake.push(Reply::bytes(200, "audio/mpeg", whole.clone()));
    let raw = speech(
        &gw,
        &json!({"model": "tts-cached", "input": "Your table is ready"}),
    );
    assert_eq!((raw.status, cache_of(&raw)), (200, Some("miss")));
    let sse = speech(
        &gw,
        &json!({"model": "tts-cached", "input": "Your table is ready", "stream_format": "sse"}),
    );
    assert_eq!(sse.status, 200, "{}", sse.text());
    assert_eq!(cache_of(&sse), Some("hit"));
    assert_eq!(sse.header("content-type"), Some("text/event-stream"));
    assert!(sse.complete);
    let (audio, usage) = audio_of(&sse.body);
    assert_eq!(audio, whole, "the events carry the miss's audio");
    assert!(client::sse_events(&sse.body).len() > 2);
    // OpenAI reports no usage for raw audio: the input counted by the gateway, as a miss does.
    assert!(usage["input_tokens"].as_u64().unwrap() > 0, "{usage}");
    assert_eq!(usage["output_tokens"], 0);
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn entries_are_the_callers_own_unless_shared() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    for model in ["tts-cached", "tts-shared"] {
        let (a, reply) = audio(1, Duration::ZERO);
        fake.push(reply);
        let body = json!({"model": model, "input": "Your code is 1234"});
        let mine = speech(&gw, &body);
        assert_eq!(
            (cache_of(&mine), mine.body.clone()),
            (Some("miss"), a.clone())
        );
        let before = fake.requests().len();
        let (b, reply) = audio(2, Duration::ZERO);
        fake.push(reply);
        let theirs = speech_as(&gw, "hashed-secret-key", &[], &body);
        if model == "tts-cached" {
            assert_eq!(cache_of(&theirs), Some("miss"), "another caller's entry");
            assert_eq!(theirs.body, b);
            assert_eq!(fake.requests().len(), before + 1);
        } else {
            assert_eq!(cache_of(&theirs), Some("hit"), "a shared model's entry");
            assert_eq!(theirs.body, a);
            assert_eq!(fake.requests().len(), before);
            // The reply pushed for it is still queued: take it out of the way.
            let _ = speech(&gw, &json!({"model": "tts-1", "input": "drain"}));
        }
    }
}

#[test]
fn a_cut_stream_an_error_event_and_a_provider_error_are_not_kept() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    let body = json!({"model": "tts-cached", "input": "cut"});
    // Raw audio cut off mid-stream (after the first audio went out).
    fake.push(Reply::chunked(
        200,
        "audio/mpeg",
        vec![
            (Duration::ZERO, vec![1; 500]),
            (Duration::from_millis(20), vec![2; 500]),
        ],
        true,
    ));
    let cut = speech(&gw, &body);
    assert!(!cut.complete, "the client sees a cut answer");
    // SSE that ends without its done event: the client gets an error event.
    let sse_body = json!({"model": "tts-cached", "input": "cut too", "stream_format": "sse"});
    fake.push(openai_sse(&[vec![3; 100]], true));
    let errored = speech(&gw, &sse_body);
    assert!(
        errored.text().contains("\"type\":\"error\""),
        "{}",
        errored.text()
    );
    // A provider error (every retry).
    let failing = json!({"model": "tts-cached", "input": "fails"});
    let failed = speech(&gw, &failing);
    assert_eq!(failed.status, 502, "{}", failed.text());
    // An error answer says what the cache did too.
    assert_eq!(cache_of(&failed), Some("miss"));
    let calls = fake.requests().len();
    // None of them was kept: each is asked again.
    for b in [&body, &failing] {
        let (a, reply) = audio(1, Duration::ZERO);
        fake.push(reply);
        let again = speech(&gw, b);
        assert_eq!((again.status, cache_of(&again)), (200, Some("miss")));
        assert_eq!(again.body, a);
    }
    fake.push(openai_sse(&[vec![4; 100]], false));
    let again = speech(&gw, &sse_body);
    assert_eq!(cache_of(&again), Some("miss"));
    assert_eq!(fake.requests().len(), calls + 3);
}

#[test]
fn no_store_and_no_cache() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    let body = json!({"model": "tts-cached", "input": "directives"});
    let (a, reply) = audio(1, Duration::ZERO);
    fake.push(reply);
    let r = speech_as(&gw, KEY, &[("Cache-Control", "no-store")], &body);
    assert_eq!((cache_of(&r), r.body.clone()), (Some("miss"), a));
    // Not stored: asked again, and stored this time.
    let (b, reply) = audio(2, Duration::ZERO);
    fake.push(reply);
    let r = speech(&gw, &body);
    assert_eq!((cache_of(&r), r.body.clone()), (Some("miss"), b.clone()));
    // `no-cache`: not looked up (the provider is asked), and its fresh answer replaces the entry.
    let (c, reply) = audio(3, Duration::ZERO);
    fake.push(reply);
    let r = speech_as(&gw, KEY, &[("Cache-Control", "max-age=0, No-Cache")], &body);
    assert_eq!((cache_of(&r), r.body.clone()), (Some("bypass"), c.clone()));
    let r = speech(&gw, &body);
    assert_eq!((cache_of(&r), r.body.clone()), (Some("hit"), c));
    assert_eq!(fake.requests().len(), 3);
}

#[test]
fn fifty_identical_requests_in_flight_make_one_provider_call() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    let gap = Duration::from_millis(150);
    let (whole, reply) = audio(6, gap);
    fake.push(reply);
    let addr = gw.addr;
    let body = json!({"model": "tts-cached", "input": "Thank you for calling"});
    let started = Instant::now();
    let threads: Vec<_> = (0..50)
        .map(|_| {
            let body = body.clone();
            std::thread::spawn(move || {
                client::post_json(
                    addr,
                    "/api/v1/audio/speech",
                    &[("Service-API-Key", KEY)],
                    &body,
                )
            })
        })
        .collect();
    let answers: Vec<client::Response> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        fake.requests().len(),
        1,
        "one provider call for all of them"
    );
    let mut misses = 0;
    for r in &answers {
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(r.complete);
        assert_eq!(r.body, whole, "each gets the whole audio");
        misses += usize::from(cache_of(r) == Some("miss"));
        assert!(matches!(cache_of(r), Some("miss" | "collapsed" | "hit")));
        // Audio as it arrives: the first bytes well before the last (the provider takes
        // 5 gaps to finish).
        let (first, last) = (r.chunks[0].0, r.chunks.last().unwrap().0);
        assert!(
            last - first >= gap * 2,
            "first bytes {:?} and last {:?} after the start",
            first - started,
            last - started
        );
    }
    assert_eq!(misses, 1);
}

#[test]
fn a_failed_leaders_followers_try_again() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    // The leader's attempts all fail slowly (every retry), so the followers wait on it; then
    // one of them asks again and the others follow it.
    fake.set_default(Reply::json(500, json!({"error": {"message": "down"}})));
    fake.push(Reply::stall(Duration::from_millis(300)));
    let (whole, reply) = audio(2, Duration::from_millis(50));
    let addr = gw.addr;
    let body = json!({"model": "tts-cached", "input": "leader fails", "retries": 0});
    let leader = {
        let body = body.clone();
        std::thread::spawn(move || {
            client::post_json(
                addr,
                "/api/v1/audio/speech",
                &[("Service-API-Key", KEY)],
                &body,
            )
        })
    };
    fake.wait_requests(1, Duration::from_secs(5));
    let followers: Vec<_> = (0..5)
        .map(|_| {
            let body = body.clone();
            std::thread::spawn(move || {
                client::post_json(
                    addr,
                    "/api/v1/audio/speech",
                    &[("Service-API-Key", KEY)],
                    &body,
                )
            })
        })
        .collect();
    // The followers are in before the leader fails (the stall holds it); then a good answer.
    fake.push(reply);
    let leader = leader.join().unwrap();
    assert_ne!(leader.status, 200, "the leader failed: {}", leader.text());
    for f in followers {
        let r = f.join().unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.body, whole);
    }
    assert_eq!(
        fake.requests().len(),
        2,
        "the leader's call, and one follower's"
    );
}

fn rerank(gw: &TestGateway, body: &serde_json::Value) -> client::Response {
    client::post_json(gw.addr, "/api/v1/rerank", &[("Service-API-Key", KEY)], body)
}

#[test]
fn a_second_identical_rerank_is_served_from_the_cache() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    fake.push(Reply::json(200, json!({"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]})));
    let body = json!({"model": "rerank-cached", "query": "capital of France", "documents": ["Berlin", "Paris"]});
    let first = rerank(&gw, &body);
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(cache_of(&first), Some("miss"));
    // `top_n` as large as the documents is the default.
    let second = rerank(
        &gw,
        &json!({"model": "rerank-cached", "query": "capital of France", "documents": ["Berlin", "Paris"], "top_n": 2}),
    );
    assert_eq!(cache_of(&second), Some("hit"));
    assert_eq!(second.json(), first.json());
    assert_eq!(fake.requests().len(), 1);
    // The miss cost what Cohere bills; the hit cost nothing upstream, and says so.
    let cost = first.header("switchyard-cost").unwrap();
    assert!(
        !cost.starts_with("unknown") && !cost.starts_with("0 "),
        "{cost}"
    );
    let currency = cost.split([' ', ';']).nth(1).unwrap();
    assert_eq!(
        second.header("switchyard-cost"),
        Some(format!("0 {currency}; basis=gateway").as_str())
    );
    // A changed field is another request.
    fake.push(Reply::json(
        200,
        json!({"results": [{"index": 1, "relevance_score": 0.9}]}),
    ));
    let third = rerank(
        &gw,
        &json!({"model": "rerank-cached", "query": "capital of France", "documents": ["Berlin", "Paris"], "top_n": 1}),
    );
    assert_eq!(cache_of(&third), Some("miss"));
    assert_eq!(third.json()["results"].as_array().unwrap().len(), 1);
    assert_eq!(fake.requests().len(), 2);
    // A model without `cache:` says nothing of a cache.
    fake.push(Reply::json(
        200,
        json!({"results": [{"index": 0, "relevance_score": 0.5}]}),
    ));
    let plain = rerank(
        &gw,
        &json!({"model": "rerank-v3.5", "query": "q", "documents": ["d"]}),
    );
    assert_eq!(plain.status, 200, "{}", plain.text());
    assert_eq!(cache_of(&plain), None);
}

#[test]
fn an_opted_in_image_model_keeps_inline_answers_only() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    let post = |body: &serde_json::Value, extra: &[(&str, &str)]| {
        let mut headers = vec![("Service-API-Key", KEY)];
        headers.extend_from_slice(extra);
        client::post_json(gw.addr, "/api/v1/images/generations", &headers, body)
    };
    let png = support::image_conformance::png(500, 7);
    let b64 = support::image_conformance::b64(&png);
    fake.set_default(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": b64}]}),
    ));
    let body =
        json!({"model": "image-cached", "prompt": "a lighthouse", "response_format": "b64_json"});
    let first = post(&body, &[]);
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(cache_of(&first), Some("miss"));
    let second = post(
        &json!({"model": "image-cached", "prompt": "a lighthouse", "response_format": "b64_json", "retries": 0}),
        &[],
    );
    assert_eq!(cache_of(&second), Some("hit"));
    assert_eq!(second.json(), first.json());
    assert_eq!(second.json()["data"][0]["b64_json"], b64);
    assert_eq!(fake.requests().len(), 1);
    // Another prompt is another answer; `no-cache` asks the provider.
    assert_eq!(
        cache_of(&post(
            &json!({"model": "image-cached", "prompt": "a harbour", "response_format": "b64_json"}),
            &[]
        )),
        Some("miss")
    );
    assert_eq!(
        cache_of(&post(&body, &[("Cache-Control", "no-cache")])),
        Some("bypass")
    );
    assert_eq!(fake.requests().len(), 3);
    // Links expire: an answer of links is served, not kept.
    let links =
        json!({"model": "image-cached", "prompt": "a lighthouse", "response_format": "url"});
    let l1 = post(&links, &[]);
    assert_eq!(
        (l1.status, cache_of(&l1)),
        (200, Some("miss")),
        "{}",
        l1.text()
    );
    let l2 = post(&links, &[]);
    assert_eq!(cache_of(&l2), Some("miss"));
    assert_eq!(fake.requests().len(), 5);
    // A task is not served from the cache: no cache header.
    let task = post(
        &json!({"model": "image-cached", "prompt": "a lighthouse", "response_format": "b64_json", "async": true}),
        &[],
    );
    assert_eq!(task.status, 200, "{}", task.text());
    assert_eq!(task.json()["task_status"], "running");
    assert_eq!(cache_of(&task), None);
}

#[cfg(feature = "metrics")]
fn with_metrics(fake: &FakeProvider, cache: &str) -> (TestGateway, SocketAddr) {
    let m = free_port();
    let gw = TestGateway::start_with(|ports| {
        config(fake, ports, cache).replace(
            "switchyard:\n",
            &format!("switchyard:\n  metrics: {{address: \"127.0.0.1:{m}\"}}\n"),
        )
    });
    let metrics: SocketAddr = format!("127.0.0.1:{m}").parse().unwrap();
    wait_listening(metrics);
    (gw, metrics)
}

/// The value of an unlabelled series in the metrics text.
#[cfg(feature = "metrics")]
fn series(metrics: SocketAddr, name: &str) -> u64 {
    let text = client::request(metrics, "GET", "/metrics", &[], b"").text();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

// The bound is read from the metrics; the memory store's own unit tests check it without them.
#[cfg(feature = "metrics")]
#[test]
fn memory_stays_within_its_bound() {
    let fake = FakeProvider::start();
    let (gw, metrics) = with_metrics(
        &fake,
        "  cache: {store: memory, max_bytes: 65536, max_entry_bytes: 16384}\n",
    );
    fake.set_handler(|_| Some(Reply::bytes(200, "audio/mpeg", vec![9; 10_000])));
    // 40 answers of 10 kB: six times the bound.
    for i in 0..40 {
        let r = speech(
            &gw,
            &json!({"model": "tts-cached", "input": format!("line {i}")}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        let held = series(metrics, "switchyard_cache_bytes");
        assert!(held <= 65536, "{held} bytes held after {i}");
    }
    assert!(series(metrics, "switchyard_cache_bytes") > 0);
    assert!(series(metrics, "switchyard_cache_evictions_total") > 0);
    // An answer over the per-entry cap is served, not kept.
    fake.set_handler(|_| Some(Reply::bytes(200, "audio/mpeg", vec![8; 20_000])));
    let big = json!({"model": "tts-cached", "input": "big"});
    assert_eq!(speech(&gw, &big).body.len(), 20_000);
    assert_eq!(cache_of(&speech(&gw, &big)), Some("miss"));
}

// The purge is served by the metrics listener.
#[cfg(feature = "metrics")]
#[test]
fn an_operator_purges_a_key_or_a_model() {
    let fake = FakeProvider::start();
    let (gw, metrics) = with_metrics(&fake, "");
    fake.set_handler(|_| Some(Reply::bytes(200, "audio/mpeg", vec![5; 100])));
    let a = json!({"model": "tts-cached", "input": "a"});
    let b = json!({"model": "tts-cached", "input": "b"});
    let key = speech(&gw, &a)
        .header("switchyard-cache-key")
        .unwrap()
        .to_string();
    speech(&gw, &b);
    assert_eq!(cache_of(&speech(&gw, &a)), Some("hit"));
    let purge = |q: &str| client::request(metrics, "POST", &format!("/cache/purge?{q}"), &[], b"");
    let r = purge(&format!("model=tts-cached&key={key}"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["purged"], 1);
    assert_eq!(cache_of(&speech(&gw, &a)), Some("miss"));
    assert_eq!(cache_of(&speech(&gw, &b)), Some("hit"));
    assert_eq!(purge("model=tts-cached").status, 200);
    assert_eq!(cache_of(&speech(&gw, &a)), Some("miss"));
    assert_eq!(cache_of(&speech(&gw, &b)), Some("miss"));
    assert_eq!(purge("key=abc").status, 400);
    assert_eq!(
        client::request(metrics, "GET", "/cache/purge?model=tts-cached", &[], b"").status,
        405
    );
}

#[cfg(feature = "redis")]
#[test]
fn redis_entries_are_shared_by_instances_and_survive_a_restart() {
    let fake = FakeProvider::start();
    let prefix = support::redis::run_prefix();
    let url = support::redis::redis_url();
    let start = || {
        TestGateway::start_with(|ports| {
            config(&fake, ports, "  cache: {store: redis}\n").replace(
                "  images: {",
                &format!(
                    "  store: {{redis_url: \"{url}\", key_prefix: \"{prefix}\"}}\n  images: {{"
                ),
            )
        })
    };
    let (one, two) = (start(), start());
    let (whole, reply) = audio(3, Duration::ZERO);
    fake.push(reply);
    let body = json!({"model": "tts-cached", "input": "shared between instances"});
    let first = speech(&one, &body);
    assert_eq!(
        (cache_of(&first), first.body.clone()),
        (Some("miss"), whole.clone())
    );
    let other = speech(&two, &body);
    assert_eq!(
        (cache_of(&other), other.body.clone()),
        (Some("hit"), whole.clone())
    );
    drop(one);
    let three = start();
    let after = speech(&three, &body);
    assert_eq!((cache_of(&after), after.body.clone()), (Some("hit"), whole));
    assert_eq!(fake.requests().len(), 1);
    fake.push(Reply::json(
        200,
        json!({"results": [{"index": 0, "relevance_score": 0.4}]}),
    ));
    let r = json!({"model": "rerank-cached", "query": "q", "documents": ["d"]});
    let miss = rerank(&two, &r);
    let hit = rerank(&three, &r);
    assert_eq!(
        (cache_of(&miss), cache_of(&hit)),
        (Some("miss"), Some("hit"))
    );
    assert_eq!(miss.json(), hit.json());
}
