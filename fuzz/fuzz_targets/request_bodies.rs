//! Request body validation of every operation, and the rerank compatibility surfaces' request
//! translation, against the default config's catalog. The first byte picks the parser; any error
//! must be a client error in the spec's shape (400s with `details`).
#![no_main]

use fuzz_support::{check_client_error, world, MAX_RETRIES};
use libfuzzer_sys::fuzz_target;
use switchyard::internals::api::compat::Surface;
use switchyard::internals::api::{images, rerank, speech};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let catalog = world().gateway.catalog();
    match selector % 6 {
        0 => {
            if let Err(e) = speech::parse(body, catalog, MAX_RETRIES) {
                check_client_error(&e);
            }
        }
        1 => {
            if let Err(e) = images::parse(body, catalog, MAX_RETRIES) {
                check_client_error(&e);
            }
        }
        2 => {
            if let Err(e) = rerank::parse(body, catalog, MAX_RETRIES) {
                check_client_error(&e);
            }
        }
        n => {
            let surface = [Surface::CohereV1, Surface::CohereV2, Surface::Jina][(n - 3) as usize];
            let translated = match surface.translate(body) {
                Ok(Some(t)) => t,
                Ok(None) => unreachable!("a compatibility surface always translates"),
                Err(e) => {
                    check_client_error(&e);
                    let _ = surface.error_body(&e, "0123456789abcdef0123456789abcdef");
                    return;
                }
            };
            // The translation is the gateway's own body, validated as on /api/v1/rerank. (Checked
            // as JSON text, not as a `Value`: a number such as 1e999 is valid JSON that `Value`
            // cannot hold, and is copied to the provider verbatim.)
            assert!(
                serde_json::from_slice::<Box<serde_json::value::RawValue>>(&translated.body)
                    .is_ok(),
                "translated body is not JSON: {:?}",
                String::from_utf8_lossy(&translated.body)
            );
            match rerank::parse(&translated.body, catalog, MAX_RETRIES) {
                Ok(req) => assert_eq!(req.documents.len(), translated.originals.len()),
                Err(e) => {
                    check_client_error(&e);
                    let _ = surface.error_body(&e, "0123456789abcdef0123456789abcdef");
                }
            }
        }
    }
});
