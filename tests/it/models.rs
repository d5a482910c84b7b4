//! `GET /api/v1/models` and `GET /api/v1/models/{id}`: OpenAI's list shape with every configured
//! model, its operation, targets and capabilities; authenticated; and capabilities that are what
//! the gateway then accepts: a listed value passes validation, an unlisted one is refused.

use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use crate::support;
use support::fake::{FakeProvider, Reply};
use support::{client, TestGateway, JWT_SECRET, PROVIDER_KEY};

/// Models whose capabilities the config changes, and one whose name holds a `/`.
const EXTRA_MODELS: &str = r#"
    tts-bytes:
      family: openai-tts
      capabilities: {input_limit: {max: 10, unit: bytes}, voices: [alloy, echo], default_voice: echo}
      targets: [{provider: openai, model: tts-1}]
    gpt-image-ruled:
      family: gpt-image
      capabilities: {sizes: {min_side: 512, max_side: 2048, multiple_of: 16, max_pixels: 2097152, max_aspect_ratio: "21:9"}, default_quality: high}
      targets: [{provider: openai, model: gpt-image-1, lifecycle: {still_available: true}}]
    team/tts:
      family: openai-tts
      targets: [{provider: disabled, model: tts-1}, {provider: openai, model: tts-1}, {provider: azure, model: tts-deployment}]
    tts-priced:
      family: openai-tts
      price: {currency: EUR, characters: {price: 14, per: 1000000}}
      targets: [{provider: openai, model: tts-1}, {provider: openai, model: tts-1-hd, price: unpriced}]
    seedream-cny:
      family: seedream
      targets: [{provider: ark, model: doubao-seedream-4-0-250828, lifecycle: {still_available: true}, price: {currency: CNY, images: {per_image: 0.2}}}]
"#;

fn setup() -> (FakeProvider, TestGateway, String) {
    let fake = FakeProvider::start();
    let url = fake.base_url();
    let yaml = std::cell::RefCell::new(String::new());
    let gw = TestGateway::start_with(|ports| {
        let config = support::config(&url, ports) + EXTRA_MODELS;
        *yaml.borrow_mut() = config.clone();
        config
    });
    (fake, gw, yaml.into_inner())
}

fn get(gw: &TestGateway, path: &str) -> client::Response {
    client::request(gw.addr, "GET", path, &support::auth(), b"")
}

fn list(gw: &TestGateway) -> Vec<Value> {
    let resp = get(gw, "/api/v1/models");
    assert_eq!(resp.status, 200, "{}", resp.text());
    resp.json()["data"].as_array().unwrap().clone()
}

fn entry<'a>(models: &'a [Value], id: &str) -> &'a Value {
    models
        .iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("{id} is not listed"))
}

/// The configured models (`switchyard.models`), name → family.
fn configured(yaml: &str) -> Vec<(String, String)> {
    let doc: serde_yaml::Value = serde_yaml::from_str(yaml).unwrap();
    doc["switchyard"]["models"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().unwrap().to_string(),
                v["family"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn the_list_is_openai_shaped_and_holds_every_configured_model() {
    let (fake, gw, yaml) = setup();
    let resp = get(&gw, "/api/v1/models");
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("application/json"));
    let body = resp.json();
    assert_eq!(body["object"], "list");
    assert_eq!(body.as_object().unwrap().len(), 2, "{body}");
    let models = body["data"].as_array().unwrap();
    let ids: Vec<&str> = models.iter().map(|m| m["id"].as_str().unwrap()).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted, "sorted by id");

    let want = configured(&yaml);
    assert_eq!(models.len(), want.len(), "{ids:?}");
    let created = models[0]["created"].as_i64().unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((now - 600..=now).contains(&created), "{created}");
    for (name, family) in &want {
        let m = entry(models, name);
        let op = switchyard::internals::caps::family(family)
            .unwrap()
            .operation();
        assert_eq!(m["object"], "model", "{name}");
        assert_eq!(m["created"], created, "{name}: one load time");
        assert_eq!(m["operation"], op.as_str(), "{name}");
        assert_eq!(m["family"], family.as_str(), "{name}");
        assert!(m["capabilities"].is_object(), "{name}");
        assert_eq!(m["owned_by"], m["targets"][0]["provider"], "{name}");
    }

    // Targets are public facts: the provider's kind and native model, never the account's name,
    // key or address.
    let azure = entry(models, "azure-tts");
    assert_eq!(azure["owned_by"], "azure-openai");
    assert_eq!(
        azure["targets"],
        json!([{"provider": "azure-openai", "model": "tts-deployment", "available": true, "price": null}])
    );
    let text = resp.text();
    for secret in [
        PROVIDER_KEY,
        support::KLING_SECRET_KEY,
        &fake.base_url(),
        "127.0.0.1",
    ] {
        assert!(!text.contains(secret), "the list shows {secret}");
    }

    // A model whose provider has no key is listed, and says so.
    let off = entry(models, "tts-off");
    assert_eq!(off["available"], false);
    // (tts-1's lifecycle and price, also listed per target, have tests of their own.)
    assert_eq!(
        targets_plain(off),
        json!([{"provider": "openai", "model": "tts-1", "available": false}])
    );
    assert_eq!(entry(models, "tts-1")["available"], true);
    // Two accounts of one kind serving one native model are one public target, available when
    // either account has its key.
    let team = entry(models, "team/tts");
    assert_eq!(team["available"], true);
    assert_eq!(team["owned_by"], "openai");
    assert_eq!(
        targets_plain(team),
        json!([
            {"provider": "openai", "model": "tts-1", "available": true},
            {"provider": "azure-openai", "model": "tts-deployment", "available": true},
        ])
    );

    assert!(fake.requests().is_empty(), "listing asks no provider");
}

/// A model's `targets`, each without its `lifecycle` and `price`.
fn targets_plain(model: &Value) -> Value {
    let mut targets = model["targets"].clone();
    for t in targets.as_array_mut().into_iter().flatten() {
        if let Some(t) = t.as_object_mut() {
            t.remove("lifecycle");
            t.remove("price");
        }
    }
    targets
}

/// Each target lists its price in the units its provider bills, exact decimals as strings, with
/// currency, source and date; a configured price is shown in place of the built-in one; a target
/// with no price says `null`, never 0.
#[test]
fn each_target_shows_its_price_or_null() {
    let (_fake, gw, _) = setup();
    let models = list(&gw);
    let price = |model: &str, i: usize| entry(&models, model)["targets"][i]["price"].clone();
    assert_eq!(
        price("tts-1", 0),
        json!({
            "currency": "USD",
            "characters": {"price": "15", "per": 1000000},
            "source": "https://developers.openai.com/api/docs/models/tts-1",
            "checked": "2026-11-27",
        })
    );
    let speech = price("gpt-4o-mini-tts", 0);
    assert_eq!(
        speech["tokens"],
        json!({"per": 1000000, "text_in": "0.6", "audio_out": "12"})
    );
    let image = price("gpt-image-2", 0);
    assert_eq!(
        image["tokens"],
        json!({"per": 1000000, "text_in": "5", "image_in": "8", "text_out": "10", "image_out": "30"})
    );
    let table = image["images"]["table"].as_array().unwrap();
    assert!(
        table.contains(&json!({"quality": "high", "size": "1024x1024", "price": "0.211"})),
        "{image}"
    );
    assert!(
        table.contains(&json!({"quality": "low", "size": "1024x1536", "price": "0.005"})),
        "{image}"
    );
    assert_eq!(
        price("voyage-rerank-2.5", 0)["tokens"],
        json!({"per": 1000000, "input": "0.05"})
    );
    assert_eq!(
        price("flux-pro-1.1", 0)["images"],
        json!({"per_image": "0.04"})
    );
    // Mixedbread's model page: $0.15 per 1M tokens (W2 of the 2026-12-01 audit; it was 0).
    assert_eq!(
        price("mxbai-rerank-large-v2", 0)["tokens"],
        json!({"per": 1000000, "input": "0.15"})
    );
    // Chinese providers' domestic prices are in yuan.
    assert_eq!(price("cogview-4", 0)["currency"], "CNY");
    assert_eq!(
        price("cogview-4", 0)["images"],
        json!({"per_image": "0.06"})
    );
    // No source confirmed a price for these: null, not 0.
    for unpriced in [
        "rerank-english-v3.0",
        "azure-tts",
        "kling-v2-1",
        "local-bm25",
    ] {
        assert_eq!(price(unpriced, 0), Value::Null, "{unpriced}");
    }
    // The configuration's price over the built-in entry (which keeps its source), a target
    // declared unpriced, and a price in yuan for a model the table lacks.
    let priced = price("tts-priced", 0);
    assert_eq!(priced["currency"], "EUR");
    assert_eq!(priced["characters"], json!({"price": "14", "per": 1000000}));
    assert_eq!(
        priced["source"],
        "https://developers.openai.com/api/docs/models/tts-1"
    );
    assert_eq!(price("tts-priced", 1), Value::Null);
    assert_eq!(
        price("seedream-cny", 0),
        json!({"currency": "CNY", "images": {"per_image": "0.2"}})
    );
}

/// The capabilities of a few models of each operation are their family's, from the built-in table.
#[test]
fn capabilities_are_the_family_table() {
    use switchyard::internals::caps::Caps;
    let (_fake, gw, _) = setup();
    let models = list(&gw);

    let Some(Caps::Speech(tts)) = switchyard::internals::caps::family("openai-tts") else {
        panic!("openai-tts")
    };
    let c = &entry(&models, "tts-1")["capabilities"];
    assert_eq!(c["formats"], json!(tts.formats));
    assert_eq!(c["sse_formats"], json!([]));
    assert_eq!(c["speeds"], json!(tts.speeds));
    assert_eq!(c["default_voice"], json!(tts.default_voice));
    assert_eq!(c["voices"], json!(tts.voices));
    assert_eq!(c["instructions"], false);
    assert_eq!(
        c["input_limit"],
        json!({"max": tts.input_limit.max, "unit": "characters"})
    );
    let c = &entry(&models, "gpt-4o-mini-tts")["capabilities"];
    assert_eq!(
        (&c["instructions"], &c["custom_voices"]),
        (&json!(true), &json!(true))
    );
    // Each unit under the table's own name.
    let c = &entry(&models, "qwen3-tts-flash")["capabilities"];
    assert_eq!(c["input_limit"]["unit"], "han_weighted_characters");
    let c = &entry(&models, "google-tts")["capabilities"];
    assert_eq!(c["input_limit"]["unit"], "bytes");

    let Some(Caps::Images(image)) = switchyard::internals::caps::family("gpt-image") else {
        panic!("gpt-image")
    };
    let m = entry(&models, "gpt-image-1");
    let c = &m["capabilities"];
    assert_eq!(c["sizes"], json!(image.sizes));
    assert_eq!(c["default_size"], image.default_size);
    assert_eq!(c["qualities"], json!(image.qualities));
    assert_eq!(c["max_n"], image.max_n);
    assert_eq!(c["output_formats"], json!(image.output_formats));
    assert_eq!(c["backgrounds"], json!(image.backgrounds));
    let ratios: Vec<(&String, &Value)> = c["aspect_ratios"].as_object().unwrap().iter().collect();
    assert_eq!(ratios.len(), image.aspect_ratios.len());
    for (ratio, size) in image.aspect_ratios {
        assert_eq!(c["aspect_ratios"][*ratio], *size, "{ratio}");
    }
    assert_eq!(c["size_rule"], Value::Null);
    // A family with a size rule shows its bounds.
    let c = &entry(&models, "seedream-4")["capabilities"];
    let Some(Caps::Images(seedream)) = switchyard::internals::caps::family("seedream") else {
        panic!("seedream")
    };
    let rule = seedream.size_rule.expect("seedream has a size rule");
    assert_eq!(c["size_rule"]["max_pixels"], json!(rule.max_pixels));
    // A model that takes no reference image takes none at all.
    let Some(Caps::Images(flux)) = switchyard::internals::caps::family("flux") else {
        panic!("flux")
    };
    let c = &entry(&models, "flux-pro-1.1")["capabilities"];
    assert_eq!(c["reference_image"], flux.reference_image);
    if !flux.reference_image {
        assert_eq!(c["max_images"], 0);
    }

    let Some(Caps::Rerank(cohere)) = switchyard::internals::caps::family("cohere-rerank") else {
        panic!("cohere-rerank")
    };
    let c = &entry(&models, "rerank-v3.5")["capabilities"];
    assert_eq!(
        c,
        &json!({
            "max_documents": cohere.max_documents,
            "query_limit": {"max": cohere.query_limit.max, "unit": cohere.query_limit.unit},
            "native_fields": cohere.native_fields,
        })
    );
}

#[test]
fn a_config_override_is_listed() {
    let (_fake, gw, _) = setup();
    let models = list(&gw);
    let c = &entry(&models, "tts-bytes")["capabilities"];
    assert_eq!(c["input_limit"], json!({"max": 10, "unit": "bytes"}));
    assert_eq!(c["voices"], json!(["alloy", "echo"]));
    assert_eq!(c["default_voice"], "echo");
    let c = &entry(&models, "gpt-image-ruled")["capabilities"];
    assert_eq!(
        c["size_rule"],
        json!({"min_side": 512, "max_side": 2048, "multiple_of": 16, "max_pixels": 2097152, "max_aspect_ratio": "21:9"})
    );
    assert_eq!(c["default_quality"], "high");
}

/// The gateway's answer to `body`: accepted (it reached the provider, which refuses everything
/// here) or refused by validation (400 `validation_error`, or 413 `input_too_long`).
fn accepted(gw: &TestGateway, fake: &FakeProvider, path: &str, body: Value) -> bool {
    let before = fake.requests().len();
    let resp = support::post(gw, path, &body);
    let refused =
        (resp.status == 400 && resp.json()["code"] == "validation_error") || resp.status == 413;
    let reached = fake.requests().len() > before;
    assert!(
        refused != reached,
        "{body}: {} {} (reached the provider: {reached})",
        resp.status,
        resp.text()
    );
    reached
}

/// What the list says a model takes is what the gateway takes: each listed value passes
/// validation, values beside the list are refused, limits hold at their edge.
#[test]
fn listed_capabilities_are_what_requests_meet() {
    let (fake, gw, _) = setup();
    // Every request that passes validation is refused by the provider, so it costs nothing.
    fake.set_default(Reply::json(
        400,
        json!({"error": {"message": "nope", "type": "invalid_request_error"}}),
    ));
    let models = list(&gw);

    let speech = "/api/v1/audio/speech";
    let c = entry(&models, "eleven-multilingual-v2")["capabilities"].clone();
    let req = |extra: Value| {
        let mut body = json!({"model": "eleven-multilingual-v2", "input": "Hello"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let formats = c["formats"].as_array().unwrap();
    for f in ["mp3", "opus", "aac", "flac", "wav", "pcm"] {
        let listed = formats.iter().any(|x| x == f);
        let got = accepted(&gw, &fake, speech, req(json!({"response_format": f})));
        assert_eq!(got, listed, "format {f}");
    }
    let speeds = c["speeds"].as_array().unwrap();
    for s in [0.25, 0.5, 1.0, 2.0, 4.0] {
        let listed = speeds.iter().any(|x| x.as_f64() == Some(s));
        assert_eq!(
            accepted(&gw, &fake, speech, req(json!({"speed": s}))),
            listed,
            "speed {s}"
        );
    }
    let max = c["input_limit"]["max"].as_u64().unwrap() as usize;
    assert_eq!(c["input_limit"]["unit"], "characters");
    assert!(accepted(
        &gw,
        &fake,
        speech,
        req(json!({"input": "é".repeat(max)}))
    ));
    assert!(!accepted(
        &gw,
        &fake,
        speech,
        req(json!({"input": "é".repeat(max + 1)}))
    ));
    // A model listing its voices takes those and no other.
    let c = &entry(&models, "tts-bytes")["capabilities"];
    for v in c["voices"].as_array().unwrap() {
        let body = json!({"model": "tts-bytes", "input": "Hi", "voice": v});
        assert!(accepted(&gw, &fake, speech, body), "{v}");
    }
    let body = json!({"model": "tts-bytes", "input": "Hi", "voice": "nova"});
    assert!(!accepted(&gw, &fake, speech, body));

    let images = "/api/v1/images/generations";
    let c = entry(&models, "gpt-image-1")["capabilities"].clone();
    let img = |extra: Value| {
        let mut body = json!({"model": "gpt-image-1", "prompt": "a cat"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    for size in c["sizes"].as_array().unwrap() {
        assert!(
            accepted(&gw, &fake, images, img(json!({"size": size}))),
            "{size}"
        );
    }
    assert!(!accepted(
        &gw,
        &fake,
        images,
        img(json!({"size": "1000x1000"}))
    ));
    for ratio in c["aspect_ratios"].as_object().unwrap().keys() {
        let body = img(json!({"aspect_ratio": ratio}));
        assert!(accepted(&gw, &fake, images, body), "{ratio}");
    }
    for q in c["qualities"].as_array().unwrap() {
        assert!(
            accepted(&gw, &fake, images, img(json!({"quality": q}))),
            "{q}"
        );
    }
    assert!(!accepted(
        &gw,
        &fake,
        images,
        img(json!({"quality": "pro"}))
    ));
    let max_n = c["max_n"].as_u64().unwrap();
    assert!(accepted(&gw, &fake, images, img(json!({"n": max_n}))));
    assert!(!accepted(&gw, &fake, images, img(json!({"n": max_n + 1}))));
    // A size rule's bounds, at their edges.
    let ruled = |size: &str| json!({"model": "gpt-image-ruled", "prompt": "a cat", "size": size});
    assert!(
        accepted(&gw, &fake, images, ruled("1344x576")),
        "exactly 21:9"
    );
    assert!(
        !accepted(&gw, &fake, images, ruled("1376x576")),
        "wider than 21:9"
    );
    assert!(
        !accepted(&gw, &fake, images, ruled("1280x721")),
        "not a multiple of 16"
    );

    let rerank = "/api/v1/rerank";
    let c = &entry(&models, "rerank-v3.5")["capabilities"];
    let max = c["max_documents"].as_u64().unwrap() as usize;
    let docs = |n: usize| -> Vec<String> { (0..n).map(|i| format!("doc {i}")).collect() };
    let body = |n| json!({"model": "rerank-v3.5", "query": "q", "documents": docs(n)});
    assert!(accepted(&gw, &fake, rerank, body(max)));
    assert!(!accepted(&gw, &fake, rerank, body(max + 1)));
}

#[test]
fn one_model_by_id_is_its_list_entry() {
    let (fake, gw, _) = setup();
    let models = list(&gw);
    for id in ["tts-1", "gpt-image-1", "rerank-v3.5", "tts-off"] {
        let resp = get(&gw, &format!("/api/v1/models/{id}"));
        assert_eq!(resp.status, 200, "{id}: {}", resp.text());
        assert_eq!(resp.header("content-type"), Some("application/json"));
        assert_eq!(&resp.json(), entry(&models, id));
    }
    // A name with a `/`: as is, or percent-encoded (as SDKs send it).
    for path in [
        "/api/v1/models/team/tts",
        "/api/v1/models/team%2Ftts",
        "/api/v1/models/team%2ftts",
        "/api/v1/models/%74eam%2Ftts",
    ] {
        let resp = get(&gw, path);
        assert_eq!(resp.status, 200, "{path}: {}", resp.text());
        assert_eq!(&resp.json(), entry(&models, "team/tts"));
    }
    for path in [
        "/api/v1/models/nope",
        "/api/v1/models/TTS-1",
        "/api/v1/models/tts-1/",
        "/api/v1/models/%zz",
        "/api/v1/models/team",
    ] {
        let resp = get(&gw, path);
        assert_eq!(resp.status, 404, "{path}: {}", resp.text());
        let body = resp.json();
        assert_eq!(body["code"], "not_found", "{path}");
        assert!(body["message"].as_str().unwrap().contains("no such model"));
        // The Error object: `code`, `message` and the answer's request id, nothing else.
        assert_eq!(body.as_object().unwrap().len(), 3, "{body}");
        assert_eq!(body["request_id"], resp.header("x-request-id").unwrap());
    }
    assert!(fake.requests().is_empty());
}

#[test]
fn the_list_needs_credentials_an_api_key_or_a_jwt() {
    let (_fake, gw, _) = setup();
    for path in [
        "/api/v1/models",
        "/api/v1/models/tts-1",
        "/api/v1/models/nope",
    ] {
        for headers in [
            vec![],
            vec![("Service-API-Key", "wrong")],
            vec![("Authorization", "Bearer wrong")],
        ] {
            let resp = client::request(gw.addr, "GET", path, &headers, b"");
            assert_eq!(resp.status, 401, "{path} {headers:?}: {}", resp.text());
            assert_eq!(resp.json()["code"], "unauthorized");
        }
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = json!({"sub": "user-1", "iss": "switchyard-tests", "exp": now + 600});
    let token = encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .unwrap();
    let bearer = format!("Bearer {token}");
    let by_jwt = client::request(
        gw.overseas,
        "GET",
        "/api/v1/models",
        &[("Authorization", &bearer)],
        b"",
    );
    assert_eq!(by_jwt.status, 200, "{}", by_jwt.text());
    // Every principal sees the same list, on every entry point.
    assert!(by_jwt.body == get(&gw, "/api/v1/models").body);
    let bearer_key = format!("Bearer {}", support::KEY);
    let resp = client::request(
        gw.addr,
        "GET",
        "/api/v1/models/tts-1",
        &[("Authorization", &bearer_key)],
        b"",
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
}

#[test]
fn other_methods_are_405_naming_get() {
    let (fake, gw, _) = setup();
    for path in ["/api/v1/models", "/api/v1/models/tts-1"] {
        for method in ["POST", "HEAD", "PUT", "DELETE"] {
            let resp = client::request(gw.addr, method, path, &support::auth(), b"");
            assert_eq!(resp.status, 405, "{method} {path}");
            assert_eq!(resp.header("allow"), Some("GET"), "{method} {path}");
            if method != "HEAD" {
                assert_eq!(resp.json()["code"], "method_not_allowed");
            }
        }
    }
    let resp = get(&gw, "/api/v1/models/");
    assert_eq!(resp.status, 404);
    assert!(fake.requests().is_empty());
}
