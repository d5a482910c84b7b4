//! The Gemini API's lists. Models, for `switchyard check-providers`: `GET /v1beta/models`, paged by
//! `pageSize`/`pageToken`, answering `{"models": [{"name": "models/…", "displayName"}],
//! "nextPageToken"}`; names lose their `models/` prefix, as a configuration writes them. Voices,
//! for `GET /api/v1/audio/voices` of the Gemini speech models: `GET /v1beta/voices`, whose query
//! and answer are snake_case (`page_size`/`page_token`; `{"voices": [{"id", "display_name", "type",
//! …}], "next_page_token"}`), the prebuilt voices and the Extended Voice Library together.

use serde::Deserialize;

use crate::api::discovery::{Discovery, ListFns, Listed, Page};
use crate::common::native::NativeRequest;

/// The list endpoints of the Gemini kind: its models, and the voices of its speech models (image
/// models have none: the voice listing serves speech models only).
pub(crate) const DISCOVERY: Discovery = Discovery {
    models: Some(ListFns {
        request: models_request,
        response: read_models,
    }),
    voices: Some(ListFns {
        request: voices_request,
        response: read_voices,
    }),
};

fn models_request(page: Option<&str>) -> NativeRequest {
    paged("/v1beta/models?pageSize=1000", "&pageToken=", page)
}

/// 1,000 a page: Google's list methods lower a larger page size to their maximum (AIP-158), so
/// this asks for as few pages as the API allows.
fn voices_request(page: Option<&str>) -> NativeRequest {
    paged("/v1beta/voices?page_size=1000", "&page_token=", page)
}

/// `first`, then the page token (percent-encoded) after `param` when there is one.
fn paged(first: &str, param: &str, page: Option<&str>) -> NativeRequest {
    let mut path = String::from(first);
    if let Some(token) = page {
        path.push_str(param);
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
struct VoiceList {
    #[serde(default)]
    voices: Vec<ListedVoice>,
    #[serde(default)]
    next_page_token: Option<String>,
}

#[derive(Deserialize)]
struct ListedVoice {
    /// What a request names it by (`voiceConfig.voice`, or a prebuilt voice's name).
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    display_name: Option<String>,
}

fn read_voices(body: &[u8]) -> Result<Page, String> {
    let list: VoiceList = serde_json::from_slice(body)
        .map_err(|e| format!("voice list is not the expected JSON: {e}"))?;
    Ok(Page {
        items: list
            .voices
            .into_iter()
            // A voice without an id cannot be asked for: not listed.
            .filter_map(|v| {
                Some(Listed::new(
                    v.id.filter(|id| !id.is_empty())?,
                    v.display_name,
                ))
            })
            .collect(),
        next: list.next_page_token.filter(|t| !t.is_empty()),
    })
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

    #[test]
    fn pages_through_the_voice_list() {
        assert_eq!(voices_request(None).path, "/v1beta/voices?page_size=1000");
        assert_eq!(
            voices_request(Some("p/2")).path,
            "/v1beta/voices?page_size=1000&page_token=p%2F2"
        );
        let page = read_voices(
            br#"{"voices": [{"id": "Kore", "display_name": "Kore", "type": "prebuilt",
                  "gender": "female"},
                 {"id": "lib-0042", "display_name": "Ada (British, calm)", "type": "prebuilt"},
                 {"display_name": "no id"}],
                "next_page_token": "p2"}"#,
        )
        .unwrap();
        assert_eq!(
            page.items,
            vec![
                Listed::new("Kore", Some("Kore".into())),
                Listed::new("lib-0042", Some("Ada (British, calm)".into())),
            ]
        );
        assert_eq!(page.next.as_deref(), Some("p2"));
        assert!(read_voices(br#"{"voices": []}"#).unwrap().next.is_none());
        assert!(read_voices(br#"{"voices": {}}"#).is_err());
    }
}
