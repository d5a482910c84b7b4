//! OpenAI's model list, `{"object": "list", "data": [{"id": …, "object": "model", …}]}`, as
//! OpenAI's `GET /v1/models` answers it and OpenAI-compatible endpoints copy it (DashScope's
//! compatible mode). One page: the format has no pagination.

use serde::Deserialize;

use crate::api::discovery::{Listed, Page};

#[derive(Deserialize)]
struct List {
    data: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    id: String,
}

/// The models an OpenAI-shaped list names.
pub(crate) fn read(body: &[u8]) -> Result<Page, String> {
    let list: List = serde_json::from_slice(body)
        .map_err(|e| format!("model list is not the expected JSON: {e}"))?;
    Ok(Page {
        items: list
            .data
            .into_iter()
            .map(|e| Listed::new(e.id, None))
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
        assert!(read(br#"{"models":[]}"#).is_err());
    }
}
