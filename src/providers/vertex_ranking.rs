//! Google's Vertex AI ranking API (Discovery Engine's `RankService.Rank`):
//! `POST https://discoveryengine.googleapis.com/v1/projects/{project}/locations/{location}/
//! rankingConfigs/default_ranking_config:rank`, authorised by an OAuth 2.0 access token of a
//! Google service account (`upstream::google_auth`, scope `cloud-platform`), read exactly as the
//! `vertex` kind reads it (`vertex::credentials`: `api_key` or `credentials_file`, `project`,
//! `token_url`; `location` defaults to `global`).
//!
//! The body: `model` (`semantic-ranker-default-004`, `semantic-ranker-fast-004`, or their
//! `@latest` aliases), `query`, `records` (at most 200 `{id, title, content}`; each document is
//! one record whose `id` is its index in the request, written as a string, and whose `content`
//! is the document), `topN` only when the caller gave `top_n` (unset returns every record), and
//! `ignoreRecordDetailsInResponse: true` (the gateway re-attaches the caller's own strings, so
//! Google's echo would only enlarge the answer).
//!
//! The answer is `{"records": [{"id", "score"}]}`, sorted by descending score. It is proto3 JSON:
//! a member equal to its default is left out, so a record scored exactly 0 may come without
//! `score` (read as 0). Each `id` is mapped back to its index; an id the request did not send is
//! a bad answer. The API reports no usage: `total_tokens` is the gateway's own count.
//!
//! Errors are Google's envelope (`providers/formats/google.rs`): `NOT_FOUND` is this adapter's
//! "no such model" (the project's ranking config or the model is not there), the shared
//! classification reads the rest (`UNAUTHENTICATED`/`PERMISSION_DENIED` — including the Discovery
//! Engine API not enabled on the project — as the operator's credentials).

use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::api::adapter::{Adapters, RerankAdapter};
use crate::api::rerank::{QueryCounting, RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::json::JsonStr;
use crate::common::native::{NativeRequest, Prepared};
use crate::providers::formats::google as google_errors;
use crate::providers::registry::Kind;
use crate::providers::vertex::{self, Settings};
use crate::upstream::provider::{bad_answer, Provider};

// ---- constants -------------------------------------------------------------------------------

/// The only location Google's ranking examples use, and the default.
const GLOBAL: &str = "global";

/// The kind's name in configuration errors.
const KIND: &str = "vertex-ranking";

/// No usage is reported and no per-pair billing formula is published: the query counts once in
/// the gateway's own token estimate.
const COUNTING: QueryCounting = QueryCounting::Once;

// ---- the adapter -----------------------------------------------------------------------------

/// The rerank adapter of one account: it knows the account's ranking config path.
struct Ranking {
    /// `/v1/projects/{project}/locations/{location}/rankingConfigs/default_ranking_config:rank`.
    path: String,
}

impl RerankAdapter for Ranking {
    fn request(&self, target: &Target, req: &RerankRequest<'_>) -> Result<Prepared, GatewayError> {
        rank_request(&self.path, target, req).map(Prepared::Http)
    }

    fn response<'r>(
        &self,
        provider: &Provider,
        req: &'r RerankRequest<'r>,
        _headers: &http::HeaderMap,
        body: &[u8],
    ) -> Result<RerankResult<'r>, UpstreamError> {
        rank_response(provider, req, body)
    }
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn rank_request(
    path: &str,
    target: &Target,
    req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let body = Body {
        model: &target.native_model,
        req,
    };
    let docs: usize = req.documents.iter().map(|d| d.raw().get().len()).sum();
    let mut out = Vec::with_capacity(
        128 + target.native_model.len()
            + req.query.as_str().len()
            + docs
            + 32 * req.documents.len(),
    );
    body.serialize(&mut serde_json::Serializer::new(&mut out))
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    Ok(NativeRequest::post_json(path.to_string(), out))
}

struct Body<'a> {
    model: &'a str,
    req: &'a RerankRequest<'a>,
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("model", self.model)?;
        m.serialize_entry("query", self.req.query.as_str())?;
        m.serialize_entry("records", &Records(&self.req.documents))?;
        if self.req.top_n_given {
            m.serialize_entry("topN", &self.req.top_n)?;
        }
        m.serialize_entry("ignoreRecordDetailsInResponse", &true)?;
        m.end()
    }
}

/// Each document as a record: its index as the id, its literal (copied as the caller sent it)
/// as the content.
struct Records<'a>(&'a [JsonStr<'a>]);

impl Serialize for Records<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for (i, doc) in self.0.iter().enumerate() {
            seq.serialize_element(&Record(i, doc))?;
        }
        seq.end()
    }
}

struct Record<'a>(usize, &'a JsonStr<'a>);

impl Serialize for Record<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("id", &Id(self.0))?;
        m.serialize_entry("content", self.1)?;
        m.end()
    }
}

/// An index written as a JSON string (`"3"`), without an intermediate `String`.
struct Id(usize);

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

// ---- translation back ------------------------------------------------------------------------

/// `{"records": [...]}`: every other member is skipped.
#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    records: Option<Scores>,
}

/// The records as `(index, score)`, read in one pass (a record's title and content, were they
/// echoed, are skipped unread). An id that is not a request index is kept as `usize::MAX`, which
/// the public result refuses as outside the request.
struct Scores(Vec<(usize, f64)>);

impl<'de> Deserialize<'de> for Scores {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Scores, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scores;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of ranking records")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scores, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(256));
                while let Some(r) = seq.next_element::<Scored>()? {
                    out.push((r.index, r.score));
                }
                Ok(Scores(out))
            }
        }
        d.deserialize_seq(V)
    }
}

/// One record: its id read as an index, and its score (absent: proto3's default, 0).
struct Scored {
    index: usize,
    score: f64,
}

impl<'de> Deserialize<'de> for Scored {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Scored, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scored;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a ranking record")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Scored, A::Error> {
                let mut index = None;
                let mut score = 0.0;
                while let Some(key) = m.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "id" => {
                            let id = m.next_value::<std::borrow::Cow<'de, str>>()?;
                            // Only the ids this adapter writes (decimal indexes) are indexes.
                            let valid = !id.is_empty()
                                && id.bytes().all(|b| b.is_ascii_digit())
                                && (id.len() == 1 || !id.starts_with('0'));
                            index = Some(if valid {
                                id.parse().unwrap_or(usize::MAX)
                            } else {
                                usize::MAX
                            });
                        }
                        "score" => score = m.next_value::<f64>()?,
                        _ => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                let index = index.ok_or_else(|| de::Error::missing_field("id"))?;
                Ok(Scored { index, score })
            }
        }
        d.deserialize_map(V)
    }
}

pub(crate) fn rank_response<'r>(
    provider: &Provider,
    req: &'r RerankRequest<'r>,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    let answer: Answer = serde_json::from_slice(body)
        .map_err(|e| bad_answer(provider, format!("unreadable ranking answer: {e}")))?;
    let Some(Scores(scores)) = answer.records else {
        return Err(bad_answer(provider, "ranking answer has no records"));
    };
    req.build(scores, None, COUNTING, serde_json::Map::new())
        .map_err(|m| bad_answer(provider, m))
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let (mut err, detail) = google_errors::classify(provider, status, body);
    let not_found = detail
        .as_ref()
        .map(|d| d.status == "NOT_FOUND")
        .unwrap_or(status == 404);
    if not_found {
        // The ranking config or the model the configuration names is not there.
        err.kind = UpstreamErrorKind::UnknownModel;
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Vertex AI ranking kind: a service account's access tokens; rerank only.
pub(crate) fn kind(settings: &Settings, key: &str) -> Result<Kind, String> {
    let location = vertex::given(&settings.location).unwrap_or(GLOBAL);
    vertex::segment(KIND, "location", location)?;
    let (auth, project) = vertex::credentials(KIND, settings, key)?;
    let path = format!(
        "/v1/projects/{project}/locations/{location}/rankingConfigs/default_ranking_config:rank"
    );
    Ok(Kind {
        auth,
        errors: error_response,
        remote: true,
        result_hosts: &[],
        adapters: Adapters {
            rerank: Some(Box::new(Ranking { path })),
            ..Adapters::default()
        },
    })
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::providers::test_support as support;

    const PATH: &str =
        "/v1/projects/p-1/locations/global/rankingConfigs/default_ranking_config:rank";

    fn provider() -> Arc<Provider> {
        support::provider("vertex-ranking", "")
    }

    fn request<'a>(docs: &[&'a str], top_n: Option<usize>) -> RerankRequest<'a> {
        support::rerank_request(
            "vertex-ranking",
            "ranker",
            "why \"blue\"?",
            docs,
            top_n,
            Vec::new(),
        )
    }

    #[test]
    fn body_has_records_by_index_and_top_n_only_when_given() {
        let target = support::target(provider(), "semantic-ranker-default-004");
        let native = rank_request(PATH, &target, &request(&["a", "b\"c"], Some(1))).unwrap();
        assert_eq!(native.path, PATH);
        assert_eq!(
            std::str::from_utf8(&native.body).unwrap(),
            concat!(
                r#"{"model":"semantic-ranker-default-004","query":"why \"blue\"?","#,
                r#""records":[{"id":"0","content":"a"},{"id":"1","content":"b\"c"}],"#,
                r#""topN":1,"ignoreRecordDetailsInResponse":true}"#
            )
        );
        let native = rank_request(PATH, &target, &request(&["a"], None)).unwrap();
        let body = std::str::from_utf8(&native.body).unwrap();
        assert!(!body.contains("topN"), "{body}");
    }

    #[test]
    fn reads_records_by_id_and_a_missing_score_as_zero() {
        let p = provider();
        let req = request(&["a", "b", "c"], Some(2));
        let body = br#"{"records":[{"id":"2","score":0.93},{"id":"0","score":0.41,"title":"t","content":"a"},{"id":"1"}]}"#;
        let out = rank_response(&p, &req, body).unwrap();
        let got: Vec<_> = out
            .results
            .iter()
            .map(|r| (r.index, r.relevance_score))
            .collect();
        assert_eq!(got, vec![(2, 0.93), (0, 0.41)]);
        assert_eq!(out.metadata["total_tokens_source"], "gateway");
        assert_eq!(out.metadata["query_tokens_counted"], "once");

        let req = request(&["a", "b"], None);
        let out = rank_response(
            &p,
            &req,
            br#"{"records":[{"id":"1"},{"id":"0","score":-0.5}]}"#,
        )
        .unwrap();
        let got: Vec<_> = out.results.iter().map(|r| r.index).collect();
        assert_eq!(got, vec![1, 0]);
    }

    #[test]
    fn bad_answers_are_bad_responses() {
        let p = provider();
        let req = request(&["a", "b"], None);
        for body in [
            &b"<html>"[..],
            b"{}",
            br#"{"results":[{"index":0,"relevance_score":0.5}]}"#,
            br#"{"records":[{"id":"2","score":0.5}]}"#,
            br#"{"records":[{"id":"01","score":0.5}]}"#,
            br#"{"records":[{"id":"doc-a","score":0.5}]}"#,
            br#"{"records":[{"score":0.5}]}"#,
        ] {
            let e = rank_response(&p, &req, body).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse, "{e}");
        }
    }

    #[test]
    fn maps_google_errors() {
        let p = provider();
        let google = |code: u16, status: &str, message: &str| {
            format!(r#"{{"error":{{"code":{code},"message":"{message}","status":"{status}"}}}}"#)
        };
        let cases: &[(u16, String, UpstreamErrorKind)] = &[
            (
                400,
                google(
                    400,
                    "INVALID_ARGUMENT",
                    "Records must have either a title or content.",
                ),
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                404,
                google(404, "NOT_FOUND", "Model not found."),
                UpstreamErrorKind::UnknownModel,
            ),
            (
                403,
                google(
                    403,
                    "PERMISSION_DENIED",
                    "Discovery Engine API has not been used in project 1 before or it is disabled.",
                ),
                UpstreamErrorKind::AuthRejected,
            ),
            (
                401,
                google(
                    401,
                    "UNAUTHENTICATED",
                    "Request had invalid authentication credentials.",
                ),
                UpstreamErrorKind::AuthRejected,
            ),
            (
                429,
                google(429, "RESOURCE_EXHAUSTED", "Quota exceeded."),
                UpstreamErrorKind::RateLimited,
            ),
            (500, "oops".to_string(), UpstreamErrorKind::Failure),
        ];
        for (status, body, kind) in cases {
            let e = error_response(&p, *status, body.as_bytes());
            assert_eq!(e.kind, *kind, "{status} {body}");
        }
        assert_eq!(
            error_response(&p, 404, cases[1].1.as_bytes()).message,
            "Model not found."
        );
        assert!(error_response(&p, 503, b"").retryable());
    }

    #[test]
    fn settings_are_checked() {
        let no_key = Settings::default();
        let built = kind(&no_key, "").unwrap();
        assert!(matches!(
            built.auth,
            crate::upstream::provider::Auth::Missing
        ));
        let bad = Settings {
            location: Some("us/../x".into()),
            ..Settings::default()
        };
        assert!(kind(&bad, "")
            .err()
            .unwrap()
            .contains("vertex-ranking location"));
    }
}
