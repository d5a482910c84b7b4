//! FastAPI's error body, `{"detail": …}`: Jina, Voyage, Mixedbread, BFL and ElevenLabs answer
//! errors with it (ElevenLabs and BFL read `detail` out of their own envelopes).

use serde::Deserialize;
use serde_json::Value;

/// `{"detail": …}`, or the `{"message": …}` some of these APIs send instead.
#[derive(Deserialize)]
pub(crate) struct ErrorBody {
    #[serde(default)]
    detail: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

impl ErrorBody {
    /// `body` as this envelope, if it is one.
    pub(crate) fn parse(body: &[u8]) -> Option<ErrorBody> {
        serde_json::from_slice(body).ok()
    }

    /// The detail's text, else the message unless it is blank.
    pub(crate) fn text(self) -> Option<String> {
        self.detail
            .as_ref()
            .and_then(detail_text)
            .or(self.message.filter(|m| !m.trim().is_empty()))
    }
}

/// The human text of a FastAPI `detail`: a string, a validation list (`[{"loc": [...], "msg":
/// ...}]`) or an object carrying `message`. `None` when that leaves no text.
pub(crate) fn detail_text(detail: &Value) -> Option<String> {
    let text = match detail {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|item| match item {
                Value::String(s) => Some(s.clone()),
                Value::Object(o) => {
                    let msg = o
                        .get("msg")
                        .or_else(|| o.get("message"))
                        .and_then(Value::as_str)?;
                    let loc = o
                        .get("loc")
                        .and_then(Value::as_array)
                        .map(|parts| {
                            parts
                                .iter()
                                .map(|p| match p {
                                    Value::String(s) => s.clone(),
                                    other => other.to_string(),
                                })
                                .collect::<Vec<_>>()
                                .join(".")
                        })
                        .unwrap_or_default();
                    Some(if loc.is_empty() {
                        msg.to_string()
                    } else {
                        format!("{loc}: {msg}")
                    })
                }
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("; "),
        Value::Object(o) => o
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    };
    (!text.trim().is_empty()).then_some(text)
}
