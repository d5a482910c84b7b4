//! Minimal HTTP/1.1 framing for the benchmark's own client and fake provider: just enough to find
//! where a message ends (`Content-Length` or `chunked`), with the body handed out as it arrives.
//!
//! Sockets are driven with tokio's `readable`/`try_read` and `writable`/`try_write` (no `io-util`),
//! one message in flight per connection.

use std::io;
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::TcpStream;

/// Bytes asked of the socket per read.
pub const READ_CHUNK: usize = 64 * 1024;

/// Write all of `bytes`.
pub async fn write_all(s: &TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        s.writable().await?;
        match s.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A read buffer, zeroed once and reused: the unread bytes are `data[start..end]`.
pub struct Buf {
    data: Vec<u8>,
    start: usize,
    end: usize,
}

impl Default for Buf {
    fn default() -> Self {
        Buf {
            data: vec![0; READ_CHUNK],
            start: 0,
            end: 0,
        }
    }
}

impl Buf {
    /// The unread bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    /// Mark `n` bytes as read.
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    /// Make room for a read: when full, move the unread bytes to the front, and grow if that
    /// frees nothing.
    fn make_room(&mut self) {
        if self.end == self.data.len() {
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.end == self.data.len() {
                let len = self.data.len();
                self.data.resize(len * 2, 0);
            }
        }
    }

    /// Read more bytes from a stream (the fake's TLS connections); `Ok(0)` means the peer
    /// closed. Plain sockets use [`Buf::read_from`], which polls readiness directly.
    pub async fn read_from_io<R: AsyncRead + Unpin>(&mut self, r: &mut R) -> io::Result<usize> {
        self.make_room();
        let n = r.read(&mut self.data[self.end..]).await?;
        self.end += n;
        Ok(n)
    }

    /// Read more bytes from `s`; `Ok(0)` means the peer closed.
    pub async fn read_from(&mut self, s: &TcpStream) -> io::Result<usize> {
        self.make_room();
        loop {
            s.readable().await?;
            match s.try_read(&mut self.data[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// How a message body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Length(usize),
    Chunked,
}

/// A parsed response head.
pub struct Head {
    pub status: u16,
    pub framing: Framing,
    /// Bytes of the head, including the blank line.
    pub len: usize,
}

/// Parse a response head if `buf` holds all of it.
pub fn parse_response_head(buf: &[u8]) -> io::Result<Option<Head>> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf).map_err(|_| bad("bad response head"))? {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => return Ok(None),
    };
    let status = resp.code.unwrap_or(0);
    let mut framing = Framing::Length(0);
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| bad("bad content-length"))?;
            framing = Framing::Length(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding")
            && h.value.eq_ignore_ascii_case(b"chunked")
        {
            framing = Framing::Chunked;
            break;
        }
    }
    Ok(Some(Head {
        status,
        framing,
        len,
    }))
}

/// A parsed request head (the fake provider's side).
pub struct RequestHead {
    pub path: String,
    pub content_length: usize,
    pub len: usize,
}

/// Parse a request head if `buf` holds all of it. Chunked request bodies are refused (neither the
/// gateway nor Pingora's proxy sends one for these requests).
pub fn parse_request_head(buf: &[u8]) -> io::Result<Option<RequestHead>> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf).map_err(|_| bad("bad request head"))? {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => return Ok(None),
    };
    let mut content_length = 0;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            content_length = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| bad("bad content-length"))?;
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(bad("chunked request bodies are not supported by the fake"));
        }
    }
    Ok(Some(RequestHead {
        path: req.path.unwrap_or("/").to_string(),
        content_length,
        len,
    }))
}

/// Incremental decoder of a response body: hands out body bytes as they arrive.
pub struct BodyDecoder {
    state: State,
}

enum State {
    /// Bytes of a Content-Length body still to come.
    Length(usize),
    /// Waiting for a chunk-size line.
    Size,
    /// Inside a chunk: bytes left.
    Data(usize),
    /// After a chunk's data: its CRLF.
    DataEnd,
    /// After the 0 chunk: trailers until a blank line.
    Trailer,
    Done,
}

impl BodyDecoder {
    pub fn new(framing: Framing) -> BodyDecoder {
        let state = match framing {
            Framing::Length(0) => State::Done,
            Framing::Length(n) => State::Length(n),
            Framing::Chunked => State::Size,
        };
        BodyDecoder { state }
    }

    pub fn done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// Consume what it can of `buf`, passing body bytes to `data`; returns bytes consumed.
    pub fn feed(&mut self, buf: &[u8], data: &mut impl FnMut(&[u8])) -> io::Result<usize> {
        let mut at = 0;
        loop {
            let rest = &buf[at..];
            match &mut self.state {
                State::Done => return Ok(at),
                State::Length(left) => {
                    let n = (*left).min(rest.len());
                    if n == 0 {
                        return Ok(at);
                    }
                    data(&rest[..n]);
                    *left -= n;
                    at += n;
                    if *left == 0 {
                        self.state = State::Done;
                    }
                }
                State::Size => {
                    let Some(nl) = rest.iter().position(|b| *b == b'\n') else {
                        return Ok(at);
                    };
                    let line = std::str::from_utf8(&rest[..nl]).map_err(|_| bad("chunk size"))?;
                    let hex = line.trim().split(';').next().unwrap_or("");
                    let size =
                        usize::from_str_radix(hex, 16).map_err(|_| bad("bad chunk size line"))?;
                    at += nl + 1;
                    self.state = if size == 0 {
                        State::Trailer
                    } else {
                        State::Data(size)
                    };
                }
                State::Data(left) => {
                    let n = (*left).min(rest.len());
                    if n == 0 {
                        return Ok(at);
                    }
                    data(&rest[..n]);
                    *left -= n;
                    at += n;
                    if *left == 0 {
                        self.state = State::DataEnd;
                    }
                }
                State::DataEnd => {
                    let Some(nl) = rest.iter().position(|b| *b == b'\n') else {
                        return Ok(at);
                    };
                    at += nl + 1;
                    self.state = State::Size;
                }
                State::Trailer => {
                    let Some(nl) = rest.iter().position(|b| *b == b'\n') else {
                        return Ok(at);
                    };
                    let blank = rest[..nl].iter().all(|b| *b == b'\r');
                    at += nl + 1;
                    if blank {
                        self.state = State::Done;
                    }
                }
            }
        }
    }
}

/// Read one whole response from `s` (after the request was written), passing body bytes with
/// their arrival time to `data`. `buf` is reused between calls; returns the status.
pub async fn read_response(
    s: &TcpStream,
    buf: &mut Buf,
    mut data: impl FnMut(&[u8], Instant),
) -> io::Result<u16> {
    let head = loop {
        if let Some(h) = parse_response_head(buf.bytes())? {
            break h;
        }
        if buf.read_from(s).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    };
    buf.consume(head.len);
    let mut dec = BodyDecoder::new(head.framing);
    let mut now = Instant::now();
    loop {
        let used = dec.feed(buf.bytes(), &mut |d| data(d, now))?;
        buf.consume(used);
        if dec.done() {
            return Ok(head.status);
        }
        if buf.read_from(s).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        now = Instant::now();
    }
}
