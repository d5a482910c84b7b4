//! Every provider's answer decoders: rerank answers, image answers, image task poll answers, and
//! the classification of error answers (`Provider::error_response`, each adapter's error map).
//!
//! Input: a selector byte (which decoder), a case byte (which model/provider), a status (u16, for
//! error answers), a header block (its length, then `name: value` lines), then the body.
//! A decoded rerank result is also rendered in every compatibility surface's shape; an error's
//! message must never carry the provider key.
#![no_main]

use fuzz_support::{headers, world, Input};
use libfuzzer_sys::fuzz_target;
use switchyard::internals::api::compat::{Surface, Translated};
use switchyard::internals::common::error::{GatewayError, UpstreamError};
use switchyard::internals::upstream::provider::Provider;

/// The provider key every fuzzed account has (see `fuzz_support::lookup`).
const KEY: &str = "fuzz-key";

thread_local! {
    /// A Jina request over the rerank cases' three documents, to render answers with.
    static TRANSLATED: &'static Translated<'static> = Box::leak(Box::new(
        Surface::Jina
            .translate(br#"{"model":"m","query":"what is rust","documents":["rust is a language","a fox","iron oxide"]}"#)
            .expect("valid")
            .expect("translated"),
    ));
}

fn check_error(provider: &Provider, e: UpstreamError) {
    let e = GatewayError::Upstream(e);
    let _ = e.status();
    // Keyless accounts (the built-in reranker, TEI) have no key to leak. The key is private, so
    // whether this account's key is KEY is asked of its own redaction.
    if provider.redact(KEY) == KEY {
        return;
    }
    let msg = e.message();
    assert!(
        !msg.contains(KEY),
        "provider key in an error message: {msg}"
    );
    // What a client reads is the body's decoded `message`: read as raw bytes, a JSON escape
    // (`\f` for a form feed the provider sent) followed by "uzz-key" would look like the key.
    let body: serde_json::Value = serde_json::from_slice(&e.body()).expect("error body is JSON");
    let shown = body["message"].as_str().expect("error body has a message");
    assert!(!shown.contains(KEY), "provider key in an error body");
}

fuzz_target!(|data: &[u8]| {
    let w = world();
    let mut input = Input::new(data);
    let selector = input.byte();
    let case = input.byte() as usize;
    let status = input.u16();
    let headers = headers(input.short());
    let body = input.rest();
    match selector % 4 {
        0 => {
            let c = &w.rerank[case % w.rerank.len()];
            match c.adapter.response(&c.provider, &c.req, &headers, body) {
                Ok(result) => {
                    let t = TRANSLATED.with(|t| *t);
                    for s in [
                        Surface::Native,
                        Surface::CohereV1,
                        Surface::CohereV2,
                        Surface::Jina,
                    ] {
                        s.answer(&result, t).expect("a result renders");
                    }
                }
                Err(e) => check_error(&c.provider, e),
            }
        }
        1 => {
            let c = &w.images[case % w.images.len()];
            if let Err(e) = c.adapter.response(&c.provider, &c.req, &headers, body) {
                check_error(&c.provider, e);
            }
        }
        2 => {
            let tasks: Vec<_> = w
                .images
                .iter()
                .filter_map(|c| c.adapter.tasks().map(|t| (c, t)))
                .collect();
            let (c, t) = tasks[case % tasks.len()];
            if let Err(e) = t.poll_response(&c.provider, &headers, body) {
                check_error(&c.provider, e);
            }
        }
        _ => {
            let p = &w.providers[case % w.providers.len()];
            check_error(p, p.error_response(status % 1000, &headers, body));
        }
    }
});
