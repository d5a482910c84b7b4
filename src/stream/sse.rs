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

/// Index just past the first blank line (`\n\n`, `\r\n\r\n` or `\r\r`).
fn find_event_end(buf: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i + 1 < buf.len() {
        match (buf[i], buf[i + 1]) {
            (b'\n', b'\n') | (b'\r', b'\r') => return Some(i + 2),
            (b'\r', b'\n') if buf.get(i + 2..i + 4) == Some(b"\r\n") => return Some(i + 4),
            _ => i += 1,
        }
    }
    None
}

/// The payload of the `data:` lines of one event, joined by `\n` (None when it has none).
pub fn data_of(event: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(event).ok()?;
    let mut out: Option<String> = None;
    for line in text.lines() {
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

    #[test]
    fn builds_events() {
        assert_eq!(&event(b"{}")[..], b"data: {}\n\n");
    }
}
