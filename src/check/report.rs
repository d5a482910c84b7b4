//! The check's findings and how they are printed: one line each (`<status> <account> [<url>]:
//! <message>`) and a closing summary, or one JSON document (`--json`).

use serde::Serialize;

use super::{EXIT_OK, EXIT_PROBLEMS};
use crate::upstream::provider::Provider;

/// What a finding says. Every status but `ok` and `not_checked` is a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    /// The endpoint answered, the key was accepted and everything configured is listed.
    Ok,
    /// A configured native model the account does not list.
    ModelUnknown,
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
            Status::VoiceUnknown => "voice_unknown",
            Status::KeyRefused => "key_refused",
            Status::Unreachable => "unreachable",
            Status::Error => "error",
            Status::NotChecked => "not_checked",
        }
    }

    pub(crate) fn is_problem(self) -> bool {
        !matches!(self, Status::Ok | Status::NotChecked)
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
    pub message: String,
}

impl Finding {
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
            out.push_str(&format!("{:<13} {}", f.status.as_str(), f.account));
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
        if problems == 0 {
            out.push_str(&format!(
                "no problem found: {} of {} account(s) answered as configured; {notes} not_checked note(s)\n",
                answered.len(),
                accounts.len()
            ));
        } else {
            out.push_str(&format!(
                "{problems} problem(s) found in {} account(s)\n",
                accounts.len()
            ));
        }
        out
    }

    /// `{"ok": …, "problems": N, "findings": [...]}`, one line.
    pub(crate) fn json(&self) -> String {
        let doc = serde_json::json!({
            "ok": self.problems() == 0,
            "problems": self.problems(),
            "findings": self.findings,
        });
        format!("{doc}\n")
    }
}
