//! Amazon Bedrock rerank: the Agents for Amazon Bedrock runtime's `Rerank` operation
//! (`POST https://bedrock-agent-runtime.<region>.amazonaws.com/rerank`), signed with AWS
//! Signature Version 4 (signing name `bedrock`; credentials and region from the account,
//! `providers/formats/aws.rs`).
//!
//! The body: `queries` (exactly one `{"type": "TEXT", "textQuery": {"text"}}`), `sources` (1 to
//! 1,000 `{"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text"}}}`)
//! and `rerankingConfiguration` (`type: BEDROCK_RERANKING_MODEL`, the model's ARN and
//! `numberOfResults`). A target's model is a foundation-model id (`amazon.rerank-v1:0`,
//! `cohere.rerank-v3-5:0`), made into the ARN for the account's region, or a whole ARN, sent as is.
//!
//! The answer is `{"results": [{"index", "relevanceScore", "document"?}], "nextToken"?}`: no usage
//! at all. Bedrock bills rerank per query, a query being one call of up to 100 documents, so the
//! answer's `metadata.queries` is that count (`ceil(documents / 100)`) and token usage is the
//! gateway's own count; a configured `queries` price turns it into a cost.
//!
//! Errors are AWS REST-JSON (`{"message"}`, the type in `x-amzn-ErrorType`), classified by status
//! and message: a model the account cannot use (`ResourceNotFoundException` 404,
//! `AccessDeniedException` "…access to the model…", a `ValidationException` about the model
//! identifier or ARN) is the "no such model" signal; other 403s are refused credentials.

use std::sync::Arc;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use crate::api::adapter::{Adapters, RerankAdapter};
use crate::api::rerank::{QueryCounting, RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind};
use crate::common::json::JsonStr;
use crate::common::native::{NativeRequest, Prepared};
use crate::providers::formats::aws;
use crate::providers::formats::errors::status_error;
use crate::providers::formats::rerank::{self, Nothing, Wire};
use crate::providers::registry::Kind;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

/// The answer's shape, read by the shared reader: `results[].index` and `relevanceScore`.
const ANSWER: Wire = Wire {
    path: "/rerank",
    results: &["results"],
    score: "relevanceScore",
    // A cross-encoder: each document is scored with the query (the gateway's own count).
    billing: QueryCounting::PerDocument,
    ..Wire::COHERE
};

/// Documents in one billed query.
const DOCUMENTS_PER_QUERY: usize = 100;

/// SigV4's signing name for the agent runtime.
const SIGNING_NAME: &str = "bedrock";

// ---- the adapter -----------------------------------------------------------------------------

/// The rerank adapter of one account: it knows the account's region, for the model ARN.
pub(crate) struct Bedrock {
    region: Arc<str>,
}

impl RerankAdapter for Bedrock {
    fn request(&self, target: &Target, req: &RerankRequest<'_>) -> Result<Prepared, GatewayError> {
        rerank_request(&self.region, target, req).map(Prepared::Http)
    }

    fn response<'r>(
        &self,
        provider: &Provider,
        req: &'r RerankRequest<'r>,
        _headers: &http::HeaderMap,
        body: &[u8],
    ) -> Result<RerankResult<'r>, UpstreamError> {
        rerank_response(provider, req, body)
    }
}

// ---- translation to native -------------------------------------------------------------------

pub(crate) fn rerank_request(
    region: &str,
    target: &Target,
    req: &RerankRequest<'_>,
) -> Result<NativeRequest, GatewayError> {
    let arn = model_arn(region, &target.native_model);
    let body = Body { arn: &arn, req };
    let docs: usize = req.documents.iter().map(|d| d.raw().get().len()).sum();
    let mut out = Vec::with_capacity(
        256 + arn.len() + req.query.as_str().len() + docs + 80 * req.documents.len(),
    );
    body.serialize(&mut serde_json::Serializer::new(&mut out))
        .map_err(|e| GatewayError::Internal(format!("serializing native request: {e}")))?;
    Ok(NativeRequest::post_json(ANSWER.path, out))
}

/// A foundation-model id as its ARN in `region`; an ARN as it is.
fn model_arn(region: &str, model: &str) -> String {
    if model.starts_with("arn:") {
        model.to_string()
    } else {
        format!("arn:aws:bedrock:{region}::foundation-model/{model}")
    }
}

struct Body<'a> {
    arn: &'a str,
    req: &'a RerankRequest<'a>,
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("queries", &[Query(self.req.query.as_str())])?;
        m.serialize_entry("sources", &Sources(&self.req.documents))?;
        m.serialize_entry(
            "rerankingConfiguration",
            &Config {
                arn: self.arn,
                // Always sent: Bedrock's own default is not documented; the gateway's is every
                // document (at most 1,000, Bedrock's limit, which the family enforces).
                results: self.req.top_n,
            },
        )?;
        m.end()
    }
}

/// `{"type": "TEXT", "textQuery": {"text": query}}`.
struct Query<'a>(&'a str);

impl Serialize for Query<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "TEXT")?;
        m.serialize_entry("textQuery", &Text(self.0))?;
        m.end()
    }
}

/// `{"text": value}`.
struct Text<T>(T);

impl<T: Serialize> Serialize for Text<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("text", &self.0)?;
        m.end()
    }
}

/// Each document as an inline text source, its literal copied as the caller sent it.
struct Sources<'a>(&'a [JsonStr<'a>]);

impl Serialize for Sources<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for doc in self.0 {
            seq.serialize_element(&Source(doc))?;
        }
        seq.end()
    }
}

struct Source<'a>(&'a JsonStr<'a>);

impl Serialize for Source<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "INLINE")?;
        m.serialize_entry("inlineDocumentSource", &Inline(self.0))?;
        m.end()
    }
}

struct Inline<'a>(&'a JsonStr<'a>);

impl Serialize for Inline<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "TEXT")?;
        m.serialize_entry("textDocument", &Text(self.0))?;
        m.end()
    }
}

struct Config<'a> {
    arn: &'a str,
    results: usize,
}

impl Serialize for Config<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Inner<'a>(&'a Config<'a>);
        impl Serialize for Inner<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                struct Model<'a>(&'a str);
                impl Serialize for Model<'_> {
                    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                        let mut m = s.serialize_map(Some(1))?;
                        m.serialize_entry("modelArn", self.0)?;
                        m.end()
                    }
                }
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("numberOfResults", &self.0.results)?;
                m.serialize_entry("modelConfiguration", &Model(self.0.arn))?;
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "BEDROCK_RERANKING_MODEL")?;
        m.serialize_entry("bedrockRerankingConfiguration", &Inner(self))?;
        m.end()
    }
}

// ---- translation back ------------------------------------------------------------------------

pub(crate) fn rerank_response<'r>(
    provider: &Provider,
    req: &'r RerankRequest<'r>,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    let answer = rerank::read::<Nothing>(&ANSWER, provider, req, body)?;
    let mut metadata = serde_json::Map::new();
    // What Bedrock bills: one query per call of up to 100 documents.
    let queries = req.documents.len().div_ceil(DOCUMENTS_PER_QUERY).max(1);
    metadata.insert("queries".into(), queries.into());
    answer.finish(&ANSWER, provider, req, None, metadata)
}

// ---- error mapping ---------------------------------------------------------------------------

pub(crate) fn error_response(provider: &Provider, status: u16, body: &[u8]) -> UpstreamError {
    let parsed = aws::ErrorBody::parse(body);
    let message = parsed.message();
    let mut err = status_error(provider, status, message);
    let lower = message.map(str::to_ascii_lowercase).unwrap_or_default();
    let about_the_model = lower.contains("model identifier")
        || lower.contains("access to the model")
        || lower.contains("model arn")
        || lower.contains("modelarn");
    match (status, parsed.kind()) {
        // The model is not there for this account and region.
        (404, _) => err.kind = UpstreamErrorKind::UnknownModel,
        (400 | 403, _) if about_the_model => err.kind = UpstreamErrorKind::UnknownModel,
        // ServiceQuotaExceededException is a 400, but about the account's quota, not the request.
        (400, Some("ServiceQuotaExceededException")) => err.kind = UpstreamErrorKind::RateLimited,
        (400, _) if lower.contains("quota") => err.kind = UpstreamErrorKind::RateLimited,
        // DependencyFailedException: a resource Bedrock relies on failed.
        (424, _) => err.kind = UpstreamErrorKind::Failure,
        _ => {}
    }
    err
}

// ---- registration ----------------------------------------------------------------------------

/// The Bedrock kind: SigV4-signed, rerank only.
pub(crate) fn kind(settings: &aws::Settings, key: &str) -> Result<Kind, String> {
    let auth = aws::auth("bedrock", settings, key, SIGNING_NAME)?;
    let region: Arc<str> = settings.region().unwrap_or("us-east-1").into();
    Ok(Kind {
        auth,
        errors: error_response,
        remote: true,
        result_hosts: &[],
        adapters: Adapters {
            rerank: Some(Box::new(Bedrock { region })),
            ..Adapters::default()
        },
    })
}

// ---- tests -----------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::test_support as support;

    fn provider() -> Arc<Provider> {
        support::provider("bedrock", "AKIDEXAMPLE")
    }

    fn request<'a>(docs: &[&'a str], top_n: Option<usize>) -> RerankRequest<'a> {
        support::rerank_request(
            "bedrock-rerank",
            "rerank",
            "q \"x\"",
            docs,
            top_n,
            Vec::new(),
        )
    }

    #[test]
    fn body_carries_one_query_inline_sources_and_the_model_arn() {
        let target = support::target(provider(), "cohere.rerank-v3-5:0");
        let req = request(&["a", "b\"c"], Some(1));
        let native = rerank_request("us-west-2", &target, &req).unwrap();
        assert_eq!(native.path, "/rerank");
        assert_eq!(
            std::str::from_utf8(&native.body).unwrap(),
            concat!(
                r#"{"queries":[{"type":"TEXT","textQuery":{"text":"q \"x\""}}],"#,
                r#""sources":[{"type":"INLINE","inlineDocumentSource":{"type":"TEXT","textDocument":{"text":"a"}}},"#,
                r#"{"type":"INLINE","inlineDocumentSource":{"type":"TEXT","textDocument":{"text":"b\"c"}}}],"#,
                r#""rerankingConfiguration":{"type":"BEDROCK_RERANKING_MODEL","bedrockRerankingConfiguration":"#,
                r#"{"numberOfResults":1,"modelConfiguration":{"modelArn":"arn:aws:bedrock:us-west-2::foundation-model/cohere.rerank-v3-5:0"}}}}"#
            )
        );
        // An ARN is sent as it is; without top_n every document is asked for.
        let arn = "arn:aws:bedrock:eu-central-1::foundation-model/amazon.rerank-v1:0";
        let target = support::target(provider(), arn);
        let native = rerank_request("us-west-2", &target, &request(&["a", "b"], None)).unwrap();
        let body = std::str::from_utf8(&native.body).unwrap();
        assert!(body.contains(&format!(r#""modelArn":"{arn}""#)), "{body}");
        assert!(body.contains(r#""numberOfResults":2"#), "{body}");
    }

    #[test]
    fn answer_without_usage_counts_queries() {
        let p = provider();
        let docs: Vec<String> = (0..150).map(|i| format!("d{i}")).collect();
        let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
        let req = request(&refs, Some(2));
        let body = br#"{"results":[{"index":7,"relevanceScore":0.9},{"index":3,"relevanceScore":0.4,"document":{"type":"TEXT","textDocument":{"text":"d3"}}}]}"#;
        let out = rerank_response(&p, &req, body).unwrap();
        let got: Vec<_> = out.results.iter().map(|r| r.index).collect();
        assert_eq!(got, vec![7, 3]);
        assert_eq!(out.metadata["queries"], 2);
        assert_eq!(out.metadata["total_tokens_source"], "gateway");
        assert_eq!(out.metadata["query_tokens_counted"], "per_document");
    }

    #[test]
    fn bad_answers_are_bad_responses() {
        let p = provider();
        let req = request(&["a"], None);
        for body in [
            &b"{}"[..],
            br#"{"results":[{"index":0,"relevance_score":0.5}]}"#,
            br#"{"results":[{"index":1,"relevanceScore":0.5}]}"#,
        ] {
            let e = rerank_response(&p, &req, body).unwrap_err();
            assert_eq!(e.kind, UpstreamErrorKind::BadResponse, "{e}");
        }
    }

    #[test]
    fn maps_errors() {
        let p = provider();
        let cases: &[(u16, &str, UpstreamErrorKind)] = &[
            (
                400,
                r#"{"message":"1 validation error detected: Value at 'sources' failed to satisfy constraint: Member must have length less than or equal to 1000"}"#,
                UpstreamErrorKind::InvalidRequest,
            ),
            (
                400,
                r#"{"message":"The provided model identifier is invalid."}"#,
                UpstreamErrorKind::UnknownModel,
            ),
            (
                403,
                r#"{"message":"You don't have access to the model with the specified model ID."}"#,
                UpstreamErrorKind::UnknownModel,
            ),
            (
                403,
                r#"{"message":"The request signature we calculated does not match the signature you provided."}"#,
                UpstreamErrorKind::AuthRejected,
            ),
            (
                404,
                r#"{"message":"Model not found"}"#,
                UpstreamErrorKind::UnknownModel,
            ),
            (
                400,
                r#"{"__type":"ServiceQuotaExceededException","message":"Your request exceeds the service quota for your account."}"#,
                UpstreamErrorKind::RateLimited,
            ),
            (
                429,
                r#"{"message":"Rate exceeded"}"#,
                UpstreamErrorKind::RateLimited,
            ),
            (
                424,
                r#"{"message":"dependency failed","resourceName":"x"}"#,
                UpstreamErrorKind::Failure,
            ),
            (
                500,
                r#"{"message":"internal","reason":"x"}"#,
                UpstreamErrorKind::Failure,
            ),
        ];
        for (status, body, kind) in cases {
            let e = error_response(&p, *status, body.as_bytes());
            assert_eq!(e.kind, *kind, "{status} {body}");
        }
        assert_eq!(
            error_response(&p, 429, cases[6].1.as_bytes()).message,
            "Rate exceeded"
        );
        assert!(error_response(&p, 502, b"").retryable());
    }
}
