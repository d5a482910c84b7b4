//! Provider kinds defined outside the crate (here, in the test crate, through
//! `switchyard::provider_api` only: a rerank and a speech kind), bound to models in the
//! configuration and served end to end against a fake in-house server that checks what it
//! receives: the native request, the kind's own credentials header and setting, retries, and the
//! kind's error classification deciding the caller's answer. And the configuration's side: an
//! unknown kind is refused naming the known ones, a setting the kind does not take is refused by
//! name, and a reload knows the kinds the configuration was loaded with.

use serde_json::json;
use switchyard::provider_api::ProviderKinds;

use crate::support::fake::{FakeProvider, Recorded, Reply};
use crate::support::{self, free_port, TestGateway};

/// The in-house server's key, as the configuration gives it.
const INHOUSE_KEY: &str = "inhouse-secret-0001";

/// A rerank server of "our own": `POST /v1/score` with `{"model", "query", "candidates"}` and the
/// token in `x-inhouse-token`, the account's tenant in `x-inhouse-tenant`; it answers
/// `{"scores": [...]}` (one per candidate, in order) or `{"error": {"code", "message"}}`.
mod inhouse {
    use switchyard::provider_api::*;

    /// The kind's own setting (`tenant:` beside the shared keys of the account).
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Settings {
        tenant: String,
    }

    #[derive(serde::Serialize)]
    struct Score<'a> {
        model: &'a str,
        query: &'a str,
        candidates: &'a [JsonStr<'a>],
    }

    #[derive(serde::Deserialize)]
    struct Scores {
        scores: Vec<f64>,
    }

    #[derive(serde::Deserialize)]
    struct ErrorBody {
        error: ErrorDetail,
    }

    #[derive(serde::Deserialize)]
    struct ErrorDetail {
        code: String,
        message: String,
    }

    /// An adapter with state of its own (the tenant header), so a trait implementation.
    struct Rerank {
        tenant: HeaderValue,
    }

    impl RerankAdapter for Rerank {
        fn request(
            &self,
            target: &Target,
            req: &RerankRequest<'_>,
        ) -> Result<Prepared, GatewayError> {
            let body = Score {
                model: &target.native_model,
                query: req.query.as_str(),
                candidates: &req.documents,
            };
            let mut native =
                NativeRequest::post_json("/v1/score", json_with_extra(&body, &req.passthrough)?);
            native.headers.push((
                HeaderName::from_static("x-inhouse-tenant"),
                self.tenant.clone(),
            ));
            Ok(Prepared::Http(native))
        }

        fn response<'r>(
            &self,
            provider: &Provider,
            req: &'r RerankRequest<'r>,
            _headers: &HeaderMap,
            body: &[u8],
        ) -> Result<RerankResult<'r>, UpstreamError> {
            let answer: Scores = serde_json::from_slice(body)
                .map_err(|e| bad_answer(provider, format!("not a scores answer: {e}")))?;
            if answer.scores.len() != req.documents.len() {
                return Err(bad_answer(provider, "not one score per candidate"));
            }
            req.build(
                answer.scores.into_iter().enumerate(),
                None,
                QueryCounting::Once,
                Default::default(),
            )
            .map_err(|m| bad_answer(provider, m))
        }
    }

    /// The server's codes decide, whatever the status: `busy` is worth retrying even on a 400,
    /// `model_not_loaded` is the operator's problem, `bad_input` the caller's.
    fn errors(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
        let parsed: Option<ErrorBody> = serde_json::from_slice(body).ok();
        let message = parsed
            .as_ref()
            .map(|b| provider.redact(&b.error.message))
            .unwrap_or_else(|| format!("HTTP {status}"));
        let mut err = UpstreamError::from_status(&provider.name, status, message);
        match parsed.as_ref().map(|b| b.error.code.as_str()) {
            Some("busy") => err.kind = UpstreamErrorKind::RateLimited,
            Some("model_not_loaded") => err.kind = UpstreamErrorKind::UnknownModel,
            Some("bad_input") => err.kind = UpstreamErrorKind::InvalidRequest,
            _ => {}
        }
        err
    }

    /// A speech server of "our own": `POST /tts` with `{"voice", "text", "format", "rate"}` and
    /// a Bearer key; it answers the audio itself. Stateless, so plain functions.
    fn tts_request(
        target: &Target,
        req: &SpeechRequest<'_>,
    ) -> Result<NativeRequest, GatewayError> {
        let body = serde_json::json!({
            "voice": format!("{}/{}", target.native_model, req.voice.as_str()),
            "text": req.input.as_str(),
            "format": req.response_format,
            "rate": req.speed,
        });
        Ok(NativeRequest::post_json(
            "/tts",
            body.to_string().into_bytes(),
        ))
    }

    /// The host's registry: `inhouse-rerank` and `inhouse-tts`.
    pub fn kinds() -> ProviderKinds {
        let mut kinds = ProviderKinds::new();
        kinds
            .register("inhouse-tts", |account| {
                Ok(Kind {
                    auth: keyed(account.key(), Auth::bearer)?,
                    errors: |p, status, _| UpstreamError::from_status(&p.name, status, "failed"),
                    remote: true,
                    result_hosts: &[],
                    adapters: Adapters {
                        speech: Some(Box::new(SpeechFns {
                            request: tts_request,
                            // The answer is the audio: passed through as it comes.
                            decoding: None,
                        })),
                        ..Adapters::default()
                    },
                })
            })
            .unwrap()
            .register("inhouse-rerank", |account| {
                let settings: Settings = account.settings()?;
                let tenant = HeaderValue::from_str(&settings.tenant)
                    .map_err(|_| "tenant: not a header value".to_string())?;
                Ok(Kind {
                    auth: keyed(account.key(), |key| Auth::header("x-inhouse-token", key))?,
                    errors,
                    remote: true,
                    result_hosts: &[],
                    adapters: Adapters {
                        rerank: Some(Box::new(Rerank { tenant })),
                        ..Adapters::default()
                    },
                })
            })
            .unwrap();
        kinds
    }
}

fn config(base_url: &str, ports: (u16, u16)) -> String {
    format!(
        r#"
version: 1
threads: 1
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners:
    - {{name: a, address: "127.0.0.1:{p0}"}}
    - {{name: b, address: "127.0.0.1:{p1}"}}
  retries: {{max: 3, initial_backoff_ms: 1, max_backoff_ms: 5, max_retry_after_ms: 50}}
  auth:
    api_keys:
      - {{name: tester, key: "{key}"}}
  providers:
    inhouse:
      kind: inhouse-rerank
      api_key: "{INHOUSE_KEY}"
      tenant: search
      base_url: "{base_url}"
      timeouts: {{read_ms: 1500}}
    voices: {{kind: inhouse-tts, api_key: "{INHOUSE_KEY}", base_url: "{base_url}/speech"}}
  models:
    inhouse-voice: {{family: openai-tts, targets: [{{provider: voices, model: studio}}]}}
    inhouse-ranker:
      family: jina-rerank
      capabilities: {{max_documents: 64}}
      targets: [{{provider: inhouse, model: ranker-v3}}]
"#,
        p0 = ports.0,
        p1 = ports.1,
        key = support::KEY,
    )
}

fn start(fake: &FakeProvider) -> TestGateway {
    TestGateway::start_with_kinds(|ports| config(&fake.base_url(), ports), &inhouse::kinds())
}

fn rerank(gw: &TestGateway, retries: u32) -> support::client::Response {
    support::post(
        gw,
        "/api/v1/rerank",
        &json!({
            "model": "inhouse-ranker",
            "query": "which is a fruit",
            "documents": ["a car", "an apple", "a pear"],
            "top_n": 2,
            "retries": retries,
        }),
    )
}

fn scores() -> Reply {
    Reply::json(200, json!({"scores": [0.1, 0.9, 0.6]}))
}

fn error(status: u16, code: &str, message: &str) -> Reply {
    Reply::json(status, json!({"error": {"code": code, "message": message}}))
}

/// What every request to the in-house server must be: the kind's path, its credentials header
/// and setting, and the native body built by the adapter written outside the crate.
fn assert_native(req: &Recorded) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/score");
    assert_eq!(req.header("x-inhouse-token"), Some(INHOUSE_KEY));
    assert_eq!(req.header("x-inhouse-tenant"), Some("search"));
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(
        req.json(),
        json!({
            "model": "ranker-v3",
            "query": "which is a fruit",
            "candidates": ["a car", "an apple", "a pear"],
        })
    );
}

#[test]
fn a_model_bound_to_a_kind_defined_outside_the_crate_is_served() {
    let fake = FakeProvider::start();
    fake.push(scores());
    let gw = start(&fake);
    let r = rerank(&gw, 0);
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.json();
    assert_eq!(body["model"], "inhouse-ranker");
    assert_eq!(
        body["results"],
        json!([
            {"index": 1, "relevance_score": 0.9, "document": "an apple"},
            {"index": 2, "relevance_score": 0.6, "document": "a pear"},
        ])
    );
    assert_eq!(body["metadata"]["total_tokens_source"], "gateway");
    assert!(body["usage"]["total_tokens"].as_u64().unwrap() > 0);
    let seen = fake.requests();
    assert_eq!(seen.len(), 1);
    assert_native(&seen[0]);

    // The model list shows the account's kind as the configuration names it.
    let models = support::client::request(
        gw.addr,
        "GET",
        "/api/v1/models/inhouse-ranker",
        &support::auth(),
        b"",
    );
    assert_eq!(models.status, 200, "{}", models.text());
    assert!(
        models.text().contains("inhouse-rerank"),
        "{}",
        models.text()
    );
}

#[test]
fn a_failed_attempt_is_retried_to_success() {
    for status in [500, 503] {
        let fake = FakeProvider::start();
        fake.push(error(status, "internal", "worker crashed"));
        fake.push(scores());
        let gw = start(&fake);
        let r = rerank(&gw, 1);
        assert_eq!(r.status, 200, "HTTP {status} first: {}", r.text());
        assert_eq!(r.json()["results"][0]["index"], 1);
        let seen = fake.requests();
        assert_eq!(seen.len(), 2, "HTTP {status}: one retry");
        // The retry is the same native request, rebuilt.
        seen.iter().for_each(assert_native);

        // Without retries the caller sees the failure, as the gateway's own error.
        fake.push(error(status, "internal", "worker crashed"));
        let r = rerank(&gw, 0);
        assert_eq!(r.status, 502, "{}", r.text());
        assert_eq!(r.json()["code"], "upstream_error");
        assert_eq!(fake.requests().len(), 3);
    }
}

#[test]
fn the_kinds_error_classification_decides_the_callers_answer() {
    let fake = FakeProvider::start();
    let gw = start(&fake);

    // `bad_input`: the caller's 400, with the server's reason (its key redacted), not retried.
    fake.push(error(
        400,
        "bad_input",
        &format!("query too long for token {INHOUSE_KEY}"),
    ));
    let r = rerank(&gw, 1);
    assert_eq!(r.status, 400, "{}", r.text());
    let e = &r.json();
    assert_eq!(e["code"], "invalid_request");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("query too long"), "{message}");
    assert!(!r.text().contains(INHOUSE_KEY), "{}", r.text());
    assert_eq!(fake.requests().len(), 1, "a caller's error is not retried");

    // `busy` on a 400: by status alone the caller's error, but the kind says "rate limited", so
    // it is retried and succeeds.
    fake.push(error(400, "busy", "all workers busy"));
    fake.push(scores());
    let r = rerank(&gw, 1);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(fake.requests().len(), 3);

    // `model_not_loaded` on a 404: the configuration names a model the server does not serve.
    fake.push(error(404, "model_not_loaded", "ranker-v3 is not loaded"));
    let r = rerank(&gw, 0);
    assert_eq!(r.status, 503, "{}", r.text());
    let e = &r.json();
    assert_eq!(e["code"], "model_unavailable");
    assert!(e["message"].as_str().unwrap().contains("ranker-v3"), "{e}");
    fake.requests().iter().for_each(assert_native);
}

#[test]
fn an_unknown_kind_is_refused_at_load_naming_the_known_ones() {
    let yaml = config("http://127.0.0.1:9", (free_port(), free_port()));
    // Without the host's kinds the account's kind is unknown.
    let errors = switchyard::config::load_str(&yaml, &|_| None)
        .err()
        .unwrap()
        .join("\n");
    assert!(
        errors.contains(
            "switchyard.providers.inhouse.kind: unknown provider kind `inhouse-rerank`; \
             built-in kinds: openai, azure-openai, cohere"
        ),
        "{errors}"
    );
    assert!(errors.contains("registered kinds: none"), "{errors}");

    // With kinds registered, a misspelt kind names them too.
    let misspelt = yaml.replace("kind: inhouse-rerank", "kind: inhouse-reranker");
    let errors = switchyard::config::load_str_with(&misspelt, &|_| None, &inhouse::kinds())
        .err()
        .unwrap()
        .join("\n");
    assert!(
        errors.contains("unknown provider kind `inhouse-reranker`"),
        "{errors}"
    );
    assert!(errors.contains("kling"), "{errors}");
    assert!(
        errors.contains("registered kinds: inhouse-rerank, inhouse-tts"),
        "{errors}"
    );

    // A setting the kind does not take, and one it needs but lacks, are named.
    let extra = yaml.replace("tenant: search", "tenant: search\n      region: eu");
    let errors = switchyard::config::load_str_with(&extra, &|_| None, &inhouse::kinds())
        .err()
        .unwrap();
    assert_eq!(
        errors,
        ["switchyard.providers.inhouse: region: not a setting of provider kind `inhouse-rerank`"]
    );
    let missing = yaml.replace("      tenant: search\n", "");
    let errors = switchyard::config::load_str_with(&missing, &|_| None, &inhouse::kinds())
        .err()
        .unwrap()
        .join("\n");
    assert!(
        errors.contains("switchyard.providers.inhouse: missing field `tenant`"),
        "{errors}"
    );

    // Built-in kinds cannot be replaced, so a configuration means the same with or without them.
    let mut kinds = ProviderKinds::new();
    let refused = kinds
        .register("tei", |_| Err("never built".into()))
        .err()
        .unwrap();
    assert!(refused.contains("built in"), "{refused}");
}

#[test]
fn a_reload_knows_the_kinds_the_configuration_was_loaded_with() {
    let dir = std::env::temp_dir().join(format!(
        "switchyard-external-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gateway.yaml");
    let yaml = config("http://127.0.0.1:9", (free_port(), free_port()));
    std::fs::write(&file, &yaml).unwrap();
    let path = file.display().to_string();
    let settings = switchyard::config::load_file_with(&path, &inhouse::kinds()).unwrap();
    let state = switchyard::GatewayState::new(settings.gateway);
    // The file changes the model's document cap; the reload must read the kind to apply it.
    std::fs::write(&file, yaml.replace("max_documents: 64", "max_documents: 8")).unwrap();
    let reloader = switchyard::internals::reload::Reloader {
        state: state.clone(),
        source: switchyard::internals::reload::ConfigSource::File(path),
        server: Default::default(),
    };
    let reloaded = reloader.reload();
    std::fs::remove_dir_all(&dir).ok();
    assert!(reloaded.is_ok(), "{reloaded:?}");
    let settings = state.settings();
    let model = settings.catalog().get("inhouse-ranker").unwrap();
    let switchyard::internals::caps::Caps::Rerank(caps) = model.caps else {
        panic!("not a rerank model")
    };
    assert_eq!(caps.max_documents, 8);
}

#[test]
fn a_speech_kind_defined_outside_the_crate_passes_its_audio_through_with_retries() {
    let fake = FakeProvider::start();
    let gw = start(&fake);
    let audio: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    fake.push(Reply::json(503, json!({"error": "warming up"})));
    fake.push(Reply::bytes(200, "audio/mpeg", audio.clone()));
    let r = support::post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "inhouse-voice", "input": "Hello there", "voice": "nova", "retries": 1}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("audio/mpeg"));
    assert!(r.body == audio, "the audio arrives as the server sent it");
    let seen = fake.requests();
    assert_eq!(seen.len(), 2, "one retry after the 503");
    for req in &seen {
        assert_eq!(req.path, "/speech/tts");
        assert_eq!(
            req.header("authorization"),
            Some(format!("Bearer {INHOUSE_KEY}").as_str())
        );
        assert_eq!(
            req.json(),
            json!({"voice": "studio/nova", "text": "Hello there", "format": "mp3", "rate": 1.0})
        );
    }
}
