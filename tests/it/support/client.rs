//! A raw, blocking HTTP/1.1 client (plain `std::net`) for Switchyard's integration tests, to
//! assert exactly what the gateway sent back: status, headers, body bytes, chunk boundaries and
//! their arrival times, whether a chunked body was terminated, and interim `100 Continue`s.
//!
//! Every read has a 30 s timeout ([`READ_TIMEOUT`]): a hang panics (fails the test) instead of
//! blocking forever. A connection closed before any complete status line is NOT a panic: the
//! returned [`Response`] then has `status == 0` and `complete == false`.
//!
//! Also [`sse_events`], which splits a `text/event-stream` body into its `data:` payloads.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long a single read (or write) may wait before the test fails.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Most response header fields parsed.
const MAX_HEADERS: usize = 256;

/// A response as received.
#[derive(Clone, Debug)]
pub struct Response {
    /// The final status; 0 if the connection closed before a complete status line and head.
    pub status: u16,
    /// Header fields in the order received; names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Every body byte received (de-chunked; for a chunked body cut off mid-chunk this includes
    /// the partial chunk's bytes, which are not in `chunks`).
    pub body: Vec<u8>,
    /// Chunked body: whether the terminating 0-length chunk (and the blank line after any
    /// trailers) arrived; false = connection closed mid-body. Content-Length body: whether all
    /// of it arrived. true for bodiless responses and for bodies delimited by connection close;
    /// false when `status == 0`.
    pub complete: bool,
    /// Chunked body: each complete chunk with the Instant its last byte was received.
    pub chunks: Vec<(Instant, Vec<u8>)>,
    /// Whether an interim `100 Continue` was received (and skipped) before the final response.
    pub saw_continue: bool,
}

impl Response {
    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON; panics with the status and body text if it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        match serde_json::from_slice(&self.body) {
            Ok(value) => value,
            Err(err) => panic!(
                "response body is not JSON ({err}); status {}, body: {}",
                self.status,
                self.text()
            ),
        }
    }

    /// The body as (lossy UTF-8) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Send one request on a fresh connection and read the whole response.
///
/// Adds `Host: <addr>`, `Content-Length` (omitted for a GET/HEAD with an empty body) and
/// `Connection: close`, each unless `headers` already has that field (`Content-Length` is
/// also left out when `headers` has `Transfer-Encoding`). If the connection closes before a
/// status line, returns `status == 0, complete == false` instead of panicking. Write errors are
/// ignored (the server may answer and close before reading everything); the response is read
/// regardless. Panics if connecting fails or a read waits more than [`READ_TIMEOUT`].
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !has("host") {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let bodiless_method = method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD");
    let framed = has("content-length") || has("transfer-encoding");
    let omit_length = framed || (body.is_empty() && bodiless_method);
    if !omit_length {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    if !has("connection") {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    exchange(addr, &bytes, method)
}

/// POST a JSON body (adds `Content-Type: application/json` unless `headers` has a content type).
pub fn post_json(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: &serde_json::Value,
) -> Response {
    let mut all: Vec<(&str, &str)> = headers.to_vec();
    if !headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
    {
        all.push(("Content-Type", "application/json"));
    }
    let bytes = serde_json::to_vec(body).expect("serialize JSON request body");
    request(addr, "POST", path, &all, &bytes)
}

/// Send `request_bytes` as the whole request on a fresh connection (nothing added) and read the
/// response, exactly as [`request`] does. The request method (first token) decides whether a
/// body is expected (none for HEAD). Interim `100 Continue`s are skipped (`saw_continue`).
pub fn raw(addr: SocketAddr, request_bytes: &[u8]) -> Response {
    let method = request_bytes
        .split(|b| *b == b' ')
        .next()
        .map(|m| String::from_utf8_lossy(m).into_owned())
        .unwrap_or_default();
    exchange(addr, request_bytes, &method)
}

/// Connect to `addr` with TCP_NODELAY and [`READ_TIMEOUT`] read/write timeouts; panics on failure.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap_or_else(|err| panic!("connect to {addr}: {err}"));
    stream.set_nodelay(true).expect("set_nodelay");
    stream
        .set_read_timeout(Some(READ_TIMEOUT))
        .expect("set_read_timeout");
    stream
        .set_write_timeout(Some(READ_TIMEOUT))
        .expect("set_write_timeout");
    stream
}

/// Read one response from an open connection (for keep-alive tests driving a `TcpStream` by
/// hand). `method` is the request's method (a HEAD response has no body). Sets a
/// [`READ_TIMEOUT`] read timeout if the stream has none. Bytes received past the end of this
/// response are discarded, so do not use it on pipelined responses.
pub fn read_response(stream: &mut TcpStream, method: &str) -> Response {
    if stream.read_timeout().ok().flatten().is_none() {
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("set_read_timeout");
    }
    let mut reader = Reader {
        stream,
        buf: Vec::new(),
        last_read: Instant::now(),
    };
    let mut response = Response {
        status: 0,
        headers: Vec::new(),
        body: Vec::new(),
        complete: false,
        chunks: Vec::new(),
        saw_continue: false,
    };

    // The head, skipping interim 1xx responses (but not 101, which is final).
    let (status, headers) = loop {
        let (status, headers, len) = loop {
            match parse_head(&reader.buf) {
                Ok(Some(head)) => break head,
                Ok(None) => {
                    if reader.read_more() == 0 {
                        return response;
                    }
                }
                Err(err) => panic!(
                    "malformed response head ({err}): {:?}",
                    String::from_utf8_lossy(&reader.buf)
                ),
            }
        };
        reader.buf.drain(..len);
        if (100..200).contains(&status) && status != 101 {
            response.saw_continue |= status == 100;
            continue;
        }
        break (status, headers);
    };
    response.status = status;
    response.headers = headers;

    let bodiless = method.eq_ignore_ascii_case("HEAD")
        || (100..200).contains(&status)
        || status == 204
        || status == 304;
    let chunked = response
        .headers
        .iter()
        .filter(|(n, _)| n == "transfer-encoding")
        .any(|(_, v)| {
            v.rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"))
        });
    if bodiless {
        response.complete = true;
    } else if chunked {
        read_chunked(&mut reader, &mut response);
    } else if let Some(length) = response.header("content-length") {
        let length: usize = length
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("bad content-length {length:?}"));
        response.complete = reader.fill(length);
        let have = reader.buf.len().min(length);
        response.body = reader.buf[..have].to_vec();
    } else {
        // Delimited by connection close.
        while reader.read_more() > 0 {}
        response.body = std::mem::take(&mut reader.buf);
        response.complete = true;
    }
    response
}

/// Split a `text/event-stream` body into the `data:` payloads of its events, in order.
///
/// Events end at a blank line; lines may end in LF, CRLF or CR; several `data:` lines in one
/// event are joined with "\n"; one space after the colon is removed; comments (`:` lines) and
/// other fields (`event:`, `id:`, `retry:`) are ignored; an event with no `data` line is
/// skipped; a final event not terminated by a blank line is discarded (as a browser would).
pub fn sse_events(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    let mut lines: Vec<&str> = text.split('\n').collect();
    // The piece after the last newline is an unterminated line (or empty): not part of any event.
    lines.pop();
    let mut events = Vec::new();
    let mut data: Option<String> = None;
    for line in lines {
        if line.is_empty() {
            if let Some(payload) = data.take() {
                events.push(payload);
            }
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        if field == "data" {
            match &mut data {
                Some(payload) => {
                    payload.push('\n');
                    payload.push_str(value);
                }
                None => data = Some(value.to_string()),
            }
        }
    }
    events
}

fn exchange(addr: SocketAddr, bytes: &[u8], method: &str) -> Response {
    let mut stream = connect(addr);
    // Ignored on purpose: the server may reply (e.g. 413) and close before reading it all.
    let _ = stream.write_all(bytes);
    let _ = stream.flush();
    read_response(&mut stream, method)
}

type Head = (u16, Vec<(String, String)>, usize);

fn parse_head(buf: &[u8]) -> Result<Option<Head>, httparse::Error> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut fields);
    match response.parse(buf)? {
        httparse::Status::Partial => Ok(None),
        httparse::Status::Complete(len) => Ok(Some((
            response.code.unwrap_or(0),
            response
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_ascii_lowercase(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect(),
            len,
        ))),
    }
}

fn read_chunked(reader: &mut Reader<'_>, response: &mut Response) {
    loop {
        let Some(line) = reader.line() else { return };
        // Chunk extensions (";name=value") are ignored.
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .unwrap_or_else(|_| panic!("bad chunk-size line {line:?}"));
        if size == 0 {
            // Trailer fields (ignored) up to the blank line.
            while let Some(trailer) = reader.line() {
                if trailer.is_empty() {
                    response.complete = true;
                    return;
                }
            }
            return;
        }
        if !reader.fill(size + 2) {
            let have = reader.buf.len().min(size);
            response.body.extend_from_slice(&reader.buf[..have]);
            return;
        }
        assert_eq!(
            &reader.buf[size..size + 2],
            b"\r\n",
            "chunk data not followed by CRLF"
        );
        let data = reader.buf[..size].to_vec();
        reader.buf.drain(..size + 2);
        response.body.extend_from_slice(&data);
        response.chunks.push((reader.last_read, data));
    }
}

struct Reader<'a> {
    stream: &'a mut TcpStream,
    /// Received, not yet consumed.
    buf: Vec<u8>,
    /// When the latest read returned data.
    last_read: Instant,
}

impl Reader<'_> {
    /// Read once, appending to the buffer; 0 at end of stream (or on a reset/abort, which is
    /// treated the same). Panics after [`READ_TIMEOUT`] without data.
    fn read_more(&mut self) -> usize {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(n) => {
                    self.last_read = Instant::now();
                    self.buf.extend_from_slice(&chunk[..n]);
                    return n;
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err)
                    if matches!(
                        err.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    let seen = String::from_utf8_lossy(&self.buf);
                    let seen: String = seen.chars().take(2000).collect();
                    panic!(
                        "no data from {:?} for {READ_TIMEOUT:?}; unconsumed bytes so far: {seen:?}",
                        self.stream.peer_addr().ok()
                    );
                }
                Err(_) => return 0,
            }
        }
    }

    /// Read until the buffer holds `n` bytes; false if the stream ended first.
    fn fill(&mut self, n: usize) -> bool {
        while self.buf.len() < n {
            if self.read_more() == 0 {
                return false;
            }
        }
        true
    }

    /// Take one CRLF-terminated line (without the CRLF); None if the stream ended first.
    fn line(&mut self) -> Option<String> {
        let mut scanned = 0;
        loop {
            if let Some(pos) = self.buf[scanned..].windows(2).position(|w| w == b"\r\n") {
                let end = scanned + pos;
                let line = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                self.buf.drain(..end + 2);
                return Some(line);
            }
            scanned = self.buf.len().saturating_sub(1);
            if self.read_more() == 0 {
                return None;
            }
        }
    }
}
