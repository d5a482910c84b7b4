//! Every provider's speech decoder (the `AudioDecoder` of each adapter's `SpeechDecoding`, raw and
//! SSE requests), fed a fuzzed native body in fuzzed pieces, then finished. The audio and the
//! outcome must not depend on how the body was cut.
//!
//! Input: a case byte (which model/provider/stream format), a count of size bytes, the sizes,
//! then the body.
#![no_main]

use bytes::Bytes;
use fuzz_support::{chunks, world, Input, SpeechCase};
use libfuzzer_sys::fuzz_target;
use switchyard::internals::stream::audio::{Finished, SpeechDecoding};

/// The audio produced (joined) and how the body ended, or the error's message.
fn decode(c: &SpeechCase, pieces: &[&[u8]]) -> Option<(Vec<u8>, Result<Finished, String>)> {
    let SpeechDecoding::Decode(mut dec) = c.adapter.decoding(&c.provider, &c.req) else {
        return None;
    };
    let mut out = Vec::new();
    for p in pieces {
        if let Err(e) = dec.push(&Bytes::copy_from_slice(p), &mut out) {
            return Some((join(&out), Err(e.message)));
        }
    }
    let end = dec.finish(&mut out).map_err(|e| e.message);
    Some((join(&out), end))
}

fn join(out: &[Bytes]) -> Vec<u8> {
    out.iter().flat_map(|b| b.iter().copied()).collect()
}

fuzz_target!(|data: &[u8]| {
    let w = world();
    let mut input = Input::new(data);
    let c = &w.speech[input.byte() as usize % w.speech.len()];
    let sizes = input.short();
    let body = input.rest();
    let Some(whole) = decode(c, &[body]) else {
        return;
    };
    let cut = decode(c, &chunks(body, sizes)).expect("same decoding");
    // Audio emitted before an error may differ (an error stops at a different piece); the outcome
    // and, on success, the audio may not.
    assert_eq!(
        whole.1.is_ok(),
        cut.1.is_ok(),
        "{}: outcome depends on chunking: {:?} vs {:?}",
        c.label,
        whole.1,
        cut.1
    );
    if whole.1.is_ok() {
        assert_eq!(whole, cut, "{}: audio depends on chunking", c.label);
    }
});
