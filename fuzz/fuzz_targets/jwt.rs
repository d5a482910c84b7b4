//! Authentication of arbitrary credentials with an API key and HS256 JWTs configured (issuer and
//! audience required). The first byte picks the header: raw `Authorization` bytes, raw
//! `service-api-key` bytes, or a Bearer token whose header and claims JSON come from the input
//! (split at the first 0xFF byte), correctly signed, so claim checks are reached.
#![no_main]

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use fuzz_support::{API_KEY, JWT_SECRET};
use http::{HeaderMap, HeaderValue};
use jsonwebtoken::{Algorithm, EncodingKey};
use libfuzzer_sys::fuzz_target;
use switchyard::internals::auth::{AuthSettings, Authenticator};

const ISSUER: &str = "https://issuer.example";

thread_local! {
    static AUTH: &'static Authenticator = {
        let settings: AuthSettings = serde_json::from_value(serde_json::json!({
            "api_keys": [{"name": "fuzz", "key": API_KEY}],
            "jwt": {"hs256_secret": JWT_SECRET, "issuer": ISSUER, "audience": "switchyard"}
        }))
        .expect("auth settings");
        Box::leak(Box::new(Authenticator::from_settings(&settings).expect("valid auth")))
    };
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let auth = AUTH.with(|a| *a);
    let mut headers = HeaderMap::new();
    match selector % 3 {
        0 | 1 => {
            let Ok(v) = HeaderValue::from_bytes(rest) else {
                return;
            };
            let name = if selector % 3 == 0 {
                "authorization"
            } else {
                "service-api-key"
            };
            headers.insert(name, v);
            if auth.authenticate(&headers).is_ok() {
                // Nothing but the configured key gets in without the JWT secret.
                assert!(
                    rest.windows(API_KEY.len()).any(|w| w == API_KEY.as_bytes()),
                    "garbage accepted: {:?}",
                    String::from_utf8_lossy(rest)
                );
            }
        }
        _ => {
            let at = rest.iter().position(|b| *b == 0xFF).unwrap_or(rest.len());
            let (header, claims) = (&rest[..at], rest.get(at + 1..).unwrap_or_default());
            let signing_input = format!(
                "{}.{}",
                URL_SAFE_NO_PAD.encode(header),
                URL_SAFE_NO_PAD.encode(claims)
            );
            let key = EncodingKey::from_secret(JWT_SECRET.as_bytes());
            let Ok(sig) =
                jsonwebtoken::crypto::sign(signing_input.as_bytes(), &key, Algorithm::HS256)
            else {
                return;
            };
            let token = format!("Bearer {signing_input}.{sig}");
            let Ok(v) = HeaderValue::from_str(&token) else {
                return;
            };
            headers.insert("authorization", v);
            if let Ok(p) = auth.authenticate(&headers) {
                assert!(!p.id.is_empty());
                // Accepted tokens named the configured issuer.
                assert!(
                    claims.windows(ISSUER.len()).any(|w| w == ISSUER.as_bytes()),
                    "token without the issuer accepted: {:?}",
                    String::from_utf8_lossy(claims)
                );
            }
        }
    }
});
