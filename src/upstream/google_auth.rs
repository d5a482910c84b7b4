//! Google service-account credentials, done once for every Google Cloud provider kind (Vertex AI
//! and whichever comes next): the account's JSON key, an OAuth 2.0 access token minted from it,
//! and that token kept fresh off the request path.
//!
//! The flow is Google's "server to server" one: a JWT whose claims name the service account
//! (`iss`), the scope asked for (`scope`), the token endpoint (`aud`) and an hour of validity
//! (`iat`, `exp`), signed RS256 with the account's private key, is posted as a form
//! (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>`) to the token
//! endpoint, which answers `{"access_token", "expires_in", "token_type": "Bearer"}`.
//!
//! [`TokenSource`] is the account's [`Signer`]. Requests never mint: they read the current token.
//! One background task per account (started by the first request, so an account nobody uses
//! never calls Google) mints the first token, then mints the next one before the current one
//! expires ([`refresh_delay`]), and retries a failed mint with back-off. Only the very first
//! request waits, for the first token ([`Signer::ready`]), and for at most [`FIRST_TOKEN_WAIT`].
//! The task holds the source weakly: when a reload drops the account, the task ends.
//!
//! The private key never leaves this module: it is parsed once into a signing key, registered
//! with the log filter (`logging::redact_also`), and no error message quotes it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderName, HeaderValue};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::endpoint::{Endpoint, Timeouts};
use super::exchange::Upstream;
use super::health::EjectionPolicy;
use super::provider::{Account, Auth, Provider, Ready, Signable, Signer};
use super::retry::RetryPolicy;
use crate::common::error::UpstreamError;
use crate::common::native::NativeRequest;
use crate::metrics::Metrics;

/// Google's OAuth 2.0 token endpoint (the JWT's `aud` too).
pub(crate) const DEFAULT_TOKEN_URL: &str = "https://oauth2.googleapis.com/token";
/// The scope Vertex AI and the other Cloud APIs accept.
pub(crate) const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// The grant type of a signed JWT assertion, form-encoded.
const GRANT_TYPE: &str = "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer";
/// Validity asked for in the assertion (Google's maximum: one hour).
const ASSERTION_LIFETIME: u64 = 3600;
/// A token is replaced this long before it expires (or halfway through a shorter life).
const REFRESH_BEFORE: u64 = 300;
/// How long the first request waits for the first token before failing its attempt.
pub(crate) const FIRST_TOKEN_WAIT: Duration = Duration::from_secs(10);
/// Back-off after a failed mint: doubling from the first value up to the second.
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MOST: Duration = Duration::from_secs(60);
/// Largest token answer read.
const MAX_ANSWER: usize = 64 * 1024;

/// The fields of a service-account key file the flow uses.
#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    client_email: String,
    #[serde(default)]
    private_key: String,
    #[serde(default)]
    private_key_id: Option<String>,
    #[serde(default)]
    project_id: Option<String>,
}

/// A parsed service-account key: who it is and the key it signs with.
pub(crate) struct ServiceAccount {
    email: String,
    key_id: Option<String>,
    key: EncodingKey,
    /// The project the key belongs to (the default project of the calls).
    pub(crate) project_id: Option<String>,
}

impl ServiceAccount {
    /// Read a key file's JSON. Errors name what is wrong, never a value: the text is a secret.
    pub(crate) fn from_json(json: &str) -> Result<ServiceAccount, String> {
        let file: KeyFile = serde_json::from_str(json).map_err(|e| {
            format!(
                "not a Google service-account key (JSON error at line {}, column {})",
                e.line(),
                e.column()
            )
        })?;
        if file.kind != "service_account" {
            return Err("not a Google service-account key: `type` is not `service_account`".into());
        }
        if file.client_email.is_empty() || file.private_key.is_empty() {
            return Err(
                "the service-account key lacks `client_email` or `private_key`".to_string(),
            );
        }
        // The key in full and each line of its base64 body: a log line may hold either.
        crate::logging::redact_also(&file.private_key);
        for line in file.private_key.lines() {
            crate::logging::redact_also(line);
        }
        let key = EncodingKey::from_rsa_pem(file.private_key.as_bytes()).map_err(|_| {
            "the service-account key's `private_key` is not an RSA private key in PEM".to_string()
        })?;
        Ok(ServiceAccount {
            email: file.client_email,
            key_id: file.private_key_id,
            key,
            project_id: file.project_id.filter(|p| !p.is_empty()),
        })
    }

    /// The signed JWT assertion for `audience` (the token endpoint) at Unix time `now`.
    pub(crate) fn assertion(&self, audience: &str, now: u64) -> Result<String, String> {
        #[derive(Serialize)]
        struct Claims<'a> {
            iss: &'a str,
            scope: &'a str,
            aud: &'a str,
            iat: u64,
            exp: u64,
        }
        let mut header = Header::new(Algorithm::RS256);
        header.kid = self.key_id.clone();
        let claims = Claims {
            iss: &self.email,
            scope: CLOUD_PLATFORM_SCOPE,
            aud: audience,
            iat: now,
            exp: now + ASSERTION_LIFETIME,
        };
        jsonwebtoken::encode(&header, &claims, &self.key)
            .map_err(|e| format!("signing the service-account assertion: {e}"))
    }
}

/// What requests read: the current token, and how many mints have failed (a request waiting for
/// the first token stops waiting at a failure).
#[derive(Default)]
struct State {
    token: Option<Arc<Token>>,
    failures: u64,
}

/// A minted access token: the `Authorization` value and when it stops working (Unix seconds).
struct Token {
    value: HeaderValue,
    expires_at: u64,
}

/// The token endpoint's answer.
#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

/// Google's OAuth error answer (`{"error": "invalid_grant", "error_description": "…"}`).
#[derive(Deserialize)]
struct TokenError {
    #[serde(default)]
    error: String,
    #[serde(default)]
    error_description: String,
}

/// One account's access tokens: the [`Signer`] of a Google Cloud provider kind.
pub(crate) struct TokenSource {
    inner: Arc<Inner>,
}

struct Inner {
    service: ServiceAccount,
    /// The token endpoint's URL (the assertion's `aud`).
    token_url: String,
    /// The token endpoint as the exchange reaches it, and the client that does.
    endpoint: Provider,
    upstream: Upstream,
    current: watch::Sender<State>,
    started: AtomicBool,
    /// Why the last mint failed, for the error of a request that finds no token.
    last_error: Mutex<Option<String>>,
}

impl TokenSource {
    /// A source for `service`'s tokens from `token_url`.
    pub(crate) fn new(service: ServiceAccount, token_url: &str) -> Result<TokenSource, String> {
        let timeouts = Timeouts {
            connect: Duration::from_secs(5),
            total_connect: Duration::from_secs(10),
            read: Duration::from_secs(10),
            write: Duration::from_secs(10),
            idle: Duration::from_secs(60),
        };
        let ep = Endpoint::parse(token_url, timeouts).map_err(|m| format!("token_url: {m}"))?;
        let endpoint = Provider::new(
            Account {
                name: format!("google token endpoint for {}", service.email),
                kind: "google-oauth".into(),
                key: String::new(),
                default_endpoint: Some(ep),
                region_endpoints: Default::default(),
                max_response_bytes: MAX_ANSWER,
                result_hosts: Vec::new(),
            },
            0,
            Auth::None,
            |p, status, _| UpstreamError::from_status(&p.name, status, "token endpoint"),
        );
        // The token client's own connections: one token an hour needs no retry policy of the
        // gateway's (a failed mint is retried by the refresh loop).
        let retry = RetryPolicy {
            max_retries: 0,
            initial_backoff: RETRY_FIRST,
            max_backoff: RETRY_MOST,
            max_retry_after: RETRY_MOST,
        };
        let upstream = Upstream::new(
            retry,
            Duration::from_secs(60),
            EjectionPolicy::default(),
            Metrics::off(),
        );
        Ok(TokenSource {
            inner: Arc::new(Inner {
                service,
                token_url: token_url.to_string(),
                endpoint,
                upstream,
                current: watch::Sender::new(State::default()),
                started: AtomicBool::new(false),
                last_error: Mutex::new(None),
            }),
        })
    }

    /// Start the refresh task if it is not running (needs a tokio runtime: the request's).
    fn start(&self) {
        // Every request passes here: a plain load keeps the common case a shared read.
        if self.inner.started.load(Ordering::Acquire)
            || self.inner.started.swap(true, Ordering::AcqRel)
        {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(refresh(Arc::downgrade(&self.inner)));
            }
            Err(_) => self.inner.started.store(false, Ordering::Release),
        }
    }

    /// The current token, if it has not expired.
    fn valid_token(&self) -> Option<HeaderValue> {
        let now = unix_now();
        self.inner
            .current
            .borrow()
            .token
            .as_ref()
            .filter(|t| t.expires_at > now)
            .map(|t| t.value.clone())
    }
}

impl TokenSource {
    /// The `Authorization` value with the current token (an `Err` says why there is none).
    fn authorization(&self) -> Result<HeaderValue, String> {
        self.start();
        self.valid_token().ok_or_else(|| {
            let last = self
                .inner
                .last_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            match last {
                Some(why) => format!("no Google access token: {why}"),
                None => "no Google access token yet".to_string(),
            }
        })
    }
}

impl Signer for TokenSource {
    fn sign(&self, _req: &Signable<'_>) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
        Ok(vec![(http::header::AUTHORIZATION, self.authorization()?)])
    }

    fn ready(&self) -> Option<Ready<'_>> {
        if self.valid_token().is_some() {
            return None;
        }
        self.start();
        let mut rx = self.inner.current.subscribe();
        let failed_before = rx.borrow().failures;
        Some(Box::pin(async move {
            let settled = |s: &State| {
                s.failures > failed_before
                    || s.token.as_ref().is_some_and(|t| t.expires_at > unix_now())
            };
            // A timeout or a failed mint: the attempt fails with the mint's error.
            let _ = tokio::time::timeout(FIRST_TOKEN_WAIT, rx.wait_for(settled)).await;
            self.authorization().map(|_| ())
        }))
    }
}

/// The refresh loop: mint, publish, sleep until the next refresh is due; on failure retry with
/// back-off. Ends when the source is dropped.
async fn refresh(source: Weak<Inner>) {
    let mut backoff = RETRY_FIRST;
    loop {
        let Some(inner) = source.upgrade() else {
            return;
        };
        let wait = match inner.mint().await {
            Ok(token) => {
                backoff = RETRY_FIRST;
                let wait = refresh_delay(unix_now(), token.expires_at);
                *inner
                    .last_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = None;
                inner
                    .current
                    .send_modify(|s| s.token = Some(Arc::new(token)));
                wait
            }
            Err(why) => {
                log::warn!(
                    "service account {}: minting a Google access token failed: {why}",
                    inner.service.email
                );
                *inner
                    .last_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(why);
                inner.current.send_modify(|s| s.failures += 1);
                let wait = backoff;
                backoff = (backoff * 2).min(RETRY_MOST);
                wait
            }
        };
        drop(inner);
        tokio::time::sleep(wait).await;
    }
}

/// How long after minting (at `now`) a token expiring at `expires_at` is replaced: when
/// [`REFRESH_BEFORE`] of its life is left, or halfway through a life shorter than twice that.
pub(crate) fn refresh_delay(now: u64, expires_at: u64) -> Duration {
    let life = expires_at.saturating_sub(now);
    let early = REFRESH_BEFORE.min(life / 2);
    Duration::from_secs(life - early).max(Duration::from_millis(500))
}

impl Inner {
    /// One token from the endpoint.
    async fn mint(&self) -> Result<Token, String> {
        let now = unix_now();
        let assertion = self.service.assertion(&self.token_url, now)?;
        let mut body = String::with_capacity(64 + assertion.len());
        body.push_str("grant_type=");
        body.push_str(GRANT_TYPE);
        body.push_str("&assertion=");
        // A JWT is base64url and dots: nothing to escape in a form.
        body.push_str(&assertion);
        let mut req = NativeRequest::post_json(String::new(), body.into_bytes());
        req.content_type = "application/x-www-form-urlencoded".into();
        let resp = self
            .upstream
            .send(&self.endpoint, "", &req)
            .await
            .map_err(|e| e.message)?;
        let status = resp.status;
        let bytes = resp.read_all(MAX_ANSWER).await.map_err(|e| e.message)?;
        if !(200..300).contains(&status) {
            let why = serde_json::from_slice::<TokenError>(&bytes)
                .map(|e| format!("{} {}", e.error, e.error_description))
                .unwrap_or_default();
            return Err(format!(
                "token endpoint answered HTTP {status} {}",
                why.trim()
            ));
        }
        let answer: TokenAnswer = serde_json::from_slice(&bytes)
            .map_err(|_| "token endpoint's answer is not a token".to_string())?;
        let mut value = HeaderValue::from_str(&format!("Bearer {}", answer.access_token))
            .map_err(|_| "token endpoint's token is not a valid header value".to_string())?;
        value.set_sensitive(true);
        crate::logging::redact_also(&answer.access_token);
        Ok(Token {
            value,
            expires_at: unix_now() + answer.expires_in.unwrap_or(ASSERTION_LIFETIME),
        })
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{DecodingKey, Validation};

    const KEY_FILE: &str =
        include_str!("../../tests/fixtures/google/service-account-TEST-ONLY.json");
    const PUBLIC: &str =
        include_str!("../../tests/fixtures/google/service-account-TEST-ONLY.pub.pem");

    #[derive(Deserialize)]
    struct Claims {
        iss: String,
        scope: String,
        aud: String,
        iat: u64,
        exp: u64,
    }

    #[test]
    fn the_assertion_is_signed_rs256_with_googles_claims() {
        let sa = ServiceAccount::from_json(KEY_FILE).unwrap();
        assert_eq!(sa.project_id.as_deref(), Some("switchyard-test"));
        let jwt = sa.assertion(DEFAULT_TOKEN_URL, 1_800_000_000).unwrap();
        let key = DecodingKey::from_rsa_pem(PUBLIC.as_bytes()).unwrap();
        let mut v = Validation::new(Algorithm::RS256);
        v.set_audience(&[DEFAULT_TOKEN_URL]);
        v.validate_exp = false;
        let data = jsonwebtoken::decode::<Claims>(&jwt, &key, &v).unwrap();
        assert_eq!(data.header.kid.as_deref(), Some("test-key-id-0001"));
        let c = data.claims;
        assert_eq!(
            c.iss,
            "switchyard-test@switchyard-test.iam.gserviceaccount.com"
        );
        assert_eq!(c.scope, CLOUD_PLATFORM_SCOPE);
        assert_eq!(c.aud, DEFAULT_TOKEN_URL);
        assert_eq!((c.iat, c.exp), (1_800_000_000, 1_800_003_600));
    }

    #[test]
    fn a_bad_key_file_is_refused_without_quoting_it() {
        let secretish = r#"{"type": "service_account", "client_email": "a@b", "private_key": "SECRET-NOT-PEM-123456"}"#;
        let e = ServiceAccount::from_json(secretish).err().unwrap();
        assert!(!e.contains("SECRET"), "{e}");
        assert!(e.contains("not an RSA private key"), "{e}");
        let e = ServiceAccount::from_json("{\"type\": \"authorized_user\"}")
            .err()
            .unwrap();
        assert!(e.contains("service_account"), "{e}");
        let e = ServiceAccount::from_json("SECRET-garbage").err().unwrap();
        assert!(!e.contains("SECRET"), "{e}");
    }

    #[test]
    fn tokens_are_replaced_before_they_expire() {
        assert_eq!(refresh_delay(0, 3600), Duration::from_secs(3300));
        assert_eq!(refresh_delay(0, 4), Duration::from_secs(2));
        assert_eq!(refresh_delay(10, 10), Duration::from_millis(500));
    }
}
