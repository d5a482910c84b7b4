//! Gemini speech (Gemini 3.8 Flash TTS and Flash-Lite TTS) end to end against a fake Gemini API:
//! the streamed `generateContent` request it receives (model path, `?alt=sse`, the key only in
//! `x-goog-api-key`, the text, voice and style), PCM answered as Google documents it (SSE events
//! of `candidates[].content.parts[].inlineData` labelled `audio/L16;codec=pcm;rate=24000`, the last
//! with `finishReason` and `usageMetadata`), the gateway's WAV decoded, raw PCM, the public SSE,
//! the formats only an encoder can make, Google's errors, a cut stream, and the voice list.

use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};

use crate::support;
use support::client;
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{decoded_audio, public_events, speech};
use support::{auth, TestGateway, KEY, PROVIDER_KEY};

const FLASH: &str = "gemini-3.8-flash-tts";
const LITE: &str = "gemini-3.8-flash-lite-tts";
const PCM_TYPE: &str = "audio/L16;codec=pcm;rate=24000";
const INPUT: &str = "The quick brown fox jumps over the lazy dog.";

fn path(model: &str) -> String {
    format!("/v1beta/models/{model}:streamGenerateContent?alt=sse")
}

/// 16-bit samples, `n` of them, whose values depend on `seed`.
fn pcm(n: usize, seed: i16) -> Vec<u8> {
    (0..n)
        .flat_map(|i| ((i as i16).wrapping_mul(37).wrapping_add(seed)).to_le_bytes())
        .collect()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn audio_event(piece: &[u8]) -> String {
    let event = json!({"candidates": [{"content": {"role": "model", "parts": [
        {"inlineData": {"mimeType": PCM_TYPE, "data": b64(piece)}}]}, "index": 0}],
        "modelVersion": FLASH, "responseId": "r-1"});
    format!("data: {event}\r\n\r\n")
}

fn last_event() -> String {
    let event = json!({"candidates": [{"content": {"role": "model", "parts": []},
        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 75,
            "totalTokenCount": 84,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 9}],
            "candidatesTokensDetails": [{"modality": "AUDIO", "tokenCount": 75}]},
        "modelVersion": FLASH, "responseId": "r-1"});
    format!("data: {event}\r\n\r\n")
}

/// The stream Google sends for `pieces` of PCM: one event each, then the last one.
fn answer(pieces: &[Vec<u8>]) -> Reply {
    let mut events: Vec<(Duration, String)> = pieces
        .iter()
        .map(|p| (Duration::ZERO, audio_event(p)))
        .collect();
    events.push((Duration::ZERO, last_event()));
    Reply::sse(events)
}

fn pieces() -> Vec<Vec<u8>> {
    vec![pcm(1500, 1), pcm(2000, 2), pcm(750, 3)]
}

fn google_error(status: u16, google: &str, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"error": {"code": status, "message": message, "status": google}}),
    )
}

fn only_request(fake: &FakeProvider, before: usize) -> Recorded {
    let sent = fake.requests();
    assert_eq!(sent.len(), before + 1, "one native request");
    sent[before].clone()
}

/// The request Gemini must have received: the model's streamed path, the key in
/// `x-goog-api-key` and nowhere else, none of the caller's credentials, and `speech_config`.
fn check_request(req: &Recorded, model: &str, speech_config: Value, part: Value) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, path(model));
    assert_eq!(req.header("x-goog-api-key"), Some(PROVIDER_KEY));
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.header("authorization"), None);
    for (name, value) in &req.headers {
        assert!(
            !value.contains(KEY),
            "the caller's key reached Gemini in {name}"
        );
    }
    assert_eq!(
        req.json(),
        json!({"contents": [{"role": "user", "parts": [part]}],
               "generationConfig": {"responseModalities": ["AUDIO"],
                                    "speechConfig": speech_config}})
    );
}

fn prebuilt(voice: &str) -> Value {
    json!({"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": voice}}})
}

#[test]
fn wav_is_the_pcm_with_a_header_and_costs_the_reported_tokens() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let p = pieces();
    fake.push(answer(&p));
    let resp = speech(
        &gw,
        FLASH,
        INPUT,
        json!({"voice": "Puck", "response_format": "wav"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("audio/wav"));
    assert!(resp.complete);
    let wav = &resp.body;
    // A RIFF WAVE of PCM (format 1), mono, 24 kHz, 16-bit, then the samples as sent.
    assert_eq!(&wav[0..4], b"RIFF");
    assert_eq!(&wav[8..16], b"WAVEfmt ");
    let u16_at = |i: usize| u16::from_le_bytes([wav[i], wav[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([wav[i], wav[i + 1], wav[i + 2], wav[i + 3]]);
    assert_eq!(u16_at(20), 1, "PCM");
    assert_eq!(u16_at(22), 1, "mono");
    assert_eq!(u32_at(24), 24_000, "sample rate");
    assert_eq!(u32_at(28), 48_000, "byte rate");
    assert_eq!(u16_at(34), 16, "bits per sample");
    assert_eq!(&wav[36..40], b"data");
    let samples = &wav[44..];
    assert_eq!(samples.len() / 2, 1500 + 2000 + 750, "sample count");
    assert!(samples == p.concat().as_slice(), "samples differ");
    // The head leaves before the usage arrives: the text tokens by the gateway's count at $0.50
    // per 1M, an estimate (the reported usage is billed in the log: `cost::gemini_speech_…`).
    let tokens = switchyard::internals::tokens::count(INPUT) as u64;
    let head = format!("0.{:0>9}", tokens * 500);
    assert_eq!(
        resp.header("switchyard-cost"),
        Some(
            format!(
                "{} USD; basis=gateway; estimate",
                head.trim_end_matches('0')
            )
            .as_str()
        )
    );
    check_request(
        &only_request(&fake, 0),
        FLASH,
        prebuilt("Puck"),
        json!({"text": INPUT}),
    );
}

#[test]
fn pcm_raw_with_the_default_voice_style_and_a_library_voice() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let p = pieces();
    fake.push(answer(&p));
    let resp = speech(
        &gw,
        LITE,
        INPUT,
        json!({"response_format": "pcm", "instructions": "calm, like a late-night radio host"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("audio/pcm"));
    assert!(resp.body == p.concat(), "PCM differs");
    // The style is metadata of the part, never words in the text.
    check_request(
        &only_request(&fake, 0),
        LITE,
        prebuilt("Kore"),
        json!({"text": INPUT, "speech_metadata": {"style": "calm, like a late-night radio host"}}),
    );
    // A voice that is not prebuilt (the Extended Voice Library's) goes as `voiceConfig.voice`,
    // the caller's `language_code` as `languageCode`.
    fake.push(answer(&p));
    let resp = speech(
        &gw,
        LITE,
        INPUT,
        json!({"response_format": "pcm", "voice": "lib-ada-0042", "language_code": "en-GB"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    check_request(
        &only_request(&fake, 1),
        LITE,
        json!({"voiceConfig": {"voice": "lib-ada-0042"}, "languageCode": "en-GB"}),
        json!({"text": INPUT}),
    );
}

#[test]
fn sse_carries_the_pcm_and_the_usage() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let p = pieces();
    fake.push(answer(&p));
    let resp = speech(
        &gw,
        FLASH,
        INPUT,
        json!({"response_format": "pcm", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("text/event-stream"));
    let events = public_events(&resp);
    let (done, deltas) = events.split_last().unwrap();
    assert!(deltas.iter().all(|d| d["type"] == "speech.audio.delta"));
    assert!(decoded_audio(deltas) == p.concat(), "SSE audio differs");
    assert_eq!(done["type"], "speech.audio.done", "{done}");
    assert_eq!(
        done["usage"],
        json!({"input_tokens": 9, "output_tokens": 75, "total_tokens": 84})
    );
    assert_eq!(only_request(&fake, 0).path, path(FLASH));
}

/// The compressed formats are the gateway's encoders' (`stream::encode`): each is valid audio of
/// its kind when this build encodes it, else a 400 naming `response_format` before anything is
/// sent.
#[test]
fn compressed_formats_are_encoded_or_precisely_refused() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for format in ["mp3", "opus", "aac", "flac"] {
        let before = fake.requests().len();
        fake.push(answer(&pieces()));
        let resp = speech(&gw, FLASH, INPUT, json!({"response_format": format}));
        if resp.status == 200 {
            let b = &resp.body;
            let valid = match format {
                "mp3" => b.starts_with(b"ID3") || (b[0] == 0xFF && b[1] & 0xE0 == 0xE0),
                "opus" => b.starts_with(b"OggS") && b.windows(8).any(|w| w == b"OpusHead"),
                "aac" => (b[0] == 0xFF && b[1] & 0xF6 == 0xF0) || &b[4..8] == b"ftyp",
                _ => b.starts_with(b"fLaC"),
            };
            assert!(valid, "{format}: not {format} audio: {:02x?}", &b[..8]);
            assert_eq!(only_request(&fake, before).path, path(FLASH));
            continue;
        }
        assert_eq!(resp.status, 400, "{format}: {}", resp.text());
        let body = resp.json();
        let detail = body["details"]["response_format"].as_str().unwrap();
        assert!(
            detail.contains(&format!("cannot encode as `{format}`")),
            "{detail}"
        );
        assert!(detail.contains("wav") && detail.contains("pcm"), "{detail}");
        assert_eq!(fake.requests().len(), before, "a refused request was sent");
        // The reply queued for it is not consumed; the next case starts afresh.
        let _ = speech(&gw, FLASH, INPUT, json!({"response_format": "pcm"}));
    }
}

#[test]
fn googles_errors_are_classified() {
    let fake = FakeProvider::start();
    let mut gw = TestGateway::start(&fake);
    let rows = [
        (
            google_error(
                400,
                "INVALID_ARGUMENT",
                "Request contains an invalid argument.",
            ),
            400,
            "invalid_request",
        ),
        (
            google_error(
                429,
                "RESOURCE_EXHAUSTED",
                &format!("Quota exceeded for key {PROVIDER_KEY}."),
            ),
            429,
            "rate_limited",
        ),
        (
            google_error(
                404,
                "NOT_FOUND",
                "models/gemini-3.8-flash-tts is not found for API version v1beta.",
            ),
            503,
            "model_unavailable",
        ),
    ];
    for (reply, status, code) in rows {
        fake.push(reply);
        let resp = speech(&gw, FLASH, INPUT, json!({"response_format": "pcm"}));
        assert_eq!(resp.status, status, "{code}: {}", resp.text());
        assert_eq!(resp.json()["code"], code, "{}", resp.text());
        assert!(!resp.text().contains(PROVIDER_KEY), "provider key leaked");
        if code == "model_unavailable" {
            // A model-gone answer retires the target for hours.
            gw = TestGateway::start(&fake);
        }
    }
    // An error event inside the 200 stream, before any audio, is the same error.
    let event = json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
        "message": "Resource has been exhausted."}});
    fake.push(Reply::sse(vec![(
        Duration::ZERO,
        format!("data: {event}\r\n\r\n"),
    )]));
    let resp = speech(&gw, FLASH, INPUT, json!({"response_format": "pcm"}));
    assert_eq!(resp.status, 429, "{}", resp.text());
    assert_eq!(resp.json()["code"], "rate_limited");
}

#[test]
fn a_cut_stream_is_never_a_short_success() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // Audio, then the connection drops before the last event.
    let cut = || {
        Reply::chunked(
            200,
            "text/event-stream",
            vec![(Duration::ZERO, audio_event(&pcm(2000, 1)).into_bytes())],
            true,
        )
    };
    fake.push(cut());
    let resp = speech(&gw, FLASH, INPUT, json!({"response_format": "pcm"}));
    // The audio had started: the answer is cut short, not completed.
    assert!(
        resp.status == 200 && !resp.complete || resp.status >= 500,
        "{}: complete {}",
        resp.status,
        resp.complete
    );
    fake.push(cut());
    let resp = speech(
        &gw,
        FLASH,
        INPUT,
        json!({"response_format": "pcm", "stream_format": "sse"}),
    );
    let events = public_events(&resp);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "error", "{last}");
    // A stream that ends cleanly without its `finishReason` is cut too.
    fake.push(Reply::sse(vec![(Duration::ZERO, audio_event(&pcm(10, 1)))]));
    let resp = speech(
        &gw,
        FLASH,
        INPUT,
        json!({"response_format": "pcm", "stream_format": "sse"}),
    );
    let events = public_events(&resp);
    assert_eq!(events.last().unwrap()["type"], "error", "{events:?}");
}

#[test]
fn the_voice_list_is_geminis() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.set_handler(|req| {
        if !req.path.starts_with("/v1beta/voices") {
            return None;
        }
        assert_eq!(req.header("x-goog-api-key"), Some(PROVIDER_KEY));
        Some(if req.path.contains("page_token=p2") {
            Reply::json(
                200,
                json!({"voices": [{"id": "lib-ada-0042", "display_name": "Ada",
                    "type": "prebuilt", "language_code": "en-GB"}]}),
            )
        } else {
            assert_eq!(req.path, "/v1beta/voices?page_size=1000");
            Reply::json(
                200,
                json!({"voices": [
                    {"id": "Kore", "display_name": "Kore", "type": "prebuilt", "gender": "female"},
                    {"id": "Puck", "display_name": "Puck", "type": "prebuilt"}],
                    "next_page_token": "p2"}),
            )
        })
    });
    let resp = client::request(
        gw.addr,
        "GET",
        &format!("/api/v1/audio/voices?model={FLASH}"),
        &auth(),
        b"",
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let list = resp.json();
    assert_eq!(list["provider_voices"], "listed", "{list}");
    assert_eq!(list["default_voice"], "Kore");
    let ids: Vec<(&str, &str)> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["id"].as_str().unwrap(), v["source"].as_str().unwrap()))
        .collect();
    assert_eq!(
        ids,
        [
            ("Kore", "builtin"),
            ("Puck", "provider"),
            ("lib-ada-0042", "provider")
        ],
        "{list}"
    );
}
