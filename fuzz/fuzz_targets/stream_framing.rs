//! The SSE event splitter and the NDJSON line splitter, fed the same stream in fuzzed piece sizes:
//! the events (and the remainder at the end) must not depend on how the bytes were cut, and
//! together must be exactly the stream (SSE) or its non-blank lines (NDJSON).
//!
//! Input: a selector byte, a count of size bytes, the sizes, then the stream.
#![no_main]

use bytes::Bytes;
use fuzz_support::{chunks, Input};
use libfuzzer_sys::fuzz_target;
use switchyard::internals::stream::lines::LineSplitter;
use switchyard::internals::stream::sse::{data_of, EventSplitter};

fn sse(pieces: &[&[u8]]) -> (Vec<Bytes>, Option<Bytes>) {
    let mut s = EventSplitter::new();
    let mut events = Vec::new();
    for p in pieces {
        s.push(p);
        while let Some(e) = s.next_event() {
            events.push(e);
        }
    }
    (events, s.remainder())
}

fn lines(pieces: &[&[u8]]) -> (Vec<Bytes>, Option<Bytes>) {
    let mut s = LineSplitter::new();
    let mut out = Vec::new();
    for p in pieces {
        s.push(p);
        while let Some(l) = s.next_line() {
            out.push(l);
        }
    }
    (out, s.remainder())
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let selector = input.byte();
    let sizes = input.short();
    let stream = input.rest();
    let pieces = chunks(stream, sizes);
    if selector % 2 == 0 {
        let whole = sse(&[stream]);
        let cut = sse(&pieces);
        assert_eq!(whole, cut, "SSE events depend on the chunking");
        let mut joined = Vec::new();
        for e in whole.0.iter().chain(whole.1.iter()) {
            joined.extend_from_slice(e);
            let _ = data_of(e);
        }
        assert_eq!(joined, stream, "SSE events are not the stream");
    } else {
        let whole = lines(&[stream]);
        let cut = lines(&pieces);
        assert_eq!(whole, cut, "NDJSON lines depend on the chunking");
        for l in whole.0.iter().chain(whole.1.iter()) {
            assert!(!l.contains(&b'\n'));
        }
    }
});
