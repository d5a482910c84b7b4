//! Reading a JSON request body into borrowed fields, collecting every problem instead of stopping at
//! the first.
//!
//! A body is parsed once into a list of `(key, raw value)` pairs that borrow from the request bytes;
//! each endpoint then takes the fields it knows with typed getters. Type errors are recorded per field
//! (so a 400 lists all of them), and whatever is left over is the set of fields the spec does not
//! define, which the endpoint checks against what the chosen model accepts natively.
//!
//! A field whose value is JSON `null` is absent, whatever its name (OpenAI's SDKs send unset
//! parameters as `null`): a typed getter sees nothing, a required field says it got `null`, and
//! the leftovers never hold it, so a `null` is neither passed on nor refused as an unknown field.
//!
//! Strings the gateway only passes along (rerank documents) are read as [`JsonStr`]: the caller's
//! literal is kept next to its decoded text, so forwarding it to a provider and echoing it in the
//! answer copy the literal instead of escaping the text again.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::common::error::GatewayError;

use crate::common::error::ValidationErrors;

/// A string that borrows from the body when it has no escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Str<'a>(pub Cow<'a, str>);

impl<'a> Str<'a> {
    /// The text.
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

/// A JSON string kept both as the literal the caller sent (quotes and escapes included, borrowed from
/// the body) and as its decoded text.
///
/// Serializing writes the literal verbatim: it already is valid JSON for exactly this text, so a
/// string that only travels through the gateway is never escaped a second time. The text borrows
/// from the literal when the literal has no escape (then it is the literal without its quotes), and
/// is decoded once otherwise.
#[derive(Debug, Clone)]
pub struct JsonStr<'a> {
    raw: &'a RawValue,
    text: Cow<'a, str>,
}

impl<'a> JsonStr<'a> {
    /// `raw` as a string; `None` when it is another kind of value or a string the decoder refuses
    /// (an escaped lone surrogate: the syntax-only scan that produced `raw` lets it through).
    pub fn from_raw(raw: &'a RawValue) -> Option<JsonStr<'a>> {
        let literal = raw.get();
        let inner = literal.strip_prefix('"')?.strip_suffix('"')?;
        let text = if has_backslash(inner) {
            Cow::Owned(serde_json::from_str::<String>(literal).ok()?)
        } else {
            // `raw` is valid JSON (control characters and bad UTF-8 were refused when it was read),
            // so without a backslash the bytes between the quotes are the text itself.
            Cow::Borrowed(inner)
        };
        Some(JsonStr { raw, text })
    }

    /// The decoded text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The literal as sent, quotes included.
    pub fn raw(&self) -> &'a RawValue {
        self.raw
    }
}

/// Whether `s` holds a backslash (an escape). Every document passes through here, so the check
/// runs over 32-byte blocks with no early exit inside a block, which the compiler turns into vector
/// compares; `str::contains` scans a machine word at a time.
pub(crate) fn has_backslash(s: &str) -> bool {
    let mut blocks = s.as_bytes().chunks_exact(32);
    blocks
        .by_ref()
        .any(|b| b.iter().fold(false, |found, &c| found | (c == b'\\')))
        || blocks.remainder().contains(&b'\\')
}

impl Serialize for JsonStr<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // serde_json copies a `RawValue` into its output as is.
        self.raw.serialize(s)
    }
}

impl<'de> Deserialize<'de> for JsonStr<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(d)?;
        JsonStr::from_raw(raw).ok_or_else(|| de::Error::custom("expected a valid string"))
    }
}

/// The top-level fields of a JSON object body, in order, borrowed from the body.
pub(crate) struct Fields<'a> {
    entries: Vec<(Str<'a>, &'a RawValue)>,
    /// The array of strings read in the same pass as the object ([`Fields::parse_with`]).
    strings: Option<Strings<'a>>,
    pub errors: ValidationErrors,
    prefix: &'static str,
}

/// A field read as an array of strings while the body was parsed.
struct Strings<'a> {
    name: &'static str,
    /// `None`: absent or `null`; `Some(None)`: not an array of strings.
    value: Option<Option<Vec<JsonStr<'a>>>>,
}

/// The object's fields, and `strings`' field (named, not yet read) read as it passes.
struct ObjectVisitor<'a> {
    strings: Option<Strings<'a>>,
}

impl<'de> Visitor<'de> for ObjectVisitor<'de> {
    type Value = (Vec<(Str<'de>, &'de RawValue)>, Option<Strings<'de>>);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut strings = self.strings;
        let mut seen = false;
        let mut out: Vec<(Str<'de>, &'de RawValue)> =
            Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some(key) = map.next_key::<Str<'de>>()? {
            // A repeated key would make one of the two values silently disappear.
            let duplicate = |key: &Str<'_>| {
                de::Error::custom(format_args!("duplicate field `{}`", key.as_str()))
            };
            if let Some(s) = strings.as_mut().filter(|s| s.name == key.as_str()) {
                if std::mem::replace(&mut seen, true) {
                    return Err(duplicate(&key));
                }
                s.value = map.next_value_seed(StringsSeed)?;
                continue;
            }
            let value: &'de RawValue = map.next_value()?;
            if out.iter().any(|(k, _)| k == &key) {
                return Err(duplicate(&key));
            }
            out.push((key, value));
        }
        Ok((out, strings))
    }
}

/// One value read as an array of strings, each kept as a [`JsonStr`]: `None` for `null`,
/// `Some(None)` for anything else that is not such an array (read through, so the body's other
/// fields are still read and the problem is reported as this field's).
struct StringsSeed;

type StringsValue<'a> = Option<Option<Vec<JsonStr<'a>>>>;

impl<'de> DeserializeSeed<'de> for StringsSeed {
    type Value = StringsValue<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StringsSeed {
    type Value = StringsValue<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of strings")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(16));
        let mut all_strings = true;
        // Each element as its literal (one scan, as any raw value), then as a string: another
        // kind of value, or a lone surrogate, spoils the array but is read through.
        while let Some(raw) = seq.next_element::<&'de RawValue>()? {
            match JsonStr::from_raw(raw) {
                Some(s) if all_strings => out.push(s),
                Some(_) => {}
                None => all_strings = false,
            }
        }
        Ok(Some(all_strings.then_some(out)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // Members read as raw values: skipped at any depth, as a raw value's scan skips them.
        while map.next_entry::<IgnoredAny, &'de RawValue>()?.is_some() {}
        Ok(Some(None))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Some(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Some(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Some(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Some(None))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Some(None))
    }
}

impl<'a> Fields<'a> {
    /// Parse a request body that must be a JSON object.
    pub(crate) fn parse(body: &'a [u8]) -> Result<Fields<'a>, GatewayError> {
        Self::parse_object(body, None)
    }

    /// [`Fields::parse`], reading the field `strings` as an array of strings in the same pass
    /// (rerank's documents: tens of kilobytes, otherwise scanned once for the object and again
    /// by [`Fields::string_array`]). Take it with `string_array(strings)`: it is not among the
    /// fields [`Fields::into_rest`] returns, whatever it holds.
    pub(crate) fn parse_with(
        body: &'a [u8],
        strings: &'static str,
    ) -> Result<Fields<'a>, GatewayError> {
        let strings = Strings {
            name: strings,
            value: None,
        };
        Self::parse_object(body, Some(strings))
    }

    fn parse_object(
        body: &'a [u8],
        strings: Option<Strings<'a>>,
    ) -> Result<Fields<'a>, GatewayError> {
        let mut de = serde_json::Deserializer::from_slice(body);
        let (entries, strings) = de
            .deserialize_map(ObjectVisitor { strings })
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
            strings,
            errors: ValidationErrors::default(),
            prefix: "",
        })
    }

    /// Parse a nested object (e.g. `extra_body`), reporting its fields as `prefix.field`.
    pub(crate) fn nested(raw: &'a RawValue, prefix: &'static str) -> Result<Fields<'a>, String> {
        let mut de = serde_json::Deserializer::from_str(raw.get());
        let (entries, _) = de
            .deserialize_map(ObjectVisitor { strings: None })
            .map_err(|e| format!("must be an object: {e}"))?;
        Ok(Fields {
            entries,
            strings: None,
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
    pub(crate) fn take_raw(&mut self, name: &str) -> Option<&'a RawValue> {
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

    pub(crate) fn string(&mut self, name: &str) -> Option<Str<'a>> {
        self.take_typed(name, "a string")
    }

    /// A required string that must not be empty.
    pub(crate) fn required_string(&mut self, name: &str) -> Option<Str<'a>> {
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

    pub(crate) fn boolean(&mut self, name: &str) -> Option<bool> {
        self.take_typed(name, "true or false")
    }

    pub(crate) fn number(&mut self, name: &str) -> Option<f64> {
        self.take_typed(name, "a number")
    }

    /// A non-negative integer; floats such as `2.0` are refused (they signal a client bug).
    pub(crate) fn unsigned(&mut self, name: &str) -> Option<u64> {
        self.take_typed(name, "a non-negative integer")
    }

    /// An array of strings, each kept with its literal (see [`JsonStr`]): one pass over the array,
    /// and only elements with escapes are decoded.
    pub(crate) fn string_array(&mut self, name: &str) -> Option<Vec<JsonStr<'a>>> {
        const EXPECTED: &str = "an array of strings";
        let Some(read) = self.strings.as_mut().filter(|s| s.name == name) else {
            return self.take_typed(name, EXPECTED);
        };
        match read.value.take()? {
            Some(strings) => Some(strings),
            None => {
                self.error(name, format!("must be {EXPECTED}"));
                None
            }
        }
    }

    /// Record a problem with a field of this object.
    pub(crate) fn error(&mut self, name: &str, message: impl Into<String>) {
        let path = self.path(name);
        self.errors.add(path, message);
    }

    /// Whether a problem was already recorded for `name` (so a dependent check stays quiet).
    pub(crate) fn has_error(&self, name: &str) -> bool {
        self.errors.has(&self.path(name))
    }

    /// The fields nobody took, in body order; those whose value is `null` are absent, so they
    /// are not among them.
    pub(crate) fn into_rest(self) -> (Vec<(Str<'a>, &'a RawValue)>, ValidationErrors) {
        let mut entries = self.entries;
        entries.retain(|(_, raw)| raw.get() != "null");
        (entries, self.errors)
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
            b"\x7b\"a\":",
        ] {
            let err = Fields::parse(body).err().unwrap();
            assert_eq!(err.status(), 400, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn json_strings_borrow_unless_escaped_and_serialize_verbatim() {
        let body = r#"{"d":["plain text", "caf\u00e9 \"x\" \\ \ud83d\ude00\n", "naïve 日本"]}"#;
        let mut f = Fields::parse(body.as_bytes()).unwrap();
        let docs = f.string_array("d").unwrap();
        assert_eq!(docs.len(), 3);
        // No backslash: the text is the literal minus its quotes, borrowed from the body.
        assert!(matches!(docs[0].text, Cow::Borrowed("plain text")));
        assert!(matches!(docs[2].text, Cow::Borrowed("naïve 日本")));
        assert_eq!(docs[2].raw().get(), "\"naïve 日本\"");
        // Escapes: decoded once, owned.
        assert!(matches!(docs[1].text, Cow::Owned(_)));
        assert_eq!(docs[1].as_str(), "café \"x\" \\ \u{1F600}\n");
        // The literal goes out exactly as it came in, escapes untouched.
        assert_eq!(
            serde_json::to_string(&docs[1]).unwrap(),
            r#""caf\u00e9 \"x\" \\ \ud83d\ude00\n""#
        );
        assert_eq!(
            serde_json::to_string(&docs).unwrap(),
            r#"["plain text","caf\u00e9 \"x\" \\ \ud83d\ude00\n","naïve 日本"]"#
        );
    }

    #[test]
    fn backslashes_are_found_anywhere() {
        for len in [0, 1, 31, 32, 33, 63, 64, 65, 100] {
            let plain = "a".repeat(len);
            assert!(!has_backslash(&plain), "{len}");
            for at in 0..len {
                let mut s = plain.clone().into_bytes();
                s[at] = b'\\';
                let s = String::from_utf8(s).unwrap();
                assert!(has_backslash(&s), "{len} {at}");
            }
        }
    }

    #[test]
    fn string_arrays_refuse_non_strings_and_lone_surrogates() {
        for body in [
            &br#"{"d":["a",1]}"#[..],
            br#"{"d":"a"}"#,
            br#"{"d":["a",null]}"#,
            br#"{"d":["\ud800"]}"#,
            br#"{"d":["x\udc00"]}"#,
        ] {
            let mut f = Fields::parse(body).unwrap();
            assert!(f.string_array("d").is_none());
            let (_, errors) = f.into_rest();
            assert_eq!(errors.details()["d"], "must be an array of strings");
        }
    }

    #[test]
    fn null_is_absent_whatever_the_name() {
        let body = br#"{"model":"m","style":null,"n":null,"prompt":null,"extra":2,"x":null}"#;
        let mut f = Fields::parse(body).unwrap();
        assert!(f.unsigned("n").is_none());
        assert!(f.required_string("prompt").is_none());
        let (rest, errors) = f.into_rest();
        let names: Vec<&str> = rest.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["model", "extra"]);
        assert_eq!(errors.details()["prompt"], "is required (got null)");
        assert!(!errors.has("n"));
        // Nested objects (`extra_body`, a custom voice) read the same way.
        let raw: &RawValue = serde_json::from_str(r#"{"seed":null,"a":1}"#).unwrap();
        let (rest, _) = Fields::nested(raw, "extra_body").unwrap().into_rest();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].0.as_str(), "a");
    }

    /// Reading the strings in the object's pass gives what reading them afterwards gives: the
    /// same strings and literals, the same problems, the same leftovers.
    #[test]
    fn parse_with_reads_what_parse_then_string_array_reads() {
        let deep = format!(r#"{{"d":{}1{},"x":2}}"#, "[".repeat(300), "]".repeat(300));
        let deep_object = format!(r#"{{"d":{}1{}}}"#, r#"{"a":"#.repeat(300), "}".repeat(300));
        let bodies: Vec<&[u8]> = vec![
            r#"{"m":"x","d":["a","b\n\"c\"","\u00e9 \ud83d\ude00","naïve 日本"],"e":1}"#.as_bytes(),
            br#"{"d":[]}"#,
            br#"{"d":[ "a" , "b" ] , "n":null}"#,
            br#"{"d":null,"e":[1]}"#,
            br#"{"e":["a"]}"#,
            br#"{"d":["a",1,"b"],"e":true}"#,
            br#"{"d":["a",null]}"#,
            br#"{"d":["a",["b"]]}"#,
            br#"{"d":["a",{"b":"c"}]}"#,
            br#"{"d":"a"}"#,
            br#"{"d":1.5}"#,
            br#"{"d":-3}"#,
            br#"{"d":true}"#,
            br#"{"d":{"a":["b"],"c":{"d":1}}}"#,
            br#"{"d":["\ud800"],"e":"f"}"#,
            br#"{"d":["x\udc00"]}"#,
            br#"{"d":"\u0041"}"#,
            br#"{"\u0064":["a"]}"#,
            deep.as_bytes(),
            deep_object.as_bytes(),
        ];
        for body in bodies {
            let shown = String::from_utf8_lossy(body);
            let (Ok(mut a), Ok(mut b)) = (Fields::parse(body), Fields::parse_with(body, "d"))
            else {
                panic!("{shown}");
            };
            let (da, db) = (a.string_array("d"), b.string_array("d"));
            let pairs = |d: &Option<Vec<JsonStr<'_>>>| {
                d.as_ref().map(|d| {
                    d.iter()
                        .map(|s| (s.raw().get().to_string(), s.as_str().to_string()))
                        .collect::<Vec<_>>()
                })
            };
            assert_eq!(pairs(&da), pairs(&db), "{shown}");
            let ((ra, ea), (rb, eb)) = (a.into_rest(), b.into_rest());
            let names = |r: &[(Str<'_>, &RawValue)]| {
                r.iter()
                    .map(|(k, v)| format!("{}={}", k.as_str(), v.get()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(names(&ra), names(&rb), "{shown}");
            assert_eq!(ea.details(), eb.details(), "{shown}");
        }
    }

    /// Bodies that are no JSON object, or repeat a field, are refused by both.
    #[test]
    fn parse_with_refuses_what_parse_refuses() {
        for body in [
            &br#"{"d":["a"],"d":["b"]}"#[..],
            br#"{"d":null,"d":["b"]}"#,
            br#"{"d":["a"],"d":null}"#,
            br#"{"d":["a"],"e":1,"e":2}"#,
            br#"{"d":["a",]}"#,
            br#"{"d":["a" "b"]}"#,
            br#"{"d":["a"}"#,
            br#"{"d":["a"]"#,
            br#"{"d":[tru]}"#,
            br#"{"d":{"a" 1}}"#,
            b"[\"d\"]",
            br#"{"d":["a"]} x"#,
        ] {
            let shown = String::from_utf8_lossy(body);
            let a = Fields::parse(body).err().map(|e| e.status());
            let b = Fields::parse_with(body, "d").err().map(|e| e.status());
            assert_eq!((a, b), (Some(400), Some(400)), "{shown}");
        }
        let err = Fields::parse_with(br#"{"d":["a"],"d":["b"]}"#, "d").err();
        assert!(
            format!("{err:?}").contains("duplicate field `d`"),
            "{err:?}"
        );
    }

    #[test]
    fn escaped_strings_are_decoded() {
        let mut f = Fields::parse(br#"{"q":"a\nb"}"#).unwrap();
        assert_eq!(f.string("q").unwrap().as_str(), "a\nb");
    }
}
