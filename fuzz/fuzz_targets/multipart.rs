//! The image-edit reader (`POST /api/v1/images/edits`): a multipart/form-data or JSON body with a
//! fuzzed content type, read into a `/images/generations` body, which is then validated. The first
//! byte picks the content type: a fixed multipart boundary, JSON, or one taken from the input (up
//! to its first newline).
#![no_main]

use bytes::Bytes;
use fuzz_support::{check_client_error, world, MAX_RETRIES};
use libfuzzer_sys::fuzz_target;
use switchyard::internals::api::{image_edit, images};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let (content_type, body): (Option<String>, &[u8]) = match selector % 4 {
        0 => (Some("multipart/form-data; boundary=X".into()), rest),
        1 => (Some("application/json".into()), rest),
        2 => (None, rest),
        _ => {
            let at = rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
            let ct = String::from_utf8_lossy(&rest[..at]).into_owned();
            (Some(ct), rest.get(at + 1..).unwrap_or_default())
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let out = rt.block_on(image_edit::generation_body(
        content_type.as_deref(),
        Bytes::copy_from_slice(body),
    ));
    match out {
        Ok(json) => {
            if let Err(e) = images::parse(&json, world().gateway.catalog(), MAX_RETRIES) {
                check_client_error(&e);
            }
        }
        Err(e) => check_client_error(&e),
    }
});
