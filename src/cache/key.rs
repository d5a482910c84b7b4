//! A cache key: the SHA-256 digest of every field that changes an answer, each written with its
//! length so no two different field lists run together into the same bytes, under the public
//! model's name (the namespace an operator purges).
//!
//! The operations build it (`gateway/cached.rs`): they know which of their fields change the
//! answer, normalised with defaults filled in (an omitted `speed` and `speed: 1` are one key), and
//! leave out those that do not (`retries`).

use sha2::{Digest, Sha256};

/// Which answers one key stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    /// The public model (purging a model drops every key under it).
    pub(crate) model: String,
    /// The digest of the scope and the fields: where the answer is stored.
    pub(crate) digest: [u8; 32],
    /// The digest of the requests in flight that may be collapsed onto one another: the stored
    /// digest and the answer's form (a raw-audio follower cannot take an SSE leader's events,
    /// though both are served from one entry).
    pub(crate) flight: [u8; 32],
}

impl Key {
    /// A key from its parts (an operator's purge names them).
    pub(crate) fn from_parts(model: &str, digest: [u8; 32]) -> Key {
        Key {
            model: model.to_string(),
            digest,
            flight: digest,
        }
    }

    /// The digest in hexadecimal (the `Switchyard-Cache-Key` header, a Redis key, a purge).
    pub(crate) fn hex(&self) -> String {
        hex::encode(self.digest)
    }
}

/// Builds a [`Key`] field by field.
pub(crate) struct KeyBuilder {
    model: String,
    hash: Sha256,
    form: &'static str,
}

impl KeyBuilder {
    /// A key of public model `model` for `operation`, kept for `scope` (a caller's id, or `""`
    /// where the operator shares the model's entries between callers).
    pub(crate) fn new(model: &str, operation: &str, scope: &str) -> KeyBuilder {
        let mut b = KeyBuilder {
            model: model.to_string(),
            hash: Sha256::new(),
            form: "",
        };
        b.hash.update(b"switchyard-cache-v1");
        b.field("model", model.as_bytes());
        b.field("operation", operation.as_bytes());
        b.field("scope", scope.as_bytes());
        b
    }

    /// Add a named field's value (both length-prefixed).
    pub(crate) fn field(&mut self, name: &str, value: &[u8]) -> &mut Self {
        for part in [name.as_bytes(), value] {
            self.hash.update((part.len() as u64).to_le_bytes());
            self.hash.update(part);
        }
        self
    }

    /// Add a field that may be absent (absent and empty differ).
    pub(crate) fn optional(&mut self, name: &str, value: Option<&[u8]>) -> &mut Self {
        match value {
            None => self.field(name, b"\x00absent"),
            Some(v) => {
                self.hash.update([1u8]);
                self.field(name, v)
            }
        }
    }

    /// The form the answer is written in (speech: `audio` or `sse`): not part of where it is
    /// stored (one entry serves both forms), only of which requests in flight are collapsed.
    pub(crate) fn form(&mut self, form: &'static str) -> &mut Self {
        self.form = form;
        self
    }

    /// The key.
    pub(crate) fn finish(self) -> Key {
        let digest: [u8; 32] = self.hash.finalize().into();
        let flight = if self.form.is_empty() {
            digest
        } else {
            let mut h = Sha256::new();
            h.update(digest);
            h.update(self.form.as_bytes());
            h.finalize().into()
        };
        Key {
            model: self.model,
            digest,
            flight,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(scope: &str, fields: &[(&str, &[u8])]) -> Key {
        let mut b = KeyBuilder::new("m", "speech", scope);
        for (n, v) in fields {
            b.field(n, v);
        }
        b.finish()
    }

    #[test]
    fn equal_fields_make_equal_keys_and_any_change_another() {
        let a = key("k1", &[("input", b"hello"), ("voice", b"alloy")]);
        assert_eq!(a, key("k1", &[("input", b"hello"), ("voice", b"alloy")]));
        assert_ne!(a, key("k2", &[("input", b"hello"), ("voice", b"alloy")]));
        assert_ne!(a, key("k1", &[("input", b"hello!"), ("voice", b"alloy")]));
        // Lengths are part of what is hashed: moving bytes between fields changes the key.
        assert_ne!(a, key("k1", &[("input", b"hell"), ("voice", b"oalloy")]));
        assert_eq!(a.hex().len(), 64);
    }

    #[test]
    fn forms_share_an_entry_not_a_flight() {
        let build = |form: &'static str| {
            let mut b = KeyBuilder::new("m", "speech", "");
            b.field("input", b"hello").form(form);
            b.finish()
        };
        let (audio, sse) = (build("audio"), build("sse"));
        assert_eq!(audio.digest, sse.digest);
        assert_ne!(audio.flight, sse.flight);
        assert_eq!(build("audio"), audio);
    }

    #[test]
    fn absent_and_empty_differ() {
        let mut a = KeyBuilder::new("m", "speech", "");
        a.optional("instructions", None);
        let mut b = KeyBuilder::new("m", "speech", "");
        b.optional("instructions", Some(b""));
        assert_ne!(a.finish(), b.finish());
    }
}
