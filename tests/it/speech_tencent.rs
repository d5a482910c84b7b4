//! Tencent Cloud TTS (`TextToVoice`) through the speech conformance cases, against a fake that
//! checks every request's TC3-HMAC-SHA256 signature by recomputing it from what it received (its
//! own implementation of Tencent's documented algorithm, not the gateway's), and the `X-TC-*`
//! headers. The signature check is shared with the Hunyuan image tests.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::support;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{speech, speech_conformance, Expect, SpeechCase};
use support::{
    TestGateway, KEY, PROVIDER_KEY, TENCENT_REGION, TENCENT_SECRET_ID, TENCENT_SECRET_KEY,
};

const MODEL: &str = "tencent-tts";

fn mac(key: &[u8], data: &str) -> Vec<u8> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).unwrap();
    m.update(data.as_bytes());
    m.finalize().into_bytes().to_vec()
}

/// `YYYY-MM-DD` (UTC) of a Unix time, counted day by day from 1970 (independent of the
/// gateway's calendar arithmetic).
fn utc_date(secs: u64) -> String {
    let mut days = secs / 86_400;
    let mut year = 1970;
    loop {
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        let len = if leap { 366 } else { 365 };
        if days < len {
            let months = [
                31,
                if leap { 29 } else { 28 },
                31,
                30,
                31,
                30,
                31,
                31,
                30,
                31,
                30,
                31,
            ];
            let mut month = 0;
            while days >= months[month] {
                days -= months[month];
                month += 1;
            }
            return format!("{year:04}-{:02}-{:02}", month + 1, days + 1);
        }
        days -= len;
        year += 1;
    }
}

/// The fake's side of TC3: the `X-TC-*` headers (action, version, region, a timestamp within
/// Tencent's five minutes), then the canonical request rebuilt from the received method, path,
/// `Content-Type`, `Host` and body, signed with the test's SecretKey for `service` and compared
/// with `Authorization`. The secret itself never travels, nor any other credential.
pub fn assert_tc3(req: &Recorded, service: &str, action: &str, version: &str) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/");
    assert_eq!(req.header("x-tc-action"), Some(action));
    assert_eq!(req.header("x-tc-version"), Some(version));
    assert_eq!(req.header("x-tc-region"), Some(TENCENT_REGION));
    let timestamp: u64 = req
        .header("x-tc-timestamp")
        .expect("x-tc-timestamp")
        .parse()
        .expect("a Unix time");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(timestamp.abs_diff(now) < 300, "{timestamp} vs {now}");
    let canonical = format!(
        "POST\n/\n\ncontent-type:{}\nhost:{}\n\ncontent-type;host\n{}",
        req.header("content-type").unwrap(),
        req.header("host").unwrap(),
        hex::encode(Sha256::digest(&req.body)),
    );
    let date = utc_date(timestamp);
    let scope = format!("{date}/{service}/tc3_request");
    let to_sign = format!(
        "TC3-HMAC-SHA256\n{timestamp}\n{scope}\n{}",
        hex::encode(Sha256::digest(canonical.as_bytes()))
    );
    let k = mac(format!("TC3{TENCENT_SECRET_KEY}").as_bytes(), &date);
    let k = mac(&k, service);
    let k = mac(&k, "tc3_request");
    let signature = hex::encode(mac(&k, &to_sign));
    assert_eq!(
        req.header("authorization"),
        Some(
            format!(
                "TC3-HMAC-SHA256 Credential={TENCENT_SECRET_ID}/{scope}, SignedHeaders=content-type;host, Signature={signature}"
            )
            .as_str()
        ),
        "the fake's signature differs from the gateway's"
    );
    for (name, value) in &req.headers {
        assert!(
            !value.contains(TENCENT_SECRET_KEY)
                && !value.contains(KEY)
                && !value.contains(PROVIDER_KEY),
            "{name} carries a secret"
        );
        assert_ne!(name, "service-api-key");
    }
}

/// Tencent's error envelope (inside an HTTP 200, as Tencent sends it).
pub fn tencent_error(code: &str, message: &str) -> Reply {
    Reply::json(
        200,
        json!({"Response": {"Error": {"Code": code, "Message": message}, "RequestId": "req-7f3a"}}),
    )
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn voice_answer(audio: &[u8]) -> Reply {
    Reply::json(
        200,
        json!({"Response": {"Audio": b64(audio), "SessionId": "echoed", "Subtitles": [], "RequestId": "req-1"}}),
    )
}

fn answer(pieces: &[Vec<u8>], _format: &str, sse: bool, _fake: &FakeProvider) -> Vec<Reply> {
    assert!(!sse, "TextToVoice answers whole");
    vec![voice_answer(&pieces.concat())]
}

fn check(req: &Recorded, e: &Expect<'_>) {
    assert_tc3(req, "tts", "TextToVoice", "2019-08-23");
    assert_eq!(req.header("content-type"), Some("application/json"));
    let mut body = req.json();
    let session = body["SessionId"].take();
    assert!(
        uuid::Uuid::parse_str(session.as_str().unwrap()).is_ok(),
        "{session}"
    );
    assert_eq!(e.speed, 1.0);
    assert_eq!(
        body,
        json!({
            "Text": e.input,
            "SessionId": null,
            "VoiceType": e.voice.parse::<u64>().unwrap(),
            "Codec": e.format,
        })
    );
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![tencent_error(
                "AuthFailure.SignatureFailure",
                "The provided credentials could not be validated.",
            )],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![tencent_error(
                "AuthFailure.SecretIdNotFound",
                "The SecretId is not found.",
            )],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![tencent_error(
                "InvalidParameterValue.TextTooLong",
                "Text is too long.",
            )],
            400,
            "invalid_request",
        ),
        (
            vec![tencent_error(
                "LimitExceeded.AccessLimit",
                "Access frequency limit exceeded.",
            )],
            429,
            "rate_limited",
        ),
        (
            vec![tencent_error(
                "RequestLimitExceeded",
                "The number of requests exceeds the frequency limit.",
            )],
            429,
            "rate_limited",
        ),
        (
            vec![tencent_error(
                "UnsupportedOperation.PkgExhausted",
                "The resource pack is used up.",
            )],
            502,
            "upstream_error",
        ),
        (
            // The same envelope with an HTTP error status.
            vec![Reply::json(
                500,
                json!({"Response": {"Error": {"Code": "InternalError", "Message": "Internal error."}, "RequestId": "r"}}),
            )],
            502,
            "upstream_error",
        ),
    ]
}

fn retryable() -> Vec<Reply> {
    vec![tencent_error(
        "InternalError.ErrorGetRoute",
        "Internal error: route.",
    )]
}

speech_conformance!(
    conformance,
    SpeechCase {
        model: MODEL,
        formats: &[("mp3", "audio/mpeg"), ("wav", "audio/wav")],
        sse_formats: &[],
        rejected_formats: &["opus", "aac", "flac", "pcm"],
        speeds: &[1.0],
        rejected_speeds: &[0.25, 0.5, 2.0, 4.0],
        instructions: false,
        voice: "501004",
        default_voice: "501001",
        max_input_chars: 450,
        answer,
        check_request: check,
        errors,
        retryable,
    }
);

#[test]
fn native_fields_travel_and_voices_must_be_ids() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for voice in ["alloy", "zhiyu", "501001a"] {
        let resp = speech(&gw, MODEL, "你好", json!({"voice": voice}));
        assert_eq!(resp.status, 400, "{voice}: {}", resp.text());
        assert!(resp.json()["details"]["voice"]
            .as_str()
            .unwrap()
            .contains("501001"));
    }
    assert!(fake.requests().is_empty());

    fake.push(voice_answer(b"RIFF-wav-bytes"));
    let resp = speech(
        &gw,
        MODEL,
        "欢迎使用腾讯云语音合成",
        json!({"voice": "101001", "response_format": "wav", "Volume": 5, "PrimaryLanguage": 1, "EmotionCategory": "happy"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.body, b"RIFF-wav-bytes");
    let req = &fake.requests()[0];
    assert_tc3(req, "tts", "TextToVoice", "2019-08-23");
    let body: Value = req.json();
    assert_eq!(body["VoiceType"], 101001);
    assert_eq!(body["Volume"], 5);
    assert_eq!(body["PrimaryLanguage"], 1);
    assert_eq!(body["EmotionCategory"], "happy");

    // A field Tencent does not take is refused by name.
    let resp = speech(&gw, MODEL, "hi", json!({"EnableSubtitle": true}));
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn an_unknown_voice_is_the_callers_or_the_operators() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(tencent_error(
        "InvalidParameterValue.VoiceType",
        "VoiceType is invalid.",
    ));
    let resp = speech(&gw, MODEL, "hi", json!({"voice": "999999"}));
    assert_eq!(resp.status, 400, "{}", resp.text());

    // The model's default voice refused: the configuration's fault.
    fake.push(tencent_error(
        "InvalidParameterValue.VoiceType",
        "VoiceType is invalid.",
    ));
    let resp = speech(&gw, MODEL, "hi", json!({}));
    assert_eq!(resp.status, 503, "{}", resp.text());
    assert_eq!(resp.json()["code"], "model_unavailable");
}

#[test]
fn text_over_450_bytes_is_refused_before_sending() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    // 151 Chinese characters: 453 bytes, over Tencent's 150 characters.
    let resp = speech(&gw, MODEL, &"好".repeat(151), json!({}));
    assert_eq!(resp.status, 413, "{}", resp.text());
    assert_eq!(resp.json()["code"], "input_too_long");
    assert!(fake.requests().is_empty());
}
