//! Kling's credentials: every request carries `Authorization: Bearer <JWT>`, an HS256 token the
//! gateway signs itself from the account's access key (the `iss` claim) and secret key, valid for
//! 30 minutes (`exp` = now + 1800, `nbf` = now − 5 for clock skew).
//!
//! Signing per request would be wasted work, and a token used up to its last second can expire in
//! flight; so one token is kept and replaced once less than [`RENEW_BEFORE`] of its life is left.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use http::HeaderValue;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;

/// Lifetime of a minted token, in seconds (Kling's documented `exp`).
pub(crate) const TOKEN_LIFETIME: u64 = 1800;
/// A token with less than this left (seconds) is replaced before use.
pub(crate) const RENEW_BEFORE: u64 = 300;
/// How far back `nbf` is set, so a provider clock slightly behind ours accepts a fresh token.
const NOT_BEFORE_SKEW: u64 = 5;

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    exp: u64,
    nbf: u64,
}

/// Mints and caches Kling bearer tokens for one access/secret key pair.
pub(crate) struct Signer {
    access_key: String,
    key: EncodingKey,
    /// The current `Authorization` value and its `exp`.
    current: Mutex<Option<(HeaderValue, u64)>>,
}

impl Signer {
    pub(crate) fn new(access_key: &str, secret_key: &str) -> Signer {
        Signer {
            access_key: access_key.to_string(),
            key: EncodingKey::from_secret(secret_key.as_bytes()),
            current: Mutex::new(None),
        }
    }

    /// The `Authorization` header value to send now.
    pub(crate) fn authorization(&self) -> Result<HeaderValue, String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        self.authorization_at(now)
    }

    /// The `Authorization` header value to send at Unix time `now` (seconds).
    pub(crate) fn authorization_at(&self, now: u64) -> Result<HeaderValue, String> {
        let mut current = self
            .current
            .lock()
            .map_err(|_| "kling token cache lock poisoned".to_string())?;
        if let Some((value, exp)) = current.as_ref() {
            if *exp > now + RENEW_BEFORE {
                return Ok(value.clone());
            }
        }
        let exp = now + TOKEN_LIFETIME;
        let claims = Claims {
            iss: &self.access_key,
            exp,
            nbf: now.saturating_sub(NOT_BEFORE_SKEW),
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.key)
            .map_err(|e| format!("signing the kling token: {e}"))?;
        let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| "kling token is not a valid header value".to_string())?;
        value.set_sensitive(true);
        *current = Some((value.clone(), exp));
        Ok(value)
    }
}

impl crate::upstream::provider::Signer for Signer {
    /// The token does not depend on the request: `Authorization: Bearer <JWT>` alone.
    fn sign(
        &self,
        _req: &crate::upstream::provider::Signable<'_>,
    ) -> Result<Vec<(http::HeaderName, HeaderValue)>, String> {
        Ok(vec![(
            http::header::AUTHORIZATION,
            Signer::authorization(self)?,
        )])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{DecodingKey, Validation};

    #[derive(serde::Deserialize)]
    struct Decoded {
        iss: String,
        exp: u64,
        nbf: u64,
    }

    fn decode(value: &HeaderValue, secret: &str) -> (jsonwebtoken::Header, Decoded) {
        let token = value.to_str().unwrap().strip_prefix("Bearer ").unwrap();
        let mut v = Validation::new(Algorithm::HS256);
        v.validate_exp = false;
        v.validate_nbf = false;
        v.required_spec_claims.clear();
        let data = jsonwebtoken::decode::<Decoded>(
            token,
            &DecodingKey::from_secret(secret.as_bytes()),
            &v,
        )
        .unwrap();
        (data.header, data.claims)
    }

    #[test]
    fn token_is_hs256_signed_with_the_secret_and_names_the_access_key() {
        let s = Signer::new("AK123", "SK456");
        let v = s.authorization_at(1_000_000).unwrap();
        assert!(v.is_sensitive());
        let (header, claims) = decode(&v, "SK456");
        assert_eq!(header.alg, Algorithm::HS256);
        assert_eq!(header.typ.as_deref(), Some("JWT"));
        assert_eq!(claims.iss, "AK123");
        assert_eq!(claims.exp, 1_000_000 + 1800);
        assert_eq!(claims.nbf, 1_000_000 - 5);
        // Another secret does not verify it.
        let token = v.to_str().unwrap().strip_prefix("Bearer ").unwrap();
        let mut val = Validation::new(Algorithm::HS256);
        val.validate_exp = false;
        assert!(
            jsonwebtoken::decode::<Decoded>(token, &DecodingKey::from_secret(b"other"), &val)
                .is_err()
        );
    }

    #[test]
    fn token_is_reused_until_close_to_expiry_then_renewed() {
        let s = Signer::new("AK", "SK");
        let first = s.authorization_at(1_000_000).unwrap();
        // 20 minutes later, 10 minutes left: the same token.
        let later = s.authorization_at(1_000_000 + 1200).unwrap();
        assert_eq!(first, later);
        // 26 minutes later, 4 minutes left (< RENEW_BEFORE): a fresh one, valid 30 minutes on.
        let renewed = s.authorization_at(1_000_000 + 1560).unwrap();
        assert_ne!(first, renewed);
        let (_, claims) = decode(&renewed, "SK");
        assert_eq!(claims.exp, 1_000_000 + 1560 + 1800);
    }
}
