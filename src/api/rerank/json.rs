//! The public rerank answer's JSON, written by hand into one buffer.
//!
//! The answer is the gateway's biggest JSON (every result carries its document back: tens of
//! kilobytes at 100 documents), and its shape is fixed, so it is written directly: the documents'
//! literals copied as the caller sent them, numbers formatted by serde_json's own formatter, the
//! model's name and `metadata` (small, and of any shape) through serde_json. The bytes are the
//! ones serde_json writes for [`RerankResult`]'s `Serialize` (a test compares them on many
//! answers), without its per-field calls through the serializer.

use std::io;

use serde_json::ser::{CompactFormatter, Formatter};

use super::{RerankItem, RerankResult};

impl RerankResult<'_> {
    /// The answer as compact JSON, byte for byte what `serde_json::to_vec(self)` gives.
    pub fn write_json(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(self.json_size());
        self.write_into(&mut out)
            .map_err(|e| format!("serializing result: {e}"))?;
        Ok(out)
    }

    /// About the answer's length (its documents' literals and room for each result's index and
    /// score, and for usage and metadata), so that it is written into one buffer: 100 documents
    /// are tens of kilobytes, which a buffer grown from nothing copies again at every doubling.
    fn json_size(&self) -> usize {
        let documents: usize = self
            .results
            .iter()
            .filter(|r| r.with_document)
            .map(|r| r.document.raw().get().len() + 16)
            .sum();
        documents + self.results.len() * 48 + self.model.len() + 512
    }

    fn write_into(&self, out: &mut Vec<u8>) -> io::Result<()> {
        out.extend_from_slice(b"{\"model\":");
        serde_json::to_writer(&mut *out, self.model)?;
        out.extend_from_slice(b",\"results\":[");
        for (i, item) in self.results.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            item.write_into(out)?;
        }
        let f = &mut CompactFormatter;
        out.extend_from_slice(b"],\"usage\":{\"total_tokens\":");
        f.write_u64(out, self.usage.total_tokens)?;
        out.extend_from_slice(b",\"query_tokens\":");
        f.write_u64(out, self.usage.query_tokens)?;
        out.extend_from_slice(b",\"documents_tokens\":");
        f.write_u64(out, self.usage.documents_tokens)?;
        out.extend_from_slice(b"},\"metadata\":");
        serde_json::to_writer(&mut *out, &self.metadata)?;
        out.push(b'}');
        Ok(())
    }
}

impl RerankItem<'_> {
    fn write_into(&self, out: &mut Vec<u8>) -> io::Result<()> {
        let f = &mut CompactFormatter;
        out.extend_from_slice(b"{\"index\":");
        f.write_u64(out, self.index as u64)?;
        out.extend_from_slice(b",\"relevance_score\":");
        // As serde_json writes an `f64`: shortest round-trip form, `null` when not finite.
        if self.relevance_score.is_finite() {
            f.write_f64(out, self.relevance_score)?;
        } else {
            f.write_null(out)?;
        }
        if self.with_document {
            out.extend_from_slice(b",\"document\":");
            // The caller's literal, already valid JSON for exactly this text.
            out.extend_from_slice(self.document.raw().get().as_bytes());
        }
        out.push(b'}');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use serde_json::value::RawValue;
    use serde_json::{json, Map, Value};

    use super::super::{RerankItem, RerankResult, Usage};
    use crate::common::json::JsonStr;

    /// Pieces of document literals: escapes of every kind, raw Unicode, characters serde_json
    /// would escape differently from the caller (`\/`, `\u0041`), which must come back as sent.
    const PIECES: &[&str] = &[
        "plain",
        " ",
        "Carson City is the capital city of Nevada.",
        r#"\""#,
        r"\\",
        r"\/",
        r"\n",
        r"\r\n",
        r"\t",
        r"\b\f",
        r"\u0000",
        r"\u001f",
        r"\u0041",
        r"\u00e9",
        r"\ud83d\ude00",
        "é",
        "naïve 日本語",
        "😀👍🏽",
        "\u{7f}",
        "\u{2028}",
        "<script>&amp;</script>",
    ];

    const MODELS: &[&str] = &["rerank-v3.5", "m\"odel\\x", "модель/日本", "tab\there", ""];

    fn literal(rng: &mut impl Rng) -> Box<RawValue> {
        let n = rng.gen_range(0..8);
        let text: String = (0..n)
            .map(|_| PIECES[rng.gen_range(0..PIECES.len())])
            .collect();
        RawValue::from_string(format!("\"{text}\"")).unwrap()
    }

    fn score(rng: &mut impl Rng) -> f64 {
        match rng.gen_range(0..8) {
            0 => 0.0,
            1 => -0.0,
            2 => 1.0,
            3 => f64::MIN_POSITIVE,
            4 => rng.gen_range(-1e300..1e300),
            5 => f64::from_bits(rng.gen::<u64>() & !(0x7ff << 52)),
            _ => rng.gen::<f64>(),
        }
    }

    fn metadata(rng: &mut impl Rng) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("tokenizer".into(), "cl100k_base".into());
        if rng.gen() {
            m.insert("search_units".into(), json!(rng.gen::<f64>() * 10.0));
        }
        if rng.gen() {
            m.insert("request_id".into(), "id \"quoted\" \\ é \u{1}".into());
        }
        if rng.gen() {
            m.insert(
                "cost".into(),
                json!({"currency": "USD", "amount": 0.0012, "parts": [1, -2, null, true]}),
            );
        }
        m
    }

    /// The hand-written answer is serde_json's, byte for byte, for random answers: documents
    /// with every kind of escape, any score, big counts, documents on and off.
    #[test]
    fn writes_what_serde_json_writes() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(46);
        for round in 0..2000 {
            let docs: Vec<Box<RawValue>> = (0..rng.gen_range(0..12))
                .map(|_| literal(&mut rng))
                .collect();
            let strs: Vec<JsonStr<'_>> =
                docs.iter().map(|d| JsonStr::from_raw(d).unwrap()).collect();
            let with_document = rng.gen_bool(0.7);
            let results = strs
                .iter()
                .map(|d| RerankItem {
                    index: if rng.gen() {
                        rng.gen_range(0..100)
                    } else {
                        rng.gen()
                    },
                    relevance_score: score(&mut rng),
                    document: d,
                    with_document,
                })
                .collect();
            let big = |rng: &mut rand::rngs::StdRng| {
                if rng.gen() {
                    rng.gen()
                } else {
                    rng.gen_range(0..1000)
                }
            };
            let result = RerankResult {
                model: MODELS[round % MODELS.len()],
                results,
                usage: Usage {
                    total_tokens: big(&mut rng),
                    query_tokens: big(&mut rng),
                    documents_tokens: big(&mut rng),
                },
                metadata: metadata(&mut rng),
            };
            let serde = serde_json::to_vec(&result).unwrap();
            let ours = result.write_json().unwrap();
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&serde),
                "round {round}"
            );
            assert_eq!(ours, serde, "round {round}");
        }
    }

    /// Scores that are not finite (the adapters refuse them; the writer does not rely on it) are
    /// written as serde_json writes them: `null`.
    #[test]
    fn non_finite_scores_are_null_as_in_serde_json() {
        let raw = RawValue::from_string("\"d\"".into()).unwrap();
        let doc = JsonStr::from_raw(&raw).unwrap();
        for s in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let result = RerankResult {
                model: "m",
                results: vec![RerankItem {
                    index: 0,
                    relevance_score: s,
                    document: &doc,
                    with_document: true,
                }],
                usage: Usage {
                    total_tokens: 1,
                    query_tokens: 0,
                    documents_tokens: 1,
                },
                metadata: Map::new(),
            };
            assert_eq!(
                result.write_json().unwrap(),
                serde_json::to_vec(&result).unwrap()
            );
        }
    }
}
