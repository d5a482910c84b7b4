//! The binary's `-t` (test the configuration) mode.

use std::process::Command;

/// Run the binary with `args` and only `envs` in its environment: its exit code and its output
/// (stdout, then stderr).
pub(crate) fn switchyard(args: &[&str], envs: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    cmd.args(args).env_clear();
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn every_shipped_config_is_valid_with_no_environment() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/conf");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let (code, out) = switchyard(&["-t", "-c", path.to_str().unwrap()], &[]);
            assert_eq!(code, 0, "{}: {out}", path.display());
        }
    }
}

#[test]
fn a_bad_config_lists_every_problem_by_path() {
    let dir = std::env::temp_dir().join(format!("switchyard-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.yaml");
    std::fs::write(
        &file,
        "version: 1\nthreadz: 3\nswitchyard:\n  listeners: [{name: a, address: \"127.0.0.1:1\"}]\n  providers:\n    openai: {kind: openai, api_key: \"${NEEDED_KEY}\", base_url: \"https://api.openai.com/v1\", extra: 1}\n  models:\n    m: {family: nope, targets: [{provider: openai, model: x}]}\n",
    )
    .unwrap();
    let (code, out) = switchyard(&["-t", "-c", file.to_str().unwrap()], &[]);
    assert_ne!(code, 0);
    for needle in [
        "threadz",
        "switchyard.providers.openai.extra",
        "NEEDED_KEY",
        "switchyard.models.m.family",
    ] {
        assert!(out.contains(needle), "`{needle}` not reported:\n{out}");
    }
    // With the variable set, only the other problems remain.
    let (_, out) = switchyard(
        &["-t", "-c", file.to_str().unwrap()],
        &[("NEEDED_KEY", "k")],
    );
    assert!(!out.contains("NEEDED_KEY"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `-t` names every configured model that has no price (none built in, none configured, or
/// declared unpriced), so its cost is known to be unknown rather than counted as 0; a priced
/// model is not named. A price the configuration cannot read is a problem, with its path.
#[test]
fn the_configuration_test_lists_unpriced_models() {
    let dir = std::env::temp_dir().join(format!("switchyard-cli-prices-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("prices.yaml");
    let config = |extra: &str| {
        format!(
            "version: 1\nswitchyard:\n  listeners: [{{name: a, address: \"127.0.0.1:1\"}}]\n  providers:\n    openai: {{kind: openai, api_key: k, base_url: \"https://api.openai.com/v1\"}}\n  models:\n    priced: {{family: openai-tts, targets: [{{provider: openai, model: tts-1}}]}}\n    fine-tuned: {{family: openai-tts, targets: [{{provider: openai, model: my-tts}}]}}\n    free: {{family: openai-tts, price: unpriced, targets: [{{provider: openai, model: tts-1-hd}}]}}\n{extra}"
        )
    };
    std::fs::write(&file, config("")).unwrap();
    let (code, out) = switchyard(&["-t", "-c", file.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("unpriced: model `fine-tuned`: openai `my-tts` has no price"),
        "{out}"
    );
    assert!(
        out.contains("unpriced: model `free`: openai `tts-1-hd` is declared unpriced"),
        "{out}"
    );
    assert!(!out.contains("model `priced`"), "{out}");
    // A price given for it: no longer listed.
    std::fs::write(
        &file,
        config("    own: {family: openai-tts, price: {currency: USD, characters: {price: 20, per: 1000000}}, targets: [{provider: openai, model: my-tts}]}\n"),
    )
    .unwrap();
    let (code, out) = switchyard(&["-t", "-c", file.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("model `own`"), "{out}");
    // An unreadable price is refused with its path.
    std::fs::write(
        &file,
        config("    bad: {family: openai-tts, targets: [{provider: openai, model: tts-1, price: {currency: dollars}}]}\n"),
    )
    .unwrap();
    let (code, out) = switchyard(&["-t", "-c", file.to_str().unwrap()], &[]);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains(
            "switchyard.models.bad.targets[0].price.currency: `dollars` is not an ISO 4217 code"
        ),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
