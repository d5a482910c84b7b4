use super::*;
use crate::api::speech::parse;
use crate::catalog::Catalog;
use crate::providers::test_support as support;
use base64::Engine;
use serde_json::{json, Value};

const KEY: &str = "AIzaSy-gemini-secret";

fn provider() -> Arc<Provider> {
    support::provider("gemini", KEY)
}

fn catalog() -> Catalog {
    support::catalog(
        "gemini-3.8-flash-tts",
        "gemini-3.8-tts",
        support::target(provider(), "gemini-3.8-flash-tts"),
        5_000,
        1,
    )
}

fn native(body: &str) -> Result<NativeRequest, GatewayError> {
    let catalog = catalog();
    let req = parse(body.as_bytes(), &catalog, 3).unwrap();
    speech_request(&req.model.targets[0], &req)
}

fn body_json(n: &NativeRequest) -> Value {
    serde_json::from_slice(&n.body).unwrap()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn event(json: Value) -> Bytes {
    Bytes::from(format!("data: {json}\r\n\r\n"))
}

fn audio_event(pcm: &[u8], mime: &str) -> Bytes {
    event(
        json!({"candidates": [{"content": {"role": "model", "parts": [
        {"inlineData": {"mimeType": mime, "data": b64(pcm)}}]}}]}),
    )
}

fn last_event(reason: &str) -> Bytes {
    event(
        json!({"candidates": [{"content": {"role": "model", "parts": []},
        "finishReason": reason}],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 75,
                          "totalTokenCount": 84}}),
    )
}

const PCM_TYPE: &str = "audio/L16;codec=pcm;rate=24000";

fn decode(chunks: &[Bytes]) -> (Vec<u8>, Result<Finished, UpstreamError>) {
    let mut d = SseAudio::new(&provider(), PcmEvents::default());
    let mut out = Vec::new();
    for c in chunks {
        if let Err(e) = d.push(c, &mut out) {
            return (out.concat(), Err(e));
        }
    }
    let end = d.finish(&mut out);
    (out.concat(), end)
}

#[test]
fn builds_the_streamed_request_with_a_prebuilt_voice() {
    let n = native(
        r#"{"model":"gemini-3.8-flash-tts","input":"Say \"hi\"","voice":"Puck","response_format":"pcm"}"#,
    )
    .unwrap();
    assert_eq!(
        n.path,
        "/v1beta/models/gemini-3.8-flash-tts:streamGenerateContent?alt=sse"
    );
    assert_eq!(n.content_type, "application/json");
    assert_eq!(
        std::str::from_utf8(&n.body).unwrap(),
        r#"{"contents":[{"role":"user","parts":[{"text":"Say \"hi\""}]}],"generationConfig":{"responseModalities":["AUDIO"],"speechConfig":{"voiceConfig":{"prebuiltVoiceConfig":{"voiceName":"Puck"}}}}}"#
    );
}

#[test]
fn sends_other_voices_style_and_language() {
    let n = native(
        r#"{"model":"gemini-3.8-flash-tts","input":"hi","voice":"voice_abc123","response_format":"wav",
            "instructions":"warm, unhurried","language_code":"de-DE"}"#,
    )
    .unwrap();
    let b = body_json(&n);
    assert_eq!(
        b["contents"][0]["parts"][0],
        json!({"text": "hi", "speech_metadata": {"style": "warm, unhurried"}})
    );
    assert_eq!(
        b["generationConfig"]["speechConfig"],
        json!({"voiceConfig": {"voice": "voice_abc123"}, "languageCode": "de-DE"})
    );
    // No voice: the family's default, a prebuilt one.
    let n =
        native(r#"{"model":"gemini-3.8-flash-tts","input":"hi","response_format":"pcm"}"#).unwrap();
    assert_eq!(
        body_json(&n)["generationConfig"]["speechConfig"]["voiceConfig"],
        json!({"prebuiltVoiceConfig": {"voiceName": "Kore"}})
    );
    let bad = native(
        r#"{"model":"gemini-3.8-flash-tts","input":"hi","response_format":"pcm","language_code":7}"#,
    )
    .unwrap_err();
    assert!(format!("{bad:?}").contains("language_code"), "{bad:?}");
}

#[test]
fn a_format_the_build_cannot_encode_is_the_callers_400() {
    for format in ["mp3", "opus", "aac", "flac"] {
        let r = native(&format!(
            r#"{{"model":"gemini-3.8-flash-tts","input":"hi","response_format":"{format}"}}"#
        ));
        if encodable(format) {
            assert!(r.is_ok(), "{format}");
            continue;
        }
        let GatewayError::Validation(v) = r.unwrap_err() else {
            panic!("{format}: not a validation error")
        };
        let text = format!("{v:?}");
        assert!(text.contains("response_format"), "{text}");
        assert!(text.contains("wav") && text.contains("pcm"), "{text}");
    }
}

#[test]
fn decodes_pcm_events_and_the_usage() {
    let (pcm, end) = decode(&[
        audio_event(&[1, 2, 3, 4], PCM_TYPE),
        // Split mid-event, as TCP delivers it.
        Bytes::from_static(b"data: {\"candidates\": [{\"content\": {\"parts\": [{\"inlineData\": "),
        Bytes::from(format!(
            "{{\"mimeType\": \"audio/L16;codec=pcm;rate=24000\", \"data\": \"{}\"}}}}]}}}}]}}\r\n\r\n",
            b64(&[5, 6])
        )),
        last_event("STOP"),
    ]);
    assert_eq!(pcm, vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(
        end.unwrap(),
        Finished::Done(SpeechUsage {
            input_tokens: Some(9),
            output_tokens: Some(75)
        })
    );
}

#[test]
fn a_cut_stream_and_early_stops_are_errors() {
    let (pcm, end) = decode(&[audio_event(&[1, 2], PCM_TYPE)]);
    assert_eq!(pcm, vec![1, 2]);
    let e = end.unwrap_err();
    assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    assert!(e.message.contains("no finishReason"), "{}", e.message);

    let (_, end) = decode(&[audio_event(&[1, 2], PCM_TYPE), last_event("SAFETY")]);
    assert_eq!(end.unwrap_err().kind, UpstreamErrorKind::ContentPolicy);
    let (_, end) = decode(&[audio_event(&[1, 2], PCM_TYPE), last_event("MAX_TOKENS")]);
    let e = end.unwrap_err();
    assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    assert!(e.message.contains("MAX_TOKENS"), "{}", e.message);

    let (_, end) = decode(&[event(
        json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}),
    )]);
    assert_eq!(end.unwrap_err().kind, UpstreamErrorKind::ContentPolicy);
}

#[test]
fn checks_the_audio_type_and_rate() {
    assert_eq!(pcm_rate("audio/L16;codec=pcm;rate=24000"), Some(24_000));
    assert_eq!(pcm_rate("audio/l16; rate=16000"), Some(16_000));
    assert_eq!(pcm_rate("audio/pcm"), Some(RATE));
    assert_eq!(pcm_rate("audio/wav"), None);
    assert_eq!(pcm_rate("audio/L16;rate=fast"), None);

    let (_, end) = decode(&[audio_event(&[1, 2], "audio/L16;codec=pcm;rate=16000")]);
    let e = end.unwrap_err();
    assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
    assert!(e.message.contains("16000 Hz"), "{}", e.message);
    let (_, end) = decode(&[audio_event(&[1, 2], "audio/wav")]);
    assert!(end.unwrap_err().message.contains("audio/wav"));
    let (_, end) = decode(&[Bytes::from_static(b"data: {not json\r\n\r\n")]);
    assert_eq!(end.unwrap_err().kind, UpstreamErrorKind::BadResponse);
}

#[test]
fn an_error_event_is_classified_and_redacted() {
    let (_, end) = decode(&[event(json!({"error": {"code": 429,
        "status": "RESOURCE_EXHAUSTED", "message": format!("quota for key {KEY}")}}))]);
    let e = end.unwrap_err();
    assert_eq!(e.kind, UpstreamErrorKind::RateLimited);
    assert!(!e.message.contains(KEY), "{}", e.message);
}

#[test]
fn wraps_the_pcm_in_the_asked_format() {
    let catalog = catalog();
    let req = parse(
        br#"{"model":"gemini-3.8-flash-tts","input":"hi","response_format":"wav"}"#,
        &catalog,
        3,
    )
    .unwrap();
    let SpeechDecoding::Decode(mut d) = speech_decoding(&provider(), &req) else {
        panic!("not decoded")
    };
    let mut out = Vec::new();
    d.push(&audio_event(&[1, 0, 2, 0], PCM_TYPE), &mut out)
        .unwrap();
    d.push(&last_event("STOP"), &mut out).unwrap();
    d.finish(&mut out).unwrap();
    let wav = out.concat();
    assert_eq!(&wav[..4], b"RIFF");
    assert_eq!(&wav[8..12], b"WAVE");
    assert_eq!(&wav[wav.len() - 4..], &[1, 0, 2, 0]);
}
