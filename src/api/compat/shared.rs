//! What Cohere's and Jina's shapes have in common: the ranked items (with a returned document as
//! the caller sent it), and an error's one message.

use serde::Serialize;
use serde_json::value::RawValue;

use super::request::Translated;
use crate::api::rerank::RerankResult;
use crate::common::error::GatewayError;

/// One ranked result, as both APIs answer it.
#[derive(Serialize)]
pub(super) struct Item<'a> {
    index: usize,
    relevance_score: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    document: Option<Document<'a>>,
}

/// The ranked results of `result`, each with its document when the caller asked for them.
pub(super) fn items<'a>(result: &RerankResult<'_>, t: &Translated<'a>) -> Vec<Item<'a>> {
    result
        .results
        .iter()
        .map(|r| Item {
            index: r.index,
            relevance_score: r.relevance_score,
            document: document(t, r.index),
        })
        .collect()
}

/// An error's message with every validation detail spelt out: the surfaces' error shapes have one
/// message and no `details` map.
pub(super) fn full_message(err: &GatewayError) -> String {
    let mut message = err.message();
    if let GatewayError::Validation(v) = err {
        let details: Vec<String> = v
            .details()
            .iter()
            .map(|(field, why)| format!("{field}: {why}"))
            .collect();
        message = format!("{message}: {}", details.join("; "));
    }
    message
}

/// A returned document as the caller sent it: a string is answered as `{"text": string}`, an
/// object (Cohere v1 and Jina accept `{"text": …}` objects) as the object itself, every member
/// kept.
pub(super) struct Document<'a>(&'a RawValue);

impl serde::Serialize for Document<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        if self.0.get().starts_with('"') {
            let mut m = s.serialize_map(Some(1))?;
            m.serialize_entry("text", self.0)?;
            m.end()
        } else {
            self.0.serialize(s)
        }
    }
}

/// The document at `index` in the surface's shape, when the caller asked for documents.
fn document<'a>(t: &Translated<'a>, index: usize) -> Option<Document<'a>> {
    if !t.return_documents {
        return None;
    }
    t.originals.get(index).map(|raw| Document(raw))
}
