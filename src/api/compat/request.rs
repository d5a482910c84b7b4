//! A surface's request body → the gateway's own rerank body.
//!
//! The surfaces' requests are the gateway's own fields (`model`, `query`, `documents`, `top_n`,
//! `return_documents`, and a model's native fields such as Cohere's `max_tokens_per_doc`) with three
//! differences, handled here and nowhere else: a document may be an object `{"text": …}` (it is
//! ranked by its `text`, and answered as sent); Cohere's `rank_fields` may name only `text`; and
//! `null`, which the SDKs send for options left unset, means absent. `return_documents` is taken
//! here, since its default is the surface's own. Every other field is copied verbatim, so
//! `api::rerank::parse` validates it exactly as on `/api/v1/rerank` (an unknown field is a 400
//! naming it).

use serde_json::value::RawValue;

use crate::common::error::{GatewayError, ValidationErrors};
use crate::common::json::Fields;

/// What sets one surface's request apart.
pub(super) struct Dialect {
    /// `return_documents` when the caller sends none: Cohere's default is false, Jina's true.
    pub return_documents: bool,
    /// Whether Cohere's `rank_fields` is understood (only `["text"]`: documents are ranked by
    /// their text).
    pub rank_fields: bool,
}

pub(super) const COHERE: Dialect = Dialect {
    return_documents: false,
    rank_fields: true,
};

pub(super) const JINA: Dialect = Dialect {
    return_documents: true,
    rank_fields: false,
};

/// A translated request.
#[derive(Debug)]
pub struct Translated<'a> {
    /// The gateway's own rerank body.
    pub body: Vec<u8>,
    /// Each document as the caller sent it (a string, or an object with a string `text`).
    pub originals: Vec<&'a RawValue>,
    /// Whether the answer carries the documents.
    pub return_documents: bool,
}

pub(super) fn translate<'a>(
    body: &'a [u8],
    dialect: &Dialect,
) -> Result<Translated<'a>, GatewayError> {
    let mut f = Fields::parse(body)?;
    let return_documents = f.boolean("return_documents");
    if dialect.rank_fields {
        rank_fields(&mut f);
    }
    let documents = f.take_raw("documents");
    let (rest, mut errors) = f.into_rest();

    let mut out = Vec::with_capacity(body.len() + 16);
    out.push(b'{');
    let mut originals = Vec::new();
    if let Some(raw) = documents {
        let (texts, items) = documents_of(raw, &mut errors);
        out.extend_from_slice(b"\"documents\":[");
        for (i, text) in texts.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(text.get().as_bytes());
        }
        out.push(b']');
        originals = items;
    }
    for (key, value) in rest {
        if value.get() == "null" {
            continue;
        }
        if out.len() > 1 {
            out.push(b',');
        }
        let key = serde_json::to_string(key.as_str())
            .map_err(|e| GatewayError::Internal(format!("writing a field name: {e}")))?;
        out.extend_from_slice(key.as_bytes());
        out.push(b':');
        out.extend_from_slice(value.get().as_bytes());
    }
    out.push(b'}');
    errors.into_result()?;
    Ok(Translated {
        body: out,
        originals,
        return_documents: return_documents.unwrap_or(dialect.return_documents),
    })
}

/// `rank_fields`: absent, or naming only `text`.
fn rank_fields(f: &mut Fields<'_>) {
    let Some(raw) = f.take_raw("rank_fields") else {
        return;
    };
    match serde_json::from_str::<Vec<&str>>(raw.get()) {
        Ok(names) if names.iter().all(|n| *n == "text") => {}
        _ => f.error(
            "rank_fields",
            "only [\"text\"] is supported: documents are ranked by their text",
        ),
    }
}

/// Each document's text literal (for the gateway's body) and the document as sent (for the
/// answer). A document that is neither a string nor an object with a string `text` is an error
/// naming it; a list of something else is left to the gateway's own validation.
fn documents_of<'a>(
    raw: &'a RawValue,
    errors: &mut ValidationErrors,
) -> (Vec<&'a RawValue>, Vec<&'a RawValue>) {
    let Ok(items) = serde_json::from_str::<Vec<&'a RawValue>>(raw.get()) else {
        errors.add(
            "documents",
            "must be an array of strings or of objects with a string `text`",
        );
        return (Vec::new(), Vec::new());
    };
    let mut texts = Vec::with_capacity(items.len());
    for (i, &item) in items.iter().enumerate() {
        if item.get().starts_with('"') {
            texts.push(item);
            continue;
        }
        match text_of(item) {
            Some(text) => texts.push(text),
            None => errors.add(
                format!("documents[{i}]"),
                "must be a string or an object with a string `text`",
            ),
        }
    }
    (texts, items)
}

/// The literal of an object's `text` member, when it is a string.
fn text_of(item: &RawValue) -> Option<&RawValue> {
    let mut fields = Fields::nested(item, "document").ok()?;
    fields.take_raw("text").filter(|t| t.get().starts_with('"'))
}
