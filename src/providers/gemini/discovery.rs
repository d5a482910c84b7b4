//! The Gemini API's model list, for `switchyard check-providers`: `GET /v1beta/models`, paged by
//! `pageSize`/`pageToken`, answering `{"models": [{"name": "models/…", "displayName"}],
//! "nextPageToken"}`. Names lose their `models/` prefix, as a configuration writes them.

use serde::Deserialize;

use crate::api::discovery::{Discovery, ListFns, Listed, Page};
use crate::common::native::NativeRequest;

/// The list endpoints of the Gemini kind: models only (image models have no voices).
pub(crate) const DISCOVERY: Discovery = Discovery {
    models: Some(ListFns {
        request: models_request,
        response: read_models,
    }),
    voices: None,
};

fn models_request(page: Option<&str>) -> NativeRequest {
    let mut path = String::from("/v1beta/models?pageSize=1000");
    if let Some(token) = page {
        path.push_str("&pageToken=");
        for b in token.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                path.push(b as char);
            } else {
                path.push_str(&format!("%{b:02X}"));
            }
        }
    }
    NativeRequest::get(path)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelList {
    #[serde(default)]
    models: Vec<ListedModel>,
    #[serde(default)]
    next_page_token: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListedModel {
    name: String,
    #[serde(default)]
    display_name: Option<String>,
}

fn read_models(body: &[u8]) -> Result<Page, String> {
    let list: ModelList = serde_json::from_slice(body)
        .map_err(|e| format!("model list is not the expected JSON: {e}"))?;
    Ok(Page {
        items: list
            .models
            .into_iter()
            .map(|m| {
                let id = m
                    .name
                    .strip_prefix("models/")
                    .unwrap_or(&m.name)
                    .to_string();
                Listed::new(id, m.display_name)
            })
            .collect(),
        next: list.next_page_token.filter(|t| !t.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_through_the_list_without_the_models_prefix() {
        assert_eq!(models_request(None).path, "/v1beta/models?pageSize=1000");
        assert_eq!(
            models_request(Some("a+b/c=")).path,
            "/v1beta/models?pageSize=1000&pageToken=a%2Bb%2Fc%3D"
        );
        let page = read_models(
            br#"{"models": [{"name": "models/gemini-3-pro-image", "displayName": "Nano Banana Pro",
                 "supportedGenerationMethods": ["generateContent"]},
                {"name": "models/gemini-3.1-flash-image"}], "nextPageToken": "next"}"#,
        )
        .unwrap();
        assert_eq!(
            page.items,
            vec![
                Listed::new("gemini-3-pro-image", Some("Nano Banana Pro".into())),
                Listed::new("gemini-3.1-flash-image", None),
            ]
        );
        assert_eq!(page.next.as_deref(), Some("next"));
        let last = read_models(br#"{"models": [], "nextPageToken": ""}"#).unwrap();
        assert!(last.next.is_none());
        assert!(read_models(br#"{"models": "none"}"#).is_err());
    }
}
