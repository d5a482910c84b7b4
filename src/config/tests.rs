//! The configuration's own tests: whole files loaded as a host or the binary would, and the
//! errors and warnings each section reports.

use super::*;
use crate::caps::{self, Caps};

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn listeners_are_required_unless_a_host_owns_the_sockets() {
    let models = "  providers: {builtin: {kind: local}}\n  models:\n    bm25: {family: local-rerank, targets: [{provider: builtin, model: bm25}]}\n";
    for listeners in ["", "  listeners: []\n"] {
        let yaml = format!("version: 1\nswitchyard:\n{listeners}{models}");
        let problems = load_str(&yaml, &no_env).err().expect("refused");
        assert_eq!(
            problems,
            ["switchyard.listeners: at least one entry point is required"],
            "{yaml}"
        );
        let hosted = load_hosted_str(&yaml, &no_env).expect("a host's configuration");
        assert!(hosted.gateway.listeners.is_empty());
        assert!(hosted.gateway.catalog.get("bm25").is_some());
    }
    // Listeners a host's configuration does declare are still checked.
    let yaml =
        format!("version: 1\nswitchyard:\n  listeners: [{{name: a, address: nowhere}}]\n{models}");
    assert!(load_hosted_str(&yaml, &no_env).is_err());
}

#[test]
fn embedded_default_loads_without_environment() {
    let s = load_str(DEFAULT_CONFIG, &no_env).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(s.gateway.listeners.len(), 2);
    assert!(s
        .gateway
        .listeners
        .iter()
        .all(|l| l.address.ip().is_loopback()));
    assert!(s.gateway.catalog.get("tts-1").is_some());
}

/// The default configuration offers the dated gpt-4o-mini-tts snapshot (instructions, SSE).
/// ElevenLabs has no voice every account can use after 2026-12-31, so its models take the
/// operator's (`ELEVENLABS_VOICE_ID`), and none without it.
#[test]
fn the_default_speech_models_and_voices_are_current() {
    use crate::caps::Caps;
    let s = load_str(DEFAULT_CONFIG, &no_env).unwrap_or_else(|e| panic!("{e:#?}"));
    let snapshot = s
        .gateway
        .catalog
        .get("gpt-4o-mini-tts-2025-12-15")
        .expect("the dated snapshot is offered");
    assert_eq!(
        snapshot.targets[0].native_model,
        "gpt-4o-mini-tts-2025-12-15"
    );
    let Caps::Speech(c) = snapshot.caps else {
        panic!("not a speech model");
    };
    assert_eq!(c.family, "openai-tts-instruct");
    assert!(c.instructions && !c.sse_formats.is_empty());
    let voice = |env: &dyn Fn(&str) -> Option<String>, name: &str| {
        let s = load_str(DEFAULT_CONFIG, env).unwrap_or_else(|e| panic!("{e:#?}"));
        let model = s.gateway.catalog.get(name).expect(name);
        let Caps::Speech(c) = model.caps else {
            panic!("{name} is not a speech model");
        };
        c.default_voice.map(str::to_string)
    };
    let operators = |k: &str| (k == "ELEVENLABS_VOICE_ID").then(|| "my-voice-id".to_string());
    for name in ["eleven-multilingual-v2", "eleven-flash-v2.5", "eleven-v3"] {
        assert_eq!(voice(&no_env, name), None, "{name}");
        assert_eq!(
            voice(&operators, name).as_deref(),
            Some("my-voice-id"),
            "{name}"
        );
    }
}

/// An ElevenLabs model whose account has a key and no default voice is warned of at load,
/// naming what to set (no voice serves every account after 2026-12-31); it still loads.
#[test]
fn an_elevenlabs_model_with_a_key_and_no_voice_is_warned_of() {
    let keyed = |k: &str| (k == "ELEVENLABS_API_KEY").then(|| "xi-key".to_string());
    let s = load_str(DEFAULT_CONFIG, &keyed).unwrap_or_else(|e| panic!("{e:#?}"));
    let voiceless = |s: &Settings| {
        let warnings = s.gateway.warnings();
        ["eleven-multilingual-v2", "eleven-flash-v2.5", "eleven-v3"]
            .into_iter()
            .filter(|name| {
                let at = format!("switchyard.models.{name}.default_voice: not set");
                warnings
                    .iter()
                    .any(|w| w.starts_with(&at) && w.contains("`GET /api/v1/audio/voices?model="))
            })
            .count()
    };
    assert_eq!(voiceless(&s), 3, "{:#?}", s.gateway.warnings());
    let both = |k: &str| match k {
        "ELEVENLABS_API_KEY" => Some("xi-key".to_string()),
        "ELEVENLABS_VOICE_ID" => Some("my-voice-id".to_string()),
        _ => None,
    };
    let s = load_str(DEFAULT_CONFIG, &both).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(voiceless(&s), 0, "{:#?}", s.gateway.warnings());
}

fn fast_or_bge(successor: &str) -> &'static str {
    if successor.ends_with("4-fast") {
        "cohere-rerank-4-fast"
    } else {
        "bge-reranker-v2-m3"
    }
}

/// Pinecone's retired models (pinecone-rerank-v0, and cohere-rerank-3.5, served by Cohere
/// Rerank 4 Fast since 2026-08-01) hand their requests to successors, and 4 Fast is offered
/// under its own name.
#[test]
fn pinecone_defaults_name_what_serves_them() {
    let s = load_str(DEFAULT_CONFIG, &no_env).unwrap_or_else(|e| panic!("{e:#?}"));
    let fast = s
        .gateway
        .catalog
        .get("pinecone-cohere-rerank-4-fast")
        .expect("4 Fast is offered");
    assert_eq!(fast.targets[0].native_model, "cohere-rerank-4-fast");
    for (name, successor) in [
        ("pinecone-rerank-v0", "pinecone-bge-reranker-v2-m3"),
        (
            "pinecone-cohere-rerank-3.5",
            "pinecone-cohere-rerank-4-fast",
        ),
    ] {
        let model = s.gateway.catalog.get(name).expect(name);
        let lifecycle = model.targets[0].lifecycle.as_ref().expect(name);
        assert!(lifecycle.gone(crate::api::images::now()), "{name}");
        assert_eq!(
            model.lifecycle.successor.as_deref(),
            Some(successor),
            "{name}"
        );
        let serving = s.gateway.catalog.serving(name).expect(name);
        assert_eq!(serving.targets[0].native_model, fast_or_bge(successor));
    }
}

#[test]
fn every_credential_the_file_holds_is_kept_out_of_logs() {
    let yaml = r#"
version: 1
switchyard:
  listeners: [{name: a, address: "127.0.0.1:1"}]
  store: {redis_url: "redis://user:redis-pass-CFGTEST@127.0.0.1:6379"}
  auth:
    api_keys: [{name: c, key: "client-key-CFGTEST"}]
    jwt: {hs256_secret: "jwt-secret-CFGTEST-at-least-32-bytes-long"}
  providers:
    openai: {kind: openai, api_key: "provider-key-CFGTEST", base_url: "https://api.openai.com/v1"}
    kling: {kind: kling, api_key: "kling-access-CFGTEST", secret_key: "kling-secret-CFGTEST", base_url: "https://api.klingai.com"}
  models: {}
"#;
    let loaded = load_str(yaml, &no_env);
    if cfg!(feature = "redis") {
        loaded.unwrap_or_else(|e| panic!("{e:#?}"));
    } else {
        // Refused (no Redis in this build), and the secrets are still kept out of logs.
        assert!(loaded.is_err());
    }
    for secret in [
        "redis-pass-CFGTEST",
        "client-key-CFGTEST",
        "jwt-secret-CFGTEST-at-least-32-bytes-long",
        "provider-key-CFGTEST",
        "kling-access-CFGTEST",
        "kling-secret-CFGTEST",
    ] {
        let line = format!("a provider said: {secret}.");
        assert_eq!(
            crate::logging::redact(&line),
            "a provider said: [redacted].",
            "{secret}"
        );
    }
}

#[cfg(not(feature = "redis"))]
#[test]
fn without_the_redis_feature_a_store_naming_redis_is_refused_at_load() {
    for (store, key) in [
        (r#"{redis_url: "redis://127.0.0.1"}"#, "redis_url"),
        (
            r#"{redis_cluster: ["redis://127.0.0.1:7000"]}"#,
            "redis_cluster",
        ),
        (
            r#"{redis_sentinel: {urls: ["redis://127.0.0.1:26379"], master: m}}"#,
            "redis_sentinel",
        ),
    ] {
        let yaml = format!(
            "version: 1\nswitchyard:\n  listeners: [{{name: a, address: \"127.0.0.1:1\"}}]\n  \
             store: {store}\n  models: {{}}\n"
        );
        let errors = load_str(&yaml, &no_env).err().unwrap_or_default();
        assert_eq!(errors.len(), 1, "{store}: {errors:#?}");
        assert!(
            errors[0].starts_with(&format!(
                "switchyard.store.{key}: this build of Switchyard has no Redis support"
            )) && errors[0].contains("--features redis"),
            "{errors:#?}"
        );
    }
    let yaml = concat!(
        "version: 1\nswitchyard:\n  listeners: [{name: a, address: \"127.0.0.1:1\"}]\n",
        "  store: {redis_url: \" \", key_prefix: \"p:\"}\n  models: {}\n",
    );
    let s = load_str(yaml, &no_env).unwrap_or_else(|e| panic!("{e:#?}"));
    assert!(s.gateway.redis.is_none());
}

#[test]
fn a_metrics_listener_needs_the_metrics_feature() {
    let yaml = concat!(
        "version: 1\nswitchyard:\n  listeners: [{name: a, address: \"127.0.0.1:1\"}]\n",
        "  metrics: {address: \"127.0.0.1:2\"}\n  models: {}\n",
    );
    let loaded = load_str(yaml, &no_env);
    if cfg!(feature = "metrics") {
        let s = loaded.unwrap_or_else(|e| panic!("{e:#?}"));
        assert_eq!(s.gateway.metrics, Some("127.0.0.1:2".parse().unwrap()));
    } else {
        let errors = loaded.err().unwrap_or_default();
        assert_eq!(
            errors,
            [
                "switchyard.metrics: this build of Switchyard has no metrics (built without the \
              `metrics` cargo feature); remove the section, or build with `--features metrics`"
            ]
        );
    }
}

#[cfg(feature = "redis")]
#[test]
fn redis_is_one_server_a_cluster_or_sentinel_and_its_passwords_stay_out_of_logs() {
    let with_store = |store: &str| {
        format!(
            "version: 1\nswitchyard:\n  listeners: [{{name: a, address: \"127.0.0.1:1\"}}]\n  \
             store: {store}\n  models: {{}}\n"
        )
    };
    let ok = |store: &str| {
        load_str(&with_store(store), &no_env)
            .unwrap_or_else(|e| panic!("{store}: {e:#?}"))
            .gateway
            .redis
            .expect("redis configured")
    };
    let cluster = ok(
        r#"{redis_cluster: ["redis://:cl-pass-CFGTEST@127.0.0.1:7000", "redis://:cl-pass-CFGTEST@127.0.0.1:7001"]}"#,
    );
    assert_eq!(cluster.min_replicas_acked(), 0);
    let sentinel = ok(
        r#"{redis_sentinel: {urls: ["redis://:snt-pass-CFGTEST@127.0.0.1:26379"], master: mymaster, password: "node-pass-CFGTEST", min_replicas_acked: 1}, key_prefix: "p:"}"#,
    );
    assert_eq!(sentinel.min_replicas_acked(), 1);
    assert_eq!(sentinel.tag("tasks"), "{p:tasks}");
    for secret in ["cl-pass-CFGTEST", "snt-pass-CFGTEST", "node-pass-CFGTEST"] {
        assert_eq!(
            crate::logging::redact(&format!("x {secret} y")),
            "x [redacted] y",
            "{secret}"
        );
    }

    for (store, problem) in [
        (
            r#"{redis_url: "redis://127.0.0.1", redis_cluster: ["redis://127.0.0.1:7000"]}"#,
            "switchyard.store: set only one of redis_url, redis_cluster, redis_sentinel",
        ),
        (
            "{redis_cluster: []}",
            "switchyard.store.redis_cluster: list at least one node URL",
        ),
        (
            "{redis_sentinel: {urls: [], master: m}}",
            "switchyard.store.redis_sentinel.urls: list at least one sentinel URL",
        ),
        (
            r#"{redis_sentinel: {urls: ["redis://127.0.0.1:26379"]}}"#,
            "switchyard.store.redis_sentinel.master: name the primary the sentinels monitor",
        ),
    ] {
        let errors = load_str(&with_store(store), &no_env)
            .err()
            .unwrap_or_default();
        assert!(errors.iter().any(|e| e == problem), "{store}: {errors:#?}");
        assert_eq!(errors.len(), 1, "{store}: {errors:#?}");
    }
    let errors = load_str(
        &with_store(
            r#"{redis_sentinel: {urls: ["redis://127.0.0.1:26379"], master: m, replicas: 1}}"#,
        ),
        &no_env,
    )
    .err()
    .unwrap_or_default();
    assert!(
        errors.iter().any(|e| e.contains("replicas")),
        "unknown key accepted: {errors:#?}"
    );
}

#[test]
fn every_problem_is_listed_with_its_path() {
    let yaml = r#"
version: 1
thraeds: 2
switchyard:
  listeners:
    - {name: a, address: "nope"}
  retries: {max: 2, bogus: 1}
  providers:
    openai: {kind: openai, api_key: "${MISSING}", base_url: "https://api.openai.com/v1"}
    other: {kind: martian, base_url: "https://x"}
  models:
    m1: {family: no-such, targets: [{provider: openai, model: x}]}
    m2: {family: cohere-rerank, targets: [{provider: openai, model: x}]}
    m3: {family: openai-tts, targets: [{provider: ghost, model: x}]}
"#;
    let errors = load_str(yaml, &no_env).err().unwrap();
    let all = errors.join("\n");
    for needle in [
        "thraeds: unknown key",
        "switchyard.retries.bogus: unknown key",
        "switchyard.providers.openai.api_key: environment variable MISSING is not set",
        "switchyard.listeners[0].address",
        "switchyard.providers.other.kind",
        "switchyard.models.m1.family",
        "switchyard.models.m2.targets[0].provider",
        "switchyard.models.m3.targets[0].provider: no provider named `ghost`",
    ] {
        assert!(all.contains(needle), "missing `{needle}` in:\n{all}");
    }
}

#[test]
fn routing_problems_are_listed_with_their_path() {
    let yaml = r#"
version: 1
switchyard:
  listeners:
    - {name: a, address: "127.0.0.1:1"}
  routing:
    ejection: {consecutive_failures: 0, base_cooldown_ms: 0, max_cooldown_ms: 0, bogus: 1}
  providers:
    cohere: {kind: cohere, api_key: "k", base_url: "https://api.cohere.com"}
  models:
    m: {family: cohere-rerank, targets: [{provider: cohere, model: x, weight: 101}, {provider: cohere, model: y, wieght: 2}]}
"#;
    let errors = load_str(yaml, &no_env).err().unwrap();
    let all = errors.join("\n");
    for needle in [
        "switchyard.routing.ejection.consecutive_failures: must be at least 1",
        "switchyard.routing.ejection.base_cooldown_ms: must be greater than 0",
        "switchyard.routing.ejection.bogus: unknown key",
        "switchyard.models.m.targets[0].weight: 101 is more than 100",
        "switchyard.models.m.targets[1].wieght: unknown key",
    ] {
        assert!(all.contains(needle), "missing `{needle}` in:\n{all}");
    }
    let yaml = yaml
        .replace(
            "consecutive_failures: 0, base_cooldown_ms: 0, max_cooldown_ms: 0, bogus: 1",
            "base_cooldown_ms: 10, max_cooldown_ms: 5",
        )
        .replace("weight: 101", "weight: 0")
        .replace(", wieght: 2", "");
    let errors = load_str(&yaml, &no_env).err().unwrap();
    assert_eq!(
        errors,
        vec!["switchyard.routing.ejection.max_cooldown_ms: 5 is less than base_cooldown_ms (10)"]
    );
    let yaml = yaml.replace(
        "base_cooldown_ms: 10, max_cooldown_ms: 5",
        "base_cooldown_ms: 10, max_cooldown_ms: 2000, retired_cooldown_ms: 1000",
    );
    let errors = load_str(&yaml, &no_env).err().unwrap();
    assert_eq!(
        errors,
        vec![
            "switchyard.routing.ejection.retired_cooldown_ms: 1000 is less than \
             max_cooldown_ms (2000)"
        ]
    );
}

#[test]
fn a_tls_listener_is_loaded_and_its_bad_files_named_with_their_key() {
    let dir = tls::tests::Dir::new();
    let (cert, key) = tls::tests::self_signed("localhost");
    let (cert, key) = (dir.file("c.pem", &cert), dir.file("k.pem", &key));
    let yaml = format!(
        r#"
switchyard:
  listeners:
    - {{name: a, address: "127.0.0.1:9998", tls: {{cert_file: "{cert}", key_file: "{key}"}}}}
    - {{name: b, address: "127.0.0.1:9999", tls: {{cert_file: "{cert}", key_file: "{key}", reload_interval_ms: 0}}}}
"#
    );
    let s = load_str(&yaml, &no_env).unwrap_or_else(|e| panic!("{e:#?}"));
    let a = s.gateway.listeners[0].tls.as_ref().unwrap();
    assert_eq!(
        (a.cert_file.as_str(), a.key_file.as_str()),
        (cert.as_str(), key.as_str())
    );
    assert_eq!(a.reload_interval, Some(Duration::from_secs(10)));
    assert_eq!(
        s.gateway.listeners[1].tls.as_ref().unwrap().reload_interval,
        None
    );
    // Debug output (which a log could show) names the files, nothing of the key.
    assert!(!format!("{a:?}").contains("PRIVATE"));

    let yaml = format!(
        r#"
switchyard:
  listeners:
    - {{name: a, address: "127.0.0.1:9998", tls: {{cert_file: "{key}", key_file: "{key}"}}}}
    - {{name: b, address: "127.0.0.1:9999", tls: {{cert_file: "", key_file: "{key}", reload: 1}}}}
"#
    );
    let errors = load_str(&yaml, &no_env).err().unwrap();
    assert_eq!(
        errors,
        vec![
            "switchyard.listeners[1].tls.reload: unknown key".to_string(),
            format!("switchyard.listeners[0].tls: {key}: no PEM certificate in it"),
            "switchyard.listeners[1].tls.cert_file: required (a PEM file)".to_string(),
        ]
    );
}

#[test]
fn a_key_another_kind_takes_is_refused_by_name() {
    let yaml = r#"
switchyard:
  listeners:
    - {name: a, address: "127.0.0.1:9999"}
  providers:
    oa: {kind: openai, api_key: k, base_url: "https://api.openai.com/v1", app_id: x}
    co: {kind: cohere, api_key: k, base_url: "https://api.cohere.com", secret_key: y}
    vo: {kind: volcengine, api_key: k, base_url: "https://openspeech.bytedance.com", app_id: x}
"#;
    let errors = load_str(yaml, &no_env).err().unwrap();
    assert_eq!(
        errors,
        vec![
            "switchyard.providers.co.secret_key: not a setting of this provider kind",
            "switchyard.providers.oa.app_id: not a setting of this provider kind",
        ]
    );
}

/// A config with one provider of each operation and `models` as given.
fn with_models(models: &str) -> String {
    format!(
        r#"
switchyard:
  listeners: [{{name: a, address: "127.0.0.1:1"}}]
  providers:
    openai: {{kind: openai, api_key: k, base_url: "https://api.openai.com/v1"}}
    bfl: {{kind: bfl, api_key: k, base_url: "https://api.bfl.ai"}}
    cohere: {{kind: cohere, api_key: k, base_url: "https://api.cohere.com"}}
  models:
{models}"#
    )
}

fn caps_of(s: &Settings, model: &str) -> Caps {
    s.gateway.catalog.get(model).unwrap().caps
}

#[test]
fn capabilities_override_the_family_and_older_keys_still_work() {
    let yaml = with_models(
        r#"
    flux-pro:
      family: flux
      capabilities: { sizes: { min_side: 256, max_side: 1440, multiple_of: 32 }, max_n: 2 }
      targets: [{provider: bfl, model: flux-pro}]
    flux-plain: {family: flux, targets: [{provider: bfl, model: flux-pro}]}
    tts: {family: openai-tts, default_voice: echo, max_input_chars: 100, targets: [{provider: openai, model: tts-1}]}
    tts-bytes:
      family: openai-tts
      capabilities: {input_limit: {max: 300, unit: bytes}, voices: [alloy, echo]}
      targets: [{provider: openai, model: tts-1}]
    rr: {family: cohere-rerank, max_documents: 5, max_input_chars: 50, targets: [{provider: cohere, model: r}]}
"#,
    );
    let s = load_str(&yaml, &no_env).unwrap_or_else(|e| panic!("{e:#?}"));
    let Caps::Images(flux) = caps_of(&s, "flux-pro") else {
        panic!("not images")
    };
    assert_eq!(flux.family, "flux");
    assert_eq!(flux.max_n, 2);
    assert_eq!(flux.per_call_n, 1, "the family's");
    assert_eq!(flux.sizes.len(), 8, "the family's list stays");
    assert!(flux.accepts_size("1440x256") && !flux.accepts_size("1440x250"));
    let Caps::Images(plain) = caps_of(&s, "flux-plain") else {
        panic!("not images")
    };
    assert!(plain.size_rule.is_none(), "one model's override is its own");
    let Caps::Speech(tts) = caps_of(&s, "tts") else {
        panic!("not speech")
    };
    assert_eq!(tts.default_voice, Some("echo"));
    assert_eq!(
        tts.input_limit,
        caps::Limit {
            max: 100,
            unit: caps::Unit::Characters
        }
    );
    let Caps::Speech(bytes) = caps_of(&s, "tts-bytes") else {
        panic!("not speech")
    };
    assert_eq!(bytes.input_limit.unit, caps::Unit::Bytes);
    assert_eq!(bytes.voices, ["alloy", "echo"]);
    let Caps::Rerank(rr) = caps_of(&s, "rr") else {
        panic!("not rerank")
    };
    assert_eq!(rr.max_documents, 5);
    assert_eq!(rr.query_limit.max, 50);
}

#[test]
fn bad_capability_overrides_are_named_by_path() {
    let yaml = with_models(
        r#"
    flux-pro:
      family: flux
      capabilities: { sizes: { min_side: 256, max_side: 1440, multiple_of: 32 }, max_n: 40, colour: red }
      targets: [{provider: bfl, model: flux-pro}]
    flux-small:
      family: flux
      capabilities: { sizes: { list: [], max_side: 512 } }
      targets: [{provider: bfl, model: flux-pro}]
    tts:
      family: openai-tts
      max_input_chars: 10
      capabilities: {input_limit: {max: 20}, voices: [nova]}
      targets: [{provider: openai, model: tts-1}]
    rr: {family: cohere-rerank, capabilities: [1], targets: [{provider: cohere, model: r}]}
"#,
    );
    let all = load_str(&yaml, &no_env).err().unwrap().join("\n");
    for needle in [
        "switchyard.models.flux-pro.capabilities.colour: unknown key",
        "switchyard.models.flux-small.capabilities.default_size: `1024x1024` is not a size the family accepts (any WxH with sides of at most 512 px)",
        "switchyard.models.flux-small.capabilities.aspect_ratios.16:9: `1344x768` is not a size",
        "switchyard.models.tts.max_input_chars: also given as capabilities.input_limit; keep one",
        "switchyard.models.tts.capabilities.default_voice: `alloy` is not one of the voices (nova)",
        "switchyard.models.rr.capabilities: invalid type: sequence",
        "switchyard.models.flux-pro.capabilities.max_n: must be from 1 to 10",
    ] {
        assert!(all.contains(needle), "missing `{needle}` in:\n{all}");
    }
}
