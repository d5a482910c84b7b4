//! Criterion micro-benchmarks of the gateway's pure hot paths, on one core, with the same bodies
//! as the throughput benchmark (`benches/throughput/workload.rs`):
//!
//! - rerank, 100 and 10 documents: validate the public request, translate it to Cohere's, translate
//!   Cohere's answer back and serialize the public answer (`end_to_end`: the issue's ≤ 50 µs target
//!   for 100 documents), and each step alone, including the gateway's token counting for `usage`;
//! - image: the same four steps for DALL·E 3;
//! - SSE: splitting OpenAI's events (pass-through) and wrapping raw audio in the gateway's events
//!   (ElevenLabs);
//! - speech encoding: 1 s of 24 kHz PCM (the Realtime API's and Gemini's) into each public format,
//!   in 4,800-byte pieces (100 ms, a delta's size), `wav` being the copy the others compare with;
//! - authentication of an API key;
//! - the usage ledger's `record` with its writer running and with the database down, and their
//!   ratio (`hot_paths/ledger.rs`).
//!
//! `cargo bench --bench hot_paths`; see `benches/README.md`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code)]
#[path = "throughput/workload.rs"]
mod workload;

#[cfg(feature = "ledger")]
#[path = "hot_paths/ledger.rs"]
mod ledger;

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use switchyard::internals::api::images::{ImageItem, ImageResult};
use switchyard::internals::api::{images, rerank};
use switchyard::internals::catalog::{Catalog, Target};
use switchyard::internals::common::images::ImageAnswer;
use switchyard::internals::common::images::ImageData;
use switchyard::internals::common::images::NativeImages;
use switchyard::internals::common::native::Prepared;

const CONFIG: &str = r#"
version: 1
switchyard:
  listeners: [{name: bench, address: "127.0.0.1:1"}]
  auth: {api_keys: [{name: bench, key: "bench-key"}]}
  providers:
    cohere: {kind: cohere, api_key: "sk-bench", base_url: "http://127.0.0.1:9"}
    ark: {kind: ark, api_key: "sk-bench", base_url: "http://127.0.0.1:9/api/v3"}
  models:
    rerank-v3.5: {family: cohere-rerank, targets: [{provider: cohere, model: rerank-v3.5}]}
    seedream-4.0: {family: seedream, lifecycle: {still_available: true}, targets: [{provider: ark, model: doubao-seedream-4-0-250828}]}
"#;

struct Fixture {
    settings: switchyard::config::GatewaySettings,
}

impl Fixture {
    fn new() -> Fixture {
        let settings = switchyard::config::load_str(CONFIG, &|_| None)
            .unwrap_or_else(|e| panic!("bench config: {e:?}"))
            .gateway;
        Fixture { settings }
    }

    fn catalog(&self) -> &Catalog {
        self.settings.catalog()
    }

    fn target(&self, model: &str) -> &Target {
        &self.catalog().get(model).unwrap().targets[0]
    }
}

/// Validate, translate, translate back and serialize: one rerank request's pure work.
fn rerank_once(f: &Fixture, body: &[u8], answer: &[u8], headers: &http::HeaderMap) -> usize {
    let req = rerank::parse(body, f.catalog(), 5).unwrap();
    let target = f.target("rerank-v3.5");
    let native = f
        .settings
        .adapters()
        .rerank(&target.provider)
        .unwrap()
        .request(target, &req)
        .unwrap();
    let result = f
        .settings
        .adapters()
        .rerank(&target.provider)
        .unwrap()
        .response(&target.provider, &req, headers, answer)
        .unwrap();
    let out = result.write_json().unwrap();
    match native {
        Prepared::Http(n) => n.body.len() + out.len(),
        Prepared::Local(b) => b.len() + out.len(),
        Prepared::Socket(_) => out.len(),
    }
}

fn bench_rerank(c: &mut Criterion, docs: usize) {
    let f = Fixture::new();
    let body = workload::rerank_body("rerank-v3.5", docs).into_bytes();
    let answer = workload::rerank_answer(docs).into_bytes();
    let headers = http::HeaderMap::new();
    let target = f.target("rerank-v3.5");
    let mut g = c.benchmark_group(format!("rerank_{docs}"));
    g.bench_function("end_to_end", |b| {
        b.iter(|| rerank_once(&f, black_box(&body), black_box(&answer), &headers))
    });
    g.bench_function("validate", |b| {
        b.iter(|| rerank::parse(black_box(&body), f.catalog(), 5).unwrap())
    });
    let req = rerank::parse(&body, f.catalog(), 5).unwrap();
    g.bench_function("translate_request", |b| {
        b.iter(|| {
            f.settings
                .adapters()
                .rerank(&target.provider)
                .unwrap()
                .request(target, black_box(&req))
                .unwrap()
        })
    });
    g.bench_function("translate_answer", |b| {
        b.iter(|| {
            let r = f
                .settings
                .adapters()
                .rerank(&target.provider)
                .unwrap()
                .response(&target.provider, &req, &headers, black_box(&answer))
                .unwrap();
            r.write_json().unwrap()
        })
    });
    g.bench_function("usage_tokens", |b| {
        b.iter(|| black_box(&req).usage(None, rerank::QueryCounting::PerDocument))
    });
    g.finish();
}

/// The count cache (`tokens/texts.rs`) on one document of the workload's kind: counted afresh, a
/// miss (a text never seen: made per iteration, as the fresh row makes it too) and a hit.
fn count_cache(c: &mut Criterion) {
    let mut g = c.benchmark_group("tokens_230_chars");
    let mut n = 0u64;
    let mut fresh_text = || {
        n += 1;
        format!("{} {n}", workload::document(n as usize))
    };
    g.bench_function("count_fresh", |b| {
        b.iter(|| switchyard::internals::tokens::count(black_box(&fresh_text())))
    });
    g.bench_function("count_cached_miss", |b| {
        b.iter(|| switchyard::internals::tokens::count_cached(black_box(&fresh_text())))
    });
    let text = workload::document(7);
    g.bench_function("count_cached_hit", |b| {
        b.iter(|| switchyard::internals::tokens::count_cached(black_box(&text)))
    });
    g.finish();
}

fn rerank_100(c: &mut Criterion) {
    bench_rerank(c, 100);
}

fn rerank_10(c: &mut Criterion) {
    bench_rerank(c, 10);
}

/// The public result for URL answers asked as `url` (the delivery step passes them through).
fn public(native: NativeImages) -> ImageResult {
    let data = native
        .images
        .into_iter()
        .map(|i| match i.data {
            ImageData::Url(url) => ImageItem {
                url: Some(url),
                b64_json: None,
                revised_prompt: i.revised_prompt,
                layer: i.layer,
            },
            other => panic!("the workload answers with URLs, not {other:?}"),
        })
        .collect();
    ImageResult {
        created: native.created.unwrap_or(0),
        data,
        task_id: uuid::Uuid::new_v4().to_string(),
        task_status: "succeed",
        error: None,
        facts: native.facts,
        served: Vec::new(),
    }
}

/// The images of a direct (not task-based) answer.
fn images_of(answer: ImageAnswer) -> NativeImages {
    match answer {
        ImageAnswer::Images(images) => images,
        ImageAnswer::Task(t) => panic!("the workload answers directly, not with task {}", t.id),
    }
}

fn image(c: &mut Criterion) {
    let f = Fixture::new();
    let (_, body) = workload::Workload::Image.public();
    let body = body.into_bytes();
    let answer = workload::IMAGE_ANSWER.as_bytes();
    let target = f.target("seedream-4.0");
    let headers = http::HeaderMap::new();
    let mut g = c.benchmark_group("image");
    g.bench_function("end_to_end", |b| {
        b.iter(|| {
            let req = images::parse(black_box(&body), f.catalog(), 5).unwrap();
            let native = f
                .settings
                .adapters()
                .images(&target.provider)
                .unwrap()
                .request(target, &req, req.n)
                .unwrap();
            let images = f
                .settings
                .adapters()
                .images(&target.provider)
                .unwrap()
                .response(&target.provider, &req, &headers, black_box(answer));
            (
                native,
                serde_json::to_vec(&public(images_of(images.unwrap()))).unwrap(),
            )
        })
    });
    g.bench_function("validate", |b| {
        b.iter(|| images::parse(black_box(&body), f.catalog(), 5).unwrap())
    });
    let req = images::parse(&body, f.catalog(), 5).unwrap();
    g.bench_function("translate_request", |b| {
        b.iter(|| {
            f.settings
                .adapters()
                .images(&target.provider)
                .unwrap()
                .request(target, black_box(&req), 1)
                .unwrap()
        })
    });
    g.bench_function("translate_answer", |b| {
        b.iter(|| {
            let r = f
                .settings
                .adapters()
                .images(&target.provider)
                .unwrap()
                .response(&target.provider, &req, &headers, black_box(answer))
                .unwrap();
            serde_json::to_vec(&public(images_of(r))).unwrap()
        })
    });
    g.finish();
}

fn sse(c: &mut Criterion) {
    use switchyard::internals::engine::speech::delta_event;
    use switchyard::internals::stream::sse::EventSplitter;
    let mut g = c.benchmark_group("sse");
    // Four OpenAI delta events (1 KiB of audio each) arriving in one read.
    let b64 = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        workload::audio(1024),
    );
    let one = format!("data: {{\"type\":\"speech.audio.delta\",\"audio\":\"{b64}\"}}\n\n");
    let read = Bytes::from(one.repeat(4));
    g.bench_function("openai_split_4_events", |b| {
        b.iter(|| {
            let mut s = EventSplitter::new();
            s.push(black_box(&read));
            let mut n = 0;
            while let Some(ev) = s.next_event() {
                n += ev.len();
            }
            n
        })
    });
    let piece = workload::audio(1024);
    g.bench_function("elevenlabs_delta_event_1KiB", |b| {
        b.iter(|| delta_event(black_box(&piece)))
    });
    let piece = workload::audio(16 * 1024);
    g.bench_function("elevenlabs_delta_event_16KiB", |b| {
        b.iter(|| delta_event(black_box(&piece)))
    });
    g.finish();
}

fn encode(c: &mut Criterion) {
    use switchyard::internals::stream::encode::encoder;
    // A voiced sound more than noise: 150 Hz with two overtones, its loudness moving at 4 Hz.
    let pcm: Vec<u8> = (0..24_000)
        .flat_map(|i| {
            let t = f64::from(i) / 24_000.0;
            let tone: f64 = [(150.0, 1.0), (300.0, 0.5), (450.0, 0.25)]
                .iter()
                .map(|(hz, a)| a * (t * hz * std::f64::consts::TAU).sin())
                .sum();
            let level = 0.6 + 0.4 * (t * 4.0 * std::f64::consts::TAU).sin();
            ((tone * level * 9_000.0) as i16).to_le_bytes()
        })
        .collect();
    let mut g = c.benchmark_group("encode_1s_24khz");
    for format in ["wav", "mp3", "opus", "aac", "flac"] {
        if encoder(format, 24_000).is_none() {
            continue; // built without `speech-encoding`
        }
        g.bench_function(format, |b| {
            b.iter(|| {
                let mut enc = encoder(format, 24_000).unwrap();
                let mut out = Vec::new();
                for piece in pcm.chunks(4_800) {
                    enc.push(black_box(piece), &mut out).unwrap();
                }
                enc.finish(&mut out).unwrap();
                out.iter().map(Bytes::len).sum::<usize>()
            })
        });
    }
    g.finish();
}

fn auth(c: &mut Criterion) {
    let f = Fixture::new();
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "service-api-key",
        http::HeaderValue::from_static("bench-key"),
    );
    c.bench_function("auth/api_key", |b| {
        b.iter(|| f.settings.auth().authenticate(black_box(&headers)).unwrap())
    });
}

fn ledger_record(_c: &mut Criterion) {
    #[cfg(feature = "ledger")]
    ledger::bench(_c);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = rerank_100, rerank_10, count_cache, image, sse, encode, auth, ledger_record
}
criterion_main!(benches);
