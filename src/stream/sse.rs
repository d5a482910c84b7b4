//! Incremental Server-Sent Events framing.
//!
//! Provider streams arrive in arbitrary TCP-sized pieces; a client must only ever see whole events
//! (so that an error event appended after a failure is never glued onto half an event). The
//! splitter buffers at most one incomplete event and hands out complete ones as slices of the
//! buffer, without copying them again.

use bytes::{Bytes, BytesMut};

/// Splits a byte stream into complete SSE events (each including its terminating blank line).
#[derive(Default)]
pub struct EventSplitter {
    buf: BytesMut,
    /// How far `buf` is known to hold no blank line, so a long event arriving in many pieces is
    /// scanned once, not once per piece.
    scanned: usize,
}

impl EventSplitter {
    /// An empty splitter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add bytes from the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete event, if one is buffered.
    pub fn next_event(&mut self) -> Option<Bytes> {
        // A blank line is at most 4 bytes: one may straddle the end of what was scanned.
        let from = self.scanned.saturating_sub(3);
        match find_event_end(&self.buf[from..]) {
            Some(end) => {
                self.scanned = 0;
                Some(self.buf.split_to(from + end).freeze())
            }
            None => {
                self.scanned = self.buf.len();
                None
            }
        }
    }

    /// Whatever is left when the stream ends (an event missing its final blank line).
    pub fn remainder(&mut self) -> Option<Bytes> {
        self.scanned = 0;
        (!self.buf.is_empty()).then(|| self.buf.split().freeze())
    }
}

/// Index just past the first blank line: a line terminator right after another one, where a
/// terminator is `\r\n`, `\n` or `\r` (WHATWG HTML, "Server-sent events", the stream's
/// grammar). So besides `\n\n`, `\r\n\r\n` and `\r\r`, the mixed `\n\r\n`, `\r\n\n` and
/// `\n\r` end an event too. A `\r` that ends what has arrived may be the first half of a
/// `\r\n`, so it is decided only when the next byte is there (or the stream ends): where an
/// event ends never depends on how the stream was cut.
fn find_event_end(buf: &[u8]) -> Option<usize> {
    // The terminator at `i` and its length; `Err` when it cannot be told yet (a `\r` last).
    let terminator = |i: usize| match (buf.get(i), buf.get(i + 1)) {
        (Some(b'\n'), _) => Ok(Some(1)),
        (Some(b'\r'), Some(b'\n')) => Ok(Some(2)),
        (Some(b'\r'), Some(_)) => Ok(Some(1)),
        (Some(b'\r'), None) => Err(()),
        _ => Ok(None),
    };
    let mut i = 0;
    while i < buf.len() {
        match terminator(i).ok()? {
            Some(first) => {
                if let Some(second) = terminator(i + first).ok()? {
                    return Some(i + first + second);
                }
                i += first;
            }
            None => i += 1,
        }
    }
    None
}

/// The payload of the `data:` lines of one event, joined by `\n` (None when it has none). Lines
/// end at `\r\n`, `\n` or `\r` (splitting at either byte only adds empty lines, which carry no
/// field).
pub fn data_of(event: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(event).ok()?;
    let mut out: Option<String> = None;
    for line in text.split(['\r', '\n']) {
        if let Some(rest) = line.strip_prefix("data:") {
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            match &mut out {
                Some(s) => {
                    s.push('\n');
                    s.push_str(rest);
                }
                None => out = Some(rest.to_string()),
            }
        }
    }
    out
}

/// One event carrying `json` as its data.
pub fn event(json: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(json.len() + 8);
    b.extend_from_slice(b"data: ");
    b.extend_from_slice(json);
    b.extend_from_slice(b"\n\n");
    b.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_across_arbitrary_pieces() {
        let stream = b"data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\ndata: x\ndata: y\n\ntrailing";
        for cut in 1..stream.len() {
            let mut s = EventSplitter::new();
            let mut events = Vec::new();
            for piece in stream.chunks(cut) {
                s.push(piece);
                while let Some(e) = s.next_event() {
                    events.push(e);
                }
            }
            assert_eq!(events.len(), 3, "cut {cut}");
            assert_eq!(data_of(&events[0]).unwrap(), "{\"a\":1}");
            assert_eq!(data_of(&events[1]).unwrap(), "{\"b\":2}");
            assert_eq!(data_of(&events[2]).unwrap(), "x\ny");
            assert_eq!(&s.remainder().unwrap()[..], b"trailing");
        }
    }

    /// Every blank line the WHATWG grammar allows ends an event, the mixed ones included, however
    /// the stream is cut.
    #[test]
    fn mixed_blank_lines_end_events() {
        let stream = b"data: a\n\r\ndata: b\r\n\ndata: c\n\rdata: d\r\rdata: e\r\n\r\ndata: f\n\n";
        for cut in 1..stream.len() {
            let mut s = EventSplitter::new();
            let mut events = Vec::new();
            for piece in stream.chunks(cut) {
                s.push(piece);
                while let Some(e) = s.next_event() {
                    events.push(e);
                }
            }
            let data: Vec<String> = events.iter().filter_map(|e| data_of(e)).collect();
            assert_eq!(
                data,
                ["a", "b", "c", "d", "e", "f"],
                "cut {cut}: {events:?}"
            );
            assert_eq!(s.remainder(), None, "cut {cut}");
        }
        // Each event is cut just past its own blank line.
        let mut s = EventSplitter::new();
        s.push(b"data: a\n\r\ndata: b\r\n\n");
        assert_eq!(&s.next_event().unwrap()[..], b"data: a\n\r\n");
        assert_eq!(&s.next_event().unwrap()[..], b"data: b\r\n\n");
        assert_eq!(s.next_event(), None);
        // A `\r` last is decided by the byte after it: here half of a `\r\n`.
        let mut s = EventSplitter::new();
        s.push(b"data: a\n\r");
        assert_eq!(s.next_event(), None);
        s.push(b"\ndata: b");
        assert_eq!(&s.next_event().unwrap()[..], b"data: a\n\r\n");
        assert_eq!(&s.remainder().unwrap()[..], b"data: b");
        // A single line break is not a blank line, whichever it is.
        for one in [
            &b"data: a\r\ndata: b"[..],
            b"data: a\ndata: b",
            b"data: a\rdata: b",
        ] {
            let mut s = EventSplitter::new();
            s.push(one);
            assert_eq!(s.next_event(), None, "{one:?}");
        }
    }

    #[test]
    fn builds_events() {
        assert_eq!(&event(b"{}")[..], b"data: {}\n\n");
    }
}
