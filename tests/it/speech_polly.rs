//! Amazon Polly (`SynthesizeSpeech`, `POST /v1/speech`) through the speech conformance cases,
//! against a fake that checks every request's AWS Signature Version 4 by recomputing it from what
//! it received (its own implementation of AWS's documented algorithm, not the gateway's), and
//! what is Polly's own: the engine from the target, speed as SSML prosody, the voice list from
//! `DescribeVoices`, throttling as a 400, a voice the engine lacks.

use std::time::Duration;

use crate::support;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use support::client;
use support::fake::{FakeProvider, Recorded, Reply};
use support::speech_conformance::{
    audio, decoded_audio, public_events, speech, speech_conformance, Expect, SpeechCase,
};
use support::{auth, TestGateway, AWS_ACCESS_KEY_ID, AWS_SECRET};

const MODEL: &str = "polly-neural";
const REGION: &str = "eu-west-1";

fn mac(key: &[u8], data: &str) -> Vec<u8> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).unwrap();
    m.update(data.as_bytes());
    m.finalize().into_bytes().to_vec()
}

/// The fake's side of SigV4: rebuild the canonical request from the received method, path,
/// headers and body, sign it with the test's secret for service `polly`, and compare with
/// `Authorization`. The account has no session token; a GET has no content type to sign.
fn assert_signed(req: &Recorded) {
    let date = req.header("x-amz-date").expect("x-amz-date");
    assert_eq!(date.len(), 16, "{date}");
    assert_eq!(req.header("x-amz-security-token"), None);
    let day = &date[..8];
    let (path, query) = req.path.split_once('?').unwrap_or((&req.path, ""));
    let (headers, signed) = match req.header("content-type") {
        Some(ct) => (
            format!(
                "content-type:{ct}\nhost:{}\nx-amz-date:{date}\n",
                req.header("host").unwrap()
            ),
            "content-type;host;x-amz-date",
        ),
        None => (
            format!("host:{}\nx-amz-date:{date}\n", req.header("host").unwrap()),
            "host;x-amz-date",
        ),
    };
    let canonical = format!(
        "{}\n{path}\n{query}\n{headers}\n{signed}\n{}",
        req.method,
        hex::encode(Sha256::digest(&req.body)),
    );
    let scope = format!("{day}/{REGION}/polly/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{date}\n{scope}\n{}",
        hex::encode(Sha256::digest(canonical.as_bytes()))
    );
    let k = mac(format!("AWS4{AWS_SECRET}").as_bytes(), day);
    let k = mac(&k, REGION);
    let k = mac(&k, "polly");
    let k = mac(&k, "aws4_request");
    let signature = hex::encode(mac(&k, &to_sign));
    assert_eq!(
        req.header("authorization"),
        Some(
            format!(
                "AWS4-HMAC-SHA256 Credential={AWS_ACCESS_KEY_ID}/{scope}, SignedHeaders={signed}, Signature={signature}"
            )
            .as_str()
        ),
        "the fake's signature differs from the gateway's"
    );
    // The secret itself never travels, and no client credential is forwarded.
    assert!(!req.headers.iter().any(|(_, v)| v.contains(AWS_SECRET)));
    assert_eq!(req.header("service-api-key"), None);
}

fn native_content_type(format: &str) -> &'static str {
    match format {
        "mp3" => "audio/mpeg",
        "opus" => "audio/ogg",
        _ => "audio/pcm",
    }
}

/// `SynthesizeSpeech` answers the audio itself, streamed, whatever the public stream format.
fn answer(pieces: &[Vec<u8>], format: &str, _sse: bool, _fake: &FakeProvider) -> Vec<Reply> {
    let chunks = pieces.iter().map(|p| (Duration::ZERO, p.clone())).collect();
    vec![
        Reply::chunked(200, native_content_type(format), chunks, false)
            .with_header("x-amzn-RequestCharacters", "44"),
    ]
}

fn ssml(text: &str, speed: f64) -> String {
    let escaped = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    format!(
        r#"<speak><prosody rate="{}%">{escaped}</prosody></speak>"#,
        (speed * 100.0).round()
    )
}

fn check(req: &Recorded, e: &Expect<'_>) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/speech");
    assert_eq!(req.header("content-type"), Some("application/json"));
    let (format, rate) = match e.format {
        "mp3" => ("mp3", None),
        "opus" => ("ogg_opus", Some("48000")),
        "pcm" => ("pcm", Some("16000")),
        other => panic!("no Polly format for {other}"),
    };
    let (text, text_type) = if e.speed == 1.0 {
        (e.input.to_string(), "text")
    } else {
        (ssml(e.input, e.speed), "ssml")
    };
    let mut want = json!({
        "Engine": "neural",
        "OutputFormat": format,
        "Text": text,
        "TextType": text_type,
        "VoiceId": e.voice,
    });
    if let Some(rate) = rate {
        want["SampleRate"] = json!(rate);
    }
    assert_eq!(req.json(), want);
    assert_signed(req);
}

fn aws_error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::json(status, json!({"message": message})).with_header("x-amzn-ErrorType", kind)
}

fn errors() -> Vec<(Vec<Reply>, u16, &'static str)> {
    vec![
        (
            vec![aws_error(
                400,
                "TextLengthExceededException",
                "Maximum text length has been exceeded",
            )],
            400,
            "invalid_request",
        ),
        (
            vec![aws_error(
                403,
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
            )],
            502,
            "upstream_auth_failed",
        ),
        (
            vec![Reply::json(
                400,
                json!({"__type": "ThrottlingException", "message": "Rate exceeded"}),
            )],
            429,
            "rate_limited",
        ),
        (
            vec![aws_error(
                500,
                "ServiceFailureException",
                "An unknown condition has caused a service failure.",
            )],
            502,
            "upstream_error",
        ),
    ]
}

/// A service failure before any audio: retried.
fn retryable() -> Vec<Reply> {
    vec![aws_error(
        500,
        "ServiceFailureException",
        "An unknown condition has caused a service failure.",
    )]
}

speech_conformance!(
    conformance,
    SpeechCase {
        model: MODEL,
        formats: &[
            ("mp3", "audio/mpeg"),
            ("opus", "audio/opus"),
            ("pcm", "audio/pcm"),
        ],
        sse_formats: &["mp3", "opus", "pcm"],
        rejected_formats: &["wav", "aac", "flac"],
        speeds: &[0.25, 0.5, 1.0, 2.0],
        rejected_speeds: &[4.0],
        instructions: false,
        voice: "Matthew",
        default_voice: "Joanna",
        max_input_chars: 3000,
        answer,
        check_request: check,
        errors,
        retryable,
    }
);

// ---- Polly's own behaviour -------------------------------------------------------------------

/// The engine is the target's model; the caller's native fields go in Polly's own names; the text
/// is escaped into the SSML, never markup.
#[test]
fn generative_engine_native_fields_and_escaped_ssml() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::bytes(200, "audio/mpeg", audio(100, 1)));
    let resp = speech(
        &gw,
        "polly-generative",
        "</prosody><audio src=\"https://x\"/> R&D",
        json!({"speed": 0.5, "LanguageCode": "en-US", "LexiconNames": ["acronyms"]}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == audio(100, 1));
    let sent = &fake.requests()[0];
    assert_signed(sent);
    assert_eq!(
        sent.json(),
        json!({
            "Engine": "generative",
            "OutputFormat": "mp3",
            "Text": "<speak><prosody rate=\"50%\">&lt;/prosody&gt;&lt;audio src=\"https://x\"/&gt; R&amp;D</prosody></speak>",
            "TextType": "ssml",
            "VoiceId": "Ruth",
            "LanguageCode": "en-US",
            "LexiconNames": ["acronyms"],
        })
    );
    // Fields Polly does not take are refused by name, not dropped.
    let resp = speech(
        &gw,
        "polly-generative",
        "hi",
        json!({"SpeechMarkTypes": ["word"]}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(resp.json()["details"]["SpeechMarkTypes"].is_string());
    assert_eq!(fake.requests().len(), 1);
}

/// An input whose SSML would pass Polly's 6,000 characters is the caller's 400, unsent.
#[test]
fn ssml_over_polly_s_total_limit_is_refused_before_sending() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let resp = speech(&gw, MODEL, &"<".repeat(1_500), json!({"speed": 2}));
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(
        resp.json()["details"]["input"].is_string(),
        "{}",
        resp.text()
    );
    assert!(fake.requests().is_empty());
}

/// A voice the engine does not have is the caller's 400 for the caller's voice.
#[test]
fn a_voice_the_engine_lacks_is_the_callers_error() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(aws_error(
        400,
        "EngineNotSupportedException",
        "This voice does not support the selected engine: neural",
    ));
    let resp = speech(&gw, MODEL, "hi", json!({"voice": "Geraint"}));
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert_eq!(resp.json()["code"], "invalid_request");
    assert_eq!(fake.requests().len(), 1);
}

/// Polly's throttling is a 400, not a 429: it is retried all the same.
#[test]
fn throttling_as_a_400_is_retried() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    fake.push(Reply::json(
        400,
        json!({"__type": "ThrottlingException", "message": "Rate exceeded"}),
    ));
    fake.push(Reply::bytes(200, "audio/mpeg", audio(500, 3)));
    let resp = speech(&gw, MODEL, "hi", json!({"retries": 1}));
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.body == audio(500, 3));
    let sent = fake.requests();
    assert_eq!(sent.len(), 2);
    for req in &sent {
        assert_signed(req);
    }
}

/// SSE wraps the streamed audio.
#[test]
fn sse_wraps_the_streamed_audio() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let pieces = [audio(1200, 1), audio(900, 2)];
    fake.push(Reply::chunked(
        200,
        "audio/pcm",
        pieces.iter().map(|p| (Duration::ZERO, p.clone())).collect(),
        false,
    ));
    let resp = speech(
        &gw,
        MODEL,
        "hi",
        json!({"response_format": "pcm", "stream_format": "sse"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let events = public_events(&resp);
    assert_eq!(events.last().unwrap()["type"], "speech.audio.done");
    assert!(decoded_audio(&events) == pieces.concat());
}

/// `GET /api/v1/audio/voices` adds the region's voices from `DescribeVoices`, every page, each
/// request signed.
#[test]
fn the_regions_voices_are_listed_page_by_page() {
    let fake = FakeProvider::start();
    fake.set_handler(|r| {
        (r.method == "GET" && r.path.starts_with("/v1/voices")).then(|| {
            let voice = |id: &str, engines: Value| {
                json!({"Gender": "Female", "Id": id, "LanguageCode": "en-US",
                       "LanguageName": "US English", "Name": id, "SupportedEngines": engines})
            };
            if r.path == "/v1/voices" {
                Reply::json(
                    200,
                    json!({"Voices": [voice("Joanna", json!(["neural", "standard"]))],
                           "NextToken": "page/2"}),
                )
            } else if r.path == "/v1/voices?NextToken=page%2F2" {
                Reply::json(
                    200,
                    json!({"Voices": [voice("Ruth", json!(["generative", "long-form", "neural"]))]}),
                )
            } else {
                Reply::json(400, json!({"message": format!("unexpected {}", r.path)}))
            }
        })
    });
    let gw = TestGateway::start(&fake);
    let resp = client::request(
        gw.addr,
        "GET",
        &format!("/api/v1/audio/voices?model={MODEL}"),
        &auth(),
        b"",
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let list = resp.json();
    assert_eq!(list["provider_voices"], "listed", "{list}");
    let data = list["data"].as_array().unwrap();
    assert_eq!(data[0]["id"], "Joanna");
    assert!(
        data.iter()
            .any(|v| v["id"] == "Ruth" && v["source"] == "provider"),
        "{list}"
    );
    let sent = fake.requests();
    assert_eq!(sent.len(), 2);
    for req in &sent {
        assert_signed(req);
    }
}
