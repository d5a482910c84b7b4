//! Quick property tests of the parsers of untrusted bytes, the same ones `fuzz/` fuzzes for
//! minutes: request validation, the SSE and NDJSON splitters, every speech decoder, key and JWT
//! authentication, the config loader, and the readers of providers' model and voice lists. Each
//! runs a bounded number of generated cases (a few seconds in a debug build) against the default
//! config's catalog and providers.

use std::sync::OnceLock;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value};
use switchyard::config::{self, GatewaySettings};
use switchyard::internals::api::{compat::Surface, images, rerank, speech};
use switchyard::internals::common::error::GatewayError;
use switchyard::internals::common::Operation;
use switchyard::internals::stream::audio::SpeechDecoding;
use switchyard::internals::stream::lines::LineSplitter;
use switchyard::internals::stream::sse::EventSplitter;

const API_KEY: &str = "prop-api-key";
const JWT_SECRET: &str = "prop-jwt-secret";

fn lookup(name: &str) -> Option<String> {
    match name {
        "SWITCHYARD_API_KEY" => Some(API_KEY.into()),
        "SWITCHYARD_JWT_SECRET" => Some(JWT_SECRET.into()),
        n if n.ends_with("_KEY") || n.ends_with("_TOKEN") || n.ends_with("_ID") => {
            Some("prop-provider-key".into())
        }
        _ => None,
    }
}

/// The default config, every provider enabled.
fn settings() -> &'static GatewaySettings {
    static S: OnceLock<GatewaySettings> = OnceLock::new();
    S.get_or_init(|| {
        config::load_str(config::DEFAULT_CONFIG, &lookup)
            .map(|s| s.gateway)
            .unwrap_or_else(|e| panic!("default config: {e:?}"))
    })
}

fn model_names() -> Vec<String> {
    let c = &settings().catalog();
    [Operation::Speech, Operation::Images, Operation::Rerank]
        .into_iter()
        .flat_map(|op| c.names_for(op))
        .map(str::to_string)
        .collect()
}

const FIELDS: &[&str] = &[
    "model",
    "input",
    "voice",
    "response_format",
    "stream_format",
    "speed",
    "instructions",
    "retries",
    "prompt",
    "negative_prompt",
    "image",
    "mask",
    "n",
    "size",
    "aspect_ratio",
    "quality",
    "strength",
    "seed",
    "query",
    "documents",
    "top_n",
    "return_documents",
    "rank_fields",
    "text",
];

fn short_string() -> impl Strategy<Value = String> {
    prop_oneof![
        vec(any::<char>(), 0..12).prop_map(|c| c.into_iter().collect()),
        select(FIELDS).prop_map(str::to_string),
        select(model_names()),
        select(vec![
            "mp3",
            "sse",
            "wav",
            "1024x1024",
            "16:9",
            "alloy",
            "b64_json"
        ])
        .prop_map(str::to_string),
    ]
}

/// Any JSON value, biased towards the fields and values the API knows.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-10.0f64..1e6).prop_map(Value::from),
        short_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 48, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            vec((short_string(), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A request-shaped object: mostly known fields, sometimes a real model.
fn request_object() -> impl Strategy<Value = Value> {
    (
        vec(
            (select(FIELDS).prop_map(str::to_string), json_value()),
            0..8,
        ),
        proptest::option::of(select(model_names())),
    )
        .prop_map(|(kv, model)| {
            let mut m: Map<String, Value> = kv.into_iter().collect();
            if let Some(model) = model {
                m.insert("model".into(), Value::String(model));
            }
            Value::Object(m)
        })
}

/// A refused request is a client error in the spec's shape; a 400 names what is wrong.
fn assert_client_error(e: &GatewayError) {
    let status = e.status();
    assert!(matches!(status, 400 | 413), "answered {status}: {e:?}");
    let body: Value = serde_json::from_slice(&e.body()).unwrap();
    assert!(
        body["code"].is_string() && body["message"].is_string(),
        "{body}"
    );
    if status == 400 {
        let details = body["details"].as_object().unwrap();
        assert!(!details.is_empty(), "400 without details: {body}");
    }
}

fn validate_everywhere(body: &[u8]) -> Vec<Result<(), GatewayError>> {
    let c = &settings().catalog();
    let mut out = vec![
        speech::parse(body, c, 5).map(drop),
        images::parse(body, c, 5).map(drop),
        rerank::parse(body, c, 5).map(drop),
    ];
    for surface in [Surface::CohereV1, Surface::CohereV2, Surface::Jina] {
        out.push(match surface.translate(body) {
            Ok(Some(t)) => rerank::parse(&t.body, c, 5).map(drop),
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        });
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn request_validation_answers_400_with_details(body in request_object()) {
        let bytes = serde_json::to_vec(&body).unwrap();
        for r in validate_everywhere(&bytes) {
            if let Err(e) = r {
                assert_client_error(&e);
            }
        }
    }

    #[test]
    fn a_body_that_is_not_an_object_is_a_400(body in json_value(), raw in vec(any::<u8>(), 0..64)) {
        let not_object = !body.is_object();
        let bytes = serde_json::to_vec(&body).unwrap();
        for r in validate_everywhere(&bytes) {
            match r {
                Err(e) => assert_client_error(&e),
                Ok(()) => prop_assert!(!not_object, "{body} accepted"),
            }
        }
        for r in validate_everywhere(&raw) {
            if let Err(e) = r {
                assert_client_error(&e);
            }
        }
    }
}

fn stream_bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(
        select(vec![
            b'\n', b'\r', b'd', b'a', b't', b':', b' ', b'{', b'}', b'x', 0xff,
        ]),
        0..200,
    )
}

fn cut<'a>(data: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    for n in sizes.iter().cycle() {
        if at >= data.len() {
            break;
        }
        let end = (at + n).min(data.len());
        out.push(&data[at..end]);
        at = end;
    }
    out
}

fn sse_events(pieces: &[&[u8]]) -> (Vec<Bytes>, Option<Bytes>) {
    let mut s = EventSplitter::new();
    let mut events = Vec::new();
    for p in pieces {
        s.push(p);
        while let Some(e) = s.next_event() {
            events.push(e);
        }
    }
    (events, s.remainder())
}

fn ndjson_lines(pieces: &[&[u8]]) -> (Vec<Bytes>, Option<Bytes>) {
    let mut s = LineSplitter::new();
    let mut lines = Vec::new();
    for p in pieces {
        s.push(p);
        while let Some(l) = s.next_line() {
            lines.push(l);
        }
    }
    (lines, s.remainder())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn sse_events_do_not_depend_on_chunking(data in stream_bytes(), sizes in vec(1usize..24, 1..8)) {
        let whole = sse_events(&[&data]);
        prop_assert_eq!(&whole, &sse_events(&cut(&data, &sizes)));
        let joined: Vec<u8> = whole.0.iter().chain(whole.1.iter()).flat_map(|b| b.to_vec()).collect();
        prop_assert_eq!(joined, data);
    }

    #[test]
    fn ndjson_lines_do_not_depend_on_chunking(data in stream_bytes(), sizes in vec(1usize..24, 1..8)) {
        let whole = ndjson_lines(&[&data]);
        prop_assert_eq!(&whole, &ndjson_lines(&cut(&data, &sizes)));
        for l in whole.0.iter().chain(whole.1.iter()) {
            prop_assert!(!l.contains(&b'\n'));
        }
    }
}

/// Every speech model's request, raw and as SSE, with its provider and adapter.
fn speech_cases() -> &'static [(String, speech::SpeechRequest<'static>)] {
    static CASES: OnceLock<Vec<(String, speech::SpeechRequest<'static>)>> = OnceLock::new();
    CASES.get_or_init(|| {
        let s = settings();
        let mut out = Vec::new();
        for name in s.catalog().names_for(Operation::Speech) {
            for extra in ["", r#","stream_format":"sse""#] {
                let body: &'static str =
                    Box::leak(format!(r#"{{"model":"{name}","input":"Hello"{extra}}}"#).into());
                // Models that cannot stream SSE refuse the second body; every model takes the first.
                match speech::parse(body.as_bytes(), s.catalog(), 5) {
                    Ok(req) => out.push((format!("{name}{extra}"), req)),
                    Err(e) => assert!(!extra.is_empty(), "{name}: {e:?}"),
                }
            }
        }
        out
    })
}

/// Native speech bodies: noise, JSON, SSE events and NDJSON lines with arbitrary JSON inside.
fn speech_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 0..256),
        json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        vec(json_value(), 0..4).prop_map(|vs| vs
            .iter()
            .flat_map(|v| format!("data: {v}\n\n").into_bytes())
            .collect()),
        vec(json_value(), 0..4).prop_map(|vs| vs
            .iter()
            .flat_map(|v| format!("{v}\n").into_bytes())
            .collect()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn speech_decoders_never_panic(body in speech_body(), sizes in vec(1usize..64, 1..6)) {
        let s = settings();
        for (name, req) in speech_cases() {
            for target in &req.model.targets {
                let adapter = s.adapters().speech(&target.provider).unwrap();
                let SpeechDecoding::Decode(mut dec) = adapter.decoding(&target.provider, req) else {
                    continue;
                };
                let mut out = Vec::new();
                let mut failed = false;
                for piece in cut(&body, &sizes) {
                    if dec.push(&Bytes::copy_from_slice(piece), &mut out).is_err() {
                        failed = true;
                        break;
                    }
                }
                if !failed {
                    // An answer with no end marker is an error, never a silent success with nothing.
                    if let Ok(f) = dec.finish(&mut out) {
                        let _ = (name, f);
                    }
                }
            }
        }
    }
}

fn authenticate(name: &'static str, value: &[u8]) -> Option<Result<String, String>> {
    let v = HeaderValue::from_bytes(value).ok()?;
    let mut h = HeaderMap::new();
    h.insert(name, v);
    Some(
        settings()
            .auth()
            .authenticate(&h)
            .map(|p| p.id)
            .map_err(|e| e.to_string()),
    )
}

fn token_text() -> impl Strategy<Value = Vec<u8>> {
    vec(
        select(b"eyJhbGciOiJIUzI1NiJ9.-_=+/ Bearer\tx0".to_vec()),
        0..120,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn garbage_credentials_are_refused(raw in vec(any::<u8>(), 0..96), token in token_text()) {
        for name in ["authorization", "service-api-key"] {
            for value in [&raw, &token] {
                if let Some(r) = authenticate(name, value) {
                    let has_key = value.windows(API_KEY.len()).any(|w| w == API_KEY.as_bytes());
                    prop_assert!(r.is_err() || has_key, "{:?} accepted", String::from_utf8_lossy(value));
                }
            }
        }
        let mut bearer = b"Bearer ".to_vec();
        bearer.extend_from_slice(&token);
        if let Some(r) = authenticate("authorization", &bearer) {
            prop_assert!(r.is_err());
        }
    }

    #[test]
    fn tokens_signed_with_another_secret_are_refused(claims in json_value(), header in json_value()) {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        for header in [serde_json::json!({"alg": "HS256", "typ": "JWT"}), header] {
            let input = format!(
                "{}.{}",
                b64.encode(serde_json::to_vec(&header).unwrap()),
                b64.encode(serde_json::to_vec(&claims).unwrap())
            );
            let key = jsonwebtoken::EncodingKey::from_secret(b"not-the-secret");
            let sig = jsonwebtoken::crypto::sign(input.as_bytes(), &key, jsonwebtoken::Algorithm::HS256).unwrap();
            let r = authenticate("authorization", format!("Bearer {input}.{sig}").as_bytes());
            prop_assert!(matches!(r, Some(Err(_))), "{:?}", r);
            // The right secret: whatever the claims, no panic.
            let key = jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes());
            let sig = jsonwebtoken::crypto::sign(input.as_bytes(), &key, jsonwebtoken::Algorithm::HS256).unwrap();
            let _ = authenticate("authorization", format!("Bearer {input}.{sig}").as_bytes());
        }
    }
}

/// The default config with one line replaced by `text` (or `text` inserted), or arbitrary text.
fn config_text() -> impl Strategy<Value = String> {
    let lines: Vec<String> = config::DEFAULT_CONFIG.lines().map(str::to_string).collect();
    let n = lines.len();
    prop_oneof![
        vec(any::<char>(), 0..200).prop_map(|c| c.into_iter().collect()),
        (0..n, vec(any::<char>(), 0..40), any::<bool>()).prop_map(move |(at, text, replace)| {
            let mut l = lines.clone();
            let text: String = text.into_iter().collect();
            if replace {
                // Keep the indentation, so the change lands inside the same mapping.
                let indent: String = l[at].chars().take_while(|c| *c == ' ').collect();
                l[at] = format!("{indent}{text}");
            } else {
                l.insert(at, text);
            }
            l.join("\n")
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn config_loader_never_panics(text in config_text()) {
        if let Err(errors) = config::load_str(&text, &lookup) {
            prop_assert!(!errors.is_empty());
        }
    }
}

/// Every list reader of every configured account (`api::discovery`): models and voices.
fn list_readers() -> Vec<switchyard::internals::api::discovery::ReadList> {
    let s = settings();
    let mut out = Vec::new();
    for model in s.catalog().models() {
        for t in &model.targets {
            let d = s.adapters().discovery(&t.provider);
            out.extend(d.models.iter().chain(d.voices.iter()).map(|f| f.response));
        }
    }
    assert!(
        out.len() >= 4,
        "the default config's accounts list something"
    );
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// A provider's list answer, whatever its bytes, is read or refused with a message, never a
    /// panic (`check-providers` and the voice listing read them).
    #[test]
    fn list_readers_never_panic(body in json_value(), raw in vec(any::<u8>(), 0..64)) {
        let json = serde_json::to_vec(&body).unwrap();
        for read in list_readers() {
            let _ = read(&json);
            let _ = read(&raw);
        }
    }
}
