//! Reading a JSON request body into borrowed fields, collecting every problem instead of stopping at
//! the first.
//!
//! A body is parsed once into a list of `(key, raw value)` pairs that borrow from the request bytes;
//! each endpoint then takes the fields it knows with typed getters. Type errors are recorded per field
//! (so a 400 lists all of them), and whatever is left over is the set of fields the spec does not
//! define, which the endpoint checks against what the chosen model accepts natively.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::error::{GatewayError, ValidationErrors};

/// A string that borrows from the body when it has no escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Str<'a>(pub Cow<'a, str>);

impl<'a> Str<'a> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// The top-level fields of a JSON object body, in order, borrowed from the body.
pub struct Fields<'a> {
    entries: Vec<(Str<'a>, &'a RawValue)>,
    pub errors: ValidationErrors,
    prefix: &'static str,
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = Vec<(Str<'de>, &'de RawValue)>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out: Vec<(Str<'de>, &'de RawValue)> =
            Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some(key) = map.next_key::<Str<'de>>()? {
            let value: &'de RawValue = map.next_value()?;
            // A repeated key would make one of the two values silently disappear.
            if out.iter().any(|(k, _)| k == &key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate field `{}`",
                    key.as_str()
                )));
            }
            out.push((key, value));
        }
        Ok(out)
    }
}

impl<'a> Fields<'a> {
    /// Parse a request body that must be a JSON object.
    pub fn parse(body: &'a [u8]) -> Result<Fields<'a>, GatewayError> {
        let mut de = serde_json::Deserializer::from_slice(body);
        let entries = de
            .deserialize_map(ObjectVisitor)
            .and_then(|e| de.end().map(|_| e))
            .map_err(|e| {
                let what = if e.is_data() {
                    format!("the body must be a JSON object: {e}")
                } else {
                    format!("the body is not valid JSON: {e}")
                };
                GatewayError::field("body", what)
            })?;
        Ok(Fields {
            entries,
            errors: ValidationErrors::default(),
            prefix: "",
        })
    }

    /// Parse a nested object (e.g. `extra_body`), reporting its fields as `prefix.field`.
    pub fn nested(raw: &'a RawValue, prefix: &'static str) -> Result<Fields<'a>, String> {
        let mut de = serde_json::Deserializer::from_str(raw.get());
        let entries = de
            .deserialize_map(ObjectVisitor)
            .map_err(|e| format!("must be an object: {e}"))?;
        Ok(Fields {
            entries,
            errors: ValidationErrors::default(),
            prefix,
        })
    }

    fn path(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.prefix)
        }
    }

    /// Remove a field and return its raw value; `null` counts as absent.
    pub fn take_raw(&mut self, name: &str) -> Option<&'a RawValue> {
        let pos = self.entries.iter().position(|(k, _)| k.as_str() == name)?;
        let (_, raw) = self.entries.remove(pos);
        (raw.get() != "null").then_some(raw)
    }

    fn take_typed<T: Deserialize<'a>>(&mut self, name: &str, expected: &str) -> Option<T> {
        let raw = self.take_raw(name)?;
        match serde_json::from_str::<T>(raw.get()) {
            Ok(v) => Some(v),
            Err(_) => {
                let path = self.path(name);
                self.errors.add(path, format!("must be {expected}"));
                None
            }
        }
    }

    pub fn string(&mut self, name: &str) -> Option<Str<'a>> {
        self.take_typed(name, "a string")
    }

    /// A required string that must not be empty.
    pub fn required_string(&mut self, name: &str) -> Option<Str<'a>> {
        let had = self.entries.iter().any(|(k, _)| k.as_str() == name);
        match self.string(name) {
            Some(s) if s.as_str().trim().is_empty() => {
                let path = self.path(name);
                self.errors.add(path, "must not be empty");
                None
            }
            Some(s) => Some(s),
            None => {
                let path = self.path(name);
                if !self.errors.has(&path) {
                    let why = if had {
                        "is required (got null)"
                    } else {
                        "is required"
                    };
                    self.errors.add(path, why);
                }
                None
            }
        }
    }

    pub fn boolean(&mut self, name: &str) -> Option<bool> {
        self.take_typed(name, "true or false")
    }

    pub fn number(&mut self, name: &str) -> Option<f64> {
        self.take_typed(name, "a number")
    }

    /// A non-negative integer; floats such as `2.0` are refused (they signal a client bug).
    pub fn unsigned(&mut self, name: &str) -> Option<u64> {
        self.take_typed(name, "a non-negative integer")
    }

    pub fn string_array(&mut self, name: &str) -> Option<Vec<Str<'a>>> {
        self.take_typed(name, "an array of strings")
    }

    /// Record a problem with a field of this object.
    pub fn error(&mut self, name: &str, message: impl Into<String>) {
        let path = self.path(name);
        self.errors.add(path, message);
    }

    /// Whether a problem was already recorded for `name` (so a dependent check stays quiet).
    pub fn has_error(&self, name: &str) -> bool {
        self.errors.has(&self.path(name))
    }

    /// The fields nobody took, in body order.
    pub fn into_rest(self) -> (Vec<(Str<'a>, &'a RawValue)>, ValidationErrors) {
        (self.entries, self.errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrows_and_collects_type_errors() {
        let body = br#"{"model":"m","speed":"fast","n":2.5,"extra":1}"#;
        let mut f = Fields::parse(body).unwrap();
        let model = f.string("model").unwrap();
        assert!(matches!(model.0, Cow::Borrowed("m")));
        assert!(f.number("speed").is_none());
        assert!(f.unsigned("n").is_none());
        let (rest, errors) = f.into_rest();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].0.as_str(), "extra");
        assert_eq!(errors.details()["speed"], "must be a number");
        assert_eq!(errors.details()["n"], "must be a non-negative integer");
    }

    #[test]
    fn rejects_duplicates_non_objects_and_trailing_bytes() {
        for body in [
            &br#"{"a":1,"a":2}"#[..],
            b"[1,2]",
            b"{\"a\":1} x",
            b"{\"a\":",
        ] {
            let err = Fields::parse(body).err().unwrap();
            assert_eq!(err.status(), 400, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn escaped_strings_are_decoded() {
        let mut f = Fields::parse(br#"{"q":"a\nb"}"#).unwrap();
        assert_eq!(f.string("q").unwrap().as_str(), "a\nb");
    }
}
