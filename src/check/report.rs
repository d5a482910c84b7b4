//! The check's findings and how they are printed: one line each (`<status> <account> [<url>]:
//! <message>`) and a closing summary, or one JSON document (`--json`).

use serde::Serialize;

use super::{EXIT_OK, EXIT_PROBLEMS};
use crate::upstream::provider::Provider;

/// What a finding says. Every status but `ok`, `not_checked` and `model_retiring` is a problem;
/// `model_retiring` is a warning (said, and counted apart, but the exit status stays 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    /// The endpoint answered, the key was accepted and everything configured is listed.
    Ok,
    /// A configured native model the account does not list.
    ModelUnknown,
    /// A configured native model the account lists with a shutdown date that has come: the
    /// provider no longer serves it.
    ModelShutDown,
    /// A configured native model the account lists with a shutdown date still to come.
    ModelRetiring,
    /// A configured voice (a model's default, or a mapped voice) the account does not list.
    VoiceUnknown,
    /// The provider refused the key (401/403, or its own "invalid key" code).
    KeyRefused,
    /// The endpoint did not answer (connection refused, DNS, TLS, timeout).
    Unreachable,
    /// The endpoint answered something the check could not use (5xx, a body it cannot read).
    Error,
    /// Nothing to ask (no list endpoint for the kind, no key, in-process): said, not counted.
    NotChecked,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::ModelUnknown => "model_unknown",
            Status::ModelShutDown => "model_shut_down",
            Status::ModelRetiring => "model_retiring",
            Status::VoiceUnknown => "voice_unknown",
            Status::KeyRefused => "key_refused",
            Status::Unreachable => "unreachable",
            Status::Error => "error",
            Status::NotChecked => "not_checked",
        }
    }

    pub(crate) fn is_problem(self) -> bool {
        !matches!(
            self,
            Status::Ok | Status::NotChecked | Status::ModelRetiring
        )
    }

    /// How grave it is: `error` (a problem), `warning`, `note` (`not_checked`) or `ok`.
    pub(crate) fn level(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::NotChecked => "note",
            Status::ModelRetiring => "warning",
            _ => "error",
        }
    }
}

/// One finding about one account (at one of its endpoints, when it concerns one).
#[derive(Debug, Serialize)]
pub(crate) struct Finding {
    pub status: Status,
    pub account: String,
    /// The account's provider kind.
    pub kind: String,
    /// The base URL asked (scheme, host and path; never credentials).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The native model concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The public models configured with it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub public_models: Vec<String>,
    /// The voice concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voice: Option<String>,
    /// The shutdown date the account's model list gives the model (`YYYY-MM-DD`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shutdown_date: Option<String>,
    /// The shutdown date the gateway's lifecycle data gives the target (`src/caps/lifecycle.yaml`
    /// or the target's `lifecycle:`), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifecycle_shutdown: Option<String>,
    pub message: String,
}

impl Finding {
    /// The finding as JSON, with its status's [`Status::level`] as `level`.
    fn json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("level".into(), self.status.level().into());
        }
        v
    }

    pub(crate) fn new(
        status: Status,
        p: &Provider,
        endpoint: Option<String>,
        message: String,
    ) -> Finding {
        Finding {
            status,
            account: p.name.clone(),
            kind: p.kind.clone(),
            endpoint,
            model: None,
            public_models: Vec::new(),
            voice: None,
            shutdown_date: None,
            lifecycle_shutdown: None,
            message,
        }
    }
}

/// Everything the check found.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub findings: Vec<Finding>,
}

impl Report {
    pub(crate) fn problems(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.status.is_problem())
            .count()
    }

    pub(crate) fn warnings(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.status.level() == "warning")
            .count()
    }

    pub(crate) fn exit_code(&self) -> i32 {
        if self.problems() == 0 {
            EXIT_OK
        } else {
            EXIT_PROBLEMS
        }
    }

    /// One line per finding, then a summary line.
    pub(crate) fn text(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            out.push_str(&format!("{:<15} {}", f.status.as_str(), f.account));
            if let Some(ep) = &f.endpoint {
                out.push_str(&format!(" [{ep}]"));
            }
            out.push_str(&format!(": {}\n", f.message));
        }
        let mut accounts: Vec<&str> = self.findings.iter().map(|f| f.account.as_str()).collect();
        accounts.dedup();
        let mut answered: Vec<&str> = self
            .findings
            .iter()
            .filter(|f| f.status == Status::Ok)
            .map(|f| f.account.as_str())
            .collect();
        answered.dedup();
        let notes = self
            .findings
            .iter()
            .filter(|f| f.status == Status::NotChecked)
            .count();
        let problems = self.problems();
        let warnings = match self.warnings() {
            0 => String::new(),
            n => format!("; {n} warning(s)"),
        };
        if problems == 0 {
            out.push_str(&format!(
                "no problem found: {} of {} account(s) answered as configured; {notes} not_checked note(s){warnings}\n",
                answered.len(),
                accounts.len()
            ));
        } else {
            out.push_str(&format!(
                "{problems} problem(s) found in {} account(s){warnings}\n",
                accounts.len()
            ));
        }
        out
    }

    /// `{"ok": …, "problems": N, "warnings": N, "findings": [...]}`, one line.
    pub(crate) fn json(&self) -> String {
        let doc = serde_json::json!({
            "ok": self.problems() == 0,
            "problems": self.problems(),
            "warnings": self.warnings(),
            "findings": self.findings.iter().map(Finding::json).collect::<Vec<_>>(),
        });
        format!("{doc}\n")
    }
}
