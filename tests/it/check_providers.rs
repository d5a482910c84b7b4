//! `switchyard check-providers`: the binary asks fakes of OpenAI, ElevenLabs, Cohere and DashScope
//! (each speaking its provider's list endpoints and checking the key it receives) what they serve,
//! and reports what the configuration names that they do not list or list with a shutdown date
//! (OpenAI's `shutdown_date`), refused keys and base URLs that do not answer; its exit status says
//! whether anything is wrong; no key is ever printed.

use std::process::Command;

use serde_json::{json, Value};

use crate::support::fake::{FakeProvider, Recorded, Reply};
use crate::support::refused_port;

const OPENAI_KEY: &str = "sk-check-openai-key-0001";
const ELEVEN_KEY: &str = "xi-check-eleven-key-0002";
const COHERE_KEY: &str = "co-check-cohere-key-0003";
const DASHSCOPE_KEY: &str = "sk-check-dashscope-key-0004";
/// A key no fake accepts.
const WRONG_KEY: &str = "co-check-wrong-key-9999";

/// The four fakes, each answering its provider's list endpoints for its own key and refusing any
/// other key the way its provider does (echoing the key it was given, which must not reach the
/// check's output).
struct World {
    openai: FakeProvider,
    eleven: FakeProvider,
    cohere: FakeProvider,
    dashscope: FakeProvider,
}

fn bearer(r: &Recorded) -> Option<String> {
    r.header("authorization")
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::to_string)
}

impl World {
    fn start() -> World {
        let openai = FakeProvider::start();
        openai.set_handler(|r| {
            let key = bearer(r).unwrap_or_default();
            if key != OPENAI_KEY {
                return Some(Reply::json(
                    401,
                    json!({"error": {"message": format!("Incorrect API key provided: {key}."), "type": "invalid_request_error", "code": "invalid_api_key"}}),
                ));
            }
            (r.method == "GET" && r.path == "/v1/models").then(|| {
                Reply::json(
                    200,
                    // OpenAI's model objects carry `shutdown_date`: a `YYYY-MM-DD` string, or
                    // null when none is announced (docs/providers/openai.md).
                    json!({"object": "list", "data": [
                        {"id": "tts-1", "object": "model", "created": 1, "owned_by": "system", "shutdown_date": null},
                        {"id": "gpt-4o-mini-tts", "object": "model", "created": 1, "owned_by": "system"},
                        {"id": "tts-old", "object": "model", "created": 1, "owned_by": "system", "shutdown_date": "2020-01-06"},
                        {"id": "tts-later", "object": "model", "created": 1, "owned_by": "system", "shutdown_date": "2099-01-01"},
                        {"id": "tts-agreed", "object": "model", "created": 1, "owned_by": "system", "shutdown_date": "2099-03-01"},
                    ]}),
                )
            })
        });
        let eleven = FakeProvider::start();
        eleven.set_handler(|r| {
            if r.header("xi-api-key") != Some(ELEVEN_KEY) {
                return Some(Reply::json(
                    401,
                    json!({"detail": {"status": "invalid_api_key", "message": "Invalid API key"}}),
                ));
            }
            match (r.method.as_str(), r.path.as_str()) {
                ("GET", "/v1/models") => Some(Reply::json(
                    200,
                    json!([
                        {"model_id": "eleven_multilingual_v2", "name": "Eleven Multilingual v2", "can_do_text_to_speech": true},
                        {"model_id": "eleven_flash_v2_5", "name": "Eleven Flash v2.5", "can_do_text_to_speech": true},
                    ]),
                )),
                ("GET", "/v1/voices") => Some(Reply::json(
                    200,
                    json!({"voices": [
                        {"voice_id": "JBFqnCBsd6RMkjVDRZzb", "name": "George", "category": "premade"},
                        {"voice_id": "EXAVITQu4vr4xnSDxMaL", "name": "Sarah", "category": "premade"},
                    ]}),
                )),
                _ => None,
            }
        });
        let cohere = FakeProvider::start();
        cohere.set_handler(|r| {
            let key = bearer(r).unwrap_or_default();
            if key != COHERE_KEY {
                return Some(Reply::json(
                    401,
                    json!({"message": format!("invalid api token {key}")}),
                ));
            }
            // Two pages: the check must follow `next_page_token`.
            match r.path.as_str() {
                "/v1/models?endpoint=rerank&page_size=1000" => Some(Reply::json(
                    200,
                    json!({"models": [{"name": "rerank-english-v3.0", "endpoints": ["rerank"]}], "next_page_token": "page-2"}),
                )),
                "/v1/models?endpoint=rerank&page_size=1000&page_token=page-2" => Some(Reply::json(
                    200,
                    json!({"models": [{"name": "rerank-v3.5", "endpoints": ["rerank"]}]}),
                )),
                _ => None,
            }
        });
        let dashscope = FakeProvider::start();
        dashscope.set_handler(|r| {
            if bearer(r).as_deref() != Some(DASHSCOPE_KEY) {
                return Some(Reply::json(
                    401,
                    json!({"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error", "code": "invalid_api_key"}}),
                ));
            }
            (r.method == "GET" && r.path == "/compatible-mode/v1/models").then(|| {
                Reply::json(
                    200,
                    json!({"object": "list", "data": [{"id": "qwen3-tts-flash", "object": "model", "owned_by": "system"}]}),
                )
            })
        });
        World {
            openai,
            eleven,
            cohere,
            dashscope,
        }
    }

    /// A configuration of the four accounts (keys from the environment, as operators give them)
    /// with `models` and `dashscope_regions` (extra keys of the DashScope account).
    fn config(&self, models: &str, dashscope_extra: &str) -> String {
        format!(
            r#"
switchyard:
  listeners: [{{name: a, address: "127.0.0.1:1"}}]
  providers:
    openai: {{kind: openai, api_key: "${{CHECK_OPENAI_KEY}}", base_url: "{oa}/v1"}}
    elevenlabs: {{kind: elevenlabs, api_key: "${{CHECK_ELEVEN_KEY}}", base_url: "{el}"}}
    cohere: {{kind: cohere, api_key: "${{CHECK_COHERE_KEY}}", base_url: "{co}"}}
    dashscope: {{kind: dashscope, api_key: "${{CHECK_DASHSCOPE_KEY}}", base_url: "{ds}"{dashscope_extra}}}
  models:
    tts-1: {{family: openai-tts, targets: [{{provider: openai, model: tts-1}}]}}
    eleven: {{family: elevenlabs-tts, default_voice: JBFqnCBsd6RMkjVDRZzb, voice_map: {{alloy: EXAVITQu4vr4xnSDxMaL}}, targets: [{{provider: elevenlabs, model: eleven_multilingual_v2}}]}}
    rerank-v3.5: {{family: cohere-rerank, targets: [{{provider: cohere, model: rerank-v3.5}}]}}
    qwen3-tts-flash: {{family: qwen-tts, targets: [{{provider: dashscope, model: qwen3-tts-flash}}]}}
{models}"#,
            oa = self.openai.base_url(),
            el = self.eleven.base_url(),
            co = self.cohere.base_url(),
            ds = self.dashscope.base_url(),
        )
    }
}

/// The binary's exit status and output (stdout, stderr) for `config`, with the accounts' keys
/// (the Cohere one replaced by `cohere_key`) in its environment.
fn check(config: &str, cohere_key: &str, json: bool) -> (i32, String, String) {
    let dir = std::env::temp_dir().join(format!(
        "switchyard-check-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("conf.yaml");
    std::fs::write(&file, config).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    cmd.args(["check-providers", "-c", file.to_str().unwrap()])
        .env_clear()
        // The most talkative logging: a key must not appear at any level.
        .env("RUST_LOG", "trace")
        .env("CHECK_OPENAI_KEY", OPENAI_KEY)
        .env("CHECK_ELEVEN_KEY", ELEVEN_KEY)
        .env("CHECK_COHERE_KEY", cohere_key)
        .env("CHECK_DASHSCOPE_KEY", DASHSCOPE_KEY);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    for key in [OPENAI_KEY, ELEVEN_KEY, COHERE_KEY, DASHSCOPE_KEY, WRONG_KEY] {
        assert!(
            !stdout.contains(key) && !stderr.contains(key),
            "a key was printed:\n{stdout}\n{stderr}"
        );
    }
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

/// The lines of the report that start with `status` and name `account`.
fn lines<'a>(out: &'a str, status: &str, account: &str) -> Vec<&'a str> {
    out.lines()
        .filter(|l| l.starts_with(&format!("{status} ")))
        .filter(|l| l.split_whitespace().nth(1) == Some(account))
        .collect()
}

#[test]
fn a_world_as_configured_is_all_well() {
    let world = World::start();
    let (code, out, err) = check(&world.config("", ""), COHERE_KEY, false);
    assert_eq!(code, 0, "{out}\n{err}");
    for account in ["openai", "elevenlabs", "cohere", "dashscope"] {
        assert_eq!(lines(&out, "ok", account).len(), 1, "{account}:\n{out}");
    }
    assert!(
        lines(&out, "ok", "elevenlabs")[0].contains("2 of 2 configured voice(s) listed"),
        "{out}"
    );
    assert!(
        out.contains("no problem found: 4 of 4 account(s) answered as configured"),
        "{out}"
    );
    // Each fake was asked its list endpoints, with its own key.
    let get = |f: &FakeProvider| -> Vec<String> {
        f.requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    };
    assert_eq!(get(&world.openai), ["GET /v1/models"]);
    assert_eq!(get(&world.eleven), ["GET /v1/models", "GET /v1/voices"]);
    assert_eq!(
        get(&world.cohere),
        [
            "GET /v1/models?endpoint=rerank&page_size=1000",
            "GET /v1/models?endpoint=rerank&page_size=1000&page_token=page-2"
        ]
    );
    assert_eq!(get(&world.dashscope), ["GET /compatible-mode/v1/models"]);
}

#[test]
fn a_model_and_a_default_voice_the_provider_does_not_list_are_problems() {
    let world = World::start();
    let models = "    eleven-v3: {family: elevenlabs-v3, default_voice: 21m00Tcm4TlvDq8ikWAM, targets: [{provider: elevenlabs, model: eleven_v3}]}\n    eleven-listed: {family: elevenlabs-tts, capabilities: {voices: [JBFqnCBsd6RMkjVDRZzb, gone-voice-id], default_voice: JBFqnCBsd6RMkjVDRZzb}, targets: [{provider: elevenlabs, model: eleven_multilingual_v2}]}\n    tts-gone: {family: openai-tts, targets: [{provider: openai, model: tts-0-retired}]}\n";
    let (code, out, err) = check(&world.config(models, ""), COHERE_KEY, false);
    assert_eq!(code, 1, "{out}\n{err}");
    let missing = lines(&out, "model_unknown", "elevenlabs");
    assert_eq!(missing.len(), 1, "{out}");
    assert!(
        missing[0].contains("model `eleven_v3` (configured for eleven-v3)"),
        "{out}"
    );
    let missing = lines(&out, "model_unknown", "openai");
    assert!(
        missing.len() == 1 && missing[0].contains("`tts-0-retired` (configured for tts-gone)"),
        "{out}"
    );
    let voice = lines(&out, "voice_unknown", "elevenlabs");
    assert_eq!(voice.len(), 2, "{out}");
    assert!(
        voice[0].contains("voice `21m00Tcm4TlvDq8ikWAM` (default voice of eleven-v3)"),
        "{out}"
    );
    assert!(
        voice[1].contains("voice `gone-voice-id` (capabilities.voices of eleven-listed)"),
        "{out}"
    );
    // The accounts without a problem are still said to be fine.
    assert_eq!(lines(&out, "ok", "cohere").len(), 1, "{out}");
    assert!(lines(&out, "ok", "elevenlabs").is_empty(), "{out}");
    assert!(out.contains("4 problem(s) found in 4 account(s)"), "{out}");

    // The same as JSON.
    let (code, out, _) = check(&world.config(models, ""), COHERE_KEY, true);
    assert_eq!(code, 1);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["problems"], 4);
    let findings = doc["findings"].as_array().unwrap();
    let voice = findings
        .iter()
        .find(|f| f["status"] == "voice_unknown" && f["voice"] == "21m00Tcm4TlvDq8ikWAM")
        .unwrap();
    assert_eq!(voice["account"], "elevenlabs");
    assert_eq!(voice["voice"], "21m00Tcm4TlvDq8ikWAM");
    let model = findings
        .iter()
        .find(|f| f["status"] == "model_unknown" && f["account"] == "openai")
        .unwrap();
    assert_eq!(model["model"], "tts-0-retired");
    assert_eq!(model["public_models"], json!(["tts-gone"]));
}

/// Models OpenAI lists with a `shutdown_date`: one past (the provider no longer serves it), one
/// to come that the gateway's lifecycle data dates otherwise, one to come that it dates alike;
/// and one it no longer lists at all.
const SHUTDOWN_MODELS: &str = "    tts-old-model: {family: openai-tts, targets: [{provider: openai, model: tts-old}]}\n    tts-later-model: {family: openai-tts, targets: [{provider: openai, model: tts-later, lifecycle: {deprecated: 2026-10-01, shutdown: 2099-03-01, replacement: [tts-1]}}]}\n    tts-agreed-model: {family: openai-tts, targets: [{provider: openai, model: tts-agreed, lifecycle: {deprecated: 2026-10-01, shutdown: 2099-03-01, replacement: [tts-1]}}]}\n    tts-gone: {family: openai-tts, targets: [{provider: openai, model: tts-0-retired}]}\n";

#[test]
fn a_model_the_provider_lists_with_a_shutdown_date_is_reported_with_the_date() {
    let world = World::start();
    let (code, out, err) = check(&world.config(SHUTDOWN_MODELS, ""), COHERE_KEY, false);
    // The past date is a problem; the dates to come are warnings.
    assert_eq!(code, 1, "{out}\n{err}");
    let gone = lines(&out, "model_shut_down", "openai");
    assert_eq!(gone.len(), 1, "{out}");
    assert!(
        gone[0]
            .contains("model `tts-old` (configured for tts-old-model) was shut down on 2020-01-06")
            && gone[0].contains("the gateway's lifecycle data has no shutdown date for it"),
        "{out}"
    );
    let retiring = lines(&out, "model_retiring", "openai");
    assert_eq!(retiring.len(), 2, "{out}");
    let later = retiring.iter().find(|l| l.contains("`tts-later`")).unwrap();
    assert!(
        later.contains("shuts down on 2099-01-01")
            && later.contains("the gateway's lifecycle data says 2099-03-01"),
        "{out}"
    );
    let agreed = retiring
        .iter()
        .find(|l| l.contains("`tts-agreed`"))
        .unwrap();
    assert!(
        agreed.contains("shuts down on 2099-03-01") && !agreed.contains("lifecycle data"),
        "{out}"
    );
    // A model the account no longer lists at all is still reported.
    let unknown = lines(&out, "model_unknown", "openai");
    assert!(
        unknown.len() == 1 && unknown[0].contains("`tts-0-retired` (configured for tts-gone)"),
        "{out}"
    );
    assert!(
        out.contains("2 problem(s) found in 4 account(s); 2 warning(s)"),
        "{out}"
    );

    // The same as JSON: each finding's level and both dates.
    let (code, out, _) = check(&world.config(SHUTDOWN_MODELS, ""), COHERE_KEY, true);
    assert_eq!(code, 1);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["problems"], 2);
    assert_eq!(doc["warnings"], 2);
    let findings = doc["findings"].as_array().unwrap();
    let of = |model: &str| findings.iter().find(|f| f["model"] == model).unwrap();
    let old = of("tts-old");
    assert_eq!(old["status"], "model_shut_down");
    assert_eq!(old["level"], "error");
    assert_eq!(old["shutdown_date"], "2020-01-06");
    assert!(old.get("lifecycle_shutdown").is_none());
    assert_eq!(old["public_models"], json!(["tts-old-model"]));
    let later = of("tts-later");
    assert_eq!(later["status"], "model_retiring");
    assert_eq!(later["level"], "warning");
    assert_eq!(later["shutdown_date"], "2099-01-01");
    assert_eq!(later["lifecycle_shutdown"], "2099-03-01");
    assert_eq!(of("tts-0-retired")["status"], "model_unknown");
    assert_eq!(of("tts-0-retired")["level"], "error");
}

#[test]
fn a_shutdown_date_still_to_come_is_a_warning_not_a_problem() {
    let world = World::start();
    let models = "    tts-later-model: {family: openai-tts, targets: [{provider: openai, model: tts-later, lifecycle: {deprecated: 2026-10-01, shutdown: 2099-03-01, replacement: [tts-1]}}]}\n";
    let (code, out, err) = check(&world.config(models, ""), COHERE_KEY, false);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(lines(&out, "model_retiring", "openai").len(), 1, "{out}");
    // Every configured model is listed: the account answered as configured.
    let ok = lines(&out, "ok", "openai");
    assert!(
        ok.len() == 1 && ok[0].contains("2 of 2 configured model(s) listed"),
        "{out}"
    );
    let summary = out.lines().last().unwrap();
    assert!(
        summary.starts_with("no problem found: 4 of 4 account(s) answered as configured;")
            && summary.ends_with("; 1 warning(s)"),
        "{out}"
    );
}

#[test]
fn a_refused_key_is_a_problem_and_is_never_printed() {
    let world = World::start();
    let (code, out, err) = check(&world.config("", ""), WRONG_KEY, false);
    assert_eq!(code, 1, "{out}\n{err}");
    let refused = lines(&out, "key_refused", "cohere");
    assert_eq!(refused.len(), 1, "{out}");
    assert!(refused[0].contains("HTTP 401"), "{out}");
    // The fake echoed the key it was given; `check` asserted it is nowhere in the output.
    assert!(world
        .cohere
        .requests()
        .iter()
        .all(|r| bearer(r).as_deref() == Some(WRONG_KEY)));
    assert_eq!(lines(&out, "ok", "openai").len(), 1, "{out}");
}

#[test]
fn a_base_url_that_does_not_answer_is_a_problem() {
    let world = World::start();
    let (port, _held) = refused_port();
    let regions = format!(", region_base_urls: {{intl: \"http://127.0.0.1:{port}\"}}");
    let (code, out, err) = check(&world.config("", &regions), COHERE_KEY, false);
    assert_eq!(code, 1, "{out}\n{err}");
    let down = lines(&out, "unreachable", "dashscope");
    assert_eq!(down.len(), 1, "{out}");
    assert!(
        down[0].contains(&format!("[http://127.0.0.1:{port}]")),
        "{out}"
    );
    // The base URL itself answered.
    let ok = lines(&out, "ok", "dashscope");
    assert_eq!(ok.len(), 1, "{out}");
    assert!(ok[0].contains(&world.dashscope.base_url()), "{out}");
}

#[test]
fn usage_and_an_invalid_configuration_exit_2_and_the_gateway_options_still_work() {
    let bin = env!("CARGO_BIN_EXE_switchyard");
    let run = |args: &[&str]| {
        let out = Command::new(bin).args(args).env_clear().output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (code, out) = run(&["check-providers", "--help"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("usage: switchyard check-providers"), "{out}");
    let (code, out) = run(&["check-providers", "--bogus"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("unknown argument `--bogus`"), "{out}");
    let (code, out) = run(&["check-providers", "-c", "/nonexistent/switchyard.yaml"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("/nonexistent/switchyard.yaml"), "{out}");
    // Pingora's own options are read as before.
    let conf = concat!(env!("CARGO_MANIFEST_DIR"), "/conf/switchyard.yaml");
    let (code, out) = run(&["-t", "-c", conf]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("configuration is valid"), "{out}");
}

#[test]
fn a_kind_without_a_list_endpoint_is_reached_and_said_to_be_not_checked() {
    let minimax = FakeProvider::start();
    minimax.set_default(Reply::json(404, json!({"base_resp": {"status_code": 404}})));
    let (port, _held) = refused_port();
    let config = format!(
        r#"
switchyard:
  listeners: [{{name: a, address: "127.0.0.1:1"}}]
  providers:
    minimax: {{kind: minimax, api_key: "${{CHECK_COHERE_KEY}}", base_url: "{mm}", region_base_urls: {{cn: "http://127.0.0.1:{port}"}}}}
  models:
    speech-2.8-hd: {{family: minimax-tts, targets: [{{provider: minimax, model: speech-2.8-hd}}]}}
"#,
        mm = minimax.base_url()
    );
    let (code, out, err) = check(&config, COHERE_KEY, false);
    assert_eq!(code, 1, "{out}\n{err}");
    let notes = lines(&out, "not_checked", "minimax");
    assert!(
        notes
            .iter()
            .any(|l| l.contains("answers (HTTP 404 at the base URL)")
                && l.contains("1 configured model(s) not checked")),
        "{out}"
    );
    assert_eq!(lines(&out, "unreachable", "minimax").len(), 1, "{out}");
    let reqs = minimax.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        (reqs[0].method.as_str(), reqs[0].path.as_str()),
        ("GET", "/")
    );

    // Without the unreachable region, nothing is a problem: what cannot be checked is said, not
    // counted.
    let config = config.replace(
        &format!(", region_base_urls: {{cn: \"http://127.0.0.1:{port}\"}}"),
        "",
    );
    let (code, out, err) = check(&config, COHERE_KEY, false);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("no problem found: 0 of 1 account(s) answered as configured"),
        "{out}"
    );
}
