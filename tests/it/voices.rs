//! `GET /api/v1/audio/voices?model=…` and the operator's voice map: a model's voices from the
//! capability data, from the provider's voice list (ElevenLabs `GET /v1/voices`, kept a while),
//! the mapped names; a mapped name sent by a client reaches the provider as the voice it stands
//! for.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::support::client;
use crate::support::fake::{FakeProvider, Reply};
use crate::support::{auth, config, post, TestGateway, PROVIDER_KEY};

/// The standard test models, plus speech models with voice maps.
fn gateway(fake: &FakeProvider) -> TestGateway {
    let url = fake.base_url();
    TestGateway::start_with(|ports| {
        format!(
            "{}{}",
            config(&url, ports),
            r#"    eleven-mapped:
      family: elevenlabs-tts
      default_voice: VOICE_DEFAULT
      voice_map: {alloy: VOICE_ALLOY, nova: VOICE_NOVA}
      targets: [{provider: elevenlabs, model: eleven_multilingual_v2}]
    eleven-listed:
      family: elevenlabs-tts
      capabilities: {voices: [VOICE_DEFAULT, VOICE_SECOND], default_voice: VOICE_DEFAULT}
      targets: [{provider: elevenlabs, model: eleven_multilingual_v2}]
    tts-listed:
      family: openai-tts
      capabilities: {voices: [alloy, echo], default_voice: echo}
      voice_map: {narrator: alloy}
      targets: [{provider: openai, model: tts-1}]
"#
        )
    })
}

fn voices(gw: &TestGateway, query: &str) -> client::Response {
    client::request(
        gw.addr,
        "GET",
        &format!("/api/v1/audio/voices{query}"),
        &auth(),
        b"",
    )
}

fn ids(list: &Value) -> Vec<(String, String)> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["id"].as_str().unwrap().to_string(),
                v["source"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_model_without_a_provider_list_lists_its_data_and_its_mapped_names() {
    let fake = FakeProvider::start();
    let gw = gateway(&fake);
    let resp = voices(&gw, "?model=tts-listed");
    assert_eq!(resp.status, 200, "{}", resp.text());
    let list = resp.json();
    assert_eq!(list["object"], "list");
    assert_eq!(list["model"], "tts-listed");
    assert_eq!(list["default_voice"], "echo");
    assert_eq!(list["provider_voices"], "not_offered");
    assert_eq!(
        ids(&list),
        [
            ("echo".to_string(), "builtin".to_string()),
            ("alloy".into(), "builtin".into()),
            ("narrator".into(), "mapping".into()),
        ]
    );
    assert_eq!(list["data"][0]["default"], true);
    assert!(list["data"][1].get("default").is_none());
    assert_eq!(list["data"][2]["voice"], "alloy");
    // OpenAI has no voice list: nothing was asked of the provider.
    assert!(fake.requests().is_empty());

    // A family without a voice list: its default.
    let list = voices(&gw, "?model=tts-1").json();
    assert_eq!(ids(&list), [("alloy".to_string(), "builtin".to_string())]);
}

#[test]
fn the_provider_list_is_added_and_kept() {
    let fake = FakeProvider::start();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    fake.set_handler(move |r| {
        if r.method == "GET" && r.path == "/v1/voices" {
            seen.fetch_add(1, Ordering::SeqCst);
            // ElevenLabs' own key header, and the operator's key, never the caller's.
            if r.header("xi-api-key") != Some(PROVIDER_KEY) {
                return Some(Reply::json(
                    401,
                    json!({"detail": {"status": "invalid_api_key", "message": "bad key"}}),
                ));
            }
            return Some(Reply::json(
                200,
                json!({"voices": [
                    {"voice_id": "VOICE_DEFAULT", "name": "George", "category": "premade"},
                    {"voice_id": "VOICE_OTHER", "name": "Sarah", "category": "premade"},
                ]}),
            ));
        }
        None
    });
    let gw = gateway(&fake);
    for _ in 0..3 {
        let resp = voices(&gw, "?model=eleven-mapped");
        assert_eq!(resp.status, 200, "{}", resp.text());
        let list = resp.json();
        assert_eq!(list["provider_voices"], "listed");
        assert_eq!(
            ids(&list),
            [
                ("VOICE_DEFAULT".to_string(), "builtin".to_string()),
                ("alloy".into(), "mapping".into()),
                ("nova".into(), "mapping".into()),
                ("VOICE_OTHER".into(), "provider".into()),
            ]
        );
        // The provider's names fill in the data's voices.
        assert_eq!(list["data"][0]["name"], "George");
        assert_eq!(list["data"][3]["name"], "Sarah");
        assert_eq!(list["data"][1]["voice"], "VOICE_ALLOY");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the list is kept");

    // A model with a voice list offers only those: the provider's names fill them in, its other
    // voices (which the model would refuse) are not offered.
    let list = voices(&gw, "?model=eleven-listed").json();
    assert_eq!(
        ids(&list),
        [
            ("VOICE_DEFAULT".to_string(), "builtin".to_string()),
            ("VOICE_SECOND".into(), "builtin".into()),
        ]
    );
    assert_eq!(list["data"][0]["name"], "George");
    assert_eq!(list["provider_voices"], "listed");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one list per account");
}

#[test]
fn a_provider_list_that_fails_leaves_the_rest_listed() {
    let fake = FakeProvider::start();
    fake.set_default(Reply::json(
        503,
        json!({"detail": {"status": "system_busy"}}),
    ));
    let gw = gateway(&fake);
    let resp = voices(&gw, "?model=eleven-mapped");
    assert_eq!(resp.status, 200, "{}", resp.text());
    let list = resp.json();
    assert_eq!(list["provider_voices"], "unavailable");
    assert_eq!(ids(&list).len(), 3, "{list}");
}

#[test]
fn a_mapped_name_reaches_the_provider_as_its_voice() {
    let fake = FakeProvider::start();
    let gw = gateway(&fake);
    // ElevenLabs: the voice is in the path.
    for (voice, native) in [
        (Some("alloy"), "VOICE_ALLOY"),
        (Some("nova"), "VOICE_NOVA"),
        (Some("VOICE_OTHER"), "VOICE_OTHER"),
        (None, "VOICE_DEFAULT"),
    ] {
        fake.push(Reply::bytes(200, "audio/mpeg", vec![7; 64]));
        let mut body = json!({"model": "eleven-mapped", "input": "Hello"});
        if let Some(v) = voice {
            body["voice"] = json!(v);
        }
        let resp = post(&gw, "/api/v1/audio/speech", &body);
        assert_eq!(resp.status, 200, "{voice:?}: {}", resp.text());
        let got = fake.requests().pop().unwrap();
        assert!(
            got.path
                .starts_with(&format!("/v1/text-to-speech/{native}/stream?")),
            "{voice:?}: {}",
            got.path
        );
    }
    // OpenAI: the voice is in the body; a model with a voice list accepts its mapped names.
    fake.push(Reply::bytes(200, "audio/mpeg", vec![7; 64]));
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-listed", "input": "Hello", "voice": "narrator"}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(fake.requests().pop().unwrap().json()["voice"], "alloy");
    let before = fake.requests().len();
    let resp = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-listed", "input": "Hello", "voice": "nova"}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    let err = resp.json();
    assert_eq!(err["code"], "validation_error");
    assert_eq!(
        err["details"]["voice"],
        "model tts-listed accepts: alloy, echo, narrator"
    );
    assert_eq!(fake.requests().len(), before, "refused before the provider");
}

#[test]
fn unknown_and_non_speech_models_and_a_missing_key_are_refused() {
    let fake = FakeProvider::start();
    let gw = gateway(&fake);
    let resp = voices(&gw, "?model=no-such-model");
    assert_eq!(resp.status, 404, "{}", resp.text());
    assert_eq!(resp.json()["code"], "not_found");

    let resp = voices(&gw, "?model=rerank-v3.5");
    assert_eq!(resp.status, 400, "{}", resp.text());
    let err = resp.json();
    assert_eq!(err["code"], "validation_error");
    assert!(
        err["details"]["model"]
            .as_str()
            .unwrap()
            .contains("only speech models have voices"),
        "{err}"
    );

    for query in ["", "?model=", "?voice=alloy"] {
        let resp = voices(&gw, query);
        assert_eq!(resp.status, 400, "{query}: {}", resp.text());
        assert!(resp.json()["details"]["model"].is_string(), "{query}");
    }

    let resp = client::request(
        gw.addr,
        "GET",
        "/api/v1/audio/voices?model=eleven-mapped",
        &[],
        b"",
    );
    assert_eq!(resp.status, 401, "{}", resp.text());
    let resp = client::request(
        gw.addr,
        "POST",
        "/api/v1/audio/voices?model=eleven-mapped",
        &auth(),
        b"",
    );
    assert_eq!(resp.status, 405, "{}", resp.text());
    assert!(fake.requests().is_empty(), "no provider was asked");
}

#[test]
fn a_bad_voice_map_is_refused_at_load() {
    let yaml = config("http://127.0.0.1:1", (1, 2)).replace(
        "  models:\n",
        "  models:\n    bad-rerank: {family: cohere-rerank, voice_map: {alloy: x}, targets: [{provider: cohere, model: r}]}\n    bad-voice: {family: openai-tts, capabilities: {voices: [alloy, echo]}, voice_map: {narrator: onyx, ' ': alloy}, targets: [{provider: openai, model: tts-1}]}\n",
    );
    let errors = switchyard::config::load_str(&yaml, &|_| None)
        .err()
        .unwrap()
        .join("\n");
    for needle in [
        "switchyard.models.bad-rerank.voice_map: only speech models take a voice map",
        "switchyard.models.bad-voice.voice_map.narrator: `onyx` is not one of the model's voices (alloy, echo)",
        "switchyard.models.bad-voice.voice_map: a voice name must not be empty",
    ] {
        assert!(errors.contains(needle), "missing `{needle}` in:\n{errors}");
    }
}
