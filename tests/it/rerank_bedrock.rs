//! Amazon Bedrock rerank (`bedrock-agent-runtime` `POST /rerank`) through the rerank conformance
//! cases, against a fake that checks every request's AWS Signature Version 4 by recomputing it
//! from what it received (its own implementation of AWS's documented algorithm, not the
//! gateway's).

use crate::support;
use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::{Digest, Sha256};
use support::fake::{FakeProvider, Recorded, Reply};
use support::rerank_conformance::{rerank_conformance, QueryCounting, RerankCase};
use support::{post, TestGateway, AWS_ACCESS_KEY_ID, AWS_SECRET, AWS_SESSION_TOKEN};

const ARN: &str = "arn:aws:bedrock:us-west-2::foundation-model/cohere.rerank-v3-5:0";

fn success(scores: &[(usize, f64)], _docs: &[&str]) -> Reply {
    let results: Vec<_> = scores
        .iter()
        .map(|(i, s)| json!({"index": i, "relevanceScore": s}))
        .collect();
    // No usage: Bedrock reports none.
    Reply::json(200, json!({"results": results}))
}

fn mac(key: &[u8], data: &str) -> Vec<u8> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).unwrap();
    m.update(data.as_bytes());
    m.finalize().into_bytes().to_vec()
}

/// The fake's side of SigV4: rebuild the canonical request from the received method, path,
/// headers and body, sign it with the test's secret, and compare with `Authorization`.
fn assert_signed(req: &Recorded) {
    let date = req.header("x-amz-date").expect("x-amz-date");
    assert_eq!(date.len(), 16, "{date}");
    assert_eq!(req.header("x-amz-security-token"), Some(AWS_SESSION_TOKEN));
    let day = &date[..8];
    let signed = "content-type;host;x-amz-date;x-amz-security-token";
    let canonical = format!(
        "{}\n{}\n\ncontent-type:{}\nhost:{}\nx-amz-date:{}\nx-amz-security-token:{}\n\n{}\n{}",
        req.method,
        req.path,
        req.header("content-type").unwrap(),
        req.header("host").unwrap(),
        date,
        AWS_SESSION_TOKEN,
        signed,
        hex::encode(Sha256::digest(&req.body)),
    );
    let scope = format!("{day}/us-west-2/bedrock/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{date}\n{scope}\n{}",
        hex::encode(Sha256::digest(canonical.as_bytes()))
    );
    let k = mac(format!("AWS4{AWS_SECRET}").as_bytes(), day);
    let k = mac(&k, "us-west-2");
    let k = mac(&k, "bedrock");
    let k = mac(&k, "aws4_request");
    let signature = hex::encode(mac(&k, &to_sign));
    assert_eq!(
        req.header("authorization"),
        Some(
            format!(
                "AWS4-HMAC-SHA256 Credential={AWS_ACCESS_KEY_ID}/{scope}, SignedHeaders={signed}, Signature={signature}"
            )
            .as_str()
        ),
        "the fake's signature differs from the gateway's"
    );
    // The secret itself never travels.
    assert!(!req.headers.iter().any(|(_, v)| v.contains(AWS_SECRET)));
}

fn check(req: &Recorded, query: &str, docs: &[&str], top_n: Option<usize>) {
    let sources: Vec<_> = docs
        .iter()
        .map(|d| json!({"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": d}}}))
        .collect();
    assert_eq!(
        req.json(),
        json!({
            "queries": [{"type": "TEXT", "textQuery": {"text": query}}],
            "sources": sources,
            "rerankingConfiguration": {
                "type": "BEDROCK_RERANKING_MODEL",
                "bedrockRerankingConfiguration": {
                    "numberOfResults": top_n.unwrap_or(docs.len()),
                    "modelConfiguration": {"modelArn": ARN},
                },
            },
        })
    );
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_signed(req);
}

fn errors() -> Vec<(Reply, u16, &'static str)> {
    let aws = |status: u16, kind: &str, message: &str| {
        Reply::json(status, json!({"message": message})).with_header("x-amzn-ErrorType", kind)
    };
    vec![
        (
            aws(
                400,
                "ValidationException",
                "1 validation error detected: Value at 'queries.1.member.textQuery.text' failed to satisfy constraint",
            ),
            400,
            "invalid_request",
        ),
        // The model is not offered to this account or region: the configuration's fault.
        (
            aws(
                403,
                "AccessDeniedException",
                "You don't have access to the model with the specified model ID.",
            ),
            503,
            "model_unavailable",
        ),
        (
            aws(404, "ResourceNotFoundException", "Model not found"),
            503,
            "model_unavailable",
        ),
        (
            aws(
                403,
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
            ),
            502,
            "upstream_auth_failed",
        ),
        (
            aws(429, "ThrottlingException", "Rate exceeded"),
            429,
            "rate_limited",
        ),
        (
            aws(500, "InternalServerException", "internal error"),
            502,
            "upstream_error",
        ),
        (
            // Cohere's score name: Bedrock's is `relevanceScore`.
            Reply::json(200, json!({"results": [{"index": 0, "relevance_score": 0.5}]})),
            502,
            "upstream_bad_response",
        ),
    ]
}

rerank_conformance!(
    conformance,
    RerankCase {
        model: "bedrock-cohere-rerank",
        path: "/rerank",
        bearer: false,
        max_documents: 1000,
        success,
        reported_total: None,
        unbilled: success,
        query_counting: QueryCounting::PerDocument,
        check_request: check,
        errors,
    }
);

/// Bedrock bills per query of up to 100 documents: the answer says how many this request was.
#[test]
fn answer_counts_billed_queries() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let docs: Vec<String> = (0..101).map(|i| format!("document {i}")).collect();
    fake.push(success(&[(100, 0.9), (5, 0.2)], &[]));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "bedrock-cohere-rerank", "query": "q", "documents": docs, "top_n": 2}),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let out = resp.json();
    assert_eq!(out["metadata"]["queries"], 2);
    assert_eq!(out["metadata"]["total_tokens_source"], "gateway");
    assert_eq!(out["results"][0]["index"], 100);
    assert_signed(&fake.requests().pop().unwrap());
}

/// Bedrock's document limit (32,000 characters) is the gateway's 400, before any signing.
#[test]
fn an_over_long_document_is_refused() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let long = "x".repeat(32_001);
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": "bedrock-cohere-rerank", "query": "q", "documents": ["ok", long]}),
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(fake.requests().is_empty());
}
