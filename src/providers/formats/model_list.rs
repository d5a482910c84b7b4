//! OpenAI's model list, `{"object": "list", "data": [{"id": …, "object": "model", …}]}`, as
//! OpenAI's `GET /v1/models` answers it and OpenAI-compatible endpoints copy it (DashScope's
//! compatible mode). One page: the format has no pagination.
//!
//! A model's `shutdown_date` (OpenAI: "the date when the model will shut down, or null if not
//! announced", a `YYYY-MM-DD` string; `docs/providers/openai.md`) is read into
//! [`Listed::shutdown`]. Compatible endpoints leave it out; a value that is not such a date is
//! ignored rather than failing the whole list.

use serde::Deserialize;

use crate::api::discovery::{Listed, Page};
use crate::caps::lifecycle::Date;

#[derive(Deserialize)]
struct List {
    data: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    id: String,
    /// Any JSON value: only a `YYYY-MM-DD` string is a date.
    #[serde(default)]
    shutdown_date: Option<serde_json::Value>,
}

/// The models an OpenAI-shaped list names, with their announced shutdown dates.
pub(crate) fn read(body: &[u8]) -> Result<Page, String> {
    let list: List = serde_json::from_slice(body)
        .map_err(|e| format!("model list is not the expected JSON: {e}"))?;
    Ok(Page {
        items: list
            .data
            .into_iter()
            .map(|e| {
                let shutdown = e
                    .shutdown_date
                    .as_ref()
                    .and_then(|v| v.as_str())
                    .and_then(Date::parse);
                Listed::new(e.id, None).with_shutdown(shutdown)
            })
            .collect(),
        next: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_ids() {
        let page = read(br#"{"object":"list","data":[{"id":"tts-1","object":"model","created":1,"owned_by":"system"},{"id":"gpt-image-2"}]}"#).unwrap();
        let ids: Vec<&str> = page.items.iter().map(|l| l.id.as_str()).collect();
        assert_eq!(ids, ["tts-1", "gpt-image-2"]);
        assert!(page.next.is_none());
        assert!(page.items.iter().all(|l| l.shutdown.is_none()));
        assert!(read(br#"{"models":[]}"#).is_err());
    }

    #[test]
    fn reads_a_shutdown_date_and_ignores_one_that_is_not_a_date() {
        let page = read(br#"{"object":"list","data":[
            {"id":"gpt-image-1.5","object":"model","created":1,"owned_by":"system","shutdown_date":"2026-12-01"},
            {"id":"gpt-image-2","object":"model","created":1,"owned_by":"system","shutdown_date":null},
            {"id":"odd","shutdown_date":1796083200},
            {"id":"odder","shutdown_date":"Dec 1, 2026"}]}"#)
        .unwrap();
        let dates: Vec<Option<String>> = page
            .items
            .iter()
            .map(|l| l.shutdown.map(|d| d.to_string()))
            .collect();
        assert_eq!(dates, [Some("2026-12-01".to_string()), None, None, None]);
    }
}
