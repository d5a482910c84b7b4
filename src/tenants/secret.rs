//! A database key's secret: `sy_` and 43 characters of base64url (32 random bytes from the
//! operating system). Only its SHA-256 digest is stored, and its first 9 characters (the
//! prefix, for recognising a key without revealing it).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// How long a key's prefix is: `sy_` and six characters.
const PREFIX_CHARS: usize = 9;

/// A freshly made secret. Its `Debug` never shows it.
pub(crate) struct Secret {
    /// The secret itself: returned to the administrator once, never stored or logged.
    pub(crate) text: String,
    /// Its SHA-256.
    pub(crate) digest: [u8; 32],
    /// Its first 9 characters.
    pub(crate) prefix: String,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({}…)", self.prefix)
    }
}

/// A new secret from 32 random bytes.
pub(crate) fn generate() -> Secret {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let text = format!("sy_{}", URL_SAFE_NO_PAD.encode(bytes));
    let digest = Sha256::digest(text.as_bytes()).into();
    let prefix = text.chars().take(PREFIX_CHARS).collect();
    Secret {
        text,
        digest,
        prefix,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_sy_and_43_base64url_characters_with_its_digest_and_prefix() {
        let s = generate();
        assert_eq!(s.text.len(), 46);
        assert!(s.text.starts_with("sy_"));
        assert!(s.text[3..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(s.prefix, &s.text[..9]);
        assert_eq!(hex::encode(s.digest), crate::auth::sha256_hex(&s.text));
        assert!(!format!("{s:?}").contains(&s.text));
        assert_ne!(generate().text, s.text);
    }
}
