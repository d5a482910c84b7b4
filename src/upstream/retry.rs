//! When and how long to wait before another attempt.
//!
//! The request's `retries` (capped by config) counts extra attempts. Whether an error is worth
//! another attempt is decided by [`crate::common::error::UpstreamError::retryable`]; this module only
//! spaces attempts out: exponential backoff with full jitter, or the provider's `Retry-After` when it
//! sent one (capped, so a provider cannot park a request for minutes).

use std::time::Duration;

use rand::Rng;

/// Retry settings from config.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Largest `retries` a request may ask for.
    pub max_retries: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Longest `Retry-After` honoured.
    pub max_retry_after: Duration,
}

impl RetryPolicy {
    /// Delay before attempt number `next_attempt` (1 = the first retry).
    pub fn delay(&self, next_attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(ra) = retry_after {
            return ra.min(self.max_retry_after);
        }
        let exp = self
            .initial_backoff
            .saturating_mul(1u32 << next_attempt.saturating_sub(1).min(16));
        let ceiling = exp.min(self.max_backoff);
        // Full jitter: spreads retries of many callers hit by the same outage.
        let nanos = ceiling.as_nanos().min(u64::MAX as u128) as u64;
        if nanos == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(rand::thread_rng().gen_range(nanos / 2..=nanos))
    }
}

/// `Retry-After` in seconds (the HTTP-date form is rare from APIs and ignored).
pub(crate) fn parse_retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let v = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    let secs: f64 = v.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(3600.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_retries: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            max_retry_after: Duration::from_secs(5),
        }
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = policy();
        for _ in 0..50 {
            let d1 = p.delay(1, None);
            assert!(d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100));
            let d3 = p.delay(3, None);
            assert!(d3 >= Duration::from_millis(200) && d3 <= Duration::from_millis(400));
            assert!(p.delay(30, None) <= Duration::from_millis(1000));
        }
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let p = policy();
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(60))),
            Duration::from_secs(5)
        );
        let mut h = http::HeaderMap::new();
        h.insert(http::header::RETRY_AFTER, "3".parse().unwrap());
        assert_eq!(parse_retry_after(&h), Some(Duration::from_secs(3)));
        h.insert(http::header::RETRY_AFTER, "soon".parse().unwrap());
        assert_eq!(parse_retry_after(&h), None);
    }
}
