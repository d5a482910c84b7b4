//! A configured provider account as the exchange sees it: its name, where to reach it (per
//! region), the credentials to send, how its error answers are classified, and the limits on what
//! is read from it. What kind of provider it is lives only in the adapters built for it
//! (the providers' registry); nothing here branches on a provider kind.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;

use http::{HeaderMap, HeaderName, HeaderValue};

use super::endpoint::Endpoint;
use super::retry::parse_retry_after;
use crate::common::error::{UpstreamError, UpstreamErrorKind};

/// How a provider classifies a non-2xx answer: status and body to an error with its retry class.
pub type ErrorMap = fn(&Provider, u16, &[u8]) -> UpstreamError;

/// Signs a credential per request: a token that expires (Kling's JWTs, Google's access tokens)
/// or a signature over the request itself (AWS Signature Version 4, `upstream/sigv4.rs`).
pub trait Signer: Send + Sync {
    /// The credential headers for `req`, sent now (an `Err` fails the attempt). They are added
    /// after the request's own headers are fixed, so a signature may cover them.
    fn sign(&self, req: &Signable<'_>) -> Result<Vec<(HeaderName, HeaderValue)>, String>;

    /// `None` when [`Signer::sign`] can answer now; otherwise a future that resolves when it can,
    /// or with why it cannot, awaited before the request is built. Google's access token is
    /// fetched over the network: only the first request waits for it, later ones find it ready.
    fn ready(&self) -> Option<Ready<'_>> {
        None
    }
}

/// What [`Signer::ready`] gives to await: the credentials can be built (`Ok`), or why not.
pub type Ready<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// What a [`Signer`] may sign: the request exactly as it goes on the wire.
#[derive(Debug, Clone, Copy)]
pub struct Signable<'a> {
    /// The HTTP method.
    pub method: &'a http::Method,
    /// The `Host` header: the provider's host, with its port when not the scheme's default.
    pub authority: &'a str,
    /// The request target: the path (percent-encoded, as sent) with any query string.
    pub path: &'a str,
    /// The `Content-Type` sent, if any (none on a `GET`).
    pub content_type: Option<&'a str>,
    /// The body, whole.
    pub body: &'a [u8],
}

/// The credentials a provider account sends.
pub enum Auth {
    /// The kind needs a key and none is configured: the account is disabled.
    Missing,
    /// The kind works without a key (a self-hosted server, the in-process reranker).
    None,
    /// Fixed headers, built once and marked sensitive.
    Headers(Vec<(HeaderName, HeaderValue)>),
    /// A header signed anew for each request: the built-in kinds' only (the signing API is not
    /// part of `provider_api`).
    #[doc(hidden)]
    Signed(Box<dyn Signer>),
}

impl Auth {
    /// `Authorization: Bearer <key>`, the most common scheme.
    pub fn bearer(key: &str) -> Result<Auth, String> {
        Auth::headers(&[(http::header::AUTHORIZATION, format!("Bearer {key}"))])
    }

    /// One header carrying the key as it is (`x-api-key`, `api-key`, …).
    pub fn header(name: &'static str, key: &str) -> Result<Auth, String> {
        Auth::headers(&[(HeaderName::from_static(name), key.to_string())])
    }

    /// Fixed credential headers, marked sensitive so they are never logged.
    pub fn headers(pairs: &[(HeaderName, String)]) -> Result<Auth, String> {
        let mut out = Vec::with_capacity(pairs.len());
        for (name, value) in pairs {
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| "api_key contains characters not allowed in a header".to_string())?;
            value.set_sensitive(true);
            out.push((name.clone(), value));
        }
        Ok(Auth::Headers(out))
    }
}

/// Where and how to reach one provider account, as the config gives it.
pub struct Account {
    /// The account's name in the configuration (`providers.<name>`).
    pub name: String,
    /// The provider's kind as the config names it (`openai`, `cohere`, …): which API it speaks.
    /// Public, unlike the account's name, key and URLs (`GET /api/v1/models` shows it).
    pub kind: String,
    /// The key, kept only to redact it should a provider ever echo it back.
    pub key: String,
    /// `None` only for in-process providers.
    pub default_endpoint: Option<Endpoint>,
    pub region_endpoints: HashMap<String, Endpoint>,
    /// Largest non-streamed answer accepted from this provider.
    pub max_response_bytes: usize,
    /// Hosts the gateway may download provider results from (audio or image URLs in answers):
    /// exact names, or `*.suffix`. The provider's own base URL host is always allowed.
    pub result_hosts: Vec<String>,
}

/// A configured provider account: credentials and where to reach it.
pub struct Provider {
    /// The account's name in the configuration (`providers.<name>`).
    pub name: String,
    /// The kind (`Account::kind`).
    pub kind: String,
    /// Index of this account's adapters in the registry the config built with it.
    pub id: usize,
    auth: Auth,
    errors: ErrorMap,
    key: String,
    default_endpoint: Option<Endpoint>,
    region_endpoints: HashMap<String, Endpoint>,
    /// Largest non-streamed answer accepted from this account.
    pub max_response_bytes: usize,
    result_hosts: Vec<String>,
    /// Whether each attempt sends the provider a W3C `traceparent` (and the caller's
    /// `tracestate`): `providers.<name>.trace_context`, on unless the operator turns it off.
    pub(crate) send_trace_context: bool,
}

impl fmt::Debug for Provider {
    // The key must never reach a log line, so Debug is written by hand.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name)
            .field("enabled", &self.enabled())
            .finish()
    }
}

impl Provider {
    /// An account numbered `id`, with its kind's credentials and error classification.
    #[doc(hidden)]
    pub fn new(account: Account, id: usize, auth: Auth, errors: ErrorMap) -> Provider {
        Provider {
            name: account.name,
            kind: account.kind,
            id,
            auth,
            errors,
            key: account.key,
            default_endpoint: account.default_endpoint,
            region_endpoints: account.region_endpoints,
            max_response_bytes: account.max_response_bytes,
            result_hosts: account.result_hosts,
            send_trace_context: true,
        }
    }

    /// Usable: has its key, or needs none.
    pub fn enabled(&self) -> bool {
        !matches!(self.auth, Auth::Missing)
    }

    /// Wait until the credentials can be built (a signer's first token); at once otherwise.
    /// Credentials that could not be had (the token endpoint refused the account) are the
    /// operator's problem: [`UpstreamErrorKind::AuthRejected`], with the signer's reason.
    pub async fn credentials_ready(&self) -> Result<(), UpstreamError> {
        if let Auth::Signed(signer) = &self.auth {
            if let Some(wait) = signer.ready() {
                wait.await.map_err(|m| {
                    UpstreamError::new(UpstreamErrorKind::AuthRejected, &self.name, m)
                })?;
            }
        }
        Ok(())
    }

    /// The credential headers for `req`, sent now (the exchange's; not part of the API).
    #[doc(hidden)]
    pub fn auth_headers(
        &self,
        req: &Signable<'_>,
    ) -> Result<Cow<'_, [(HeaderName, HeaderValue)]>, String> {
        match &self.auth {
            Auth::Headers(h) => Ok(Cow::Borrowed(h)),
            Auth::Signed(signer) => signer.sign(req).map(Cow::Owned),
            Auth::Missing | Auth::None => Ok(Cow::Borrowed(&[])),
        }
    }

    /// Classify a non-2xx answer, with the `Retry-After` the provider sent.
    pub fn error_response(&self, status: u16, headers: &HeaderMap, body: &[u8]) -> UpstreamError {
        let mut err = (self.errors)(self, status, body);
        err.retry_after = parse_retry_after(headers);
        err
    }

    /// Whether an answer's result URL on `host` may be downloaded: the provider's own hosts and
    /// the configured `result_hosts` (exact, or `*.suffix`).
    pub fn result_host_allowed(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let own = self
            .default_endpoint
            .iter()
            .chain(self.region_endpoints.values())
            .any(|e| e.host.eq_ignore_ascii_case(&host));
        own || self.result_hosts.iter().any(|pattern| {
            let pattern = pattern.to_ascii_lowercase();
            match pattern.strip_prefix("*.") {
                Some(suffix) => {
                    host.len() > suffix.len() + 1
                        && host.ends_with(suffix)
                        && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
                }
                None => host == pattern,
            }
        })
    }

    /// The endpoint for the entry point's region, or the default one.
    #[doc(hidden)]
    pub fn endpoint(&self, region: &str) -> Option<&Endpoint> {
        self.region_endpoints
            .get(region)
            .or(self.default_endpoint.as_ref())
    }

    /// The regions with an endpoint of their own (`region_base_urls`), sorted.
    pub fn regions(&self) -> Vec<&str> {
        let mut regions: Vec<&str> = self.region_endpoints.keys().map(String::as_str).collect();
        regions.sort_unstable();
        regions
    }

    /// Remove the provider key from text that came from the provider before it reaches a caller.
    pub fn redact(&self, text: &str) -> String {
        let mut s = if self.key.len() >= 4 && text.contains(&self.key) {
            text.replace(&self.key, "[redacted]")
        } else {
            text.to_string()
        };
        // Providers sometimes quote a partial key ("sk-abc***xyz"); drop anything key-shaped.
        // A word counts when it starts with `sk-` once quotes and brackets are stripped, so prose
        // such as "risk-free" survives.
        let key_shaped = |w: &str| {
            w.trim_start_matches(|c: char| !c.is_alphanumeric())
                .starts_with("sk-")
        };
        if s.split(' ').any(key_shaped) {
            s = s
                .split(' ')
                .map(|w| if key_shaped(w) { "[redacted]" } else { w })
                .collect::<Vec<_>>()
                .join(" ");
        }
        const MAX: usize = 500;
        if s.len() > MAX {
            let mut cut = MAX;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            s.truncate(cut);
            s.push('…');
        }
        s
    }
}

/// A provider answer the gateway cannot read. The message is redacted: it often quotes the answer
/// (a JSON parser's error names the string it found), and an answer may quote the key back.
pub fn bad_answer(provider: &Provider, message: impl Into<String>) -> UpstreamError {
    UpstreamError::new(
        UpstreamErrorKind::BadResponse,
        &provider.name,
        provider.redact(&message.into()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(key: &str) -> Provider {
        let account = Account {
            name: "p".into(),
            kind: "openai".into(),
            key: key.into(),
            default_endpoint: None,
            region_endpoints: HashMap::new(),
            max_response_bytes: 1 << 20,
            result_hosts: Vec::new(),
        };
        Provider::new(account, 0, Auth::None, |p, status, _| {
            UpstreamError::from_status(&p.name, status, "test")
        })
    }

    #[test]
    fn redaction_removes_keys_but_not_prose() {
        let p = provider("sk-live-abcdef123");
        assert_eq!(
            p.redact("Incorrect API key provided: 'sk-live-abcdef123' is risk-free"),
            "Incorrect API key provided: '[redacted]' is risk-free"
        );
        assert_eq!(
            p.redact("key \"sk-proj-xx***yy\" revoked"),
            "key [redacted] revoked"
        );
        assert_eq!(p.redact(&"x".repeat(600)).chars().count(), 501);
    }

    /// Found by `fuzz/` (provider_answers): a DashScope task answer that was a JSON string
    /// holding the key reached the caller inside the parser's error message.
    #[test]
    fn a_bad_answer_never_quotes_the_key() {
        let p = provider("key-0123456789");
        let e = serde_json::from_str::<Vec<u8>>(r#""your key-0123456789 is wrong""#).unwrap_err();
        let err = bad_answer(&p, format!("answer is not the expected JSON: {e}"));
        assert!(!err.message.contains("key-0123456789"), "{}", err.message);
        assert!(err.message.contains("[redacted]"), "{}", err.message);
    }

    #[test]
    fn auth_headers_are_sensitive_and_a_missing_key_disables() {
        let Ok(Auth::Headers(h)) = Auth::bearer("k") else {
            panic!("bearer auth is a header")
        };
        assert!(h[0].1.is_sensitive());
        assert_eq!(h[0].1, "Bearer k");
        let mut p = provider("");
        assert!(p.enabled());
        p.auth = Auth::Missing;
        assert!(!p.enabled());
    }
}
