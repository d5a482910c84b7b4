//! A request's id: the caller's `X-Request-Id` when it sent a sane one, else one the gateway
//! makes. It goes back in every answer's `X-Request-Id` header (and in an SSE error event),
//! and into the access line, the usage ledger and the trace, so a caller's complaint leads
//! straight to the records.
//!
//! Held inline (a fixed 64-byte buffer, `Copy`): taking or making one allocates nothing, and a
//! generated id is 128 bits from the thread's random generator (no system call per request).

use std::fmt;

/// The header that carries it, both ways.
pub(crate) const HEADER: &str = "x-request-id";

/// The longest caller's id kept; a longer one is replaced by a generated id.
pub(crate) const MAX_LEN: usize = 64;

/// A request id: 1 to [`MAX_LEN`] visible ASCII characters that need no quoting in a header,
/// a log line or JSON.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestId {
    len: u8,
    /// Made by the gateway (not the caller's): random hex that can carry no one's secret.
    made: bool,
    bytes: [u8; MAX_LEN],
}

impl Default for RequestId {
    /// The empty id, before a request's head is read.
    fn default() -> Self {
        RequestId {
            len: 0,
            made: false,
            bytes: [0; MAX_LEN],
        }
    }
}

impl RequestId {
    /// The caller's `X-Request-Id` when it is sane, else a generated one.
    pub(crate) fn of(headers: &http::HeaderMap) -> RequestId {
        headers
            .get(HEADER)
            .and_then(|v| RequestId::sane(v.as_bytes()))
            .unwrap_or_else(RequestId::generate)
    }

    /// `raw` as an id, when it is 1 to [`MAX_LEN`] characters, each an HTTP token character
    /// (RFC 9110 §5.6.2) or one of `/ = : @` (base64 and prefixed ids): nothing a header, a
    /// log line or a JSON string would have to escape, no space, no control character.
    pub(crate) fn sane(raw: &[u8]) -> Option<RequestId> {
        if raw.is_empty() || raw.len() > MAX_LEN || !raw.iter().all(|&b| allowed(b)) {
            return None;
        }
        let mut id = RequestId::default();
        id.bytes[..raw.len()].copy_from_slice(raw);
        id.len = raw.len() as u8;
        Some(id)
    }

    /// A fresh id: 128 random bits as 32 lowercase hex digits.
    pub(crate) fn generate() -> RequestId {
        let n: u128 = rand::random();
        let mut id = RequestId::default();
        hex_into(&n.to_be_bytes(), &mut id.bytes[..32]);
        id.len = 32;
        id.made = true;
        id
    }

    /// Whether the gateway made this id ([`RequestId::generate`]) rather than the caller: such
    /// an id holds only random hex, so the access line writes it without a credential scan.
    pub(crate) fn made(&self) -> bool {
        self.made
    }

    /// The id as text (`""` before a request's head is read).
    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII is ever stored.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }

    /// Whether no id was set.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The answer's `X-Request-Id` header, as the gateway's answers list extra headers.
    pub(crate) fn header(&self) -> (&'static str, String) {
        (HEADER, self.as_str().to_string())
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn allowed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~/=:@".contains(&b)
}

/// `bytes` as lowercase hex into `out` (twice as long).
pub(crate) fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = DIGITS[usize::from(b >> 4)];
        out[2 * i + 1] = DIGITS[usize::from(b & 0xf)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sane_callers_id_is_kept() {
        for raw in ["abc-123", "req_01HZX:9/Ab+c==", &"a".repeat(MAX_LEN)] {
            let mut h = http::HeaderMap::new();
            h.insert(HEADER, raw.parse().unwrap());
            assert_eq!(RequestId::of(&h).as_str(), raw);
        }
    }

    #[test]
    fn anything_else_gets_a_generated_id() {
        for raw in [
            &b""[..],
            b"has space",
            b"quote\"",
            b"back\\slash",
            b"brace{",
            b"caf\xc3\xa9",
            &[b'a'; MAX_LEN + 1],
        ] {
            assert!(RequestId::sane(raw).is_none(), "{raw:?}");
        }
        let mut h = http::HeaderMap::new();
        h.insert(HEADER, http::HeaderValue::from_bytes(b"a b").unwrap());
        let id = RequestId::of(&h);
        assert_eq!(id.as_str().len(), 32);
        assert!(id.as_str().bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(RequestId::generate(), RequestId::generate());
        assert!(RequestId::default().is_empty());
        // Only the gateway's own ids skip the access line's credential scan.
        assert!(id.made() && RequestId::generate().made());
        let mut h = http::HeaderMap::new();
        h.insert(
            HEADER,
            http::HeaderValue::from_static("0123456789abcdef0123456789abcdef"),
        );
        assert!(!RequestId::of(&h).made());
    }
}
