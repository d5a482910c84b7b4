//! The built-in local reranker: Okapi BM25 computed in-process, no key, no network.
//!
//! It makes rerank work on a fresh machine with no provider keys (the README's quick start) and
//! serves as a last-resort fallback target. Tokenization handles spaced and unspaced scripts:
//! words of spaced scripts are lower-cased, stripped of a plural `s` and filtered against a short
//! English stop-word list; runs of characters of scripts written without spaces (CJK, Hangul,
//! Thai, Lao, Khmer, Myanmar) yield their single characters and adjacent pairs (bigrams), the
//! usual way to index unsegmented text lexically. Raw BM25 scores are mapped to [0, 1) with
//! `s / (s + 1)`, which keeps the order.
//!
//! Properties a caller should know (docs/providers/local.md): the IDF comes from the request's own
//! documents, so a score depends on the other documents sent with it and is comparable only within
//! one answer; the scores are not calibrated probabilities; stop words are English only; nothing
//! is billed, so usage is the gateway's count with the query counted once.
//!
//! Its "native answer" is the score list as JSON (`{"results":[{"index","relevance_score"}]}`), so
//! the local provider goes through the same translate-back step as the remote ones.

use std::collections::HashMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::api::rerank::{QueryCounting, RerankRequest, RerankResult};
use crate::catalog::Target;
use crate::common::error::GatewayError;
use crate::common::error::UpstreamError;
use crate::upstream::provider::Provider;

// ---- constants -------------------------------------------------------------------------------

/// Term-frequency saturation.
const K1: f64 = 1.2;
/// Length normalisation.
const B: f64 = 0.75;

const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from", "how", "in",
    "is", "it", "its", "of", "on", "or", "that", "the", "this", "to", "was", "what", "when",
    "where", "which", "who", "why", "with",
];

// ---- wire types ------------------------------------------------------------------------------

#[derive(Serialize, Deserialize)]
struct Answer {
    results: Vec<Scored>,
}

#[derive(Serialize, Deserialize)]
struct Scored {
    index: usize,
    relevance_score: f64,
}

// ---- scoring -----------------------------------------------------------------------------------

/// Characters of scripts written without spaces between words, indexed as character n-grams.
fn is_unspaced(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0EFF      // Thai, Lao
        | 0x1000..=0x109F    // Myanmar
        | 0x1780..=0x17FF    // Khmer
        | 0x3040..=0x30FF    // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F) // Extensions B–F, compatibility supplement
}

fn push_word(word: &mut String, out: &mut Vec<String>) {
    if word.is_empty() {
        return;
    }
    let mut w = std::mem::take(word);
    if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") {
        w.pop();
    }
    if !STOP_WORDS.contains(&w.as_str()) {
        out.push(w);
    }
}

fn push_cjk(run: &mut Vec<char>, out: &mut Vec<String>) {
    for (i, c) in run.iter().enumerate() {
        out.push(c.to_string());
        if let Some(next) = run.get(i + 1) {
            out.push([*c, *next].iter().collect());
        }
    }
    run.clear();
}

/// The terms of `text`.
pub(crate) fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut cjk = Vec::new();
    for c in text.chars() {
        if is_unspaced(c) {
            push_word(&mut word, &mut out);
            cjk.push(c);
        } else if c.is_alphanumeric() {
            push_cjk(&mut cjk, &mut out);
            word.extend(c.to_lowercase());
        } else {
            push_word(&mut word, &mut out);
            push_cjk(&mut cjk, &mut out);
        }
    }
    push_word(&mut word, &mut out);
    push_cjk(&mut cjk, &mut out);
    out
}

/// BM25 score of each document for the query, in document order.
pub(crate) fn scores(query: &str, documents: &[&str]) -> Vec<f64> {
    let docs: Vec<Vec<String>> = documents.iter().map(|d| tokenize(d)).collect();
    let n = docs.len() as f64;
    let avg_len = (docs.iter().map(Vec::len).sum::<usize>() as f64 / n.max(1.0)).max(1.0);
    let mut query_terms = tokenize(query);
    query_terms.sort_unstable();
    query_terms.dedup();
    let idf: Vec<f64> = query_terms
        .iter()
        .map(|t| {
            let df = docs.iter().filter(|d| d.contains(t)).count() as f64;
            (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
        })
        .collect();
    docs.iter()
        .map(|d| {
            let mut tf: HashMap<&str, f64> = HashMap::new();
            for t in d {
                *tf.entry(t.as_str()).or_default() += 1.0;
            }
            let len_norm = 1.0 - B + B * d.len() as f64 / avg_len;
            // A fold from +0.0, not `sum()`: summing no terms (a query of stop words only) gives
            // -0.0, which would be written out as `-0.0`.
            query_terms
                .iter()
                .zip(&idf)
                .map(|(t, idf)| {
                    let f = tf.get(t.as_str()).copied().unwrap_or(0.0);
                    idf * f * (K1 + 1.0) / (f + K1 * len_norm)
                })
                .fold(0.0, |sum, term| sum + term)
        })
        .collect()
}

// ---- translation to "native" -------------------------------------------------------------------

/// Score the request; the answer is the native JSON the translate-back step reads.
pub(crate) fn rerank(req: &RerankRequest<'_>) -> Result<Bytes, GatewayError> {
    let docs: Vec<&str> = req.documents.iter().map(|d| d.as_str()).collect();
    let results = scores(req.query.as_str(), &docs)
        .into_iter()
        .enumerate()
        .map(|(index, s)| Scored {
            index,
            relevance_score: s / (s + 1.0),
        })
        .collect();
    serde_json::to_vec(&Answer { results })
        .map(Bytes::from)
        .map_err(|e| GatewayError::Internal(format!("local reranker: {e}")))
}

// ---- translation back --------------------------------------------------------------------------

pub(crate) fn rerank_response<'r>(
    provider: &Provider,
    req: &'r RerankRequest<'r>,
    body: &[u8],
) -> Result<RerankResult<'r>, UpstreamError> {
    let bad = |m: String| crate::upstream::provider::bad_answer(provider, m);
    let answer: Answer = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
    let mut metadata = serde_json::Map::new();
    metadata.insert("scorer".into(), "bm25".into());
    // Nothing is billed: the query counts once.
    req.build(
        answer.results.iter().map(|r| (r.index, r.relevance_score)),
        None,
        QueryCounting::Once,
        metadata,
    )
    .map_err(bad)
}

// ---- registration ----------------------------------------------------------------------------

/// The in-process reranker as an adapter: its "request" is the answer itself.
struct Local;

impl crate::api::adapter::RerankAdapter for Local {
    fn request(
        &self,
        _target: &Target,
        req: &RerankRequest<'_>,
    ) -> Result<crate::common::native::Prepared, GatewayError> {
        rerank(req).map(crate::common::native::Prepared::Local)
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

/// The local kind: no key, no network.
pub(crate) fn kind() -> Result<crate::providers::registry::Kind, String> {
    Ok(crate::providers::registry::Kind {
        auth: crate::upstream::provider::Auth::None,
        // Never called over HTTP, so never asked to classify an answer.
        errors: |p, status, _| UpstreamError::from_status(&p.name, status, "local provider"),
        remote: false,
        result_hosts: &[],
        adapters: crate::api::adapter::Adapters {
            rerank: Some(Box::new(Local)),
            ..Default::default()
        },
    })
}

// ---- tests -------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn order(query: &str, docs: &[&str]) -> Vec<usize> {
        let s = scores(query, docs);
        let mut idx: Vec<usize> = (0..docs.len()).collect();
        idx.sort_by(|a, b| s[*b].total_cmp(&s[*a]).then(a.cmp(b)));
        idx
    }

    #[test]
    fn tokenizes_english_and_cjk() {
        assert_eq!(tokenize("The Cats, and DOGS!"), vec!["cat", "dog"]);
        assert_eq!(
            tokenize("北京大学"),
            vec!["北", "北京", "京", "京大", "大", "大学", "学"]
        );
        assert_eq!(tokenize("GPU是A100"), vec!["gpu", "是", "a100"]);
    }

    #[test]
    fn ranks_english_sensibly() {
        let docs = [
            "Bananas are a good source of potassium.",
            "Paris is the capital and largest city of France.",
            "The Great Wall of China is visible from many places.",
            "France borders Spain, Italy and Germany.",
        ];
        let o = order("What is the capital of France?", &docs);
        assert_eq!(o[0], 1);
        assert_eq!(o[1], 3);
        let o = order("potassium in bananas", &docs);
        assert_eq!(o[0], 0);
    }

    #[test]
    fn ranks_chinese_sensibly() {
        let docs = [
            "香蕉富含钾元素。",
            "北京是中华人民共和国的首都。",
            "长城是中国古代的军事防御工程。",
            "上海是中国的经济中心。",
        ];
        assert_eq!(order("中国的首都是哪里", &docs)[0], 1);
        assert_eq!(order("长城", &docs)[0], 2);
        assert_eq!(order("香蕉", &docs)[0], 0);
    }

    #[test]
    fn unrelated_documents_score_zero_and_stay_finite() {
        let s = scores("quantum", &["apples", "", "oranges"]);
        assert!(s.iter().all(|x| *x == 0.0));
    }

    #[test]
    fn a_zero_score_is_positive_zero() {
        // Only stop words: no query term at all.
        let s = scores("what is the", &["apples", "oranges"]);
        assert!(s.iter().all(|x| *x == 0.0 && x.is_sign_positive()), "{s:?}");
        let s = scores("quantum", &["apples"]);
        assert!(s[0].is_sign_positive());
    }

    #[test]
    fn thai_is_indexed_by_characters() {
        // "ภาษาไทย" (Thai language) is one unspaced run; its bigrams match inside longer text.
        assert!(tokenize("ภาษาไทย").len() > 1);
        let docs = ["แมวชอบนอน", "ฉันเรียนภาษาไทยทุกวัน", "apples"];
        assert_eq!(order("ภาษาไทย", &docs)[0], 1);
    }
}
