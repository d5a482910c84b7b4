//! The bounds on what clients send and how providers are retried and ejected: request body
//! limits per operation (`limits:`), client deadlines (`clients:`), the retry policy (`retries:`)
//! and when failing targets are ejected (`routing.ejection`).

use std::time::Duration;

use super::file::{ClientsFile, EjectionFile, LimitsFile, RetriesFile};
use crate::common::Operation;
use crate::upstream::health::EjectionPolicy;
use crate::upstream::retry::RetryPolicy;

/// Deadlines on what clients send (`clients:` in the file; see `file::ClientsFile`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientLimits {
    /// Time a request head has to arrive whole (HTTP/1.x).
    pub(crate) head_timeout: Duration,
    /// Time a request body gets, plus one second for each `body_min_rate` bytes received.
    pub(crate) body_timeout: Duration,
    /// Bytes per second; never 0.
    pub(crate) body_min_rate: u64,
    /// An idle client connection is closed after this long.
    pub(crate) idle_timeout: Duration,
    /// A client that takes no answer bytes for this long is cut off.
    pub(crate) write_timeout: Duration,
}

/// Request body limits per operation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Largest speech request body, in bytes.
    pub(crate) speech: usize,
    /// Largest image request body, in bytes.
    pub(crate) images: usize,
    /// Largest rerank request body, in bytes.
    pub(crate) rerank: usize,
}

impl Limits {
    /// The largest request body `op` takes, in bytes (413 past it).
    pub(crate) fn body_limit(&self, op: Operation) -> usize {
        match op {
            Operation::Speech => self.speech,
            Operation::Images => self.images,
            Operation::Rerank => self.rerank,
        }
    }
}

/// `limits:`, checked: every body limit above 0.
pub(super) fn body_limits(lim: &LimitsFile, errors: &mut Vec<String>) -> Limits {
    for (key, v) in [
        ("speech_body_bytes", lim.speech_body_bytes),
        ("images_body_bytes", lim.images_body_bytes),
        ("rerank_body_bytes", lim.rerank_body_bytes),
    ] {
        if v == 0 {
            errors.push(format!("switchyard.limits.{key}: must be greater than 0"));
        }
    }
    Limits {
        speech: lim.speech_body_bytes,
        images: lim.images_body_bytes,
        rerank: lim.rerank_body_bytes,
    }
}

/// `retries:`, as the attempt loop's policy.
pub(super) fn retry_policy(r: &RetriesFile) -> RetryPolicy {
    RetryPolicy {
        max_retries: r.max,
        initial_backoff: Duration::from_millis(r.initial_backoff_ms),
        max_backoff: Duration::from_millis(r.max_backoff_ms),
        max_retry_after: Duration::from_millis(r.max_retry_after_ms),
    }
}

/// `clients:`, checked: every deadline and the minimum rate above 0.
pub(super) fn client_limits(f: &ClientsFile, errors: &mut Vec<String>) -> ClientLimits {
    for (key, v) in [
        ("head_timeout_ms", f.head_timeout_ms),
        ("body_timeout_ms", f.body_timeout_ms),
        ("body_min_rate_bytes", f.body_min_rate_bytes),
        ("idle_timeout_ms", f.idle_timeout_ms),
        ("write_timeout_ms", f.write_timeout_ms),
    ] {
        if v == 0 {
            errors.push(format!("switchyard.clients.{key}: must be greater than 0"));
        }
    }
    ClientLimits {
        head_timeout: Duration::from_millis(f.head_timeout_ms),
        body_timeout: Duration::from_millis(f.body_timeout_ms),
        body_min_rate: f.body_min_rate_bytes.max(1),
        idle_timeout: Duration::from_millis(f.idle_timeout_ms),
        write_timeout: Duration::from_millis(f.write_timeout_ms),
    }
}

/// `routing.ejection`, checked: at least one failure, a cooldown, a maximum no shorter, and a
/// retired model's cooldown no shorter than that.
pub(super) fn ejection_policy(f: &EjectionFile, errors: &mut Vec<String>) -> EjectionPolicy {
    let at = "switchyard.routing.ejection";
    if f.consecutive_failures == 0 {
        errors.push(format!("{at}.consecutive_failures: must be at least 1"));
    }
    if f.base_cooldown_ms == 0 {
        errors.push(format!("{at}.base_cooldown_ms: must be greater than 0"));
    }
    if f.max_cooldown_ms < f.base_cooldown_ms {
        errors.push(format!(
            "{at}.max_cooldown_ms: {} is less than base_cooldown_ms ({})",
            f.max_cooldown_ms, f.base_cooldown_ms
        ));
    }
    // A retired model is out for longer than a failing one: a shorter cooldown would probe a dead
    // model more often than a merely failing one.
    if f.retired_cooldown_ms < f.max_cooldown_ms {
        errors.push(format!(
            "{at}.retired_cooldown_ms: {} is less than max_cooldown_ms ({})",
            f.retired_cooldown_ms, f.max_cooldown_ms
        ));
    }
    EjectionPolicy {
        consecutive_failures: f.consecutive_failures.max(1),
        base_cooldown: Duration::from_millis(f.base_cooldown_ms),
        max_cooldown: Duration::from_millis(f.max_cooldown_ms),
        retired_cooldown: Duration::from_millis(f.retired_cooldown_ms),
    }
}
