//! The Cohere-shaped rerank wire format: a query and a list of documents in, scored document
//! indexes out. Nine providers speak it, each with its own spellings.
//!
//! A provider is a [`Wire`], a `const` of its path and names (where the documents go, what `top_n`
//! is called, which flags it is sent, where the answer lists its results and what the score is
//! called), plus a small `Deserialize` type of its own implementing [`Reported`] for whatever it
//! reports beside the scores (billed tokens, request ids, an error inside a 200), and how it
//! counts the query when it bills ([`QueryCounting`], the profile's `billing`). The request is
//! written in one pass by a hand-written `Serialize` driven by the `Wire`: the caller's document
//! literals are copied as sent (never re-escaped) and no `serde_json::Value` is built. The answer
//! is read in one pass too: this module reads the results list (only `index` and the score; a
//! document the provider echoes is skipped) and hands every other member to the provider's
//! `Reported` type, so each provider's members keep exactly the types it declares.
//!
//! The gateway never asks for documents back: each provider's "return documents" flag is sent as
//! false, and the public answer re-attaches the caller's own strings by index.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, StrDeserializer};
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::common::error::GatewayError;

pub(crate) use crate::api::rerank::QueryCounting;
use crate::api::rerank::{RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::UpstreamError;
use crate::common::native::NativeRequest;
use crate::upstream::provider::bad_answer;
use crate::upstream::provider::Provider;

// ---- the profile -----------------------------------------------------------------------------

/// How one provider spells the request and where its answer keeps the results.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wire {
    /// Path relative to the provider's base URL.
    pub path: &'static str,
    /// Whether the native model name is sent as `model`.
    pub model: bool,
    /// Where the query and documents go, and where the options go, when the provider nests them;
    /// `None`: both at the top level.
    pub nested: Option<Nested>,
    /// The documents' name (`query` is called `query` everywhere).
    pub documents: &'static str,
    /// Whether the query and each document travel as `{"text": ...}` objects rather than as
    /// strings (NVIDIA NIM's `query: {text}`, `passages: [{text}]`).
    pub text_objects: bool,
    /// What `top_n` is called. It is sent only when the caller gave one: every provider's own
    /// default is every document, which is also the gateway's. `None`: never sent (the gateway
    /// keeps the best `top_n` itself).
    pub top_n: Option<&'static str>,
    /// Flags sent as `false`, after `top_n`: "return documents" (the gateway re-attaches the
    /// caller's own strings, so an echo would only enlarge the answer) and the like.
    pub off: &'static [&'static str],
    /// The members leading to the results list (`["output", "results"]`: DashScope's
    /// `output.results`); empty when the answer is the list itself.
    pub results: &'static [&'static str],
    /// The score's name in each result.
    pub score: &'static str,
    /// How the provider counts the query when it bills: the public `query_tokens` (and the
    /// gateway's total when the provider reports none) follow it. Every provider states its own,
    /// with the source in its ledger.
    pub billing: QueryCounting,
}

impl Wire {
    /// Cohere v2's own spelling (`POST /v2/rerank`), which the other providers vary.
    pub(crate) const COHERE: Wire = Wire {
        path: "/v2/rerank",
        model: true,
        nested: None,
        documents: "documents",
        text_objects: false,
        top_n: Some("top_n"),
        off: &[],
        results: &["results"],
        score: "relevance_score",
        // Cohere scores the query with each document (docs.cohere.com/docs/rerank-2); it bills
        // search units, not tokens, so the gateway's total follows this formula.
        billing: QueryCounting::PerDocument,
    };
}

/// A request whose query and documents live in one member and the options (`top_n`, the flags,
/// the caller's pass-through fields) in another.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Nested {
    pub input: &'static str,
    pub options: &'static str,
}

/// What a provider's answer reports beside the scores: its other top-level members, read with the
/// types the provider declares (a member it does not declare is skipped unread).
pub(crate) trait Reported: DeserializeOwned + Default {
    /// The provider's billed token figure, read with [`billed`] (`None`: the answer gives none,
    /// and `total_tokens` is the gateway's), after adding anything else billed (in other units)
    /// or identifying to `metadata`.
    fn billed(self, metadata: &mut Map<String, Value>) -> Option<u64>;

    /// An error the provider reported inside this 2xx answer (`body`), classified like the error
    /// it is. Checked before the results are looked for: such an answer has none.
    fn error(&self, _provider: &Provider, _body: &[u8]) -> Option<UpstreamError> {
        None
    }
}

/// Nothing beside the scores.
#[derive(Deserialize, Default)]
pub(crate) struct Nothing {}

impl Reported for Nothing {
    fn billed(self, _metadata: &mut Map<String, Value>) -> Option<u64> {
        None
    }
}

/// A token count as a provider's answer states it. Read as a number of any JSON kind (a float or a
/// negative number parses, so a surprising figure never makes a good answer unreadable); only
/// [`billed`] turns it into a count.
pub(crate) type Count = Option<f64>;

/// The one way every rerank adapter reads a billed token figure: the sum of the parts the provider
/// bills, each believed only when finite and non-negative (`crate::providers::billed_tokens`);
/// `None` when no part is.
pub(crate) fn billed(parts: &[Count]) -> Option<u64> {
    parts
        .iter()
        .filter_map(|p| crate::providers::billed_tokens(*p))
        .reduce(u64::saturating_add)
}

/// OpenAI-style `usage.total_tokens`.
#[derive(Deserialize, Default)]
pub(crate) struct UsageTotal {
    #[serde(default)]
    usage: Option<TotalTokens>,
}

#[derive(Deserialize)]
struct TotalTokens {
    #[serde(default)]
    total_tokens: Count,
}

impl Reported for UsageTotal {
    fn billed(self, _metadata: &mut Map<String, Value>) -> Option<u64> {
        self.usage.and_then(|u| billed(&[u.total_tokens]))
    }
}

/// Put the provider's request id into `metadata`, unless it is empty.
pub(crate) fn request_id(metadata: &mut Map<String, Value>, id: Option<String>) {
    if let Some(id) = id.filter(|s| !s.is_empty()) {
        metadata.insert("request_id".into(), id.into());
    }
}

// ---- translation to native -------------------------------------------------------------------

/// The native request for `req` sent to `target`.
pub(crate) fn request(
    wire: &Wire,
    target: &Target,
    req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let body = Body {
        wire,
        model: &target.native_model,
        req,
    };
    let mut out = Vec::with_capacity(body.size_hint());
    body.serialize(&mut serde_json::Serializer::new(&mut out))
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    Ok(NativeRequest::post_json(wire.path, out))
}

/// The native body: `model`, `query`, the documents, then the options (`top_n`, the flags, and the
/// caller's pass-through fields verbatim), each group at the top level or nested as the wire says.
struct Body<'a> {
    wire: &'a Wire,
    model: &'a str,
    req: &'a RerankRequest<'a>,
}

impl Body<'_> {
    /// Bytes the body will take, near enough that the buffer is allocated once: the documents'
    /// literals dominate.
    fn size_hint(&self) -> usize {
        const NAMES: usize = 128;
        let docs: usize = self
            .req
            .documents
            .iter()
            .map(|d| d.raw().get().len() + 1)
            .sum();
        let extra: usize = self
            .req
            .passthrough
            .iter()
            .map(|(k, v)| k.as_str().len() + v.get().len() + 4)
            .sum();
        // `{"text":}` around the query and each document, when the wire wraps them.
        let wrapping = if self.wire.text_objects {
            10 * (self.req.documents.len() + 1)
        } else {
            0
        };
        NAMES + self.model.len() + self.req.query.as_str().len() + docs + extra + wrapping
    }

    fn input<M: SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
        let documents = &self.req.documents[..];
        if self.wire.text_objects {
            m.serialize_entry("query", &Text(self.req.query.as_str()))?;
            return m.serialize_entry(self.wire.documents, &Texts(documents));
        }
        m.serialize_entry("query", self.req.query.as_str())?;
        // The caller's literals, copied as sent.
        m.serialize_entry(self.wire.documents, documents)
    }

    fn options<M: SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
        if let (Some(name), true) = (self.wire.top_n, self.req.top_n_given) {
            m.serialize_entry(name, &self.req.top_n)?;
        }
        for flag in self.wire.off {
            m.serialize_entry(flag, &false)?;
        }
        // The family's native fields travel verbatim after the known ones.
        for (key, value) in &self.req.passthrough {
            m.serialize_entry(key.as_str(), value)?;
        }
        Ok(())
    }
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        if self.wire.model {
            m.serialize_entry("model", self.model)?;
        }
        match self.wire.nested {
            None => {
                self.input(&mut m)?;
                self.options(&mut m)?;
            }
            Some(nested) => {
                m.serialize_entry(nested.input, &Group(self, Part::Input))?;
                m.serialize_entry(nested.options, &Group(self, Part::Options))?;
            }
        }
        m.end()
    }
}

/// A value as `{"text": value}`.
struct Text<T>(T);

impl<T: Serialize> Serialize for Text<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("text", &self.0)?;
        m.end()
    }
}

/// The caller's document literals, each as `{"text": literal}` (still copied as sent).
struct Texts<'b, T>(&'b [T]);

impl<T: Serialize> Serialize for Texts<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(Text))
    }
}

enum Part {
    Input,
    Options,
}

/// One part of a nested body, as its own object.
struct Group<'b, 'a>(&'b Body<'a>, Part);

impl Serialize for Group<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        match self.1 {
            Part::Input => self.0.input(&mut m)?,
            Part::Options => self.0.options(&mut m)?,
        }
        m.end()
    }
}

// ---- translation back ------------------------------------------------------------------------

/// A 2xx answer as read: the scores (`None` when the results member is missing, which only an
/// error inside the answer may excuse) and what else the provider reported.
pub(crate) struct Answer<R> {
    scores: Option<Vec<(usize, f64)>>,
    pub reported: R,
}

/// Read a 2xx answer to `req`; anything but the expected JSON is a bad response.
pub(crate) fn read<R: Reported>(
    wire: &Wire,
    provider: &Provider,
    req: &RerankRequest<'_>,
    body: &[u8],
) -> Result<Answer<R>, UpstreamError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let scores = ScoresSeed {
        within: wire.results.get(1..).unwrap_or_default(),
        score: wire.score,
        capacity: req.documents.len(),
    };
    AnswerSeed(wire, scores, PhantomData)
        .deserialize(&mut de)
        .and_then(|answer| de.end().map(|()| answer))
        .map_err(|e| bad_answer(provider, format!("answer is not the expected JSON: {e}")))
}

/// Read a 2xx answer and build the public result from it.
pub(crate) fn response<'r, R: Reported>(
    wire: &Wire,
    provider: &Provider,
    req: &'r RerankRequest<'r>,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    let answer = read::<R>(wire, provider, req, body)?;
    if let Some(err) = answer.reported.error(provider, body) {
        return Err(err);
    }
    answer.build(wire, provider, req)
}

impl<R: Reported> Answer<R> {
    /// The public result, with the usage and metadata the provider reported.
    pub(crate) fn build<'r>(
        self,
        wire: &Wire,
        provider: &Provider,
        req: &'r RerankRequest<'r>,
    ) -> Result<RerankResult<'r>, UpstreamError> {
        let mut metadata = Map::new();
        let total = self.reported.billed(&mut metadata);
        let scores = Answer {
            scores: self.scores,
            reported: (),
        };
        scores.finish(wire, provider, req, total, metadata)
    }
}

impl<R> Answer<R> {
    /// The public result, with usage and metadata the adapter found elsewhere (TEI: in headers).
    pub(crate) fn finish<'r>(
        self,
        wire: &Wire,
        provider: &Provider,
        req: &'r RerankRequest<'r>,
        total: Option<u64>,
        metadata: Map<String, Value>,
    ) -> Result<RerankResult<'r>, UpstreamError> {
        let scores = self.scores.ok_or_else(|| {
            let at = wire.results.join(".");
            bad_answer(provider, format!("rerank answer has no {at}"))
        })?;
        req.build(scores, total, wire.billing, metadata)
            .map_err(|m| bad_answer(provider, m))
    }
}

/// The whole answer: the results where the wire says, every other member to `R`.
struct AnswerSeed<'w, R>(&'w Wire, ScoresSeed, PhantomData<R>);

impl<'de, R: Reported> DeserializeSeed<'de> for AnswerSeed<'_, R> {
    type Value = Answer<R>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Answer<R>, D::Error> {
        if self.0.results.is_empty() {
            let scores = self.1.deserialize(d)?;
            return Ok(Answer {
                scores: Some(scores),
                reported: R::default(),
            });
        }
        d.deserialize_map(self)
    }
}

impl<'de, R: Reported> Visitor<'de> for AnswerSeed<'_, R> {
    type Value = Answer<R>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a rerank answer object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Answer<R>, A::Error> {
        // `deserialize` took the other way when the path is empty.
        let Some(&member) = self.0.results.first() else {
            return Err(de::Error::invalid_type(de::Unexpected::Map, &self));
        };
        let mut rest = Rest {
            map,
            member,
            seed: self.1,
            scores: None,
        };
        // `R`'s own visitor drains the object; `Rest` takes the results member out on the way.
        let reported = R::deserialize(MapAccessDeserializer::new(&mut rest))?;
        Ok(Answer {
            scores: rest.scores,
            reported,
        })
    }
}

/// The answer's members minus `member`, which it reads into `scores` as it passes.
struct Rest<A> {
    map: A,
    member: &'static str,
    seed: ScoresSeed,
    scores: Option<Vec<(usize, f64)>>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Rest<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let mut seed = seed;
        loop {
            let key = KeySeed {
                member: self.member,
                inner: seed,
            };
            match self.map.next_key_seed(key)? {
                None => return Ok(None),
                Some(Key::Other(value)) => return Ok(Some(value)),
                Some(Key::Member(_)) if self.scores.is_some() => {
                    return Err(de::Error::duplicate_field(self.member))
                }
                Some(Key::Member(unused)) => {
                    self.scores = Some(self.map.next_value_seed(self.seed)?);
                    seed = unused;
                }
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// A key of the answer object: the results member (handing the caller's key seed back unused),
/// or any other, already passed to the caller's key seed.
enum Key<V, K> {
    Member(K),
    Other(V),
}

struct KeySeed<K> {
    member: &'static str,
    inner: K,
}

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<K> {
    type Value = Key<K::Value, K>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, K: DeserializeSeed<'de>> Visitor<'de> for KeySeed<K> {
    type Value = Key<K::Value, K>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        if v == self.member {
            return Ok(Key::Member(self.inner));
        }
        self.inner
            .deserialize(StrDeserializer::new(v))
            .map(Key::Other)
    }
}

/// The results list: reached through the members `within` (none: it is the value itself), each
/// result's score named `score`.
#[derive(Clone, Copy)]
struct ScoresSeed {
    within: &'static [&'static str],
    score: &'static str,
    /// Results expected (the request's documents), so the list is allocated once.
    capacity: usize,
}

impl<'de> DeserializeSeed<'de> for ScoresSeed {
    type Value = Vec<(usize, f64)>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        if self.within.is_empty() {
            d.deserialize_seq(self)
        } else {
            d.deserialize_map(self)
        }
    }
}

impl<'de> Visitor<'de> for ScoresSeed {
    type Value = Vec<(usize, f64)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of results")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut scores = Vec::with_capacity(self.capacity);
        while let Some(scored) = seq.next_element_seed(ItemSeed(self.score))? {
            scores.push(scored);
        }
        Ok(scores)
    }

    /// An object on the way to the list (DashScope's `output`): its other members are skipped.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Some((&member, within)) = self.within.split_first() else {
            return Err(de::Error::invalid_type(de::Unexpected::Map, &self));
        };
        let mut scores = None;
        while let Some(key) = map.next_key_seed(FieldSeed(member))? {
            match key {
                Field::Named if scores.is_some() => return Err(de::Error::duplicate_field(member)),
                Field::Named => {
                    scores = Some(map.next_value_seed(ScoresSeed { within, ..self })?);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        scores.ok_or_else(|| de::Error::missing_field(member))
    }
}

/// One result: `index` and the score named `.0`; anything else (an echoed document) is skipped.
struct ItemSeed(&'static str);

impl<'de> DeserializeSeed<'de> for ItemSeed {
    type Value = (usize, f64);

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ItemSeed {
    type Value = (usize, f64);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a result with index and {}", self.0)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut index, mut score) = (None, None);
        while let Some(key) = map.next_key_seed(FieldSeed(self.0))? {
            match key {
                Field::Index if index.is_some() => return Err(de::Error::duplicate_field("index")),
                Field::Index => index = Some(map.next_value::<usize>()?),
                Field::Named if score.is_some() => return Err(de::Error::duplicate_field(self.0)),
                Field::Named => score = Some(map.next_value::<f64>()?),
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let index = index.ok_or_else(|| de::Error::missing_field("index"))?;
        let score = score.ok_or_else(|| de::Error::missing_field(self.0))?;
        Ok((index, score))
    }
}

/// A member name, compared without copying it: `index`, the name sought, or another.
enum Field {
    Index,
    Named,
    Other,
}

/// Reads a key as a [`Field`], seeking the name `.0`.
struct FieldSeed(&'static str);

impl<'de> DeserializeSeed<'de> for FieldSeed {
    type Value = Field;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Field, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed {
    type Value = Field;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Field, E> {
        // `index` is compared as a literal, which the compiler inlines; the sought name is a
        // profile's, known only at run time.
        Ok(if v == "index" {
            Field::Index
        } else if v == self.0 {
            Field::Named
        } else {
            Field::Other
        })
    }
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::Arc;

    use serde_json::value::RawValue;

    use super::*;
    use crate::common::error::UpstreamErrorKind;
    use crate::common::json::Str;
    use crate::providers::test_support as support;

    fn provider() -> Arc<Provider> {
        support::provider("p", "sk-test-key")
    }

    fn request<'a>(
        docs: &[&'a str],
        top_n: Option<usize>,
        passthrough: Vec<(Str<'a>, &'a RawValue)>,
    ) -> RerankRequest<'a> {
        support::rerank_request("cohere-rerank", "m", "q", docs, top_n, passthrough)
    }

    fn body(wire: &Wire, req: &RerankRequest<'_>) -> String {
        let target = support::target(provider(), "native");
        let native = super::request(wire, &target, req).unwrap();
        assert_eq!(native.path, wire.path);
        String::from_utf8(native.body.to_vec()).unwrap()
    }

    const RENAMED: Wire = Wire {
        path: "/rerank",
        documents: "input",
        top_n: Some("top_k"),
        off: &["return_input", "raw"],
        ..Wire::COHERE
    };

    #[test]
    fn writes_names_in_order_with_pass_through_last() {
        let raw = RawValue::from_string("{\"a\": [1]}".into()).unwrap();
        let req = request(
            &["x", "y"],
            Some(1),
            vec![(Str(Cow::Borrowed("k\"")), &*raw)],
        );
        assert_eq!(
            body(&RENAMED, &req),
            r#"{"model":"native","query":"q","input":["x","y"],"top_k":1,"return_input":false,"raw":false,"k\"":{"a": [1]}}"#
        );
        let req = request(&["x"], None, Vec::new());
        assert_eq!(
            body(&Wire::COHERE, &req),
            r#"{"model":"native","query":"q","documents":["x"]}"#
        );
    }

    #[test]
    fn without_model_or_top_n() {
        let wire = Wire {
            model: false,
            top_n: None,
            ..Wire::COHERE
        };
        let req = request(&["x"], Some(1), Vec::new());
        assert_eq!(body(&wire, &req), r#"{"query":"q","documents":["x"]}"#);
    }

    #[test]
    fn text_objects_wrap_the_query_and_each_document() {
        let wire = Wire {
            documents: "passages",
            text_objects: true,
            top_n: None,
            ..Wire::COHERE
        };
        let raw = RawValue::from_string("\"END\"".into()).unwrap();
        let req = request(
            &["x", "y\"z"],
            Some(1),
            vec![(Str(Cow::Borrowed("truncate")), &*raw)],
        );
        assert_eq!(
            body(&wire, &req),
            r#"{"model":"native","query":{"text":"q"},"passages":[{"text":"x"},{"text":"y\"z"}],"truncate":"END"}"#
        );
    }

    #[test]
    fn nested_options_carry_the_pass_through_fields() {
        let wire = Wire {
            nested: Some(Nested {
                input: "input",
                options: "parameters",
            }),
            off: &["return_documents"],
            ..Wire::COHERE
        };
        let raw = RawValue::from_string("\"i\"".into()).unwrap();
        let req = request(
            &["x"],
            Some(1),
            vec![(Str(Cow::Borrowed("instruct")), &*raw)],
        );
        assert_eq!(
            body(&wire, &req),
            r#"{"model":"native","input":{"query":"q","documents":["x"]},"parameters":{"top_n":1,"return_documents":false,"instruct":"i"}}"#
        );
    }

    #[test]
    fn document_literals_are_copied_as_sent() {
        let catalog = support::catalog(
            "m",
            "cohere-rerank",
            support::target(provider(), "native"),
            1000,
            10,
        );
        let native = support::native_request(
            &catalog,
            br#"{"model":"m","query":"caf\u00e9","documents":["caf\u00e9 \"x\"","b\/c"]}"#,
            |t, r| super::request(&Wire::COHERE, t, r),
        );
        assert_eq!(
            std::str::from_utf8(&native.body).unwrap(),
            r#"{"model":"native","query":"café","documents":["caf\u00e9 \"x\"","b\/c"]}"#
        );
    }

    /// Every member but the results, as `Reported` sees it.
    #[derive(Deserialize, Default)]
    struct Seen {
        #[serde(default)]
        before: Option<u64>,
        #[serde(default)]
        after: Option<String>,
    }

    impl Reported for Seen {
        fn billed(self, metadata: &mut Map<String, Value>) -> Option<u64> {
            request_id(metadata, self.after);
            self.before
        }
    }

    fn scores<R: Reported>(wire: &Wire, answer: &str) -> Result<Answer<R>, UpstreamError> {
        let req = request(&["x", "y", "z"], None, Vec::new());
        read::<R>(wire, &provider(), &req, answer.as_bytes())
    }

    #[test]
    fn reads_results_and_hands_the_other_members_on() {
        let req = request(&["x", "y"], None, Vec::new());
        // The results member in the middle, an escaped key, an echoed document, an unknown member.
        let answer = r#"{"before":7,"results":[{"index":1,"document":{"text":"y"},"relevance_score":0.5},{"ind\u0065x":0,"relevance_score":0.25}],"other":[1],"af\u0074er":"id-1"}"#;
        let out = scores::<Seen>(&Wire::COHERE, answer)
            .unwrap()
            .build(&Wire::COHERE, &provider(), &req)
            .unwrap();
        let got: Vec<_> = out
            .results
            .iter()
            .map(|r| (r.index, r.relevance_score))
            .collect();
        assert_eq!(got, vec![(1, 0.5), (0, 0.25)]);
        assert_eq!(out.usage.total_tokens, 7);
        assert_eq!(out.metadata["request_id"], "id-1");
    }

    #[test]
    fn reads_nested_and_bare_results() {
        let within = Wire {
            results: &["output", "results"],
            score: "score",
            ..Wire::COHERE
        };
        let answer = r#"{"output":{"n":1,"results":[{"index":0,"score":0.5}]},"before":3}"#;
        let read = scores::<Seen>(&within, answer).unwrap();
        assert_eq!(read.scores, Some(vec![(0, 0.5)]));
        assert_eq!(read.reported.before, Some(3));

        let bare = Wire {
            results: &[],
            ..Wire::COHERE
        };
        let read = scores::<Nothing>(&bare, r#"[{"index":2,"relevance_score":1}]"#).unwrap();
        assert_eq!(read.scores, Some(vec![(2, 1.0)]));
    }

    #[test]
    fn billed_figures_are_read_one_way() {
        assert_eq!(billed(&[Some(7.0)]), Some(7));
        assert_eq!(billed(&[Some(7.9)]), Some(7));
        assert_eq!(billed(&[Some(3.0), Some(4.0)]), Some(7));
        assert_eq!(billed(&[None, Some(4.0)]), Some(4));
        for nonsense in [None, Some(-1.0), Some(f64::NAN), Some(f64::INFINITY)] {
            assert_eq!(billed(&[nonsense]), None, "{nonsense:?}");
        }
        assert_eq!(billed(&[]), None);
    }

    #[test]
    fn the_profile_says_how_the_query_counts() {
        let req = request(&["x", "y", "z"], None, Vec::new());
        let once = Wire {
            billing: QueryCounting::Once,
            ..Wire::COHERE
        };
        let answer = r#"{"results":[{"index":0,"relevance_score":0.5}]}"#;
        let q = crate::tokens::count("q") as u64;
        let d = 3 * crate::tokens::count("x") as u64;
        for (wire, query, counted) in [(&Wire::COHERE, 3 * q, "per_document"), (&once, q, "once")] {
            let out = read::<Nothing>(wire, &provider(), &req, answer.as_bytes())
                .unwrap()
                .build(wire, &provider(), &req)
                .unwrap();
            assert_eq!(out.usage.query_tokens, query);
            assert_eq!(out.usage.documents_tokens, d);
            assert_eq!(out.usage.total_tokens, query + d);
            assert_eq!(out.metadata["query_tokens_counted"], counted);
            assert_eq!(out.metadata["total_tokens_source"], "gateway");
        }
    }

    #[test]
    fn a_missing_results_member_is_left_to_the_adapter() {
        let req = request(&["x"], None, Vec::new());
        let read = scores::<Seen>(&Wire::COHERE, r#"{"before":1}"#).unwrap();
        assert!(read.scores.is_none());
        let e = read.build(&Wire::COHERE, &provider(), &req).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::BadResponse);
        assert_eq!(e.message, "rerank answer has no results");
    }

    #[test]
    fn malformed_answers_are_bad_responses() {
        let within = Wire {
            results: &["output", "results"],
            ..Wire::COHERE
        };
        for (wire, answer) in [
            (&Wire::COHERE, "not json"),
            (&Wire::COHERE, r#"{"results":[]} x"#),
            (&Wire::COHERE, r#"[{"index":0,"relevance_score":0.5}]"#),
            (&Wire::COHERE, r#"{"results":[],"results":[]}"#),
            (&Wire::COHERE, r#"{"results":[{"index":0,"score":0.5}]}"#),
            (
                &Wire::COHERE,
                r#"{"results":[{"index":0,"index":1,"relevance_score":0.5}]}"#,
            ),
            (
                &Wire::COHERE,
                r#"{"results":[{"index":-1,"relevance_score":0.5}]}"#,
            ),
            (&Wire::COHERE, r#"{"results":[],"before":"x"}"#),
            (&within, r#"{"output":{}}"#),
            (&within, r#"{"output":[]}"#),
        ] {
            let e = scores::<Seen>(wire, answer).err().unwrap();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse, "{answer}");
        }
    }
}
