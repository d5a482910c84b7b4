//! An image's base64 text as it travels from a provider's JSON answer to the caller's.
//!
//! A GPT image answer is mostly one string (about 1.5 MB of base64 for a 1024×1024 PNG). Read
//! into a `String` and written back with serde_json, every byte of it is checked for escapes
//! twice, once by the parser and once by the serializer, and copied twice. A [`Base64Text`] read
//! from a provider's JSON keeps the string's literal instead (quotes included): the parser only
//! skips over it, and serializing writes the literal as it came, with no escaping pass. A literal
//! holding an escape (a provider that writes `\/`) is decoded, and then written as any string is,
//! so the caller's text is the same either way.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// Base64 text of an image: the provider's JSON string literal when it has no escape, else the
/// decoded text.
#[derive(Clone)]
pub struct Base64Text(Repr);

#[derive(Clone)]
enum Repr {
    /// Decoded text (made by the gateway or read from a non-JSON answer).
    Text(String),
    /// A JSON string literal with no backslash: the text is the literal without its quotes.
    Literal(Box<RawValue>),
}

impl Base64Text {
    /// `raw` as base64 text; `None` when it is not a JSON string.
    pub fn from_literal(raw: Box<RawValue>) -> Option<Base64Text> {
        let inner = unquoted(raw.get())?;
        if crate::common::json::has_backslash(inner) {
            let text = serde_json::from_str::<String>(raw.get()).ok()?;
            return Some(Base64Text(Repr::Text(text)));
        }
        Some(Base64Text(Repr::Literal(raw)))
    }

    /// The base64 text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Text(s) => s,
            // Made only from a literal that `unquoted` accepted.
            Repr::Literal(raw) => unquoted(raw.get()).unwrap_or_default(),
        }
    }

    /// Whether the text is empty.
    pub fn is_empty(&self) -> bool {
        self.as_str().is_empty()
    }
}

/// The text between a JSON string literal's quotes.
fn unquoted(literal: &str) -> Option<&str> {
    literal.strip_prefix('"')?.strip_suffix('"')
}

impl From<String> for Base64Text {
    fn from(text: String) -> Base64Text {
        Base64Text(Repr::Text(text))
    }
}

impl From<&str> for Base64Text {
    fn from(text: &str) -> Base64Text {
        Base64Text(Repr::Text(text.to_string()))
    }
}

impl PartialEq for Base64Text {
    fn eq(&self, other: &Base64Text) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Base64Text {}

impl PartialEq<&str> for Base64Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Debug for Base64Text {
    // Its length, not megabytes of base64 in a debug line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Base64Text({} bytes)", self.as_str().len())
    }
}

impl Serialize for Base64Text {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Repr::Text(text) => s.serialize_str(text),
            // serde_json copies a `RawValue` into its output as is: the literal is valid JSON
            // for exactly this text.
            Repr::Literal(raw) => raw.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Base64Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Base64Text::from)
    }
}

#[cfg(test)]
mod tests {
    use super::Base64Text;
    use serde_json::value::RawValue;

    fn literal(json: &str) -> Option<Base64Text> {
        let raw: Box<RawValue> = serde_json::from_str(json).ok()?;
        Base64Text::from_literal(raw)
    }

    #[test]
    fn a_literal_is_written_back_as_it_came() {
        let b = literal(r#""iVBORw0KGgo=""#).unwrap();
        assert_eq!(b.as_str(), "iVBORw0KGgo=");
        assert_eq!(serde_json::to_string(&b).unwrap(), r#""iVBORw0KGgo=""#);
    }

    #[test]
    fn escapes_are_decoded_and_the_text_written_as_any_string() {
        let b = literal(r#""ab\/cd\u002B==""#).unwrap();
        assert_eq!(b.as_str(), "ab/cd+==");
        assert_eq!(serde_json::to_string(&b).unwrap(), r#""ab/cd+==""#);
        assert_eq!(b, Base64Text::from("ab/cd+=="));
    }

    #[test]
    fn other_values_are_not_text() {
        assert!(literal("12").is_none());
        assert!(literal(r#"{"a":"b"}"#).is_none());
        assert!(literal(r#""""#).unwrap().is_empty());
    }

    #[test]
    fn made_and_read_text_round_trips() {
        let b = Base64Text::from("AAAA".to_string());
        let json = serde_json::to_string(&b).unwrap();
        assert_eq!(json, r#""AAAA""#);
        assert_eq!(serde_json::from_str::<Base64Text>(&json).unwrap(), b);
        assert_eq!(format!("{b:?}"), "Base64Text(4 bytes)");
    }
}
