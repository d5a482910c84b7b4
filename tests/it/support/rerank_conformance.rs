//! The rerank conformance cases every provider passes, in one place.
//!
//! A provider's test file describes its wire format in a [`RerankCase`] (how its fake answers, what
//! its native request must look like, its native error shapes) and invokes [`rerank_conformance!`],
//! which makes one `#[test]` per case (`rerank_jina::conformance::native_errors`, …), each against
//! its own fake provider and gateway; the cases and their assertions are the same for all providers.

use serde_json::{json, Value};
pub use switchyard::internals::api::rerank::QueryCounting;

use super::fake::{FakeProvider, Recorded, Reply};
use super::{post, TestGateway, PROVIDER_KEY};

/// Builds a native success answer from `(index, score)` pairs and the documents.
pub type SuccessFn = fn(scores: &[(usize, f64)], docs: &[&str]) -> Reply;
/// Asserts the native request for a query, documents and `top_n`.
pub type CheckFn = fn(req: &Recorded, query: &str, docs: &[&str], top_n: Option<usize>);
/// Native error answers with the public `(status, code)` each must become.
pub type ErrorsFn = fn() -> Vec<(Reply, u16, &'static str)>;

/// One provider's wire format, as the conformance cases need it.
pub struct RerankCase {
    /// Public model name in the test config.
    pub model: &'static str,
    /// Path the native request must go to (the test config's base URL is the fake's root).
    pub path: &'static str,
    /// Whether the request must carry `Authorization: Bearer <provider key>`.
    pub bearer: bool,
    /// The most documents the model accepts (its family's limit).
    pub max_documents: usize,
    /// A native success answer listing `scores` as `(index, score)` in the given order.
    pub success: SuccessFn,
    /// The billed token total `success` reports, if the provider reports one.
    pub reported_total: Option<u64>,
    /// A native success answer like `success` but without any billed token figure (for a provider
    /// that reports none, the same as `success`).
    pub unbilled: SuccessFn,
    /// How the provider counts the query when it bills (its adapter's declaration).
    pub query_counting: QueryCounting,
    /// Assert the native request for this query, documents and `top_n` (None: caller sent none).
    pub check_request: CheckFn,
    /// Native error answers and the public `(status, code)` each must become.
    pub errors: ErrorsFn,
}

const DOCS: [&str; 4] = [
    "The Eiffel Tower is in Paris.",
    "Bananas are rich in potassium.",
    "Paris is the capital of France.",
    "巴黎是法国的首都。",
];
const QUERY: &str = "What is the capital of France?";

/// One `#[test]` per conformance case for one provider:
/// `rerank_conformance!(conformance, RerankCase { .. })`, at module level, defines the module
/// `conformance` with the tests `translation_and_request`, `usage_without_a_billed_figure`,
/// `default_top_n`, `native_errors`, `retry_before_success`, `many_documents` and
/// `over_the_limit`. Each test evaluates the case
/// expression, in the scope of the module that invoked the macro, and runs its case.
macro_rules! rerank_conformance {
    ($name:ident, $case:expr $(,)?) => {
        mod $name {
            mod case {
                #[allow(unused_imports)]
                use super::super::*;

                pub fn case() -> $crate::support::rerank_conformance::RerankCase {
                    $case
                }
            }

            #[test]
            fn translation_and_request() {
                $crate::support::rerank_conformance::translation_and_request(&case::case());
            }

            #[test]
            fn usage_without_a_billed_figure() {
                $crate::support::rerank_conformance::usage_without_a_billed_figure(&case::case());
            }

            #[test]
            fn default_top_n() {
                $crate::support::rerank_conformance::default_top_n(&case::case());
            }

            #[test]
            fn cost() {
                $crate::support::rerank_conformance::cost(&case::case());
            }

            #[test]
            fn native_errors() {
                $crate::support::rerank_conformance::native_errors(&case::case());
            }

            #[test]
            fn retry_before_success() {
                $crate::support::rerank_conformance::retry_before_success(&case::case());
            }

            #[test]
            fn many_documents() {
                $crate::support::rerank_conformance::many_documents(&case::case());
            }

            #[test]
            fn over_the_limit() {
                $crate::support::rerank_conformance::over_the_limit(&case::case());
            }
        }
    };
}
pub(crate) use rerank_conformance;

/// A fake provider and a gateway pointing at it, for one case.
fn start() -> (FakeProvider, TestGateway) {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    (fake, gw)
}

fn body(case: &RerankCase, docs: &[&str], top_n: Option<usize>) -> Value {
    let mut b = json!({"model": case.model, "query": QUERY, "documents": docs});
    if let Some(n) = top_n {
        b["top_n"] = json!(n);
    }
    b
}

fn last(fake: &FakeProvider) -> Recorded {
    fake.requests()
        .pop()
        .expect("the provider received no request")
}

pub fn translation_and_request(case: &RerankCase) {
    let (fake, gw) = start();
    // Provider order deliberately unsorted, with a tie between 0 and 3.
    fake.push((case.success)(
        &[(1, 0.01), (3, 0.62), (2, 0.97), (0, 0.62)],
        &DOCS,
    ));
    let resp = post(&gw, "/api/v1/rerank", &body(case, &DOCS, Some(3)));
    assert_eq!(resp.status, 200, "{}: {}", case.model, resp.text());
    let out = resp.json();
    assert_eq!(out["model"], case.model);
    let results = out["results"].as_array().unwrap();
    let got: Vec<(u64, f64)> = results
        .iter()
        .map(|r| {
            (
                r["index"].as_u64().unwrap(),
                r["relevance_score"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![(2, 0.97), (0, 0.62), (3, 0.62)],
        "{}: order or top_n wrong",
        case.model
    );
    for r in results {
        let i = r["index"].as_u64().unwrap() as usize;
        assert_eq!(
            r["document"], DOCS[i],
            "{}: document not the caller's",
            case.model
        );
    }
    check_usage(case, &out, case.reported_total);

    let req = last(&fake);
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, case.path, "{}: native path", case.model);
    if case.bearer {
        assert_eq!(
            req.header("authorization"),
            Some(format!("Bearer {PROVIDER_KEY}").as_str())
        );
    }
    assert_eq!(req.header("service-api-key"), None);
    (case.check_request)(&req, QUERY, &DOCS, Some(3));
}

/// The usage rule, the same for every provider: `documents_tokens` each document once,
/// `query_tokens` as the provider bills the query, `total_tokens` the provider's billed figure
/// (`billed`) or else their sum, and `metadata` saying which is which.
fn check_usage(case: &RerankCase, out: &Value, billed: Option<u64>) {
    let usage = &out["usage"];
    let q = usage["query_tokens"].as_u64().unwrap();
    let d = usage["documents_tokens"].as_u64().unwrap();
    let once = switchyard::internals::tokens::count(QUERY) as u64;
    let (want_q, counted) = match case.query_counting {
        QueryCounting::PerDocument => (once * DOCS.len() as u64, "per_document"),
        QueryCounting::Once => (once, "once"),
    };
    assert_eq!(q, want_q, "{}: query_tokens", case.model);
    assert_eq!(
        d,
        DOCS.iter()
            .map(|x| switchyard::internals::tokens::count(x) as u64)
            .sum::<u64>()
    );
    let total = usage["total_tokens"].as_u64().unwrap();
    let meta = &out["metadata"];
    match billed {
        Some(t) => {
            assert_eq!(total, t, "{}: provider total not used", case.model);
            assert_eq!(meta["total_tokens_source"], "provider", "{}", case.model);
        }
        None => {
            assert_eq!(total, q + d, "{}", case.model);
            assert_eq!(meta["total_tokens_source"], "gateway", "{}", case.model);
        }
    }
    assert_eq!(meta["query_tokens_counted"], counted, "{}", case.model);
    assert_eq!(meta["tokenizer"], "cl100k_base");
}

pub fn usage_without_a_billed_figure(case: &RerankCase) {
    let (fake, gw) = start();
    fake.push((case.unbilled)(
        &[(0, 0.2), (1, 0.1), (2, 0.9), (3, 0.5)],
        &DOCS,
    ));
    let resp = post(&gw, "/api/v1/rerank", &body(case, &DOCS, None));
    assert_eq!(resp.status, 200, "{}: {}", case.model, resp.text());
    check_usage(case, &resp.json(), None);
}

pub fn default_top_n(case: &RerankCase) {
    let (fake, gw) = start();
    fake.push((case.success)(
        &[(0, 0.2), (1, 0.1), (2, 0.9), (3, 0.5)],
        &DOCS,
    ));
    let resp = post(&gw, "/api/v1/rerank", &body(case, &DOCS, None));
    assert_eq!(resp.status, 200, "{}: {}", case.model, resp.text());
    assert_eq!(
        resp.json()["results"].as_array().unwrap().len(),
        4,
        "{}: default top_n is all",
        case.model
    );
    (case.check_request)(&last(&fake), QUERY, &DOCS, None);
}

pub fn native_errors(case: &RerankCase) {
    let (fake, mut gw) = start();
    for (reply, status, code) in (case.errors)() {
        fake.push(reply);
        let resp = post(&gw, "/api/v1/rerank", &body(case, &DOCS, None));
        assert_eq!(
            resp.status,
            status,
            "{}: {code}: {}",
            case.model,
            resp.text()
        );
        assert_eq!(resp.json()["code"], code, "{}", case.model);
        assert!(
            !resp.text().contains(PROVIDER_KEY),
            "{}: provider key leaked",
            case.model
        );
        // A model-gone answer retires the target for hours (the next rows would not reach the
        // fake): the next row starts on a fresh gateway.
        if code == "model_unavailable" {
            gw = TestGateway::start(&fake);
        }
    }
}

pub fn retry_before_success(case: &RerankCase) {
    let (fake, gw) = start();
    let before = fake.requests().len();
    fake.push(Reply::json(503, json!({"message": "overloaded"})));
    fake.push((case.success)(
        &[(0, 0.5), (1, 0.4), (2, 0.3), (3, 0.2)],
        &DOCS,
    ));
    let mut b = body(case, &DOCS, None);
    b["retries"] = json!(1);
    let resp = post(&gw, "/api/v1/rerank", &b);
    assert_eq!(resp.status, 200, "{}: {}", case.model, resp.text());
    let seen = fake.requests();
    assert_eq!(seen.len(), before + 2);
    assert_eq!(
        seen[before].body,
        seen[before + 1].body,
        "{}: retry changed the request",
        case.model
    );
}

pub fn many_documents(case: &RerankCase) {
    let (fake, gw) = start();
    // 999: Cohere v1 refuses documents × its default 10 chunks per document from 10,000 on.
    let n = case.max_documents.min(999);
    let owned: Vec<String> = (0..n)
        .map(|i| format!("document {i}: {}", "lorem ipsum ".repeat(80)))
        .collect();
    let docs: Vec<&str> = owned.iter().map(String::as_str).collect();
    let scores: Vec<(usize, f64)> = (0..n).map(|i| (i, i as f64 / n as f64)).collect();
    fake.push((case.success)(&scores, &docs));
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": case.model, "query": "lorem", "documents": docs, "top_n": 5}),
    );
    assert_eq!(resp.status, 200, "{}: {}", case.model, resp.text());
    let out = resp.json();
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 5);
    assert_eq!(results[0]["index"], (n - 1) as u64);
    assert_eq!(results[0]["document"], docs[n - 1]);
}

pub fn over_the_limit(case: &RerankCase) {
    let (fake, gw) = start();
    let before = fake.requests().len();
    let docs: Vec<String> = (0..=case.max_documents).map(|i| format!("d{i}")).collect();
    let resp = post(
        &gw,
        "/api/v1/rerank",
        &json!({"model": case.model, "query": "q", "documents": docs}),
    );
    assert_eq!(resp.status, 400, "{}", case.model);
    assert!(resp.json()["details"]["documents"]
        .as_str()
        .unwrap()
        .contains(&case.max_documents.to_string()));
    assert_eq!(fake.requests().len(), before);
}

/// What one request (the four documents, no `top_n`) costs, on its `Switchyard-Cost` header and in
/// `metadata.cost`: the figure computed by hand in [`super::costs`] from the model's price and the
/// usage the fake's answer reports.
pub fn cost(case: &RerankCase) {
    let (fake, gw) = start();
    fake.push((case.success)(
        &[(0, 0.1), (1, 0.2), (2, 0.9), (3, 0.8)],
        &DOCS,
    ));
    let resp = post(&gw, "/api/v1/rerank", &body(case, &DOCS, None));
    assert_eq!(resp.status, 200, "{}: {}", case.model, resp.text());
    let header = super::costs::assert_cost(case.model, &resp);
    // The answer's `metadata.cost` says the same as the header (absent when there is none).
    let meta = &resp.json()["metadata"]["cost"];
    match header.split_once(' ') {
        Some((amount, rest)) if amount != "unknown;" => {
            assert_eq!(meta["amount"], amount, "{}: {meta}", case.model);
            assert_eq!(
                meta["currency"],
                rest.split(';').next().unwrap_or_default(),
                "{}",
                case.model
            );
        }
        _ => assert!(meta.is_null(), "{}: {meta}", case.model),
    }
}
