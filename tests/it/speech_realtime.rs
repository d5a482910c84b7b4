//! OpenAI speech through the Realtime API (issue 45): from 2027-01-06 `tts-1`, `tts-1-hd` and
//! `gpt-4o-mini-tts` answer through their successor `gpt-realtime-2.1-mini`, whose adapter speaks
//! a WebSocket to the Realtime fake (`support/realtime_fake.rs`). What the caller gets (raw audio
//! and SSE, WAV decoded), what the fake received (the text to be read, voice, speed,
//! instructions), refusals, retries before the first byte, cuts after it, cost and the cache.

use std::io::{Read, Write};
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};
use switchyard::internals::caps::lifecycle::Clock;

use crate::support::realtime_fake::{pcm_pieces, RealtimeFake, Script};
use crate::support::tls_front::{TestCa, TlsFront};
use crate::support::{client, TestGateway, KEY, PROVIDER_KEY};

/// 2027-01-07 00:00 UTC: the day after OpenAI's speech models shut down.
const AFTER_SHUTDOWN: i64 = 1_799_280_000;

/// The PCM the fake speaks by default, whole.
fn default_pcm() -> Vec<u8> {
    pcm_pieces().concat()
}

/// The models as the default configuration has them, the Realtime account at `base_url`.
fn yaml(ports: (u16, u16), base_url: &str, tls: &str, extra: &str) -> String {
    format!(
        r#"
version: 1
threads: 2
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners:
    - {{name: domestic, region: cn, address: "127.0.0.1:{p0}"}}
    - {{name: overseas, region: global, address: "127.0.0.1:{p1}"}}
  retries: {{max: 2, initial_backoff_ms: 1, max_backoff_ms: 5, max_retry_after_ms: 50}}
  auth:
    api_keys:
      - {{name: tester, key: "{KEY}"}}
  providers:
    openai:
      kind: openai
      api_key: "{PROVIDER_KEY}"
      base_url: "{base_url}"
      timeouts: {{connect_ms: 500, total_connect_ms: 1000, read_ms: 700, write_ms: 1000, idle_ms: 5000}}{tls}
  models:
    tts-1: {{family: openai-tts, successor: gpt-realtime-2.1-mini, targets: [{{provider: openai, model: tts-1}}]}}
    tts-1-hd: {{family: openai-tts, successor: gpt-realtime-2.1-mini, targets: [{{provider: openai, model: tts-1-hd}}]}}
    gpt-4o-mini-tts: {{family: openai-tts-instruct, default_voice: alloy, successor: gpt-realtime-2.1-mini, targets: [{{provider: openai, model: gpt-4o-mini-tts}}]}}
    gpt-realtime-2.1-mini:
      family: openai-realtime
      default_voice: alloy
      voice_map: {{fable: ballad, onyx: cedar, nova: marin}}
      targets: [{{provider: openai, model: gpt-realtime-2.1-mini}}]
{extra}"#,
        p0 = ports.0,
        p1 = ports.1,
    )
}

fn gateway(fake: &RealtimeFake) -> TestGateway {
    TestGateway::start_at(
        |ports| yaml(ports, &fake.base_url(), "", ""),
        Clock::manual(AFTER_SHUTDOWN),
    )
}

fn speech(gw: &TestGateway, body: &Value) -> client::Response {
    client::post_json(
        gw.addr,
        "/api/v1/audio/speech",
        &[("Authorization", &format!("Bearer {KEY}"))],
        body,
    )
}

/// The samples of a WAV file (16-bit mono 24 kHz, checked).
fn wav_samples(body: &[u8]) -> Vec<u8> {
    assert_eq!(&body[..4], b"RIFF", "not a WAV file");
    assert_eq!(&body[8..16], b"WAVEfmt ");
    let u16_at = |i: usize| u16::from_le_bytes([body[i], body[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes(body[i..i + 4].try_into().unwrap());
    assert_eq!(u16_at(20), 1, "PCM");
    assert_eq!(u16_at(22), 1, "mono");
    assert_eq!(u32_at(24), 24_000, "sample rate");
    assert_eq!(u16_at(34), 16, "bits per sample");
    // The data chunk after the fmt chunk.
    let mut at = 20 + u32_at(16) as usize;
    while &body[at..at + 4] != b"data" {
        at += 8 + u32_at(at + 4) as usize;
    }
    body[at + 8..].to_vec()
}

/// The SSE answer's audio and its closing event's usage.
fn sse_audio(resp: &client::Response) -> (Vec<u8>, Value) {
    let mut audio = Vec::new();
    let mut usage = Value::Null;
    for event in client::sse_events(&resp.body) {
        let v: Value = serde_json::from_str(&event).unwrap();
        match v["type"].as_str() {
            Some("speech.audio.delta") => audio.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(v["audio"].as_str().unwrap())
                    .unwrap(),
            ),
            Some("speech.audio.done") => usage = v["usage"].clone(),
            other => panic!("unexpected event {other:?}: {v}"),
        }
    }
    (audio, usage)
}

#[test]
fn past_the_shutdown_openai_models_answer_through_the_realtime_api() {
    let fake = RealtimeFake::start();
    let gw = gateway(&fake);
    for model in ["tts-1", "tts-1-hd", "gpt-4o-mini-tts"] {
        let pcm = speech(
            &gw,
            &json!({"model": model, "input": "Hello there.", "voice": "alloy", "response_format": "pcm"}),
        );
        assert_eq!(pcm.status, 200, "{model}: {}", pcm.text());
        assert_eq!(pcm.header("content-type"), Some("audio/pcm"));
        assert_eq!(
            pcm.header("switchyard-served-model"),
            Some("gpt-realtime-2.1-mini")
        );
        // The successor's own lifecycle headers: it is not being retired.
        assert_eq!(pcm.header("sunset"), None, "{model}");
        assert!(pcm.complete);
        assert_eq!(pcm.body, default_pcm(), "{model}: the PCM as spoken");

        let wav = speech(
            &gw,
            &json!({"model": model, "input": "Hello there.", "voice": "alloy", "response_format": "wav"}),
        );
        assert_eq!(wav.status, 200, "{}", wav.text());
        assert_eq!(wav.header("content-type"), Some("audio/wav"));
        assert_eq!(
            wav_samples(&wav.body),
            default_pcm(),
            "{model}: WAV samples"
        );

        let sse = speech(
            &gw,
            &json!({"model": model, "input": "Hello there.", "voice": "alloy", "response_format": "pcm", "stream_format": "sse"}),
        );
        assert_eq!(sse.status, 200, "{}", sse.text());
        assert_eq!(sse.header("content-type"), Some("text/event-stream"));
        let (audio, usage) = sse_audio(&sse);
        assert_eq!(audio, default_pcm());
        // The Realtime usage: text tokens in, audio tokens out.
        assert_eq!(
            usage,
            json!({"input_tokens": 20, "output_tokens": 90, "total_tokens": 110})
        );
    }
    // Every request was one session on the Realtime model, with the provider's key.
    let sessions = fake.sessions();
    assert_eq!(sessions.len(), 9);
    for s in &sessions {
        assert_eq!(s.path, "/v1/realtime?model=gpt-realtime-2.1-mini");
        let bearer = format!("Bearer {PROVIDER_KEY}");
        assert_eq!(s.header("authorization"), Some(bearer.as_str()));
    }
}

#[test]
fn the_text_is_sent_to_be_read_with_its_voice_speed_and_instructions() {
    let fake = RealtimeFake::start();
    let gw = gateway(&fake);
    let resp = speech(
        &gw,
        &json!({"model": "gpt-4o-mini-tts", "input": "What time is it?", "voice": "nova",
                "speed": 0.5, "instructions": "Whisper, slowly.", "response_format": "pcm"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let s = &fake.sessions()[0];
    // The session first, then the response, and nothing else.
    let kinds: Vec<&str> = s
        .events
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["session.update", "response.create"]);
    let session = &s.event("session.update")["session"];
    assert_eq!(session["type"], "realtime");
    assert_eq!(session["output_modalities"], json!(["audio"]));
    // `nova` is not a Realtime voice: the model's voice_map gives marin.
    assert_eq!(
        session["audio"]["output"],
        json!({"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin", "speed": 0.5})
    );
    let response = &s.event("response.create")["response"];
    // Out of band, audio only, the caller's text as the one input item: read, not answered.
    assert_eq!(response["conversation"], "none");
    assert_eq!(response["output_modalities"], json!(["audio"]));
    assert_eq!(
        response["input"],
        json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What time is it?"}]}])
    );
    let instructions = response["instructions"].as_str().unwrap();
    assert!(
        instructions.contains("exactly as it is written"),
        "{instructions}"
    );
    assert!(instructions.contains("Do not answer it"), "{instructions}");
    assert!(instructions.ends_with("Whisper, slowly."), "{instructions}");

    // tts-1 takes no instructions, and with none the reading instruction stands alone.
    let plain = speech(
        &gw,
        &json!({"model": "tts-1", "input": "Hi", "voice": "onyx"}),
    )
    .status;
    let formats_ok = plain == 200 || plain == 400;
    assert!(
        formats_ok,
        "mp3 (the default) is encoded or refused: {plain}"
    );
}

#[test]
fn speeds_voices_and_formats_the_realtime_api_cannot_honour_are_refused() {
    let fake = RealtimeFake::start();
    let gw = gateway(&fake);
    let fast = speech(
        &gw,
        &json!({"model": "tts-1", "input": "Hi", "voice": "alloy", "speed": 2, "response_format": "pcm"}),
    );
    assert_eq!(fast.status, 400, "{}", fast.text());
    assert!(
        fast.json()["details"]["speed"].is_string(),
        "{}",
        fast.text()
    );
    let voice = speech(
        &gw,
        &json!({"model": "tts-1", "input": "Hi", "voice": "bogus", "response_format": "pcm"}),
    );
    assert_eq!(voice.status, 400, "{}", voice.text());
    assert!(
        voice.json()["details"]["voice"].is_string(),
        "{}",
        voice.text()
    );
    // mp3 (the default format): encoded once this build has the encoder, else a 400 naming it.
    for sse in [false, true] {
        let mut body =
            json!({"model": "tts-1", "input": "Hi", "voice": "alloy", "response_format": "mp3"});
        if sse {
            body["stream_format"] = json!("sse");
        }
        let mp3 = speech(&gw, &body);
        match mp3.status {
            200 => {
                let audio = if sse {
                    sse_audio(&mp3).0
                } else {
                    mp3.body.clone()
                };
                let framed = audio.starts_with(b"ID3")
                    || (audio.len() > 1 && audio[0] == 0xFF && audio[1] & 0xE0 == 0xE0);
                assert!(framed, "not MP3: {:?}", &audio[..audio.len().min(8)]);
            }
            400 => {
                let details = &mp3.json()["details"];
                assert!(details["response_format"].is_string(), "{}", mp3.text());
            }
            other => panic!("mp3: {other} {}", mp3.text()),
        }
    }
    // Nothing refused reached the provider (the mp3 requests only if encoded).
    assert!(fake.sessions().len() <= 2);
}

#[test]
fn failures_before_the_first_byte_are_retried() {
    let fake = RealtimeFake::start();
    let gw = gateway(&fake);
    let server_error = json!({"error": {"message": "boom", "type": "server_error", "code": null}});
    let limited = json!({"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}});
    fake.push(Script::Refuse(500, server_error));
    fake.push(Script::Refuse(429, limited));
    let resp = speech(
        &gw,
        &json!({"model": "tts-1", "input": "Hi", "voice": "alloy", "response_format": "pcm", "retries": 2}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.body, default_pcm());
    assert_eq!(fake.sessions().len(), 3);

    // An error event, then a stall past the read timeout: both retried.
    fake.push(Script::Error("server_error", "server_error"));
    fake.push(Script::Stall);
    let resp = speech(
        &gw,
        &json!({"model": "tts-1", "input": "Hi", "voice": "alloy", "response_format": "pcm", "retries": 2}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.body, default_pcm());
    assert_eq!(fake.sessions().len(), 6);

    // A failed response is an error too (retried), then a caller's error is not retried.
    fake.push(Script::Ends(
        "failed",
        json!({"type": "failed", "error": {"type": "server_error", "code": "server_error"}}),
    ));
    fake.push(Script::Error("invalid_request_error", "invalid_value"));
    let resp = speech(
        &gw,
        &json!({"model": "tts-1", "input": "Hi", "voice": "alloy", "response_format": "pcm", "retries": 2}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert_eq!(fake.sessions().len(), 8);
}

#[test]
fn refused_keys_and_unknown_models_are_classified_like_http_answers() {
    let fake = RealtimeFake::start();
    let gw = gateway(&fake);
    fake.push(Script::Refuse(
        401,
        json!({"error": {"message": "Incorrect API key provided: sk-provider-secret-0001", "type": "invalid_request_error", "code": "invalid_api_key"}}),
    ));
    let resp = speech(
        &gw,
        &json!({"model": "tts-1", "input": "Hi", "voice": "alloy", "response_format": "pcm"}),
    );
    assert_eq!(resp.status, 502, "{}", resp.text());
    assert!(!resp.text().contains(PROVIDER_KEY), "the key never leaks");
    assert_eq!(fake.sessions().len(), 1, "a refused key is not tried again");

    fake.push(Script::Refuse(
        404,
        json!({"error": {"message": "The model `gpt-realtime-2.1-mini` does not exist or you do not have access to it.", "type": "invalid_request_error", "code": "model_not_found"}}),
    ));
    let resp = speech(
        &gw,
        &json!({"model": "gpt-realtime-2.1-mini", "input": "Hi", "voice": "alloy", "response_format": "pcm"}),
    );
    assert_eq!(resp.status, 503, "{}", resp.text());
    assert_eq!(resp.json()["code"], "model_unavailable");
}

#[test]
fn an_answer_cut_mid_stream_ends_as_other_relays_end() {
    let fake = RealtimeFake::start();
    let gw = gateway(&fake);
    fake.push(Script::Cut(2));
    let raw = speech(
        &gw,
        &json!({"model": "tts-1", "input": "Hi", "voice": "alloy", "response_format": "pcm"}),
    );
    assert_eq!(raw.status, 200);
    assert!(!raw.complete, "a raw answer cut short has no end");
    assert!(raw.body.len() < default_pcm().len());

    fake.push(Script::Cut(2));
    let sse = speech(
        &gw,
        &json!({"model": "tts-1", "input": "Hi", "voice": "alloy", "response_format": "pcm", "stream_format": "sse"}),
    );
    assert_eq!(sse.status, 200);
    let events = client::sse_events(&sse.body);
    let last: Value = serde_json::from_str(events.last().unwrap()).unwrap();
    assert_eq!(last["type"], "error", "{events:?}");
    assert!(sse.complete, "an SSE stream ends with its error event");
}

#[test]
fn the_first_byte_leaves_with_the_first_delta() {
    let fake = RealtimeFake::start();
    let gw = gateway(&fake);
    let hold = std::sync::Arc::new(tokio::sync::Notify::new());
    fake.push(Script::Speak {
        pieces: pcm_pieces(),
        usage: (3, 30),
        hold: Some(hold.clone()),
    });
    let body = json!({"model": "tts-1", "input": "Hi", "voice": "alloy", "response_format": "pcm"})
        .to_string();
    let mut conn = client::connect(gw.addr);
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        conn,
        "POST /api/v1/audio/speech HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // The head and the first delta's PCM arrive while the fake holds the rest.
    let first = pcm_pieces()[0].len();
    let mut got = Vec::new();
    let mut buf = [0u8; 16384];
    while !head_and(&got, first) {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got.starts_with(b"HTTP/1.1 200"));
    hold.notify_one();
    conn.read_to_end(&mut got).unwrap();
    assert!(got.ends_with(b"0\r\n\r\n"), "the rest, then the end");
}

/// Whether `got` holds a response head and at least `n` body bytes.
fn head_and(got: &[u8], n: usize) -> bool {
    let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    got.len() - (end + 4) >= n
}

#[test]
fn cost_and_cache_come_from_the_realtime_usage() {
    let fake = RealtimeFake::start();
    let extra = "    cached-realtime: {family: openai-realtime, targets: [{provider: openai, model: gpt-realtime-2.1-mini}], cache: {ttl_seconds: 600}}\n";
    let gw = TestGateway::start_at(
        |ports| yaml(ports, &fake.base_url(), "", extra),
        Clock::manual(AFTER_SHUTDOWN),
    );
    let body = json!({"model": "cached-realtime", "input": "Cache me", "voice": "alloy", "response_format": "pcm", "stream_format": "sse"});
    let first = speech(&gw, &body);
    assert_eq!(first.status, 200, "{}", first.text());
    // The head's cost: an estimate from the text (audio tokens are known only at the end).
    let cost = first.header("switchyard-cost").unwrap();
    assert!(cost.contains("USD"), "{cost}");
    let (audio, usage) = sse_audio(&first);
    assert_eq!(audio, default_pcm());
    assert_eq!(usage["output_tokens"], 90);
    let second = speech(&gw, &body);
    assert_eq!(second.status, 200);
    assert_eq!(second.header("switchyard-cache"), Some("hit"));
    assert_eq!(sse_audio(&second), (default_pcm(), usage));
    assert_eq!(fake.sessions().len(), 1, "the hit asked no one");
}

#[test]
fn over_tls_with_the_accounts_ca() {
    let fake = RealtimeFake::start();
    let ca = TestCa::new("realtime");
    let front = TlsFront::start(ca.leaf(&["localhost"]), fake.addr());
    let base = format!("https://localhost:{}/v1", front.port());
    let tls = format!("\n      tls: {{ca_file: \"{}\"}}", ca.ca_file);
    let gw = TestGateway::start_at(
        |ports| yaml(ports, &base, &tls, ""),
        Clock::manual(AFTER_SHUTDOWN),
    );
    let resp = speech(
        &gw,
        &json!({"model": "tts-1", "input": "Secure", "voice": "alloy", "response_format": "wav"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(wav_samples(&resp.body), default_pcm());
    assert_eq!(front.handshakes(), 1);
    assert_eq!(
        fake.sessions()[0].path,
        "/v1/realtime?model=gpt-realtime-2.1-mini"
    );
}

/// The samples symphonia decodes from `file` (`ext` hints the format) and their rate.
#[cfg(feature = "speech-encoding")]
fn decoded(file: &[u8], ext: &str) -> (u32, usize) {
    use symphonia::core::codecs::DecoderOptions;
    use symphonia::core::errors::Error;
    use symphonia::core::formats::FormatOptions;
    use symphonia::core::io::MediaSourceStream;
    use symphonia::core::meta::MetadataOptions;
    use symphonia::core::probe::Hint;
    let source = MediaSourceStream::new(
        Box::new(std::io::Cursor::new(file.to_vec())),
        Default::default(),
    );
    let mut hint = Hint::new();
    hint.with_extension(ext);
    let probed = symphonia::default::get_probe()
        .format(
            &hint,
            source,
            &FormatOptions::default(),
            &MetadataOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{ext}: not a file symphonia reads: {e}"));
    let mut format = probed.format;
    let track = format.default_track().unwrap().clone();
    let mut decoder = symphonia::default::get_codecs()
        .make(&track.codec_params, &DecoderOptions::default())
        .unwrap();
    let (mut rate, mut frames) = (0, 0);
    loop {
        let packet = match format.next_packet() {
            Ok(p) => p,
            Err(Error::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => panic!("reading {ext}: {e}"),
        };
        let audio = decoder.decode(&packet).unwrap();
        rate = audio.spec().rate;
        frames += audio.frames();
    }
    (rate, frames)
}

/// Past the shutdown, tts-1's callers get every format OpenAI's speech endpoint offered, encoded
/// by the gateway from the Realtime API's PCM, raw and as SSE: mp3, AAC and FLAC decode to the
/// samples the fake spoke (give or take the codecs' frames and priming), Opus is Ogg Opus.
#[cfg(feature = "speech-encoding")]
#[test]
fn every_format_is_encoded_from_the_realtime_pcm() {
    let fake = RealtimeFake::start();
    let gw = gateway(&fake);
    let samples = default_pcm().len() / 2;
    for format in ["mp3", "aac", "flac", "opus"] {
        for sse in [false, true] {
            let mut body = json!({"model": "tts-1", "input": "Hello", "voice": "alloy",
                "response_format": format});
            if sse {
                body["stream_format"] = json!("sse");
            }
            let resp = speech(&gw, &body);
            assert_eq!(resp.status, 200, "{format} sse={sse}: {}", resp.text());
            assert_eq!(
                resp.header("switchyard-served-model"),
                Some("gpt-realtime-2.1-mini")
            );
            let audio = if sse {
                sse_audio(&resp).0
            } else {
                resp.body.clone()
            };
            if format == "opus" {
                assert_eq!(&audio[..4], b"OggS", "opus sse={sse}");
                assert_eq!(&audio[28..36], b"OpusHead", "opus sse={sse}");
                assert!(audio.windows(8).any(|w| w == b"OpusTags"), "opus sse={sse}");
                continue;
            }
            let (rate, frames) = decoded(&audio, format);
            assert_eq!(rate, 24_000, "{format} sse={sse}");
            assert!(
                frames + 3_500 >= samples && frames <= samples + 3_500,
                "{format} sse={sse}: {frames} samples decoded, {samples} spoken"
            );
        }
    }
}

/// The caller of [`cut_yaml`]'s gateway: 15 speech characters a minute, so that one request of
/// [`HELLO`] (11) fits and a second does not while the first is counted.
const LIMITED: &str = "realtime-limited-key";
/// The input of the cut tests.
const HELLO: &str = "hello world";

/// The gateway binary (its access lines in JSON) with the Realtime model at `base_url`, its
/// caller limited by characters.
fn cut_yaml(port: u16, base_url: &str) -> String {
    format!(
        r#"
version: 1
threads: 2
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners: [{{name: main, address: "127.0.0.1:{port}"}}]
  access_log: {{format: json}}
  retries: {{max: 2, initial_backoff_ms: 1, max_backoff_ms: 5, max_retry_after_ms: 50}}
  auth:
    api_keys: [{{name: limited, key: "{LIMITED}", limits: {{characters_per_minute: 15}}}}]
  providers:
    openai: {{kind: openai, api_key: "{PROVIDER_KEY}", base_url: "{base_url}", timeouts: {{read_ms: 5000}}}}
  models:
    gpt-realtime-2.1-mini: {{family: openai-realtime, default_voice: alloy, targets: [{{provider: openai, model: gpt-realtime-2.1-mini}}]}}
"#
    )
}

/// A request of [`HELLO`] by the limited caller, with id `id`.
fn limited_speech(gw: &crate::logs::Binary, id: &str, sse: bool) -> client::Response {
    let mut body = json!({"model": "gpt-realtime-2.1-mini", "input": HELLO, "voice": "alloy",
        "response_format": "pcm"});
    if sse {
        body["stream_format"] = json!("sse");
    }
    client::post_json(
        gw.addr,
        "/api/v1/audio/speech",
        &[("Service-API-Key", LIMITED), ("X-Request-Id", id)],
        &body,
    )
}

/// The JSON access line of request `id`, once the log has one.
fn access_line(gw: &crate::logs::Binary, id: &str) -> Value {
    let marker = format!("\"request_id\":\"{id}\"");
    let text = gw.output_when(&format!("the access line of {id}"), |t| {
        t.lines()
            .any(|l| l.contains(" access] ") && l.contains(&marker))
    });
    let line = text
        .lines()
        .filter(|l| l.contains(&marker))
        .find_map(|l| l.split_once(" access] ").map(|(_, json)| json))
        .unwrap();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// An answer the Realtime API cuts mid-stream (the socket dropped after two of three deltas),
/// raw and SSE, is recorded as a cut as the HTTP relays' are (`speech_cuts.rs`): a `200` whose
/// raw body has no end or whose SSE stream ends with its `error` event; the access line's
/// `aborted` names the mid-stream failure, after one attempt (bytes had gone out: no retry);
/// nothing charged, neither in the line's usage nor against the caller's limits: a complete
/// answer still fits in the minute's 15 characters after both cuts, and then a second one does
/// not (the complete answer was charged).
#[test]
fn a_realtime_answer_cut_mid_stream_is_logged_and_charged_as_a_cut() {
    let fake = RealtimeFake::start();
    let base = fake.base_url();
    let gw = crate::logs::Binary::start(|port| cut_yaml(port, &base), "warn,access=info");
    for (id, sse) in [("rt-cut-raw", false), ("rt-cut-sse", true)] {
        fake.push(Script::Cut(2));
        let resp = limited_speech(&gw, id, sse);
        assert_eq!(resp.status, 200, "{id}: {}", resp.text());
        if sse {
            let events = client::sse_events(&resp.body);
            let last: Value = serde_json::from_str(events.last().unwrap()).unwrap();
            assert_eq!(last["type"], "error", "{id}: {events:?}");
            assert!(events.len() >= 2, "{id}: the audio before the cut");
        } else {
            assert!(!resp.complete, "{id}: a raw answer cut short has no end");
            assert!(!resp.body.is_empty() && resp.body.len() < default_pcm().len());
        }
        let line = access_line(&gw, id);
        assert_eq!(line["status"], 200, "{line}");
        let aborted = line["aborted"].as_str().unwrap_or_else(|| panic!("{line}"));
        assert!(aborted.contains("mid-stream"), "{line}");
        assert_eq!(line["attempts"], 1, "{line}");
        assert_eq!(line["native_model"], "gpt-realtime-2.1-mini", "{line}");
        assert_eq!(
            line["usage"],
            json!({"tokens": 0, "characters": 0, "images": 0}),
            "a cut answer is not charged: {line}"
        );
        // The cost the head announced (an estimate from the text) is kept, as for HTTP cuts.
        assert!(line["cost"].is_string(), "{line}");
    }
    let full = limited_speech(&gw, "rt-full", false);
    assert_eq!(
        full.status,
        200,
        "the cuts were not charged: {}",
        full.text()
    );
    assert!(full.complete);
    assert_eq!(full.body, default_pcm());
    let line = access_line(&gw, "rt-full");
    assert_eq!(line["aborted"], Value::Null, "{line}");
    assert_eq!(line["usage"]["characters"], HELLO.len(), "{line}");
    assert!(line["usage"]["tokens"].as_u64().unwrap() > 0, "{line}");
    let refused = limited_speech(&gw, "rt-refused", false);
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert_eq!(fake.sessions().len(), 3, "the refused request asked no one");
}
