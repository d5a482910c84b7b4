//! `GET /api/v1/models` and `GET /api/v1/models/{id}`: authenticated like the operations, answered
//! from the listing rendered with the catalog (`api::models::Listing`, in the settings), so an
//! answer is a lookup and a copy of bytes.

use super::outcome::{Call, Outcome};
use super::route::{Route, MODELS_PREFIX};
use crate::common::error::GatewayError;

/// Answer `route` (`Route::Models` or `Route::Model`).
pub(crate) async fn serve(route: Route, call: &mut Call<'_>) -> Outcome {
    let mut out = Outcome::new();
    let body = if route == Route::Model {
        let raw = call
            .routed()
            .strip_prefix(MODELS_PREFIX)
            .unwrap_or_default();
        let Some(id) = percent_decoded(raw) else {
            return Outcome::failed(GatewayError::ModelNotFound);
        };
        out.model = call.settings.catalog.get(&id).cloned();
        match call.settings.models.get(&id) {
            Some(body) => body,
            None => {
                out.result = Err(GatewayError::ModelNotFound.into());
                return out;
            }
        }
    } else {
        call.settings.models.list()
    };
    call.json(out, body, &[]).await
}

/// `raw` with its percent escapes decoded (`None`: a malformed escape, or not UTF-8).
pub(super) fn percent_decoded(raw: &str) -> Option<String> {
    if !raw.contains('%') {
        return Some(raw.to_string());
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = raw.get(i + 1..i + 3)?;
            // `from_str_radix` alone would take a sign (`%+1`).
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::percent_decoded;

    #[test]
    fn escapes_are_decoded_and_bad_ones_name_nothing() {
        assert_eq!(percent_decoded("tts-1").as_deref(), Some("tts-1"));
        assert_eq!(
            percent_decoded("BAAI%2Fbge-reranker-v2-m3").as_deref(),
            Some("BAAI/bge-reranker-v2-m3")
        );
        assert_eq!(percent_decoded("a%20b%2f").as_deref(), Some("a b/"));
        for bad in ["%", "a%2", "%zz", "%+1", "%ff"] {
            assert_eq!(percent_decoded(bad), None, "{bad}");
        }
    }
}
