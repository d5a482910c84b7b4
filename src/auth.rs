//! Client authentication for the gateway: decides who made a request from its
//! headers, using either static API keys or signed JWTs (HS256, RS256, ES256).
//!
//! The gateway builds one [`Authenticator`] from the `auth:` config section at
//! start-up ([`Authenticator::from_settings`]) and calls
//! [`Authenticator::authenticate`] for every request. Credentials are read from
//! `Service-API-Key: <key>`, `Authorization: Bearer <key or JWT>` or a bare
//! `Authorization: <key>`.
//!
//! Secrets never leave this module: API keys are kept only as SHA-256 digests,
//! and neither keys nor tokens appear in logs or error messages.

pub(crate) mod db_keys;
pub(crate) mod limits;

use std::fmt;
use std::sync::Arc;

use http::header::{HeaderName, AUTHORIZATION};
use http::HeaderMap;
use jsonwebtoken::errors::{Error as JwtError, ErrorKind as JwtErrorKind};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};

use db_keys::{DbKeyHandle, TenantScope};
use limits::{Approximate, JwtLimits, JwtLimitsSetting, LimitSet, LimitsMode, OnStoreError};

/// The scope (in a JWT's space-separated `scope` claim) that makes a token an administrator's:
/// the management API requires it, the public API refuses it.
pub(crate) const ADMIN_SCOPE: &str = "switchyard:admin";

/// The dedicated API-key header. `HeaderName`s are lowercase; lookups through
/// `HeaderMap` are case-insensitive for callers.
const SERVICE_API_KEY: HeaderName = HeaderName::from_static("service-api-key");

/// Clock skew beyond this is a broken clock, not skew; it also keeps
/// `now - leeway` inside jsonwebtoken far away from underflow.
const MAX_LEEWAY_SECONDS: u64 = 3600;

/// RFC 7518 §3.2: an HS256 key should be at least as long as the hash output.
const MIN_HS256_SECRET_BYTES: usize = 32;

/// The `auth:` section of the YAML config (already env-interpolated by the caller).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    /// `api_keys:` — the API keys that may call, each with its name and optional limits.
    #[serde(default)]
    pub api_keys: Vec<ApiKeySetting>,
    /// `jwt:` — how bearer JWTs are verified, and their per-subject limits (absent: none accepted).
    #[serde(default)]
    pub jwt: Option<JwtSettings>,
    /// What a request of a caller with limits gets when the shared store (Redis)
    /// cannot count it: `open` (allowed, counted in `switchyard_store_errors_total`)
    /// or `closed` (`503 store_unavailable`).
    #[serde(default)]
    pub limits_on_store_error: OnStoreError,
    /// `exact` (default: each admission decided in Redis, one round trip on the request's path)
    /// or `approximate` (decided from this instance's counts, reconciled with Redis in the
    /// background; the overshoot bound is in docs/guide/limits.md). Read at start.
    #[serde(default)]
    pub limits_mode: LimitsMode,
    /// Approximate mode: how often each instance reconciles with Redis, in milliseconds
    /// (1 to 60000; default 50). Like Kong's `sync_rate`, in milliseconds.
    #[serde(default = "default_sync_ms")]
    pub limits_sync_ms: u64,
    /// Approximate mode: what one instance may admit of each limit between two reconciliations,
    /// in percent of the limit (1 to 100; default 10). N instances overshoot a limit by at most
    /// N times this share.
    #[serde(default = "default_share_percent")]
    pub limits_local_share_percent: u64,
}

fn default_sync_ms() -> u64 {
    50
}

fn default_share_percent() -> u64 {
    10
}

/// The approximate mode's settings when `limits_mode` asks for it, checked (problems pushed).
fn approximate(s: &AuthSettings, errors: &mut Vec<String>) -> Option<Approximate> {
    if s.limits_mode != LimitsMode::Approximate {
        return None;
    }
    if !(1..=60_000).contains(&s.limits_sync_ms) {
        errors.push("auth.limits_sync_ms: must be from 1 to 60000 (milliseconds)".into());
    }
    if !(1..=100).contains(&s.limits_local_share_percent) {
        errors.push("auth.limits_local_share_percent: must be from 1 to 100".into());
    }
    Some(Approximate {
        sync: std::time::Duration::from_millis(s.limits_sync_ms),
        share_percent: s.limits_local_share_percent,
    })
}

/// One API key entry. Exactly one of `key` or `sha256` must be given.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeySetting {
    /// Identifies the caller: becomes `Principal.id` `"key:<name>"`. Several
    /// entries may share a name, e.g. while rotating a caller's key.
    pub name: String,
    /// The plain key, normally from `${ENV}`. An empty string disables the
    /// entry (skipped, logged at warn), so an unset variable locks nobody in.
    #[serde(default)]
    pub key: Option<String>,
    /// Hex SHA-256 of the key (see [`sha256_hex`]), instead of `key`. Empty
    /// disables the entry, like an empty `key`.
    #[serde(default)]
    pub sha256: Option<String>,
    /// What this caller may use. Entries sharing a name share one budget, so
    /// they must carry the same limits.
    #[serde(default)]
    pub limits: Option<LimitSet>,
}

/// JWT verification settings. Each key that is set enables its algorithm;
/// an empty string counts as not set.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtSettings {
    /// Shared secret for HS256.
    #[serde(default)]
    pub hs256_secret: Option<String>,
    /// Path of a PEM RSA public key for RS256.
    #[serde(default)]
    pub rs256_public_key_file: Option<String>,
    /// Path of a PEM P-256 public key for ES256.
    #[serde(default)]
    pub es256_public_key_file: Option<String>,
    /// When set, tokens must carry this `iss`.
    #[serde(default)]
    pub issuer: Option<String>,
    /// When set, tokens must carry this `aud`; when not set, `aud` is ignored.
    #[serde(default)]
    pub audience: Option<String>,
    /// Allowed clock skew for `exp` and `nbf`, at most 3600.
    #[serde(default = "default_leeway")]
    pub leeway_seconds: u64,
    /// Each subject's limits, chosen by a claim.
    #[serde(default)]
    pub limits: Option<JwtLimitsSetting>,
}

fn default_leeway() -> u64 {
    30
}

/// Who made the request. `id` is stable per caller: `"key:<name>"` for API
/// keys, `"jwt:<sub>"` for tokens; it also names the caller's budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub id: String,
    /// The caller's limits (`None`: none, and nothing is counted).
    pub limits: Option<Arc<LimitSet>>,
    /// A database key's tenant: its limits are counted under `tenant:<name>` beside the key's
    /// own, and its allowed models apply (`None`: a YAML key or a token, no tenant).
    pub(crate) tenant: Option<Arc<TenantScope>>,
    /// The models a database key may use (`None`: every model).
    pub(crate) allowed_models: Option<Arc<[String]>>,
}

impl Principal {
    /// A caller with `id` and `limits`, of no tenant.
    fn plain(id: String, limits: Option<Arc<LimitSet>>) -> Principal {
        Principal {
            id,
            limits,
            tenant: None,
            allowed_models: None,
        }
    }

    /// Whether this caller may use the public model `model`: within its key's and its tenant's
    /// allowed models (a YAML key or a token may use every model).
    pub(crate) fn may_use(&self, model: &str) -> bool {
        db_keys::allows(self.allowed_models.as_deref(), model)
            && self
                .tenant
                .as_ref()
                .is_none_or(|t| db_keys::allows(t.allowed_models.as_deref(), model))
    }

    /// The tenant's name, for a database key.
    #[cfg_attr(not(feature = "ledger"), allow(dead_code))]
    pub(crate) fn tenant_name(&self) -> Option<&str> {
        self.tenant.as_ref().map(|t| t.name.as_str())
    }
}

/// Why a request was not authenticated. Messages are safe to send to clients:
/// they never contain the presented key or token.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    #[error("missing credentials: send Service-API-Key, or Authorization: Bearer <token>")]
    Missing,
    #[error("invalid API key")]
    InvalidKey,
    /// The reason, e.g. "expired", "bad signature", "algorithm not allowed".
    #[error("invalid token: {0}")]
    InvalidToken(String),
}

/// Hex SHA-256 of a key: the form accepted by `auth.api_keys[].sha256`.
pub fn sha256_hex(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

#[derive(Clone)]
struct KeyEntry {
    name: String,
    digest: [u8; 32],
    limits: Option<Arc<LimitSet>>,
}

/// One enabled JWT algorithm with its own key and a `Validation` that allows
/// only that algorithm, so a key can never be used under another algorithm.
#[derive(Clone)]
struct JwtMethod {
    alg: Algorithm,
    key: DecodingKey,
    validation: Validation,
}

/// Checks request credentials against the configured API keys and JWT keys.
/// Built once at start; cheap to share (`Arc`) across requests.
#[derive(Clone)]
pub struct Authenticator {
    keys: Vec<KeyEntry>,
    jwt: Vec<JwtMethod>,
    /// Subjects' limits by claim (`None`: subjects have none).
    jwt_limits: Option<JwtLimits>,
    on_store_error: OnStoreError,
    /// `auth.limits_mode: approximate`, with its settings (`None`: exact).
    approximate: Option<Approximate>,
    /// The database keys' snapshot, consulted after the YAML keys (`None`: no `tenants:`).
    db: Option<DbKeyHandle>,
    /// What a token with the admin scope gets: refused (the public API) or required (the
    /// management API's authenticator, [`Authenticator::for_admin`]).
    admin_scope: AdminScope,
}

/// What an [`Authenticator`] makes of a JWT carrying [`ADMIN_SCOPE`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum AdminScope {
    /// The public API: such a token is not a caller's.
    Refused,
    /// The management API: only such a token is accepted.
    Required,
}

impl fmt::Debug for Authenticator {
    // Hand-written so that key digests never end up in debug logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.keys.iter().map(|k| k.name.as_str()).collect();
        let algs: Vec<Algorithm> = self.jwt.iter().map(|m| m.alg).collect();
        f.debug_struct("Authenticator")
            .field("api_keys", &names)
            .field("jwt_algorithms", &algs)
            .finish()
    }
}

impl Authenticator {
    /// Build once at start. Returns every problem found, not just the first,
    /// each a message naming the key path, e.g.
    /// `auth.api_keys[1]: set exactly one of key or sha256`.
    pub fn from_settings(s: &AuthSettings) -> Result<Authenticator, Vec<String>> {
        let mut errors = Vec::new();
        let keys = load_api_keys(&s.api_keys, &mut errors);
        let jwt = match &s.jwt {
            Some(j) => load_jwt(j, &mut errors),
            None => Vec::new(),
        };
        let jwt_limits = s
            .jwt
            .as_ref()
            .and_then(|j| j.limits.as_ref())
            .map(|l| JwtLimits::from_setting(l, &mut errors));
        let approximate = approximate(s, &mut errors);
        if errors.is_empty() {
            Ok(Authenticator {
                keys,
                jwt,
                jwt_limits,
                on_store_error: s.limits_on_store_error,
                approximate,
                db: None,
                admin_scope: AdminScope::Refused,
            })
        } else {
            Err(errors)
        }
    }

    /// The management API's authenticator: `keys` are the administrators' (`admin.keys`), and a
    /// JWT verified by `jwt` must carry the `switchyard:admin` scope. Problems are reported under
    /// `admin.` paths.
    pub(crate) fn for_admin(
        keys: &[ApiKeySetting],
        jwt: Option<&JwtSettings>,
    ) -> Result<Authenticator, Vec<String>> {
        let settings = AuthSettings {
            api_keys: keys.to_vec(),
            jwt: jwt.cloned(),
            ..AuthSettings::default()
        };
        let rename = |p: String| match p.strip_prefix("auth.api_keys") {
            Some(rest) => format!("admin.keys{rest}"),
            None => p.replacen("auth.", "admin.", 1),
        };
        let mut a = Authenticator::from_settings(&settings)
            .map_err(|errors| errors.into_iter().map(rename).collect::<Vec<_>>())?;
        a.admin_scope = AdminScope::Required;
        Ok(a)
    }

    /// Consult `db`'s snapshot of database keys after the YAML keys (a gateway with `tenants:`;
    /// every settings snapshot of one gateway gets the same handle).
    pub(crate) fn attach_db(&mut self, db: DbKeyHandle) {
        self.db = Some(db);
    }

    /// The principals of the YAML keys (`key:<name>`): a database key whose principal is one of
    /// them is left out of the snapshot (the YAML key wins, with a warning).
    #[cfg_attr(not(feature = "ledger"), allow(dead_code))]
    pub(crate) fn key_principals(&self) -> std::collections::HashSet<String> {
        self.keys
            .iter()
            .map(|k| format!("key:{}", k.name))
            .collect()
    }

    /// Authenticate a request from its headers.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, AuthError> {
        match extract_credential(headers)? {
            Credential::Key(key) => self.match_any_key(key).ok_or(AuthError::InvalidKey),
            Credential::Bearer(cred) => {
                // Opaque keys are commonly sent as Bearer too, so try them first.
                if let Some(p) = self.match_any_key(cred) {
                    return Ok(p);
                }
                if !self.jwt.is_empty() && looks_like_jwt(cred) {
                    self.verify_jwt(cred)
                } else {
                    Err(AuthError::InvalidKey)
                }
            }
        }
    }

    /// What to do when limits cannot be counted (`auth.limits_on_store_error`).
    pub fn on_store_error(&self) -> OnStoreError {
        self.on_store_error
    }

    /// `auth.limits_mode: approximate` and its settings; `None` in the exact mode.
    pub(crate) fn approximate(&self) -> Option<Approximate> {
        self.approximate
    }

    /// True when no API key and no JWT method is configured (and no database keys).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.jwt.is_empty() && self.db.is_none()
    }

    /// A YAML key, else a database key of the snapshot in force.
    fn match_any_key(&self, presented: &[u8]) -> Option<Principal> {
        if let Some(p) = self.match_key(presented) {
            return Some(p);
        }
        let db = self.db.as_ref()?;
        let snapshot = db.load();
        let key = snapshot.find(&digest(presented), std::time::SystemTime::now())?;
        Some(Principal {
            id: key.principal.clone(),
            limits: key.limits.clone(),
            tenant: Some(key.tenant.clone()),
            allowed_models: key.allowed_models.clone(),
        })
    }

    /// Compares the presented key's digest with every configured digest, with
    /// no early exit and no data-dependent branch, so response timing reveals
    /// neither whether nor which key matched. Comparing fixed-size digests
    /// rather than keys also hides the configured keys' lengths.
    fn match_key(&self, presented: &[u8]) -> Option<Principal> {
        let presented = digest(presented);
        let mut found = Choice::from(0);
        let mut index: u64 = 0;
        for (i, entry) in self.keys.iter().enumerate() {
            let eq = entry.digest[..].ct_eq(&presented[..]);
            index.conditional_assign(&(i as u64), eq);
            found |= eq;
        }
        if !bool::from(found) {
            return None;
        }
        let entry = usize::try_from(index).ok().and_then(|i| self.keys.get(i))?;
        Some(Principal::plain(
            format!("key:{}", entry.name),
            entry.limits.clone(),
        ))
    }

    fn verify_jwt(&self, token: &[u8]) -> Result<Principal, AuthError> {
        #[derive(Deserialize)]
        struct Claims {
            // A loose type so that a bad `sub` gets a clear reason below instead
            // of a JSON error; exp/nbf/iss/aud are checked by jsonwebtoken.
            #[serde(default)]
            sub: Option<serde_json::Value>,
            #[serde(default)]
            scope: Option<serde_json::Value>,
        }
        /// With limits by claim: every claim is kept, to read the one named.
        #[derive(Deserialize)]
        struct ClaimsWithRest {
            #[serde(default)]
            sub: Option<serde_json::Value>,
            #[serde(default)]
            scope: Option<serde_json::Value>,
            #[serde(flatten)]
            rest: serde_json::Map<String, serde_json::Value>,
        }

        let invalid = |reason: &str| AuthError::InvalidToken(reason.to_owned());
        // Pick the key strictly by the header's alg among the configured
        // methods (algorithm-confusion defence): e.g. an HS256 token is never
        // checked against RSA public key bytes used as an HMAC secret.
        let header = jsonwebtoken::decode_header(token).map_err(|e| invalid(header_reason(&e)))?;
        // RFC 7515 §4.1.11: extensions listed in `crit` must be understood, and
        // this verifier understands none.
        if header.crit.is_some() {
            return Err(invalid("unsupported critical header"));
        }
        let method = self
            .jwt
            .iter()
            .find(|m| m.alg == header.alg)
            .ok_or_else(|| invalid("algorithm not allowed"))?;
        let reason = |e: JwtError| AuthError::InvalidToken(token_reason(&e));
        // Only a gateway with limits by claim pays for keeping every claim.
        let (sub, scope, limits) = match &self.jwt_limits {
            None => {
                let data = jsonwebtoken::decode::<Claims>(token, &method.key, &method.validation)
                    .map_err(reason)?;
                (data.claims.sub, data.claims.scope, None)
            }
            Some(by_claim) => {
                let data =
                    jsonwebtoken::decode::<ClaimsWithRest>(token, &method.key, &method.validation)
                        .map_err(reason)?;
                let limits = by_claim.for_value(data.claims.rest.get(&by_claim.claim));
                (data.claims.sub, data.claims.scope, limits)
            }
        };
        let admin = has_admin_scope(scope.as_ref());
        match (self.admin_scope, admin) {
            (AdminScope::Refused, true) => {
                return Err(invalid("an administrator's token is not a caller's"))
            }
            (AdminScope::Required, false) => {
                return Err(invalid("missing scope `switchyard:admin`"))
            }
            _ => {}
        }
        match sub {
            Some(serde_json::Value::String(sub)) if !sub.is_empty() => {
                Ok(Principal::plain(format!("jwt:{sub}"), limits))
            }
            _ => Err(invalid("missing claim `sub`")),
        }
    }
}

/// Whether a `scope` claim (space-separated, as RFC 8693 §4.2 writes it; an array is read too)
/// names [`ADMIN_SCOPE`].
fn has_admin_scope(scope: Option<&serde_json::Value>) -> bool {
    match scope {
        Some(serde_json::Value::String(s)) => s.split_ascii_whitespace().any(|s| s == ADMIN_SCOPE),
        Some(serde_json::Value::Array(items)) => {
            items.iter().any(|v| v.as_str() == Some(ADMIN_SCOPE))
        }
        _ => false,
    }
}

enum Credential<'a> {
    /// From `Service-API-Key` or a bare `Authorization`: API key only.
    Key(&'a [u8]),
    /// From `Authorization: Bearer`: API key or JWT.
    Bearer(&'a [u8]),
}

fn extract_credential(headers: &HeaderMap) -> Result<Credential<'_>, AuthError> {
    // Bytes, not `to_str`: a non-ASCII value is simply an unknown key rather
    // than a different kind of error.
    if let Some(value) = headers.get(SERVICE_API_KEY) {
        let key = value.as_bytes().trim_ascii();
        return if key.is_empty() {
            Err(AuthError::Missing)
        } else {
            Ok(Credential::Key(key))
        };
    }
    let value = headers
        .get(AUTHORIZATION)
        .map(|v| v.as_bytes().trim_ascii())
        .unwrap_or_default();
    if value.is_empty() {
        return Err(AuthError::Missing);
    }
    let (scheme, rest) = match value.iter().position(|b| b.is_ascii_whitespace()) {
        Some(i) => {
            let (scheme, rest) = value.split_at(i);
            (scheme, rest.trim_ascii())
        }
        None => (value, &[][..]),
    };
    if scheme.eq_ignore_ascii_case(b"bearer") {
        if rest.is_empty() {
            Err(AuthError::Missing)
        } else {
            Ok(Credential::Bearer(rest))
        }
    } else {
        Ok(Credential::Key(value))
    }
}

/// Three base64url segments separated by dots. The signature may be empty so
/// that unsigned (`alg: none`) tokens reach the algorithm check and get a
/// clear reason instead of "invalid API key".
fn looks_like_jwt(cred: &[u8]) -> bool {
    let is_b64url = |seg: &[u8]| {
        seg.iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
    };
    let parts: Vec<&[u8]> = cred.split(|b| *b == b'.').collect();
    matches!(parts.as_slice(), [h, p, s] if !h.is_empty() && !p.is_empty() && is_b64url(h) && is_b64url(p) && is_b64url(s))
}

fn header_reason(e: &JwtError) -> &'static str {
    match e.kind() {
        // jsonwebtoken's `Algorithm` has no `none` variant (nor any other
        // unsupported one), so such headers fail to deserialize.
        JwtErrorKind::Json(err) if err.to_string().contains("unknown variant") => {
            "algorithm not allowed"
        }
        _ => "malformed token",
    }
}

/// Maps a jsonwebtoken error to a fixed reason. Never uses the error's own
/// text: JSON errors can quote parts of the token.
fn token_reason(e: &JwtError) -> String {
    let reason = match e.kind() {
        JwtErrorKind::ExpiredSignature => "expired",
        JwtErrorKind::ImmatureSignature => "not yet valid",
        JwtErrorKind::InvalidSignature => "bad signature",
        JwtErrorKind::InvalidIssuer => "wrong issuer",
        JwtErrorKind::InvalidAudience => "wrong audience",
        JwtErrorKind::InvalidAlgorithm => "algorithm not allowed",
        JwtErrorKind::MissingRequiredClaim(claim) => return format!("missing claim `{claim}`"),
        JwtErrorKind::InvalidClaimFormat(claim) => return format!("malformed claim `{claim}`"),
        kind @ (JwtErrorKind::InvalidRsaKey(_)
        | JwtErrorKind::InvalidEcdsaKey
        | JwtErrorKind::InvalidKeyFormat) => {
            // A server-side key problem that start-up checks did not catch.
            log::warn!("JWT verification key unusable: {kind:?}");
            "bad signature"
        }
        _ => "malformed token",
    };
    reason.to_owned()
}

fn load_api_keys(settings: &[ApiKeySetting], errors: &mut Vec<String>) -> Vec<KeyEntry> {
    // (config index, entry) so duplicates can name both entries.
    let mut keys: Vec<(usize, KeyEntry)> = Vec::new();
    // The first entry of each name and its limits: entries sharing a name share
    // one budget (and one `Arc`), so they must agree on it.
    let mut budgets: std::collections::HashMap<&str, (usize, Option<Arc<LimitSet>>)> =
        std::collections::HashMap::new();
    for (i, k) in settings.iter().enumerate() {
        let path = format!("auth.api_keys[{i}]");
        if k.name.trim().is_empty() {
            errors.push(format!("{path}.name: must not be empty"));
        }
        if let Some(set) = &k.limits {
            set.check(&format!("{path}.limits"), errors);
        }
        let own = k.limits.as_ref().and_then(limits::shared);
        let limits = match budgets.get(k.name.as_str()) {
            Some((first, shared)) => {
                if shared.as_deref() != own.as_deref() {
                    errors.push(format!(
                        "{path}.limits: entries named `{}` share one budget, so they must \
                         carry the same limits as auth.api_keys[{first}]",
                        k.name
                    ));
                }
                shared.clone()
            }
            None => {
                budgets.insert(k.name.as_str(), (i, own.clone()));
                own
            }
        };
        let digest = match (&k.key, &k.sha256) {
            (Some(_), Some(_)) | (None, None) => {
                errors.push(format!("{path}: set exactly one of `key` or `sha256`"));
                continue;
            }
            (Some(key), None) if key.is_empty() => {
                log::warn!("{path} ({}): `key` is empty; entry disabled", k.name);
                continue;
            }
            (None, Some(hash)) if hash.is_empty() => {
                log::warn!("{path} ({}): `sha256` is empty; entry disabled", k.name);
                continue;
            }
            (Some(key), None) => {
                // HTTP strips surrounding whitespace from header values, so such
                // a key could never match; usually a stray newline in a secret.
                if key.trim() != key {
                    errors.push(format!(
                        "{path}.key: has leading or trailing whitespace, so it can never match"
                    ));
                    continue;
                }
                digest(key.as_bytes())
            }
            (None, Some(hash)) => match parse_sha256_hex(hash) {
                Some(d) => d,
                None => {
                    errors.push(format!("{path}.sha256: not a 64-digit hex SHA-256"));
                    continue;
                }
            },
        };
        // Two entries with one key would make the caller's identity ambiguous.
        if let Some((j, _)) = keys.iter().find(|(_, e)| e.digest == digest) {
            errors.push(format!("{path}: same key as auth.api_keys[{j}]"));
            continue;
        }
        keys.push((
            i,
            KeyEntry {
                name: k.name.clone(),
                digest,
                limits,
            },
        ));
    }
    keys.into_iter().map(|(_, e)| e).collect()
}

fn parse_sha256_hex(s: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

fn load_jwt(s: &JwtSettings, errors: &mut Vec<String>) -> Vec<JwtMethod> {
    let set = |v: &Option<String>| v.as_deref().filter(|v| !v.is_empty()).map(str::to_owned);
    let mut keys: Vec<(Algorithm, DecodingKey)> = Vec::new();

    if let Some(secret) = set(&s.hs256_secret) {
        if secret.len() < MIN_HS256_SECRET_BYTES {
            log::warn!(
                "auth.jwt.hs256_secret: shorter than {MIN_HS256_SECRET_BYTES} bytes; \
                 tokens are easier to forge"
            );
        }
        keys.push((
            Algorithm::HS256,
            DecodingKey::from_secret(secret.as_bytes()),
        ));
    }
    if let Some(path) = set(&s.rs256_public_key_file) {
        let field = "auth.jwt.rs256_public_key_file";
        if let Some(pem) = read_public_pem(field, &path, errors) {
            match DecodingKey::from_rsa_pem(&pem) {
                Ok(key) => keys.push((Algorithm::RS256, key)),
                Err(e) => errors.push(format!(
                    "{field}: {path} is not an RSA public key in PEM form ({e})"
                )),
            }
        }
    }
    if let Some(path) = set(&s.es256_public_key_file) {
        let field = "auth.jwt.es256_public_key_file";
        if let Some(pem) = read_public_pem(field, &path, errors) {
            // `from_ec_pem` accepts any curve; a dummy verification makes the
            // P-256 check happen now rather than fail every token later.
            let key = DecodingKey::from_ec_pem(&pem)
                .ok()
                .filter(|key| jsonwebtoken::crypto::verify("", b"", key, Algorithm::ES256).is_ok());
            match key {
                Some(key) => keys.push((Algorithm::ES256, key)),
                None => errors.push(format!(
                    "{field}: {path} is not a P-256 (ES256) public key in PEM form"
                )),
            }
        }
    }

    if s.leeway_seconds > MAX_LEEWAY_SECONDS {
        errors.push(format!(
            "auth.jwt.leeway_seconds: must be at most {MAX_LEEWAY_SECONDS}"
        ));
    }
    if keys.is_empty() {
        // Like an empty API key: unset variables disable JWT, with a warning.
        log::warn!("auth.jwt: no hs256_secret or public key file set; JWT authentication disabled");
        return Vec::new();
    }
    // Empty issuer/audience would silently switch a check off (an unset
    // variable), so they are errors rather than "not configured".
    for (field, value) in [("issuer", &s.issuer), ("audience", &s.audience)] {
        if value.as_deref() == Some("") {
            errors.push(format!("auth.jwt.{field}: must not be empty"));
        }
    }

    keys.into_iter()
        .map(|(alg, key)| JwtMethod {
            alg,
            key,
            validation: validation_for(alg, s),
        })
        .collect()
}

/// Reads a PEM file meant to hold a public key; refuses private keys, which
/// the gateway does not need and should not hold.
fn read_public_pem(field: &str, path: &str, errors: &mut Vec<String>) -> Option<Vec<u8>> {
    match std::fs::read(path) {
        Ok(pem) if String::from_utf8_lossy(&pem).contains("PRIVATE KEY-----") => {
            errors.push(format!(
                "{field}: {path} holds a private key; give the public key"
            ));
            None
        }
        Ok(pem) => Some(pem),
        Err(e) => {
            errors.push(format!("{field}: cannot read {path}: {e}"));
            None
        }
    }
}

fn validation_for(alg: Algorithm, s: &JwtSettings) -> Validation {
    let mut v = Validation::new(alg);
    v.leeway = s.leeway_seconds;
    v.validate_exp = true;
    v.validate_nbf = true;
    let mut required = vec!["exp", "sub"];
    if let Some(iss) = &s.issuer {
        v.set_issuer(&[iss]);
        required.push("iss");
    }
    match &s.audience {
        Some(aud) => {
            v.set_audience(&[aud]);
            required.push("aud");
        }
        // jsonwebtoken otherwise rejects any token that carries an `aud`.
        None => v.validate_aud = false,
    }
    v.set_required_spec_claims(&required);
    v
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    const RSA_PRIVATE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/jwt/rsa_private.pem"
    );
    const RSA_PUBLIC: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/jwt/rsa_public.pem"
    );
    const EC_PRIVATE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/jwt/ec_private.pem"
    );
    const EC_PUBLIC: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/jwt/ec_public.pem"
    );

    const SECRET: &str = "an-hs256-test-secret-of-32-bytes!";

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        h
    }

    fn bearer(token: &str) -> HeaderMap {
        headers(&[("Authorization", &format!("Bearer {token}"))])
    }

    fn plain(name: &str, key: &str) -> ApiKeySetting {
        ApiKeySetting {
            name: name.into(),
            key: Some(key.into()),
            sha256: None,
            limits: None,
        }
    }

    fn hashed(name: &str, sha256: &str) -> ApiKeySetting {
        ApiKeySetting {
            name: name.into(),
            key: None,
            sha256: Some(sha256.into()),
            limits: None,
        }
    }

    fn jwt_settings() -> JwtSettings {
        JwtSettings {
            hs256_secret: None,
            rs256_public_key_file: None,
            es256_public_key_file: None,
            issuer: None,
            audience: None,
            leeway_seconds: 30,
            limits: None,
        }
    }

    fn hs256_settings() -> JwtSettings {
        JwtSettings {
            hs256_secret: Some(SECRET.into()),
            ..jwt_settings()
        }
    }

    fn build(api_keys: Vec<ApiKeySetting>, jwt: Option<JwtSettings>) -> Authenticator {
        Authenticator::from_settings(&AuthSettings {
            api_keys,
            jwt,
            limits_on_store_error: OnStoreError::Open,
            ..AuthSettings::default()
        })
        .unwrap()
    }

    fn keys_only() -> Authenticator {
        build(vec![plain("alice", "alice-key-123")], None)
    }

    fn jwt_only(j: JwtSettings) -> Authenticator {
        build(vec![], Some(j))
    }

    fn now() -> u64 {
        jsonwebtoken::get_current_timestamp()
    }

    fn sign(alg: Algorithm, key: &EncodingKey, claims: serde_json::Value) -> String {
        jsonwebtoken::encode(&Header::new(alg), &claims, key).unwrap()
    }

    fn hs256(claims: serde_json::Value) -> String {
        sign(
            Algorithm::HS256,
            &EncodingKey::from_secret(SECRET.as_bytes()),
            claims,
        )
    }

    fn read(path: &str) -> Vec<u8> {
        std::fs::read(path).unwrap()
    }

    fn invalid(reason: &str) -> Result<Principal, AuthError> {
        Err(AuthError::InvalidToken(reason.into()))
    }

    fn principal(id: &str) -> Result<Principal, AuthError> {
        Ok(Principal::plain(id.into(), None))
    }

    // --- API keys and header forms ---

    #[test]
    fn service_api_key_header() {
        let a = keys_only();
        for name in ["Service-API-Key", "service-api-key", "SERVICE-API-KEY"] {
            let got = a.authenticate(&headers(&[(name, "alice-key-123")]));
            assert_eq!(got, principal("key:alice"), "header {name}");
        }
    }

    #[test]
    fn bearer_key_with_any_scheme_case() {
        let a = keys_only();
        for value in [
            "Bearer alice-key-123",
            "bearer alice-key-123",
            "BEARER   alice-key-123",
        ] {
            let got = a.authenticate(&headers(&[("authorization", value)]));
            assert_eq!(got, principal("key:alice"), "value {value:?}");
        }
    }

    #[test]
    fn bare_authorization_key() {
        let got = keys_only().authenticate(&headers(&[("Authorization", "alice-key-123")]));
        assert_eq!(got, principal("key:alice"));
    }

    #[test]
    fn wrong_key_in_every_form() {
        let a = keys_only();
        for h in [
            headers(&[("Service-API-Key", "nope")]),
            headers(&[("Authorization", "Bearer nope")]),
            headers(&[("Authorization", "nope")]),
            headers(&[("Authorization", "Basic YWxpY2U6cHc=")]),
            // Prefix and suffix of a real key must not match.
            headers(&[("Service-API-Key", "alice-key-12")]),
            headers(&[("Service-API-Key", "alice-key-1234")]),
        ] {
            assert_eq!(a.authenticate(&h), Err(AuthError::InvalidKey), "{h:?}");
        }
    }

    #[test]
    fn missing_credentials() {
        let a = keys_only();
        for h in [
            HeaderMap::new(),
            headers(&[("X-Other", "alice-key-123")]),
            headers(&[("Authorization", "Bearer")]),
            headers(&[("Authorization", "Bearer   ")]),
            headers(&[("Authorization", "")]),
            headers(&[("Service-API-Key", "")]),
        ] {
            assert_eq!(a.authenticate(&h), Err(AuthError::Missing), "{h:?}");
        }
    }

    #[test]
    fn service_api_key_takes_precedence_over_authorization() {
        let a = keys_only();
        let h = headers(&[
            ("Service-API-Key", "wrong"),
            ("Authorization", "Bearer alice-key-123"),
        ]);
        assert_eq!(a.authenticate(&h), Err(AuthError::InvalidKey));
        let h = headers(&[
            ("Service-API-Key", "alice-key-123"),
            ("Authorization", "Bearer wrong"),
        ]);
        assert_eq!(a.authenticate(&h), principal("key:alice"));
    }

    #[test]
    fn several_keys_each_map_to_their_name() {
        let a = build(
            vec![
                plain("alice", "alice-key-123"),
                plain("bob", "bob-key-456"),
                // Same caller, second key (rotation).
                plain("alice", "alice-key-new"),
            ],
            None,
        );
        for (key, id) in [
            ("alice-key-123", "key:alice"),
            ("bob-key-456", "key:bob"),
            ("alice-key-new", "key:alice"),
        ] {
            let got = a.authenticate(&headers(&[("Service-API-Key", key)]));
            assert_eq!(got, principal(id));
        }
    }

    #[test]
    fn sha256_configured_key() {
        // Upper-case hex is accepted too.
        let hash = sha256_hex("carol-secret").to_uppercase();
        let a = build(vec![hashed("carol", &hash)], None);
        let got = a.authenticate(&headers(&[("Authorization", "Bearer carol-secret")]));
        assert_eq!(got, principal("key:carol"));
        let got = a.authenticate(&headers(&[("Authorization", &hash)]));
        assert_eq!(got, Err(AuthError::InvalidKey), "the hash is not the key");
    }

    #[test]
    fn empty_plain_key_entry_is_disabled() {
        let a = build(
            vec![plain("ghost", ""), plain("alice", "alice-key-123")],
            None,
        );
        assert!(!a.is_empty());
        assert_eq!(
            a.authenticate(&headers(&[("Service-API-Key", "alice-key-123")])),
            principal("key:alice")
        );
        assert_eq!(
            a.authenticate(&headers(&[("Authorization", "Bearer ghost")])),
            Err(AuthError::InvalidKey)
        );
        let only_disabled = build(vec![plain("ghost", ""), hashed("ghost2", "")], None);
        assert!(only_disabled.is_empty());
    }

    #[test]
    fn is_empty() {
        assert!(build(vec![], None).is_empty());
        assert!(build(vec![], Some(jwt_settings())).is_empty());
        assert!(!keys_only().is_empty());
        assert!(!jwt_only(hs256_settings()).is_empty());
    }

    #[test]
    fn sha256_hex_known_vector() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn debug_output_hides_secrets() {
        let a = build(
            vec![plain("alice", "alice-key-123")],
            Some(hs256_settings()),
        );
        let dbg = format!("{a:?}");
        assert!(dbg.contains("alice") && dbg.contains("HS256"), "{dbg}");
        assert!(!dbg.contains("alice-key-123") && !dbg.contains(SECRET));
        assert!(!dbg.contains(&sha256_hex("alice-key-123")));
    }

    // --- JWT ---

    #[test]
    fn the_admin_scope_is_refused_by_the_public_api_and_required_by_the_admin_one() {
        let public = jwt_only(hs256_settings());
        let admin = Authenticator::for_admin(&[], Some(&hs256_settings())).unwrap();
        let scoped =
            hs256(json!({"sub": "ops", "exp": now() + 300, "scope": "read switchyard:admin"}));
        let plain_token = hs256(json!({"sub": "user-1", "exp": now() + 300, "scope": "read"}));
        assert_eq!(
            public.authenticate(&bearer(&scoped)),
            invalid("an administrator's token is not a caller's")
        );
        assert_eq!(
            public.authenticate(&bearer(&plain_token)),
            principal("jwt:user-1")
        );
        assert_eq!(admin.authenticate(&bearer(&scoped)), principal("jwt:ops"));
        assert_eq!(
            admin.authenticate(&bearer(&plain_token)),
            invalid("missing scope `switchyard:admin`")
        );
        let array = hs256(json!({"sub": "ops", "exp": now() + 300, "scope": ["switchyard:admin"]}));
        assert_eq!(admin.authenticate(&bearer(&array)), principal("jwt:ops"));
    }

    #[test]
    fn admin_key_problems_are_named_under_admin() {
        let errors = Authenticator::for_admin(
            &[ApiKeySetting {
                name: "ops".into(),
                key: None,
                sha256: None,
                limits: None,
            }],
            None,
        )
        .unwrap_err();
        assert_eq!(
            errors,
            ["admin.keys[0]: set exactly one of `key` or `sha256`"]
        );
    }

    #[test]
    fn database_keys_are_found_after_yaml_keys_until_they_expire() {
        use db_keys::{DbKey, DbKeyHandle, DbKeys, TenantScope};
        let mut a = keys_only();
        let handle = DbKeyHandle::default();
        a.attach_db(handle.clone());
        let tenant = Arc::new(TenantScope {
            name: "team-a".into(),
            id: "tenant:team-a".into(),
            limits: None,
            allowed_models: Some(Arc::from(vec!["tts-1".to_string()])),
        });
        let key = |until| {
            Arc::new(DbKey {
                principal: "key:team-a/ci".into(),
                limits: None,
                allowed_models: None,
                tenant: tenant.clone(),
                valid_until: until,
            })
        };
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
        handle.store(DbKeys::new([
            (digest(b"sy_live"), key(None)),
            (digest(b"sy_old"), key(Some(past))),
        ]));
        let p = a.authenticate(&bearer("sy_live")).unwrap();
        assert_eq!(p.id, "key:team-a/ci");
        assert_eq!(p.tenant_name(), Some("team-a"));
        assert!(p.may_use("tts-1"));
        assert!(!p.may_use("gpt-image-2"));
        assert_eq!(
            a.authenticate(&bearer("sy_old")),
            Err(AuthError::InvalidKey)
        );
        assert_eq!(
            a.authenticate(&bearer("alice-key-123")),
            principal("key:alice")
        );
        handle.store(DbKeys::default());
        assert_eq!(
            a.authenticate(&bearer("sy_live")),
            Err(AuthError::InvalidKey)
        );
    }

    #[test]
    fn hs256_good_token() {
        let a = jwt_only(hs256_settings());
        let t = hs256(json!({"sub": "user-1", "exp": now() + 300}));
        assert_eq!(a.authenticate(&bearer(&t)), principal("jwt:user-1"));
    }

    #[test]
    fn api_key_is_tried_before_jwt_and_both_work() {
        let a = build(
            vec![plain("alice", "alice-key-123")],
            Some(hs256_settings()),
        );
        assert_eq!(
            a.authenticate(&bearer("alice-key-123")),
            principal("key:alice")
        );
        let t = hs256(json!({"sub": "user-1", "exp": now() + 300}));
        assert_eq!(a.authenticate(&bearer(&t)), principal("jwt:user-1"));
        // Not JWT-shaped: reported as a bad key, not a bad token.
        assert_eq!(a.authenticate(&bearer("a.b")), Err(AuthError::InvalidKey));
    }

    #[test]
    fn jwt_only_accepted_as_bearer() {
        let a = jwt_only(hs256_settings());
        let t = hs256(json!({"sub": "user-1", "exp": now() + 300}));
        for h in [
            headers(&[("Authorization", &t)]),
            headers(&[("Service-API-Key", &t)]),
        ] {
            assert_eq!(a.authenticate(&h), Err(AuthError::InvalidKey));
        }
    }

    #[test]
    fn jwt_shaped_bearer_without_jwt_config_is_a_bad_key() {
        let t = hs256(json!({"sub": "user-1", "exp": now() + 300}));
        assert_eq!(
            keys_only().authenticate(&bearer(&t)),
            Err(AuthError::InvalidKey)
        );
    }

    #[test]
    fn hs256_expired() {
        let a = jwt_only(hs256_settings());
        let t = hs256(json!({"sub": "user-1", "exp": now() - 120}));
        assert_eq!(a.authenticate(&bearer(&t)), invalid("expired"));
    }

    #[test]
    fn hs256_expired_within_leeway_is_accepted() {
        let a = jwt_only(hs256_settings());
        let t = hs256(json!({"sub": "user-1", "exp": now() - 5}));
        assert_eq!(a.authenticate(&bearer(&t)), principal("jwt:user-1"));
    }

    #[test]
    fn exp_is_required() {
        let a = jwt_only(hs256_settings());
        let t = hs256(json!({"sub": "user-1"}));
        assert_eq!(a.authenticate(&bearer(&t)), invalid("missing claim `exp`"));
        let t = hs256(json!({"sub": "user-1", "exp": "tomorrow"}));
        assert!(a.authenticate(&bearer(&t)).is_err());
    }

    #[test]
    fn hs256_nbf() {
        let a = jwt_only(hs256_settings());
        let future = hs256(json!({"sub": "u", "exp": now() + 600, "nbf": now() + 300}));
        assert_eq!(a.authenticate(&bearer(&future)), invalid("not yet valid"));
        let past = hs256(json!({"sub": "u", "exp": now() + 600, "nbf": now() - 10}));
        assert_eq!(a.authenticate(&bearer(&past)), principal("jwt:u"));
    }

    #[test]
    fn hs256_wrong_secret() {
        let a = jwt_only(hs256_settings());
        let t = sign(
            Algorithm::HS256,
            &EncodingKey::from_secret(b"some-other-secret-of-enough-length"),
            json!({"sub": "user-1", "exp": now() + 300}),
        );
        assert_eq!(a.authenticate(&bearer(&t)), invalid("bad signature"));
    }

    #[test]
    fn issuer_checked_when_configured() {
        let a = jwt_only(JwtSettings {
            issuer: Some("https://idp.example".into()),
            ..hs256_settings()
        });
        let exp = now() + 300;
        let good = hs256(json!({"sub": "u", "exp": exp, "iss": "https://idp.example"}));
        assert_eq!(a.authenticate(&bearer(&good)), principal("jwt:u"));
        let wrong = hs256(json!({"sub": "u", "exp": exp, "iss": "https://evil.example"}));
        assert_eq!(a.authenticate(&bearer(&wrong)), invalid("wrong issuer"));
        let missing = hs256(json!({"sub": "u", "exp": exp}));
        assert_eq!(
            a.authenticate(&bearer(&missing)),
            invalid("missing claim `iss`")
        );
    }

    #[test]
    fn audience_checked_when_configured() {
        let a = jwt_only(JwtSettings {
            audience: Some("switchyard".into()),
            ..hs256_settings()
        });
        let exp = now() + 300;
        let good = hs256(json!({"sub": "u", "exp": exp, "aud": "switchyard"}));
        assert_eq!(a.authenticate(&bearer(&good)), principal("jwt:u"));
        let list = hs256(json!({"sub": "u", "exp": exp, "aud": ["other", "switchyard"]}));
        assert_eq!(a.authenticate(&bearer(&list)), principal("jwt:u"));
        let wrong = hs256(json!({"sub": "u", "exp": exp, "aud": "other-api"}));
        assert_eq!(a.authenticate(&bearer(&wrong)), invalid("wrong audience"));
        let missing = hs256(json!({"sub": "u", "exp": exp}));
        assert_eq!(
            a.authenticate(&bearer(&missing)),
            invalid("missing claim `aud`")
        );
    }

    #[test]
    fn audience_ignored_when_not_configured() {
        let a = jwt_only(hs256_settings());
        let t = hs256(json!({"sub": "u", "exp": now() + 300, "aud": "anything"}));
        assert_eq!(a.authenticate(&bearer(&t)), principal("jwt:u"));
    }

    #[test]
    fn sub_is_required_and_must_be_a_string() {
        let a = jwt_only(hs256_settings());
        let exp = now() + 300;
        for claims in [
            json!({"exp": exp}),
            json!({"exp": exp, "sub": 42}),
            json!({"exp": exp, "sub": ""}),
        ] {
            let t = hs256(claims.clone());
            assert_eq!(
                a.authenticate(&bearer(&t)),
                invalid("missing claim `sub`"),
                "{claims}"
            );
        }
    }

    #[test]
    fn alg_none_rejected() {
        let a = jwt_only(hs256_settings());
        // base64url of {"alg":"none","typ":"JWT"} and {"sub":"mallory","exp":4102444800},
        // with an empty signature.
        let t =
            "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJtYWxsb3J5IiwiZXhwIjo0MTAyNDQ0ODAwfQ.";
        assert_eq!(a.authenticate(&bearer(t)), invalid("algorithm not allowed"));
        // Same with a junk signature segment.
        let t = format!("{}c2ln", t);
        assert_eq!(
            a.authenticate(&bearer(&t)),
            invalid("algorithm not allowed")
        );
    }

    #[test]
    fn crit_header_rejected() {
        let a = jwt_only(hs256_settings());
        let header = Header {
            crit: Some(vec!["exp".into()]),
            ..Header::new(Algorithm::HS256)
        };
        let t = jsonwebtoken::encode(
            &header,
            &json!({"sub": "u", "exp": now() + 300}),
            &EncodingKey::from_secret(SECRET.as_bytes()),
        )
        .unwrap();
        assert_eq!(
            a.authenticate(&bearer(&t)),
            invalid("unsupported critical header")
        );
    }

    #[test]
    fn algorithm_confusion_rejected() {
        // Only RS256 configured; the attacker signs HS256 with the (public)
        // RSA key PEM as the HMAC secret.
        let a = jwt_only(JwtSettings {
            rs256_public_key_file: Some(RSA_PUBLIC.into()),
            ..jwt_settings()
        });
        let t = sign(
            Algorithm::HS256,
            &EncodingKey::from_secret(&read(RSA_PUBLIC)),
            json!({"sub": "mallory", "exp": now() + 300}),
        );
        assert_eq!(
            a.authenticate(&bearer(&t)),
            invalid("algorithm not allowed")
        );
    }

    #[test]
    fn algorithm_confusion_rejected_with_hs256_also_configured() {
        // HS256 is allowed too, but only with its own secret.
        let a = jwt_only(JwtSettings {
            rs256_public_key_file: Some(RSA_PUBLIC.into()),
            ..hs256_settings()
        });
        let t = sign(
            Algorithm::HS256,
            &EncodingKey::from_secret(&read(RSA_PUBLIC)),
            json!({"sub": "mallory", "exp": now() + 300}),
        );
        assert_eq!(a.authenticate(&bearer(&t)), invalid("bad signature"));
    }

    #[test]
    fn unconfigured_algorithm_rejected() {
        let a = jwt_only(hs256_settings());
        let rsa = EncodingKey::from_rsa_pem(&read(RSA_PRIVATE)).unwrap();
        let exp = now() + 300;
        let t = sign(Algorithm::RS256, &rsa, json!({"sub": "u", "exp": exp}));
        assert_eq!(
            a.authenticate(&bearer(&t)),
            invalid("algorithm not allowed")
        );
        let t = hs256(json!({"sub": "u", "exp": exp}));
        let hs512 = sign(
            Algorithm::HS512,
            &EncodingKey::from_secret(SECRET.as_bytes()),
            json!({"sub": "u", "exp": exp}),
        );
        assert_eq!(
            a.authenticate(&bearer(&hs512)),
            invalid("algorithm not allowed")
        );
        assert_eq!(a.authenticate(&bearer(&t)), principal("jwt:u"));
    }

    #[test]
    fn rs256_good_token() {
        let a = jwt_only(JwtSettings {
            rs256_public_key_file: Some(RSA_PUBLIC.into()),
            ..jwt_settings()
        });
        let key = EncodingKey::from_rsa_pem(&read(RSA_PRIVATE)).unwrap();
        let t = sign(
            Algorithm::RS256,
            &key,
            json!({"sub": "svc-a", "exp": now() + 300}),
        );
        assert_eq!(a.authenticate(&bearer(&t)), principal("jwt:svc-a"));
    }

    #[test]
    fn es256_good_token_and_tampering() {
        let a = jwt_only(JwtSettings {
            es256_public_key_file: Some(EC_PUBLIC.into()),
            ..jwt_settings()
        });
        // PKCS#8 private key, as `openssl genpkey` writes it.
        let key = EncodingKey::from_ec_pem(&read(EC_PRIVATE)).unwrap();
        let t = sign(
            Algorithm::ES256,
            &key,
            json!({"sub": "svc-b", "exp": now() + 300}),
        );
        assert_eq!(a.authenticate(&bearer(&t)), principal("jwt:svc-b"));

        // Swap in another payload, keep the signature.
        let other = sign(
            Algorithm::ES256,
            &key,
            json!({"sub": "admin", "exp": now() + 300}),
        );
        let p: Vec<&str> = t.split('.').collect();
        let o: Vec<&str> = other.split('.').collect();
        let forged = format!("{}.{}.{}", p[0], o[1], p[2]);
        assert_eq!(a.authenticate(&bearer(&forged)), invalid("bad signature"));
    }

    #[test]
    fn all_three_algorithms_together() {
        let a = jwt_only(JwtSettings {
            rs256_public_key_file: Some(RSA_PUBLIC.into()),
            es256_public_key_file: Some(EC_PUBLIC.into()),
            ..hs256_settings()
        });
        let claims = json!({"sub": "u", "exp": now() + 300});
        let rsa = EncodingKey::from_rsa_pem(&read(RSA_PRIVATE)).unwrap();
        let ec = EncodingKey::from_ec_pem(&read(EC_PRIVATE)).unwrap();
        for t in [
            hs256(claims.clone()),
            sign(Algorithm::RS256, &rsa, claims.clone()),
            sign(Algorithm::ES256, &ec, claims.clone()),
        ] {
            assert_eq!(a.authenticate(&bearer(&t)), principal("jwt:u"));
        }
    }

    #[test]
    fn errors_never_contain_the_credential() {
        let a = build(
            vec![plain("alice", "alice-key-123")],
            Some(hs256_settings()),
        );
        let bad_sig = sign(
            Algorithm::HS256,
            &EncodingKey::from_secret(b"some-other-secret-of-enough-length"),
            json!({"sub": "user-1", "exp": now() + 300}),
        );
        let expired = hs256(json!({"sub": "u", "exp": now() - 1000}));
        // Header segment is base64url of `not-json`.
        let malformed = "bm90LWpzb24.e30.c2ln";
        for cred in [
            bad_sig.as_str(),
            expired.as_str(),
            malformed,
            "secret-guess",
        ] {
            let err = a.authenticate(&bearer(cred)).unwrap_err();
            let msg = err.to_string();
            assert!(!msg.contains(cred), "{msg}");
            for part in cred.split('.') {
                assert!(!msg.contains(part), "{msg}");
            }
        }
        assert_eq!(
            a.authenticate(&bearer(malformed)),
            invalid("malformed token")
        );
    }

    // --- Configuration ---

    #[test]
    fn from_settings_reports_every_problem() {
        let s = AuthSettings {
            limits_on_store_error: OnStoreError::Open,
            api_keys: vec![
                ApiKeySetting {
                    name: "both".into(),
                    key: Some("k".into()),
                    sha256: Some(sha256_hex("k")),
                    limits: None,
                },
                hashed("badhex", "not-hex"),
                ApiKeySetting {
                    name: "neither".into(),
                    key: None,
                    sha256: None,
                    limits: None,
                },
                hashed("short", "abcd"),
                plain("", "nameless-key"),
                plain("dup1", "same-key"),
                hashed("dup2", &sha256_hex("same-key")),
                plain("spacey", "key-with-newline\n"),
            ],
            jwt: Some(JwtSettings {
                rs256_public_key_file: Some("/nonexistent/rsa.pem".into()),
                es256_public_key_file: Some(RSA_PUBLIC.into()),
                leeway_seconds: 100_000,
                ..hs256_settings()
            }),
            ..AuthSettings::default()
        };
        let errors = Authenticator::from_settings(&s).unwrap_err();
        let expected_prefixes = [
            "auth.api_keys[0]: set exactly one of `key` or `sha256`",
            "auth.api_keys[1].sha256: not a 64-digit hex SHA-256",
            "auth.api_keys[2]: set exactly one of `key` or `sha256`",
            "auth.api_keys[3].sha256: not a 64-digit hex SHA-256",
            "auth.api_keys[4].name: must not be empty",
            "auth.api_keys[6]: same key as auth.api_keys[5]",
            "auth.api_keys[7].key: has leading or trailing whitespace",
            "auth.jwt.rs256_public_key_file: cannot read /nonexistent/rsa.pem: ",
            "auth.jwt.es256_public_key_file: ",
            "auth.jwt.leeway_seconds: must be at most 3600",
        ];
        assert_eq!(errors.len(), expected_prefixes.len(), "{errors:#?}");
        for (got, want) in errors.iter().zip(expected_prefixes) {
            assert!(got.starts_with(want), "got {got:?}, want {want:?}");
        }
        // Secrets from the config never appear in the messages.
        assert!(errors
            .iter()
            .all(|e| !e.contains("same-key") && !e.contains(SECRET)));
    }

    #[test]
    fn principals_carry_their_entry_s_limits_shared_by_name() {
        let rpm = |n| LimitSet {
            requests_per_minute: Some(n),
            ..LimitSet::default()
        };
        let with = |name: &str, key: &str, set: LimitSet| ApiKeySetting {
            limits: Some(set),
            ..plain(name, key)
        };
        let a = build(
            vec![
                with("alice", "alice-old", rpm(5)),
                with("alice", "alice-new", rpm(5)),
                plain("bob", "bob-key"),
            ],
            None,
        );
        let old = a.authenticate(&bearer("alice-old")).unwrap();
        let new = a.authenticate(&bearer("alice-new")).unwrap();
        assert_eq!(old.limits.as_deref(), Some(&rpm(5)));
        // One budget: the very same limits.
        assert!(Arc::ptr_eq(
            old.limits.as_ref().unwrap(),
            new.limits.as_ref().unwrap()
        ));
        assert_eq!(a.authenticate(&bearer("bob-key")).unwrap().limits, None);

        let errors = Authenticator::from_settings(&AuthSettings {
            api_keys: vec![
                with("alice", "alice-old", rpm(5)),
                with("alice", "alice-new", rpm(6)),
                with("carol", "carol-key", rpm(0)),
            ],
            jwt: None,
            limits_on_store_error: OnStoreError::Open,
            ..AuthSettings::default()
        })
        .unwrap_err();
        assert_eq!(
            errors,
            vec![
                "auth.api_keys[1].limits: entries named `alice` share one budget, so they must \
                 carry the same limits as auth.api_keys[0]"
                    .to_string(),
                "auth.api_keys[2].limits.requests_per_minute: must be greater than 0".to_string(),
            ]
        );
    }

    #[test]
    fn jwt_subjects_get_limits_by_claim() {
        let limits: JwtLimitsSetting = serde_json::from_value(json!({
            "claim": "plan",
            "by_value": {"pro": {"requests_per_minute": 100}, "internal": {}},
            "default": {"requests_per_minute": 1}
        }))
        .unwrap();
        let a = jwt_only(JwtSettings {
            limits: Some(limits),
            ..hs256_settings()
        });
        let rpm = |claims| {
            a.authenticate(&bearer(&hs256(claims)))
                .unwrap()
                .limits
                .and_then(|l| l.requests_per_minute)
        };
        let exp = now() + 300;
        assert_eq!(
            rpm(json!({"sub": "u", "exp": exp, "plan": "pro"})),
            Some(100)
        );
        assert_eq!(
            rpm(json!({"sub": "u", "exp": exp, "plan": "free"})),
            Some(1)
        );
        assert_eq!(rpm(json!({"sub": "u", "exp": exp})), Some(1));
        // Listed with nothing set: unlimited, not the default.
        assert_eq!(
            rpm(json!({"sub": "u", "exp": exp, "plan": "internal"})),
            None
        );
        // Without limits by claim, tokens are read as before.
        let plain = jwt_only(hs256_settings());
        let p = plain
            .authenticate(&bearer(&hs256(
                json!({"sub": "u", "exp": exp, "plan": "pro"}),
            )))
            .unwrap();
        assert_eq!(p, principal("jwt:u").unwrap());
    }

    #[test]
    fn key_files_must_be_public_keys_of_the_right_type() {
        let cases = [
            (
                JwtSettings {
                    rs256_public_key_file: Some(RSA_PRIVATE.into()),
                    ..jwt_settings()
                },
                "holds a private key",
            ),
            (
                JwtSettings {
                    es256_public_key_file: Some(EC_PRIVATE.into()),
                    ..jwt_settings()
                },
                "holds a private key",
            ),
            (
                JwtSettings {
                    rs256_public_key_file: Some(EC_PUBLIC.into()),
                    ..jwt_settings()
                },
                "is not an RSA public key",
            ),
            (
                JwtSettings {
                    es256_public_key_file: Some(RSA_PUBLIC.into()),
                    ..jwt_settings()
                },
                "is not a P-256 (ES256) public key",
            ),
        ];
        for (jwt, want) in cases {
            let errors = Authenticator::from_settings(&AuthSettings {
                limits_on_store_error: OnStoreError::Open,
                api_keys: vec![],
                jwt: Some(jwt),
                ..AuthSettings::default()
            })
            .unwrap_err();
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert!(errors[0].contains(want), "{errors:?}");
        }
    }

    #[test]
    fn the_approximate_modes_settings_are_checked_and_the_exact_mode_has_none() {
        let read = |yaml: &str| {
            let s: AuthSettings = serde_yaml::from_str(yaml).unwrap();
            Authenticator::from_settings(&s).map(|a| a.approximate())
        };
        assert_eq!(read("{}").unwrap(), None);
        assert_eq!(
            read("{limits_mode: exact, limits_sync_ms: 0}").unwrap(),
            None
        );
        let a = read("{limits_mode: approximate}").unwrap().unwrap();
        assert_eq!((a.sync.as_millis(), a.share_percent), (50, 10));
        let errors =
            read("{limits_mode: approximate, limits_sync_ms: 0, limits_local_share_percent: 101}")
                .unwrap_err();
        assert_eq!(
            errors,
            [
                "auth.limits_sync_ms: must be from 1 to 60000 (milliseconds)",
                "auth.limits_local_share_percent: must be from 1 to 100",
            ]
        );
        assert!(serde_yaml::from_str::<AuthSettings>("{limits_mode: loose}").is_err());
    }

    #[test]
    fn empty_issuer_or_audience_is_an_error_not_a_disabled_check() {
        let errors = Authenticator::from_settings(&AuthSettings {
            limits_on_store_error: OnStoreError::Open,
            api_keys: vec![],
            jwt: Some(JwtSettings {
                issuer: Some(String::new()),
                audience: Some(String::new()),
                ..hs256_settings()
            }),
            ..AuthSettings::default()
        })
        .unwrap_err();
        assert_eq!(
            errors,
            vec![
                "auth.jwt.issuer: must not be empty".to_string(),
                "auth.jwt.audience: must not be empty".to_string(),
            ]
        );
    }

    #[test]
    fn empty_jwt_keys_disable_jwt() {
        let a = jwt_only(JwtSettings {
            hs256_secret: Some(String::new()),
            rs256_public_key_file: Some(String::new()),
            ..jwt_settings()
        });
        assert!(a.is_empty());
        let t = hs256(json!({"sub": "u", "exp": now() + 300}));
        assert_eq!(a.authenticate(&bearer(&t)), Err(AuthError::InvalidKey));
    }

    #[test]
    fn settings_deserialize_with_defaults_and_reject_unknown_fields() {
        let s: AuthSettings = serde_json::from_value(json!({
            "api_keys": [{"name": "a", "key": "k"}],
            "jwt": {"hs256_secret": "s"}
        }))
        .unwrap();
        assert_eq!(s.jwt.unwrap().leeway_seconds, 30);
        assert_eq!(s.api_keys[0].sha256, None);
        let empty: AuthSettings = serde_json::from_value(json!({})).unwrap();
        assert!(empty.api_keys.is_empty() && empty.jwt.is_none());
        assert!(serde_json::from_value::<AuthSettings>(json!({"apikeys": []})).is_err());
        assert!(serde_json::from_value::<AuthSettings>(json!({"jwt": {"secret": "s"}})).is_err());
        assert!(serde_json::from_value::<AuthSettings>(
            json!({"api_keys": [{"name": "a", "hash": "x"}]})
        )
        .is_err());
    }
}
