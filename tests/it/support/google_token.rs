//! A fake Google OAuth 2.0 token endpoint, true to the service-account ("server to server") flow:
//! it accepts only `POST /token` with a form of `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`
//! and an `assertion` JWT signed RS256 with the test service account's key (checked against its
//! public key), whose claims are the account's email (`iss`), the cloud-platform scope, this
//! endpoint as `aud`, and an `exp` an hour after `iat`. It answers `{"access_token",
//! "expires_in", "token_type": "Bearer"}`, or Google's `{"error", "error_description"}` with 400.
//!
//! [`shared`] is one endpoint for the whole test binary (the standard test config's `vertex`
//! account uses it, so conformance cases' own fakes see only Vertex requests); [`start`] makes
//! one a test can script and count.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::json;

use super::fake::{FakeProvider, Recorded, Reply};

/// The test service account's email (in its key file).
pub const EMAIL: &str = "switchyard-test@switchyard-test.iam.gserviceaccount.com";
/// The token the shared endpoint hands out.
pub const SHARED_TOKEN: &str = "ya29.vertex-shared-test-token";
const GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// The test service account's key file (a TEST-ONLY key: tests/fixtures/google/README.md).
pub fn key_file() -> String {
    super::fixture("google/service-account-TEST-ONLY.json")
}

/// The endpoint shared by the test binary, answering [`SHARED_TOKEN`] for an hour.
pub fn shared() -> &'static FakeProvider {
    static SHARED: OnceLock<FakeProvider> = OnceLock::new();
    SHARED.get_or_init(|| start(3600, |_| SHARED_TOKEN.to_string()))
}

/// The shared endpoint's URL (the config's `token_url`).
pub fn shared_url() -> String {
    format!("{}/token", shared().base_url())
}

/// An endpoint answering tokens valid `expires_in` seconds, the `n`th (from 1) named `token(n)`.
pub fn start(expires_in: u64, token: fn(usize) -> String) -> FakeProvider {
    let fake = FakeProvider::start();
    let audience = format!("{}/token", fake.base_url());
    let minted = Arc::new(AtomicUsize::new(0));
    fake.set_handler(move |req| {
        Some(match check(req, &audience) {
            Ok(()) => {
                let n = minted.fetch_add(1, Ordering::SeqCst) + 1;
                Reply::json(
                    200,
                    json!({"access_token": token(n), "expires_in": expires_in, "token_type": "Bearer"}),
                )
            }
            Err(why) => Reply::json(
                400,
                json!({"error": "invalid_grant", "error_description": why}),
            ),
        })
    });
    fake
}

#[derive(serde::Deserialize)]
struct Claims {
    iss: String,
    scope: String,
    aud: String,
    iat: u64,
    exp: u64,
}

/// Why `req` is not a valid token request, if it is not.
fn check(req: &Recorded, audience: &str) -> Result<(), String> {
    if req.method != "POST" || req.path != "/token" {
        return Err(format!(
            "{} {} is not the token endpoint",
            req.method, req.path
        ));
    }
    if req.header("content-type") != Some("application/x-www-form-urlencoded") {
        return Err("not a form".into());
    }
    if req.header("authorization").is_some() {
        return Err("a token request carries no credentials of its own".into());
    }
    let form: Vec<(String, String)> = url_form(&req.text());
    let field = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .ok_or(format!("no {name}"))
    };
    if field("grant_type")? != GRANT {
        return Err("wrong grant_type".into());
    }
    let public = std::fs::read(super::fixture("google/service-account-TEST-ONLY.pub.pem"))
        .map_err(|e| e.to_string())?;
    let key = DecodingKey::from_rsa_pem(&public).map_err(|e| e.to_string())?;
    let mut validation = Validation::new(Algorithm::RS256);
    validation.set_audience(&[audience]);
    validation.set_required_spec_claims(&["exp", "iat", "aud", "iss"]);
    let data = jsonwebtoken::decode::<Claims>(field("assertion")?, &key, &validation)
        .map_err(|e| format!("Invalid JWT: {e}"))?;
    let c = data.claims;
    if c.iss != EMAIL || c.scope != SCOPE || c.aud != audience || c.exp != c.iat + 3600 {
        return Err("Invalid JWT claims".into());
    }
    Ok(())
}

/// An `application/x-www-form-urlencoded` body's pairs (only `%XX` escapes are decoded).
fn url_form(body: &str) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                    out.push(b);
                    i += 3;
                    continue;
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    body.split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}
