//! Tencent Cloud's API 3.0 signature (TC3-HMAC-SHA256), done once for every Tencent Cloud provider
//! (Hunyuan image, TTS, …): a [`Signer`] that signs each request as it goes on the wire, from an
//! account's SecretId and SecretKey.
//!
//! The algorithm is Tencent's documented one ("Signature v3", the same page in every product's
//! API docs): a canonical request (method, URI, query, the signed headers `content-type` and
//! `host`, the body's SHA-256), a string to sign over it with the request's Unix time and the
//! credential scope (`<UTC date>/<service>/tc3_request`), and an HMAC-SHA256 signature with a key
//! derived from `TC3` + the secret through the date, the service and `tc3_request`. The signed
//! headers are the two the official SDKs sign (`content-type;host`); the action, version and region
//! travel as `X-TC-*` headers, which the signature does not cover. The tests check it against the
//! worked example in Tencent's documentation.
//!
//! Besides `Authorization` the signer sends `X-TC-Timestamp` (the time the signature is for: it
//! must be the one signed), `X-TC-Region` (the account's region) and, for temporary credentials,
//! `X-TC-Token`. The secret never leaves this type: only the derived signature goes out, and
//! `Debug` shows neither the secret nor the token.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use http::{HeaderName, HeaderValue};
use sha2::{Digest, Sha256};

use super::provider::{Signable, Signer};

/// An account's Tencent Cloud API key.
pub(crate) struct Credentials {
    /// The SecretId (`AKID…`).
    pub(crate) secret_id: String,
    /// The SecretKey.
    pub(crate) secret_key: String,
    /// The token of temporary credentials (STS), sent as `X-TC-Token`.
    pub(crate) token: Option<String>,
}

/// Signs requests to one Tencent Cloud service (`tts`, `aiart`, …) for one region.
pub(crate) struct Tc3 {
    credentials: Credentials,
    /// `TC3` + the secret: the first HMAC key of the derivation, kept ready.
    first_key: Vec<u8>,
    region: String,
    service: &'static str,
    /// The clock (tests set a fixed one to meet the published example).
    now: fn() -> SystemTime,
}

impl fmt::Debug for Tc3 {
    // Never the secret or the token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tc3")
            .field("secret_id", &self.credentials.secret_id)
            .field("region", &self.region)
            .field("service", &self.service)
            .finish()
    }
}

const ALGORITHM: &str = "TC3-HMAC-SHA256";
const SIGNED_HEADERS: &str = "content-type;host";
const X_TC_TIMESTAMP: HeaderName = HeaderName::from_static("x-tc-timestamp");
const X_TC_REGION: HeaderName = HeaderName::from_static("x-tc-region");
const X_TC_TOKEN: HeaderName = HeaderName::from_static("x-tc-token");

impl Tc3 {
    /// A signer for `service` (the product's name, the first label of its API host: `tts` of
    /// `tts.tencentcloudapi.com`) in `region` (`ap-guangzhou`).
    pub(crate) fn new(credentials: Credentials, region: &str, service: &'static str) -> Tc3 {
        let mut first_key = Vec::with_capacity(3 + credentials.secret_key.len());
        first_key.extend_from_slice(b"TC3");
        first_key.extend_from_slice(credentials.secret_key.as_bytes());
        Tc3 {
            credentials,
            first_key,
            region: region.to_string(),
            service,
            now: SystemTime::now,
        }
    }

    /// The same signer reading its time from `now`.
    #[cfg(test)]
    pub(crate) fn with_clock(mut self, now: fn() -> SystemTime) -> Tc3 {
        self.now = now;
        self
    }

    /// The `Authorization` value for `req` signed at `timestamp` (Unix seconds).
    pub(crate) fn authorization(&self, req: &Signable<'_>, timestamp: u64) -> String {
        let date = utc_date(timestamp);
        let canonical = canonical_request(req);
        let scope = format!("{date}/{}/tc3_request", self.service);
        let string_to_sign = format!(
            "{ALGORITHM}\n{timestamp}\n{scope}\n{}",
            hex::encode(Sha256::digest(canonical.as_bytes()))
        );
        let k_date = hmac(&self.first_key, date.as_bytes());
        let k_service = hmac(&k_date, self.service.as_bytes());
        let k_signing = hmac(&k_service, b"tc3_request");
        let signature = hex::encode(hmac(&k_signing, string_to_sign.as_bytes()));
        format!(
            "{ALGORITHM} Credential={}/{scope}, SignedHeaders={SIGNED_HEADERS}, Signature={signature}",
            self.credentials.secret_id
        )
    }
}

impl Signer for Tc3 {
    fn sign(&self, req: &Signable<'_>) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
        let timestamp = (self.now)()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let authorization = self.authorization(req, timestamp);
        let mut out = Vec::with_capacity(4);
        out.push((X_TC_TIMESTAMP, header_value(&timestamp.to_string(), false)?));
        out.push((X_TC_REGION, header_value(&self.region, false)?));
        if let Some(token) = &self.credentials.token {
            out.push((X_TC_TOKEN, header_value(token, true)?));
        }
        out.push((
            http::header::AUTHORIZATION,
            header_value(&authorization, true)?,
        ));
        Ok(out)
    }
}

fn header_value(value: &str, sensitive: bool) -> Result<HeaderValue, String> {
    let mut v = HeaderValue::from_str(value).map_err(|_| {
        "Tencent Cloud credentials or region contain characters not allowed in a header".to_string()
    })?;
    v.set_sensitive(sensitive);
    Ok(v)
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC accepts a key of any length, so `new_from_slice` cannot fail.
    let mut mac = match Hmac::<Sha256>::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => return [0; 32],
    };
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// The canonical request: method, URI (`/` for API 3.0), the query string as sent (a `GET`'s
/// parameters; empty for a `POST`), the signed headers (names lower-case, values trimmed) and the
/// hex SHA-256 of the body.
pub(crate) fn canonical_request(req: &Signable<'_>) -> String {
    let (path, query) = req.path.split_once('?').unwrap_or((req.path, ""));
    let path = if path.is_empty() { "/" } else { path };
    let content_type = req.content_type.unwrap_or("").trim();
    format!(
        "{}\n{path}\n{query}\ncontent-type:{content_type}\nhost:{}\n\n{SIGNED_HEADERS}\n{}",
        req.method.as_str(),
        req.authority.trim().to_ascii_lowercase(),
        hex::encode(Sha256::digest(req.body))
    )
}

/// `YYYY-MM-DD` of `timestamp` in UTC (the date must be UTC's, not the local one).
pub(crate) fn utc_date(timestamp: u64) -> String {
    let (y, m, d) = crate::caps::lifecycle::civil_from_days((timestamp / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    // Tencent's worked example (Signature v3, "签名方法 v3", step by step for CVM
    // DescribeInstances): these credentials, service, time and body.
    const SECRET_ID: &str = "AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE";
    const SECRET_KEY: &str = "Gu5t9xGARNpq86cd98joQYCN3EXAMPLE";
    const TIMESTAMP: u64 = 1_551_113_065;
    const BODY: &str =
        r#"{"Limit": 1, "Filters": [{"Values": ["\u672a\u547d\u540d"], "Name": "instance-name"}]}"#;

    fn example(secret_key: &str, token: Option<&str>) -> Tc3 {
        Tc3::new(
            Credentials {
                secret_id: SECRET_ID.into(),
                secret_key: secret_key.into(),
                token: token.map(str::to_string),
            },
            "ap-guangzhou",
            "cvm",
        )
    }

    fn signable<'a>(method: &'a http::Method) -> Signable<'a> {
        Signable {
            method,
            authority: "cvm.tencentcloudapi.com",
            path: "/",
            content_type: Some("application/json; charset=utf-8"),
            body: BODY.as_bytes(),
        }
    }

    #[test]
    fn matches_the_documented_example() {
        let post = http::Method::POST;
        let req = signable(&post);
        // Step 1: the canonical request, and its hash (step 2).
        let canonical = canonical_request(&req);
        assert_eq!(
            canonical,
            "POST\n/\n\ncontent-type:application/json; charset=utf-8\n\
             host:cvm.tencentcloudapi.com\n\ncontent-type;host\n\
             35e9c5b0e3ae67532d3c9f17ead6c90222632e5b1ff7f6e89887f1398934f064"
        );
        assert_eq!(
            hex::encode(Sha256::digest(canonical.as_bytes())),
            "5ffe6a04c0664d6b969fab9a13bdab201d63ee709638e2749d62a09ca18d7031"
        );
        assert_eq!(utc_date(TIMESTAMP), "2019-02-25");
        // Step 4: the Authorization value.
        assert_eq!(
            example(SECRET_KEY, None).authorization(&req, TIMESTAMP),
            "TC3-HMAC-SHA256 Credential=AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE/2019-02-25/cvm/tc3_request, \
             SignedHeaders=content-type;host, \
             Signature=72e494ea809ad7a8c8f7a4507b9bddcbaa8e581f516e8da2f66e2c5a96525168"
        );
        // The Chinese edition of the page masks the key as `Gu5t9xGARNpq86cd98joQYCN3*******` and
        // gives the signature for that literal string.
        let masked = example("Gu5t9xGARNpq86cd98joQYCN3*******", None);
        assert!(masked.authorization(&req, TIMESTAMP).ends_with(
            "Signature=2230eefd229f582d8b1b891af7107b91597240707d778ab3738f756258d7652c"
        ));
    }

    #[test]
    fn headers_carry_the_time_region_token_and_hide_secrets() {
        let at = || UNIX_EPOCH + Duration::from_secs(TIMESTAMP);
        let s = example(SECRET_KEY, Some("sts-token-xyz")).with_clock(at);
        let post = http::Method::POST;
        let headers = s.sign(&signable(&post)).unwrap();
        let names: Vec<_> = headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "x-tc-timestamp",
                "x-tc-region",
                "x-tc-token",
                "authorization"
            ]
        );
        assert_eq!(headers[0].1, "1551113065");
        assert_eq!(headers[1].1, "ap-guangzhou");
        assert!(headers[2].1.is_sensitive() && headers[3].1.is_sensitive());
        let auth = headers[3].1.to_str().unwrap();
        assert!(auth.ends_with(
            "Signature=72e494ea809ad7a8c8f7a4507b9bddcbaa8e581f516e8da2f66e2c5a96525168"
        ));
        assert!(!auth.contains(SECRET_KEY));
        let debug = format!("{s:?}");
        assert!(!debug.contains(SECRET_KEY) && !debug.contains("sts-token-xyz"));
    }

    #[test]
    fn dates_are_utc() {
        // 1551113065 is 2019-02-26 00:44:25 in UTC+8 but still the 25th in UTC (the docs' own
        // warning).
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(1_709_251_199), "2024-02-29");
        assert_eq!(utc_date(1_709_251_200), "2024-03-01");
    }
}
