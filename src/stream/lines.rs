//! Incremental splitting of a newline-delimited stream (NDJSON) into whole lines.
//!
//! Like [`crate::stream::sse::EventSplitter`], it buffers at most one incomplete line and hands out whole
//! lines as slices of its buffer.

use bytes::{Bytes, BytesMut};

/// Splits a byte stream into complete lines (NDJSON records), skipping blank ones.
#[derive(Default)]
pub struct LineSplitter {
    buf: BytesMut,
    /// Bytes already searched for a newline (the search resumes after them).
    scanned: usize,
}

impl LineSplitter {
    /// An empty splitter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add bytes from the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete line without its line ending; blank lines are skipped.
    pub fn next_line(&mut self) -> Option<Bytes> {
        loop {
            let at = self.buf[self.scanned..].iter().position(|b| *b == b'\n');
            let Some(at) = at else {
                self.scanned = self.buf.len();
                return None;
            };
            let mut line = self.buf.split_to(self.scanned + at + 1);
            self.scanned = 0;
            line.truncate(line.len() - 1);
            if line.last() == Some(&b'\r') {
                line.truncate(line.len() - 1);
            }
            if !line.iter().all(u8::is_ascii_whitespace) {
                return Some(line.freeze());
            }
        }
    }

    /// A last line with no newline after it, when the stream ends.
    pub fn remainder(&mut self) -> Option<Bytes> {
        self.scanned = 0;
        let rest = self.buf.split().freeze();
        (!rest.iter().all(u8::is_ascii_whitespace)).then_some(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_across_arbitrary_pieces() {
        let stream = b"{\"a\":1}\n\r\n{\"b\":2}\r\n\n{\"c\":3}";
        for cut in 1..stream.len() {
            let mut s = LineSplitter::new();
            let mut lines = Vec::new();
            for piece in stream.chunks(cut) {
                s.push(piece);
                while let Some(l) = s.next_line() {
                    lines.push(l);
                }
            }
            assert_eq!(
                lines,
                vec![&b"{\"a\":1}"[..], &b"{\"b\":2}"[..]],
                "cut {cut}"
            );
            assert_eq!(&s.remainder().unwrap()[..], b"{\"c\":3}");
            assert!(s.remainder().is_none());
        }
    }
}
