//! Model lifecycles: the configuration test and start-up warn of a model near its shutdown and
//! refuse one past it (naming the replacement) unless the operator overrides; answers of a
//! deprecated model carry `Deprecation`, `Sunset` and `Link` (all three operations, a streamed
//! answer and an error too); the model list shows the dates; a metric exposes each target's
//! shutdown time; and a successor takes over on the shutdown date, on a clock the test moves.

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use switchyard::internals::caps::lifecycle::{Clock, Date};

use crate::logs::Binary;
use crate::support::fake::{FakeProvider, Reply};
use crate::support::{self, client, free_port, post, wait_listening, TestGateway, TEST_NOW};

/// 2026-12-01 00:00 UTC: OpenAI's shutdown of gpt-image-1.5.
const DEC_1: i64 = 1_796_083_200;
/// 2026-12-10 00:00 UTC: the shutdown the test config gives its rerank models.
const DEC_10: i64 = DEC_1 + 9 * 86_400;

/// The standard test config, a metrics listener at `metrics`, and models being retired: an OpenAI
/// image model (built-in dates) with a successor, and two Cohere rerank models dated by the
/// config, one with a successor and one without.
/// (Without the `metrics` feature there is no listener: such a build refuses the section.)
fn config(fake: &str, ports: (u16, u16), metrics: u16) -> String {
    let listener = if cfg!(feature = "metrics") {
        format!("switchyard:\n  metrics: {{address: \"127.0.0.1:{metrics}\"}}\n")
    } else {
        "switchyard:\n".into()
    };
    support::config(fake, ports).replacen("switchyard:\n", &listener, 1)
        + r#"
    gpt-image-1.5:
      family: gpt-image
      successor: gpt-image-2.6-sunburst
      targets: [{provider: openai, model: gpt-image-1.5}]
    gpt-image-2.6-sunburst: {family: gpt-image-2.6, targets: [{provider: openai, model: gpt-image-2.6-sunburst}]}
    rerank-old:
      family: cohere-rerank
      successor: rerank-v3.5
      lifecycle: {deprecated: 2026-10-01, shutdown: 2026-12-10, replacement: [rerank-v3.5], source: "https://docs.cohere.com/docs/deprecations"}
      targets: [{provider: cohere, model: rerank-old}]
    rerank-doomed:
      family: cohere-rerank
      targets: [{provider: cohere, model: rerank-doomed, lifecycle: {deprecated: 2026-10-01, shutdown: 2026-12-10, replacement: [rerank-v4.0-pro]}}]
"#
}

fn start(fake: &FakeProvider, clock: Clock) -> (TestGateway, SocketAddr) {
    let m = free_port();
    let url = fake.base_url();
    let gw = TestGateway::start_at(|ports| config(&url, ports, m), clock);
    let metrics: SocketAddr = format!("127.0.0.1:{m}").parse().unwrap();
    if cfg!(feature = "metrics") {
        wait_listening(metrics);
    }
    (gw, metrics)
}

fn png() -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n".to_vec();
    v.extend([7u8; 24]);
    v
}

fn image_answer() -> Reply {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(png());
    Reply::json(
        200,
        json!({"created": 1713833628, "data": [{"b64_json": b64}]}),
    )
}

fn rerank_answer() -> Reply {
    Reply::json(
        200,
        json!({"id": "r", "results": [{"index": 0, "relevance_score": 0.9}],
               "meta": {"billed_units": {"search_units": 1}}}),
    )
}

fn rerank(gw: &TestGateway, model: &str) -> client::Response {
    post(
        gw,
        "/api/v1/rerank",
        &json!({"model": model, "query": "q", "documents": ["a"], "retries": 0}),
    )
}

fn image(gw: &TestGateway, model: &str) -> client::Response {
    post(
        gw,
        "/api/v1/images/generations",
        &json!({"model": model, "prompt": "p", "response_format": "b64_json"}),
    )
}

/// The three lifecycle headers of an answer.
fn lifecycle_headers(r: &client::Response) -> [Option<String>; 3] {
    ["deprecation", "sunset", "link"].map(|h| r.header(h).map(str::to_string))
}

#[test]
fn answers_of_deprecated_models_carry_deprecation_sunset_and_link() {
    let fake = FakeProvider::start();
    let (gw, _) = start(&fake, Clock::manual(TEST_NOW));

    // Speech, streamed: the head (sent before the audio) carries them. tts-1: OpenAI names no
    // replacement on the speech endpoint, so the only link is the notice.
    // (Chunked from the provider: an answer whose length the provider states keeps it.)
    fake.push(Reply::chunked(
        200,
        "audio/mpeg",
        vec![(
            std::time::Duration::ZERO,
            vec![0xFF, 0xF3, 0x44, 0xC4, 1, 2, 3],
        )],
        false,
    ));
    let r = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "tts-1", "input": "hi"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // OpenAI posted the deprecation on 2026-10-01 (M1 of the 2026-12-01 audit).
    let deprecated = Date::parse("2026-10-01").unwrap().unix();
    assert_eq!(
        lifecycle_headers(&r),
        [
            Some(format!("@{deprecated}")),
            Some("Wed, 06 Jan 2027 00:00:00 GMT".into()),
            Some(
                "<https://developers.openai.com/api/docs/guides/text-to-speech>; rel=\"sunset\""
                    .into()
            ),
        ]
    );
    assert!(
        r.header("transfer-encoding").is_some(),
        "not a streamed answer"
    );
    // Speech as server-sent events: the same, on the event stream's head.
    let done = json!({"type": "speech.audio.done", "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}});
    fake.push(Reply::sse(vec![
        (
            std::time::Duration::ZERO,
            format!(
                "data: {}\n\n",
                json!({"type": "speech.audio.delta", "audio": "AAAA"})
            ),
        ),
        (std::time::Duration::ZERO, format!("data: {done}\n\n")),
    ]));
    let r = post(
        &gw,
        "/api/v1/audio/speech",
        &json!({"model": "gpt-4o-mini-tts", "input": "hi", "stream_format": "sse"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(r.header("sunset"), Some("Wed, 06 Jan 2027 00:00:00 GMT"));
    assert_eq!(
        r.header("deprecation"),
        Some(format!("@{deprecated}").as_str())
    );

    // Images: gpt-image-1.5 (OpenAI's dates), its successor linked.
    fake.push(image_answer());
    let r = image(&gw, "gpt-image-1.5");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        lifecycle_headers(&r),
        [
            Some(format!("@{}", Date::parse("2026-06-02").unwrap().unix())),
            Some("Tue, 01 Dec 2026 00:00:00 GMT".into()),
            Some(
                "</api/v1/models/gpt-image-2.6-sunburst>; rel=\"successor-version\", \
                 <https://developers.openai.com/api/docs/deprecations>; rel=\"sunset\""
                    .into()
            ),
        ]
    );
    assert_eq!(
        r.header("switchyard-served-model"),
        None,
        "served by itself"
    );

    // Rerank, dated by the config: the replacement's public model linked.
    fake.push(rerank_answer());
    let r = rerank(&gw, "rerank-doomed");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        lifecycle_headers(&r),
        [
            Some(format!("@{}", Date::parse("2026-10-01").unwrap().unix())),
            Some("Thu, 10 Dec 2026 00:00:00 GMT".into()),
            None,
        ],
        "no public model serves rerank-v4.0-pro and no source is given: no link"
    );
    fake.push(rerank_answer());
    let r = rerank(&gw, "rerank-old");
    assert_eq!(
        r.header("link"),
        Some(
            "</api/v1/models/rerank-v3.5>; rel=\"successor-version\", \
             <https://docs.cohere.com/docs/deprecations>; rel=\"sunset\""
        )
    );

    // An error answer of a deprecated model says so too.
    fake.push(Reply::json(500, json!({"message": "boom"})));
    let r = rerank(&gw, "rerank-doomed");
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(r.header("sunset"), Some("Thu, 10 Dec 2026 00:00:00 GMT"));

    // A model with no lifecycle: none of them.
    fake.push(rerank_answer());
    let r = rerank(&gw, "rerank-v3.5");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(lifecycle_headers(&r), [None, None, None]);
}

#[test]
fn the_model_list_shows_dates_replacement_and_successor() {
    let fake = FakeProvider::start();
    let (gw, _) = start(&fake, Clock::manual(TEST_NOW));
    let r = client::request(gw.addr, "GET", "/api/v1/models", &support::auth(), b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let list = r.json();
    let entry = |id: &str| -> Value {
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("{id} not listed"))
            .clone()
    };
    let m = entry("gpt-image-1.5");
    assert_eq!(m["successor"], "gpt-image-2.6-sunburst");
    assert_eq!(m["lifecycle"]["deprecated"], "2026-06-02");
    assert_eq!(m["lifecycle"]["shutdown"], "2026-12-01");
    assert_eq!(
        m["lifecycle"]["replacement"],
        json!(["gpt-image-2.6-sunburst", "gpt-image-2.6-flare"])
    );
    assert_eq!(
        m["lifecycle"]["source"],
        "https://developers.openai.com/api/docs/deprecations"
    );
    assert_eq!(m["targets"][0]["lifecycle"]["shutdown"], "2026-12-01");
    let tts = entry("tts-1");
    assert_eq!(tts["lifecycle"]["shutdown"], "2027-01-06");
    // OpenAI's replacement, served on the Realtime API (providers/openai/realtime.rs).
    assert_eq!(
        tts["lifecycle"]["replacement"],
        json!(["gpt-realtime-2.1-mini"])
    );
    assert!(tts["lifecycle"]["note"]
        .as_str()
        .unwrap()
        .contains("Realtime"));
    assert!(tts.get("successor").is_none());
    // The operator's override is shown as such.
    let image1 = entry("gpt-image-1");
    assert_eq!(image1["lifecycle"]["shutdown"], "2026-10-23");
    assert_eq!(image1["lifecycle"]["still_available"], true);
    // A model with no known lifecycle has none of the fields.
    let current = entry("rerank-v3.5");
    assert!(current.get("lifecycle").is_none() && current.get("successor").is_none());
    assert!(current["targets"][0].get("lifecycle").is_none());
    // One model's own object says the same.
    let r = client::request(
        gw.addr,
        "GET",
        "/api/v1/models/rerank-doomed",
        &support::auth(),
        b"",
    );
    assert_eq!(
        r.json()["lifecycle"]["replacement"],
        json!(["rerank-v4.0-pro"])
    );
}

#[cfg(feature = "metrics")]
#[test]
fn a_metric_exposes_each_served_targets_shutdown_time() {
    let fake = FakeProvider::start();
    let (_gw, metrics) = start(&fake, Clock::manual(TEST_NOW));
    let text = client::request(metrics, "GET", "/metrics", &[], b"").text();
    assert!(
        text.contains("# TYPE switchyard_model_shutdown_timestamp_seconds gauge"),
        "{text}"
    );
    for (model, provider, native, at) in [
        ("gpt-image-1.5", "openai", "gpt-image-1.5", DEC_1),
        ("rerank-doomed", "cohere", "rerank-doomed", DEC_10),
        (
            "tts-1",
            "openai",
            "tts-1",
            Date::parse("2027-01-06").unwrap().unix(),
        ),
    ] {
        let line = format!(
            "switchyard_model_shutdown_timestamp_seconds{{model=\"{model}\",native_model=\"{native}\",provider=\"{provider}\"}} {at}"
        );
        assert!(text.contains(&line), "missing {line} in:\n{text}");
    }
    assert!(
        !text.contains("switchyard_model_shutdown_timestamp_seconds{model=\"rerank-v3.5\""),
        "a model with no shutdown date has no series"
    );
}

#[test]
fn a_successor_takes_over_on_the_shutdown_date_and_a_model_without_one_is_refused() {
    let fake = FakeProvider::start();
    // The evening before gpt-image-1.5's shutdown.
    let clock = Clock::manual(DEC_1 - 60);
    let (gw, _) = start(&fake, clock.clone());

    fake.push(image_answer());
    assert_eq!(image(&gw, "gpt-image-1.5").status, 200);
    assert_eq!(fake.requests()[0].json()["model"], "gpt-image-1.5");

    // Midnight: the successor serves it, and the answer says so.
    clock.set(DEC_1);
    fake.push(image_answer());
    let r = image(&gw, "gpt-image-1.5");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(fake.requests()[1].json()["model"], "gpt-image-2.6-sunburst");
    assert_eq!(
        r.header("switchyard-served-model"),
        Some("gpt-image-2.6-sunburst")
    );
    assert_eq!(
        r.header("sunset"),
        None,
        "the successor is not being retired"
    );

    // Rerank: the answer's `model` names the model that served it.
    fake.push(rerank_answer());
    let r = rerank(&gw, "rerank-old");
    assert_eq!(r.json()["model"], "rerank-old", "before its shutdown");
    clock.set(DEC_10);
    fake.push(rerank_answer());
    let r = rerank(&gw, "rerank-old");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "rerank-v3.5");
    assert_eq!(r.header("switchyard-served-model"), Some("rerank-v3.5"));
    assert_eq!(fake.requests()[3].json()["model"], "rerank-v3.5");

    // No successor: 503 model_unavailable naming the replacement, and nothing reaches the provider.
    let sent = fake.requests().len();
    let r = rerank(&gw, "rerank-doomed");
    assert_eq!(r.status, 503, "{}", r.text());
    let body = r.json();
    assert_eq!(body["code"], "model_unavailable");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("2026-12-10") && message.contains("rerank-v4.0-pro"),
        "{message}"
    );
    assert_eq!(r.header("sunset"), Some("Thu, 10 Dec 2026 00:00:00 GMT"));
    assert_eq!(fake.requests().len(), sent, "a shut-down model was called");
}

/// `models` under the standard test config's providers, loaded at 2026-11-27.
fn load_at_test_now(models: &str) -> Result<switchyard::config::Settings, Vec<String>> {
    let yaml = support::config("http://127.0.0.1:9", (1, 2)) + models;
    switchyard::internals::config::load_str_at(&yaml, &|_| None, &Clock::manual(TEST_NOW))
}

#[test]
fn a_model_past_its_shutdown_is_refused_at_load_unless_overridden() {
    let errors = load_at_test_now(
        "    old-images: {family: gpt-image, targets: [{provider: openai, model: gpt-image-1}]}\n",
    )
    .err()
    .expect("a shut-down model loaded");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    for needle in [
        "switchyard.models.old-images.targets[0]: openai model `gpt-image-1` was shut down on 2026-10-23",
        "replacement: gpt-image-2.5-sunburst or gpt-image-2.5-flare",
        "still_available",
    ] {
        assert!(errors[0].contains(needle), "`{needle}` not in {errors:#?}");
    }

    // The operator says the account still has it: loaded, no warning.
    let s = load_at_test_now(
        "    old-images: {family: gpt-image, targets: [{provider: openai, model: gpt-image-1, lifecycle: {still_available: true}}]}\n",
    )
    .unwrap_or_else(|e| panic!("{e:#?}"));
    assert!(
        !s.gateway
            .warnings()
            .iter()
            .any(|w| w.contains("old-images")),
        "{:#?}",
        s.gateway.warnings()
    );
    // Or a later date of its own (model-wide), then warned of when near.
    let s = load_at_test_now(
        "    old-images: {family: gpt-image, lifecycle: {shutdown: 2026-12-20}, targets: [{provider: openai, model: gpt-image-1}]}\n",
    )
    .unwrap_or_else(|e| panic!("{e:#?}"));
    assert!(
        s.gateway
            .warnings()
            .iter()
            .any(|w| w.contains("old-images.targets[0]")
                && w.contains("shuts down on 2026-12-20 (in 23 days)")),
        "{:#?}",
        s.gateway.warnings()
    );
    // Or a successor serves it: a warning, not a refusal.
    let s = load_at_test_now(
        "    old-images: {family: gpt-image, successor: gpt-image-2, targets: [{provider: openai, model: gpt-image-1}]}\n",
    )
    .unwrap_or_else(|e| panic!("{e:#?}"));
    assert!(
        s.gateway
            .warnings()
            .iter()
            .any(|w| w.contains("model `gpt-image-2`, its successor, serves `old-images`")),
        "{:#?}",
        s.gateway.warnings()
    );

    // A successor that can never take over (a target without a shutdown date) is warned of.
    let s = load_at_test_now(
        "    undated: {family: gpt-image-2, successor: gpt-image-2, targets: [{provider: openai, model: gpt-image-2}]}\n",
    )
    .unwrap_or_else(|e| panic!("{e:#?}"));
    assert!(
        s.gateway.warnings().iter().any(|w| {
            w
            == "switchyard.models.undated.successor: `gpt-image-2` never takes over: targets[0] of \
                `undated` has no shutdown date (or `still_available`)"
        }),
        "{:#?}",
        s.gateway.warnings()
    );

    // Bad overrides and successors are named by path.
    let errors = load_at_test_now(
        r#"
    a: {family: gpt-image, successor: nope, targets: [{provider: openai, model: gpt-image-1.5}]}
    b: {family: gpt-image, successor: tts-1, targets: [{provider: openai, model: gpt-image-1.5}]}
    c: {family: gpt-image-2, targets: [{provider: openai, model: gpt-image-2, lifecycle: {shutdown: 2026-13-01, colour: red}}]}
    d: {family: gpt-image-2, targets: [{provider: openai, model: gpt-image-2, lifecycle: {still_available: true}}]}
"#,
    )
    .err()
    .unwrap()
    .join("\n");
    for needle in [
        "switchyard.models.a.successor: no model named `nope`",
        "switchyard.models.b.successor: `tts-1` serves speech, `b` serves images",
        "switchyard.models.c.targets[0].lifecycle.colour: unknown key",
        "switchyard.models.c.targets[0].lifecycle.shutdown: `2026-13-01` is not a date",
        "switchyard.models.d.targets[0].lifecycle: no built-in lifecycle for openai model `gpt-image-2`: give its `shutdown` date",
    ] {
        assert!(errors.contains(needle), "missing `{needle}` in:\n{errors}");
    }
}

// ---- the binary: `-t` and the start log ---------------------------------------------------------

/// A config naming `gpt-image-2` with a shutdown date of the operator's `days` from today (by the
/// wall clock: the binary reads it).
fn near_config(port: u16, days: i64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let date = Date::of_unix(now + days * 86_400);
    format!(
        r#"
version: 1
grace_period_seconds: 0
graceful_shutdown_timeout_seconds: 1
switchyard:
  listeners: [{{name: a, address: "127.0.0.1:{port}"}}]
  providers:
    openai: {{kind: openai, api_key: k, base_url: "http://127.0.0.1:9/v1"}}
  models:
    soon-gone:
      family: gpt-image-2
      targets: [{{provider: openai, model: gpt-image-2, lifecycle: {{shutdown: {date}, replacement: [gpt-image-2.6-flare]}}}}]
"#
    )
}

fn test_config(yaml: &str) -> (i32, String) {
    let dir = std::env::temp_dir().join(format!(
        "switchyard-lifecycle-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("c.yaml");
    std::fs::write(&file, yaml).unwrap();
    let result = crate::cli::switchyard(&["-t", "-c", file.to_str().unwrap()], &[]);
    std::fs::remove_dir_all(&dir).unwrap();
    result
}

#[test]
fn the_configuration_test_warns_of_a_near_shutdown_and_refuses_a_past_one() {
    let (code, out) = test_config(&near_config(1, 10));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(
            "warning: switchyard.models.soon-gone.targets[0]: openai model `gpt-image-2` shuts down on "
        ) && out.contains("(in 10 days); replacement: gpt-image-2.6-flare"),
        "{out}"
    );
    assert!(out.contains("configuration is valid"), "{out}");
    // Further off than 30 days: nothing to say.
    let (code, out) = test_config(&near_config(1, 31));
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("warning"), "{out}");
    // Past it: refused, naming the replacement.
    let (code, out) = test_config(&near_config(1, -1));
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("was shut down on") && out.contains("replacement: gpt-image-2.6-flare"),
        "{out}"
    );
}

#[test]
fn the_start_log_warns_of_a_near_shutdown() {
    let bin = Binary::start(|port| near_config(port, 3), "warn");
    let out = bin.output_when("the lifecycle warning", |t| t.contains("soon-gone"));
    assert!(
        out.contains("WARN")
            && out.contains(
                "switchyard.models.soon-gone.targets[0]: openai model `gpt-image-2` shuts down on"
            )
            && out.contains("(in 3 days)"),
        "{out}"
    );
}

/// A reload is judged by the running gateway's clock: a model that crossed its shutdown since the
/// start is refused on reload (the configuration in force stays), and taken over once a successor
/// is named.
#[test]
fn a_reload_past_a_shutdown_is_refused_by_the_gateways_clock() {
    use switchyard::internals::reload::ConfigSource;
    use switchyard::internals::reload::Reloader;
    let ports = (free_port(), free_port());
    let clock = Clock::manual(TEST_NOW);
    let yaml = |successor: &str| {
        support::config("http://127.0.0.1:9", ports)
            + &format!(
                "    gpt-image-1.5: {{family: gpt-image,{successor} targets: [{{provider: openai, model: gpt-image-1.5}}]}}\n"
            )
    };
    let first = switchyard::internals::config::load_str_at(&yaml(""), &|_| None, &clock)
        .unwrap_or_else(|e| panic!("{e:#?}"));
    assert!(
        first.gateway.warnings().iter().any(|w| w.contains(
            "switchyard.models.gpt-image-1.5.targets[0]: openai model `gpt-image-1.5` shuts down on 2026-12-01 (in 4 days)"
        )),
        "{:#?}",
        first.gateway.warnings()
    );
    let state = switchyard::GatewayState::new(first.gateway);
    let dir = std::env::temp_dir().join(format!("switchyard-lifecycle-reload-{}", ports.0));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("c.yaml");
    std::fs::write(&file, yaml("")).unwrap();
    let reloader = Reloader {
        state: state.clone(),
        source: ConfigSource::File(file.to_str().unwrap().to_string()),
        server: first.server,
    };
    // Midnight of the shutdown, by the gateway's clock (the wall clock says otherwise).
    clock.set(DEC_1);
    let problems = reloader.reload().expect_err("a shut-down model reloaded");
    assert!(
        problems.iter().any(
            |p| p.contains("`gpt-image-1.5` was shut down on 2026-12-01")
                && p.contains("gpt-image-2.6-sunburst or gpt-image-2.6-flare")
        ),
        "{problems:#?}"
    );
    // With a successor named, the reload goes through and the successor serves it.
    std::fs::write(&file, yaml(" successor: gpt-image-2,")).unwrap();
    reloader.reload().unwrap_or_else(|e| panic!("{e:#?}"));
    let served = state
        .settings()
        .catalog()
        .serving("gpt-image-1.5")
        .cloned()
        .unwrap();
    assert_eq!(served.name, "gpt-image-2");
    assert_eq!(
        served.lifecycle.taken_over_from.as_deref(),
        Some("gpt-image-1.5")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
