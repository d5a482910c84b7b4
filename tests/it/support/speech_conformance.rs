//! The speech conformance cases every provider passes, in one place.
//!
//! A provider's test file describes its wire format in a [`SpeechCase`] (how its fake answers
//! with given audio, what its native request must look like, its native error shapes) and invokes
//! [`speech_conformance!`], which makes one `#[test]` per case
//! (`speech_minimax::conformance::native_errors`, …), each against its own fake provider and
//! gateway. The cases and their assertions are the same for every provider: plain audio (bytes
//! identical, right content type), SSE (event order; the base64 decodes to the provider's audio) or
//! its refusal, speed mapping and refusal, format refusal, `instructions` refusal, input too long,
//! each native error shape, and a retry before the first byte.

use base64::Engine;
use serde_json::{json, Value};

use super::fake::{FakeProvider, Recorded, Reply};
use super::{client, post, TestGateway};

/// Builds the native answer that delivers `pieces` of audio (concatenated: the whole file) in
/// `format` (a public format name), for a request with `stream_format` `sse` or not.
pub type AnswerFn =
    fn(pieces: &[Vec<u8>], format: &str, sse: bool, fake: &FakeProvider) -> Vec<Reply>;
/// Asserts the native request (`voice` is what the caller sent, or the model's default).
pub type CheckFn = fn(req: &Recorded, expect: &Expect<'_>);
/// Native error answers with the public `(status, code)` each must become.
pub type ErrorsFn = fn() -> Vec<(Vec<Reply>, u16, &'static str)>;

/// What one request asked for, as the native request must reflect it.
pub struct Expect<'a> {
    pub input: &'a str,
    pub voice: &'a str,
    pub format: &'a str,
    pub speed: f64,
    pub sse: bool,
}

/// One provider's wire format, as the conformance cases need it.
pub struct SpeechCase {
    /// Public model name in the test config.
    pub model: &'static str,
    /// Public formats the model produces as raw audio, with the `Content-Type` each must have.
    pub formats: &'static [(&'static str, &'static str)],
    /// Public formats the model streams as SSE (empty: SSE is refused with a 400).
    pub sse_formats: &'static [&'static str],
    /// Public formats the model cannot produce (each a 400 naming `response_format`).
    pub rejected_formats: &'static [&'static str],
    /// Public speeds the model honours, and the ones it refuses.
    pub speeds: &'static [f64],
    pub rejected_speeds: &'static [f64],
    /// Whether the model honours `instructions` (refused with a 400 otherwise).
    pub instructions: bool,
    /// A voice the provider accepts, sent by the cases that name one.
    pub voice: &'static str,
    /// The voice used when the request names none.
    pub default_voice: &'static str,
    /// Longest input accepted (characters).
    pub max_input_chars: usize,
    /// The native answer(s) the fake gives, in order, for a request.
    pub answer: AnswerFn,
    /// Assert the native request.
    pub check_request: CheckFn,
    /// Native error answers and the public `(status, code)` each must become.
    pub errors: ErrorsFn,
    /// A failure before any audio that a retry fixes (e.g. a 503, or an error inside a 200).
    pub retryable: fn() -> Vec<Reply>,
}

/// Test audio: `n` bytes whose pattern depends on `seed`.
pub fn audio(n: usize, seed: usize) -> Vec<u8> {
    (0..n).map(|i| ((i * 31 + seed * 7) % 251) as u8).collect()
}

/// POST a speech request for `model` and `input`, with the fields of `extra` added.
pub fn speech(gw: &TestGateway, model: &str, input: &str, extra: Value) -> client::Response {
    let mut body = json!({"model": model, "input": input});
    if let (Some(b), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            b.insert(k.clone(), v.clone());
        }
    }
    post(gw, "/api/v1/audio/speech", &body)
}

/// The public SSE events of an answer, parsed.
pub fn public_events(resp: &client::Response) -> Vec<Value> {
    client::sse_events(&resp.body)
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect()
}

/// The audio the `speech.audio.delta` events carry, decoded and joined.
pub fn decoded_audio(events: &[Value]) -> Vec<u8> {
    events
        .iter()
        .filter(|e| e["type"] == "speech.audio.delta")
        .flat_map(|e| {
            base64::engine::general_purpose::STANDARD
                .decode(e["audio"].as_str().unwrap())
                .unwrap()
        })
        .collect()
}

fn pieces() -> Vec<Vec<u8>> {
    vec![audio(3000, 1), audio(4000, 2), audio(1500, 3)]
}

const INPUT: &str = "The quick brown fox jumps over the lazy dog.";

/// One `#[test]` per conformance case for one provider:
/// `speech_conformance!(conformance, SpeechCase { .. })`, at module level, defines the module
/// `conformance` with the tests `plain_audio`, `sse`, `speeds`, `rejected_formats`,
/// `instructions_refused`, `input_too_long`, `native_errors` and `retry_before_first_byte`. Each
/// test evaluates the case expression, in the scope of the module that invoked the macro, and
/// runs its case.
macro_rules! speech_conformance {
    ($name:ident, $case:expr $(,)?) => {
        mod $name {
            mod case {
                #[allow(unused_imports)]
                use super::super::*;

                pub fn case() -> $crate::support::speech_conformance::SpeechCase {
                    $case
                }
            }

            #[test]
            fn plain_audio() {
                $crate::support::speech_conformance::plain_audio(&case::case());
            }

            #[test]
            fn cost() {
                $crate::support::speech_conformance::cost(&case::case());
            }

            #[test]
            fn sse() {
                $crate::support::speech_conformance::sse(&case::case());
            }

            #[test]
            fn speeds() {
                $crate::support::speech_conformance::speeds(&case::case());
            }

            #[test]
            fn rejected_formats() {
                $crate::support::speech_conformance::rejected_formats(&case::case());
            }

            #[test]
            fn instructions_refused() {
                $crate::support::speech_conformance::instructions_refused(&case::case());
            }

            #[test]
            fn input_too_long() {
                $crate::support::speech_conformance::input_too_long(&case::case());
            }

            #[test]
            fn native_errors() {
                $crate::support::speech_conformance::native_errors(&case::case());
            }

            #[test]
            fn retry_before_first_byte() {
                $crate::support::speech_conformance::retry_before_first_byte(&case::case());
            }
        }
    };
}
pub(crate) use speech_conformance;

/// A fake provider and a gateway pointing at it, for one case.
fn start() -> (FakeProvider, TestGateway) {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    (fake, gw)
}

fn body(case: &SpeechCase, extra: Value) -> Value {
    let mut b = json!({"model": case.model, "input": INPUT});
    if let (Some(b), Some(extra)) = (b.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            b.insert(k.clone(), v.clone());
        }
    }
    b
}

fn push_all(fake: &FakeProvider, replies: Vec<Reply>) {
    for r in replies {
        fake.push(r);
    }
}

/// The requests recorded since `before`, the first of which is the native speech request.
fn new_requests(fake: &FakeProvider, before: usize) -> Vec<Recorded> {
    fake.requests().split_off(before)
}

pub fn plain_audio(case: &SpeechCase) {
    let (fake, gw) = start();
    for (format, ctype) in case.formats {
        let before = fake.requests().len();
        let p = pieces();
        push_all(&fake, (case.answer)(&p, format, false, &fake));
        let resp = post(
            &gw,
            "/api/v1/audio/speech",
            &body(
                case,
                json!({"voice": case.voice, "response_format": format}),
            ),
        );
        assert_eq!(
            resp.status,
            200,
            "{}: {format}: {}",
            case.model,
            resp.text()
        );
        assert_eq!(resp.header("content-type"), Some(*ctype), "{format}");
        assert!(resp.complete, "{format}: answer not complete");
        assert!(
            resp.body == p.concat(),
            "{}: {format}: audio bytes differ",
            case.model
        );
        let sent = new_requests(&fake, before);
        assert_no_client_credentials(&sent[0]);
        (case.check_request)(
            &sent[0],
            &Expect {
                input: INPUT,
                voice: case.voice,
                format,
                speed: 1.0,
                sse: false,
            },
        );
    }
    // No voice: the model's default is sent.
    let before = fake.requests().len();
    let (format, _) = case.formats[0];
    push_all(&fake, (case.answer)(&pieces(), format, false, &fake));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &body(case, json!({"response_format": format})),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let sent = new_requests(&fake, before);
    (case.check_request)(
        &sent[0],
        &Expect {
            input: INPUT,
            voice: case.default_voice,
            format,
            speed: 1.0,
            sse: false,
        },
    );
}

pub fn sse(case: &SpeechCase) {
    let (fake, gw) = start();
    if case.sse_formats.is_empty() {
        let resp = post(
            &gw,
            "/api/v1/audio/speech",
            &body(case, json!({"stream_format": "sse"})),
        );
        assert_eq!(resp.status, 400, "{}", resp.text());
        assert!(resp.json()["details"]["stream_format"].is_string());
        return;
    }
    for format in case.sse_formats {
        let before = fake.requests().len();
        let p = pieces();
        push_all(&fake, (case.answer)(&p, format, true, &fake));
        let resp = post(
            &gw,
            "/api/v1/audio/speech",
            &body(
                case,
                json!({"voice": case.voice, "response_format": format, "stream_format": "sse"}),
            ),
        );
        assert_eq!(resp.status, 200, "{}: {}", case.model, resp.text());
        assert_eq!(resp.header("content-type"), Some("text/event-stream"));
        assert!(resp.complete);
        let events = public_events(&resp);
        assert!(events.len() >= 2, "{events:?}");
        let (done, deltas) = events.split_last().unwrap();
        for d in deltas {
            assert_eq!(d["type"], "speech.audio.delta", "{d}");
        }
        assert!(
            decoded_audio(deltas) == p.concat(),
            "{}: SSE audio differs",
            case.model
        );
        assert_eq!(done["type"], "speech.audio.done", "{done}");
        let u = &done["usage"];
        assert_eq!(
            u["total_tokens"].as_u64().unwrap(),
            u["input_tokens"].as_u64().unwrap() + u["output_tokens"].as_u64().unwrap(),
            "{u}"
        );
        let sent = new_requests(&fake, before);
        (case.check_request)(
            &sent[0],
            &Expect {
                input: INPUT,
                voice: case.voice,
                format,
                speed: 1.0,
                sse: true,
            },
        );
    }
}

pub fn speeds(case: &SpeechCase) {
    let (fake, gw) = start();
    let (format, _) = case.formats[0];
    for speed in case.speeds {
        let before = fake.requests().len();
        push_all(&fake, (case.answer)(&pieces(), format, false, &fake));
        let resp = post(
            &gw,
            "/api/v1/audio/speech",
            &body(case, json!({"speed": speed, "response_format": format})),
        );
        assert_eq!(resp.status, 200, "speed {speed}: {}", resp.text());
        let sent = new_requests(&fake, before);
        (case.check_request)(
            &sent[0],
            &Expect {
                input: INPUT,
                voice: case.default_voice,
                format,
                speed: *speed,
                sse: false,
            },
        );
    }
    for speed in case.rejected_speeds {
        let before = fake.requests().len();
        let resp = post(
            &gw,
            "/api/v1/audio/speech",
            &body(case, json!({"speed": speed})),
        );
        assert_eq!(resp.status, 400, "speed {speed}: {}", resp.text());
        let detail = resp.json()["details"]["speed"]
            .as_str()
            .unwrap()
            .to_string();
        for ok in case.speeds {
            assert!(detail.contains(&ok.to_string()), "{detail}");
        }
        assert_eq!(
            fake.requests().len(),
            before,
            "a refused request reached the provider"
        );
    }
}

pub fn rejected_formats(case: &SpeechCase) {
    let (_fake, gw) = start();
    for format in case.rejected_formats {
        let resp = post(
            &gw,
            "/api/v1/audio/speech",
            &body(case, json!({"response_format": format})),
        );
        assert_eq!(resp.status, 400, "{format}: {}", resp.text());
        let detail = resp.json()["details"]["response_format"]
            .as_str()
            .unwrap()
            .to_string();
        for (ok, _) in case.formats {
            assert!(detail.contains(ok), "{detail}");
        }
    }
}

pub fn instructions_refused(case: &SpeechCase) {
    if case.instructions {
        return;
    }
    let (_fake, gw) = start();
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &body(case, json!({"instructions": "speak softly"})),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]["instructions"].is_string());
}

pub fn input_too_long(case: &SpeechCase) {
    let (fake, gw) = start();
    let before = fake.requests().len();
    let long = "a".repeat(case.max_input_chars + 1);
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": case.model, "input": long}),
    );
    assert_eq!(resp.status, 413, "{}", resp.text());
    assert_eq!(fake.requests().len(), before);
}

pub fn native_errors(case: &SpeechCase) {
    let (fake, mut gw) = start();
    for (replies, status, code) in (case.errors)() {
        push_all(&fake, replies);
        let resp = post(&gw, "/api/v1/audio/speech", &body(case, json!({})));
        assert_eq!(resp.status, status, "{}: {}", case.model, resp.text());
        let b = resp.json();
        assert_eq!(b["code"], code, "{b}");
        assert!(!b["message"].as_str().unwrap_or("").is_empty());
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

pub fn retry_before_first_byte(case: &SpeechCase) {
    let (fake, gw) = start();
    let (format, _) = case.formats[0];
    let before = fake.requests().len();
    push_all(&fake, (case.retryable)());
    let p = pieces();
    push_all(&fake, (case.answer)(&p, format, false, &fake));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &body(case, json!({"retries": 1, "response_format": format})),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == p.concat());
    assert!(new_requests(&fake, before).len() >= 2);

    // Without retries the same failure is the caller's answer.
    push_all(&fake, (case.retryable)());
    let resp = post(&gw, "/api/v1/audio/speech", &body(case, json!({})));
    assert!(resp.status >= 500, "{}: {}", resp.status, resp.text());
}

fn assert_no_client_credentials(req: &Recorded) {
    assert_eq!(req.header("service-api-key"), None, "client key forwarded");
    if let Some(a) = req.header("authorization") {
        assert!(!a.contains(super::KEY), "client key forwarded");
    }
}

/// What one plain request (`INPUT`, the case's first format) costs, on its `Switchyard-Cost`
/// header: the figure computed by hand in [`super::costs`] from the model's price.
pub fn cost(case: &SpeechCase) {
    let (fake, gw) = start();
    let (format, _) = case.formats[0];
    push_all(&fake, (case.answer)(&pieces(), format, false, &fake));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &body(
            case,
            json!({"voice": case.voice, "response_format": format}),
        ),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    super::costs::assert_cost(case.model, &resp);
}
