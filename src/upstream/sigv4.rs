//! AWS Signature Version 4, done once for every AWS provider (Bedrock, Polly, …): a [`Signer`]
//! that signs each request as it goes on the wire, from an account's credentials.
//!
//! The algorithm is AWS's documented one ("Create a signed AWS API request", IAM user guide):
//! a canonical request (method, URI, query, the signed headers, the body's SHA-256), a string to
//! sign over it with the credential scope (`<date>/<region>/<service>/aws4_request`), and an
//! HMAC-SHA256 signature with a key derived from the secret through the scope. The signed headers
//! are `content-type` (when sent), `host`, `x-amz-date` and, for temporary credentials,
//! `x-amz-security-token`. The URI is encoded once more, as every service but S3 expects (the
//! path on the wire is already percent-encoded, so a model id's `%3A` is signed as `%253A`).
//! The tests check it against AWS's published SigV4 test-suite signatures.
//!
//! The secret never leaves this type: only the derived signature goes out, and `Debug` shows
//! neither the secret nor the session token.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use http::{HeaderName, HeaderValue};
use sha2::{Digest, Sha256};

use super::provider::{Signable, Signer};
use crate::caps::lifecycle::civil_from_days;

/// An account's AWS credentials.
pub(crate) struct Credentials {
    /// The access key id (`AKIA…`, or `ASIA…` for temporary credentials).
    pub(crate) access_key_id: String,
    /// The secret access key.
    pub(crate) secret: String,
    /// The session token of temporary credentials (STS), sent as `x-amz-security-token`.
    pub(crate) session_token: Option<String>,
}

/// Signs requests to one AWS service in one region.
pub(crate) struct SigV4 {
    credentials: Credentials,
    /// `AWS4` + the secret: the first HMAC key of the derivation, kept ready.
    first_key: Vec<u8>,
    region: String,
    service: &'static str,
    /// The clock (tests set a fixed one to meet the published vectors).
    now: fn() -> SystemTime,
}

impl fmt::Debug for SigV4 {
    // Never the secret or the session token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigV4")
            .field("access_key_id", &self.credentials.access_key_id)
            .field("region", &self.region)
            .field("service", &self.service)
            .finish()
    }
}

const ALGORITHM: &str = "AWS4-HMAC-SHA256";
const X_AMZ_DATE: HeaderName = HeaderName::from_static("x-amz-date");
const X_AMZ_SECURITY_TOKEN: HeaderName = HeaderName::from_static("x-amz-security-token");

impl SigV4 {
    /// A signer for `service` (the signing name: `bedrock`, `polly`) in `region`.
    pub(crate) fn new(credentials: Credentials, region: &str, service: &'static str) -> SigV4 {
        let mut first_key = Vec::with_capacity(4 + credentials.secret.len());
        first_key.extend_from_slice(b"AWS4");
        first_key.extend_from_slice(credentials.secret.as_bytes());
        SigV4 {
            credentials,
            first_key,
            region: region.to_string(),
            service,
            now: SystemTime::now,
        }
    }

    /// The same signer reading its time from `now`.
    #[cfg(test)]
    pub(crate) fn with_clock(mut self, now: fn() -> SystemTime) -> SigV4 {
        self.now = now;
        self
    }

    /// The headers for `req` signed at `at` (`YYYYMMDDTHHMMSSZ`): `x-amz-date`, the session
    /// token if any, and `Authorization`.
    fn headers_at(
        &self,
        req: &Signable<'_>,
        amz_date: &str,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
        let authorization = self.authorization(req, amz_date);
        let mut out = Vec::with_capacity(3);
        out.push((X_AMZ_DATE, header_value(amz_date, false)?));
        if let Some(token) = &self.credentials.session_token {
            out.push((X_AMZ_SECURITY_TOKEN, header_value(token, true)?));
        }
        out.push((
            http::header::AUTHORIZATION,
            header_value(&authorization, true)?,
        ));
        Ok(out)
    }

    /// The `Authorization` value for `req` at `amz_date`.
    pub(crate) fn authorization(&self, req: &Signable<'_>, amz_date: &str) -> String {
        let date = &amz_date[..8.min(amz_date.len())];
        let token = self.credentials.session_token.as_deref();
        let (canonical, signed_headers) = canonical_request(req, amz_date, token);
        let scope = format!("{date}/{}/{}/aws4_request", self.region, self.service);
        let string_to_sign = format!(
            "{ALGORITHM}\n{amz_date}\n{scope}\n{}",
            hex::encode(Sha256::digest(canonical.as_bytes()))
        );
        let key = self.signing_key(date);
        let signature = hex::encode(hmac(&key, string_to_sign.as_bytes()));
        format!(
            "{ALGORITHM} Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            self.credentials.access_key_id
        )
    }

    /// `kSigning`: the secret through the date, region, service and `aws4_request`.
    fn signing_key(&self, date: &str) -> [u8; 32] {
        let k_date = hmac(&self.first_key, date.as_bytes());
        let k_region = hmac(&k_date, self.region.as_bytes());
        let k_service = hmac(&k_region, self.service.as_bytes());
        hmac(&k_service, b"aws4_request")
    }
}

impl Signer for SigV4 {
    fn sign(&self, req: &Signable<'_>) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
        let amz_date = amz_date((self.now)());
        self.headers_at(req, &amz_date)
    }
}

fn header_value(value: &str, sensitive: bool) -> Result<HeaderValue, String> {
    let mut v = HeaderValue::from_str(value)
        .map_err(|_| "AWS credentials contain characters not allowed in a header".to_string())?;
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

/// The canonical request and its signed-header list.
pub(crate) fn canonical_request(
    req: &Signable<'_>,
    amz_date: &str,
    session_token: Option<&str>,
) -> (String, &'static str) {
    let (path, query) = req.path.split_once('?').unwrap_or((req.path, ""));
    let mut out = String::with_capacity(256 + req.path.len());
    out.push_str(req.method.as_str());
    out.push('\n');
    canonical_uri(path, &mut out);
    out.push('\n');
    canonical_query(query, &mut out);
    out.push('\n');
    if let Some(ct) = req.content_type {
        out.push_str("content-type:");
        out.push_str(ct.trim());
        out.push('\n');
    }
    out.push_str("host:");
    out.push_str(req.authority.trim());
    out.push_str("\nx-amz-date:");
    out.push_str(amz_date);
    out.push('\n');
    if let Some(token) = session_token {
        out.push_str("x-amz-security-token:");
        out.push_str(token.trim());
        out.push('\n');
    }
    out.push('\n');
    let signed = match (req.content_type.is_some(), session_token.is_some()) {
        (true, true) => "content-type;host;x-amz-date;x-amz-security-token",
        (true, false) => "content-type;host;x-amz-date",
        (false, true) => "host;x-amz-date;x-amz-security-token",
        (false, false) => "host;x-amz-date",
    };
    out.push_str(signed);
    out.push('\n');
    out.push_str(&hex::encode(Sha256::digest(req.body)));
    (out, signed)
}

/// Each segment of the path as sent, URI-encoded once more (every service but S3).
fn canonical_uri(path: &str, out: &mut String) {
    if path.is_empty() {
        out.push('/');
        return;
    }
    for (i, segment) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        encode(segment.as_bytes(), out);
    }
}

/// The query's parameters, each name and value decoded then URI-encoded, sorted by name then
/// value.
fn canonical_query(query: &str, out: &mut String) {
    if query.is_empty() {
        return;
    }
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let (mut ek, mut ev) = (String::new(), String::new());
            encode(&decode(k), &mut ek);
            encode(&decode(v), &mut ev);
            (ek, ev)
        })
        .collect();
    pairs.sort_unstable();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(k);
        out.push('=');
        out.push_str(v);
    }
}

/// AWS's URI encoding: every byte but `A-Z a-z 0-9 - _ . ~` as `%XY` (upper-case hex).
fn encode(bytes: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 0xf)] as char);
        }
    }
}

/// Percent-decoding of a query component (`+` is left as is: AWS encodes a space as `%20`).
fn decode(s: &str) -> Vec<u8> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let (h, l) = (hex(h).unwrap_or(0), hex(l).unwrap_or(0));
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// `YYYYMMDDTHHMMSSZ` for `at` (UTC).
pub(crate) fn amz_date(at: SystemTime) -> String {
    let secs = at
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    // AWS's SigV4 test suite (docs.aws.amazon.com/IAM/latest/UserGuide/signature-v4-test-suite.html):
    // these credentials, region, service and time.
    const AKID: &str = "AKIDEXAMPLE";
    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    const WHEN: &str = "20150830T123600Z";

    fn suite(token: Option<&str>) -> SigV4 {
        SigV4::new(
            Credentials {
                access_key_id: AKID.into(),
                secret: SECRET.into(),
                session_token: token.map(str::to_string),
            },
            "us-east-1",
            "service",
        )
    }

    fn signable<'a>(
        method: &'a http::Method,
        path: &'a str,
        content_type: Option<&'a str>,
        body: &'a [u8],
    ) -> Signable<'a> {
        Signable {
            method,
            authority: "example.amazonaws.com",
            path,
            content_type,
            body,
        }
    }

    fn signature(auth: &str) -> &str {
        auth.rsplit("Signature=").next().unwrap()
    }

    #[test]
    fn matches_the_published_test_suite() {
        let s = suite(None);
        let get = http::Method::GET;
        let post = http::Method::POST;
        // get-vanilla
        let auth = s.authorization(&signable(&get, "/", None, b""), WHEN);
        assert_eq!(
            auth,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
             SignedHeaders=host;x-amz-date, \
             Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
        );
        // get-vanilla-query-order-key-case: parameters sorted before signing.
        let auth = s.authorization(
            &signable(&get, "/?Param2=value2&Param1=value1", None, b""),
            WHEN,
        );
        assert_eq!(
            signature(&auth),
            "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"
        );
        // post-vanilla: an empty body hashes as the empty string.
        let auth = s.authorization(&signable(&post, "/", None, b""), WHEN);
        assert_eq!(
            signature(&auth),
            "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"
        );
        // post-x-www-form-urlencoded: a signed content type and a hashed body.
        let auth = s.authorization(
            &signable(
                &post,
                "/",
                Some("application/x-www-form-urlencoded"),
                b"Param1=value1",
            ),
            WHEN,
        );
        assert!(auth.contains("SignedHeaders=content-type;host;x-amz-date,"));
        assert_eq!(
            signature(&auth),
            "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"
        );
    }

    #[test]
    fn headers_carry_the_date_the_token_and_hide_secrets() {
        // 2015-08-30T12:36:00Z
        let at = || UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        let s = suite(Some("session-token-xyz")).with_clock(at);
        let get = http::Method::GET;
        let headers = s.sign(&signable(&get, "/", None, b"")).unwrap();
        let names: Vec<_> = headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["x-amz-date", "x-amz-security-token", "authorization"]
        );
        assert_eq!(headers[0].1, WHEN);
        assert!(headers[1].1.is_sensitive() && headers[2].1.is_sensitive());
        let auth = headers[2].1.to_str().unwrap();
        assert!(auth.contains("SignedHeaders=host;x-amz-date;x-amz-security-token,"));
        assert!(!auth.contains(SECRET));
        let debug = format!("{s:?}");
        assert!(!debug.contains(SECRET) && !debug.contains("session-token-xyz"));
    }

    #[test]
    fn uri_is_encoded_again_and_query_normalized() {
        let mut out = String::new();
        canonical_uri("/model/cohere.rerank-v3-5%3A0/invoke", &mut out);
        assert_eq!(out, "/model/cohere.rerank-v3-5%253A0/invoke");
        let mut out = String::new();
        canonical_query("b=2&a=x%20y&a=1", &mut out);
        assert_eq!(out, "a=1&a=x%20y&b=2");
        let mut out = String::new();
        canonical_uri("", &mut out);
        assert_eq!(out, "/");
    }

    #[test]
    fn dates() {
        assert_eq!(amz_date(UNIX_EPOCH), "19700101T000000Z");
        assert_eq!(
            amz_date(UNIX_EPOCH + Duration::from_secs(1_440_938_160)),
            "20150830T123600Z"
        );
        // 2024-02-29T23:59:59Z, a leap day.
        assert_eq!(
            amz_date(UNIX_EPOCH + Duration::from_secs(1_709_251_199)),
            "20240229T235959Z"
        );
    }
}
