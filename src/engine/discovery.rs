//! Asking a provider account what it serves: one of its list endpoints (`api::discovery`), read
//! page by page, for `switchyard check-providers` and for the voice listing, whose answers from
//! the provider are kept a while ([`VoiceCache`]) so that listing voices does not call the
//! provider every time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::api::discovery::{ListFns, Listed};
use crate::common::error::UpstreamError;
use crate::upstream::exchange::Upstream;
use crate::upstream::provider::{bad_answer, Provider};

/// Most pages one list is read in (a provider that keeps naming a next page is cut off).
const MAX_PAGES: usize = 50;

/// Every entry of the list `fns` reads, from the account's endpoint for `region` (its default
/// endpoint when the region has none). A non-2xx answer is classified by the provider's error map,
/// so a refused key is `AuthRejected`.
pub(crate) async fn list(
    upstream: &Upstream,
    provider: &Provider,
    region: &str,
    fns: ListFns,
) -> Result<Vec<Listed>, UpstreamError> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let req = (fns.request)(token.as_deref());
        let resp = upstream.send(provider, region, &req).await?;
        let status = resp.status;
        let headers = resp.headers().cloned().unwrap_or_default();
        let body = resp.read_all(provider.max_response_bytes).await?;
        if !(200..300).contains(&status) {
            return Err(provider.error_response(status, &headers, &body));
        }
        let page = (fns.response)(&body).map_err(|m| bad_answer(provider, m))?;
        out.extend(page.items);
        match page.next {
            Some(next) if token.as_deref() != Some(next.as_str()) => token = Some(next),
            _ => return Ok(out),
        }
    }
    Err(bad_answer(
        provider,
        format!("the list goes on for more than {MAX_PAGES} pages"),
    ))
}

/// How long a provider's voice list is kept.
pub(crate) const VOICES_TTL: Duration = Duration::from_secs(600);
/// How long a failure to read it is kept (so a provider that is down is not asked on every
/// listing, and is asked again soon).
pub(crate) const VOICES_FAILURE_TTL: Duration = Duration::from_secs(30);

/// Provider voice lists by account name and region, each kept for [`VOICES_TTL`] (a failure for
/// [`VOICES_FAILURE_TTL`]). Runtime state: it outlives a configuration reload, keyed by names.
#[derive(Default)]
pub(crate) struct VoiceCache {
    entries: Mutex<HashMap<(String, String), Cached>>,
}

#[derive(Clone)]
struct Cached {
    at: Instant,
    voices: Result<Arc<[Listed]>, UpstreamError>,
}

impl VoiceCache {
    /// The account's voices: the kept list while it is fresh, else the provider's list now. Two
    /// listings that miss at once both ask; the later answer is kept.
    pub(crate) async fn voices(
        &self,
        upstream: &Upstream,
        provider: &Provider,
        region: &str,
        fns: ListFns,
    ) -> Result<Arc<[Listed]>, UpstreamError> {
        let key = (provider.name.clone(), region.to_string());
        if let Some(hit) = self.fresh(&key) {
            return hit;
        }
        let voices = Box::pin(list(upstream, provider, region, fns))
            .await
            .map(Arc::from);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.insert(
            key,
            Cached {
                at: Instant::now(),
                voices: voices.clone(),
            },
        );
        voices
    }

    fn fresh(&self, key: &(String, String)) -> Option<Result<Arc<[Listed]>, UpstreamError>> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let cached = entries.get(key)?;
        let ttl = match cached.voices {
            Ok(_) => VOICES_TTL,
            Err(_) => VOICES_FAILURE_TTL,
        };
        (cached.at.elapsed() < ttl).then(|| cached.voices.clone())
    }
}
