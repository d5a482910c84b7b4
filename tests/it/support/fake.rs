//! A scriptable fake HTTP/1.1 upstream (a stand-in for an AI provider) for Switchyard's
//! integration tests.
//!
//! [`FakeProvider::start`] binds `127.0.0.1:0` before returning (so the address accepts
//! connections at once, no readiness wait needed) and serves on a dedicated background thread
//! with its own current-thread tokio runtime, so tests can be plain `#[test]` functions while
//! the gateway under test runs on other threads.
//!
//! Every request is read completely (Content-Length or chunked body), recorded (see
//! [`FakeProvider::requests`] / [`FakeProvider::wait_requests`]) and then answered with the
//! next queued [`Reply`] (FIFO), or the default reply when the queue is empty. Connections are
//! kept alive across requests until the client closes, the client sends `Connection: close`,
//! or a reply ends the connection ([`ReplyBody::Hangup`], [`ReplyBody::Stall`], an aborted
//! [`ReplyBody::Chunked`], or a reply carrying its own `connection: close` header).
//!
//! Only tokio's `rt`, `net`, `time`, `sync` and `macros` features are used (no `io-util`).

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// Largest request head (or chunk-size/trailer line) accepted; beyond it the fake answers 431/400.
const MAX_HEAD: usize = 1024 * 1024;
/// Most request header fields accepted; beyond it the fake answers 431.
const MAX_HEADERS: usize = 256;
/// Largest single chunk accepted in a chunked request body.
const MAX_CHUNK: usize = 1 << 30;
/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 64 * 1024;

/// One request as the fake received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// Path and query exactly as sent in the request line, e.g. `/v1/audio/speech?x=1`.
    pub path: String,
    /// Header fields in the order received; names lower-cased, values as sent (lossy UTF-8).
    pub headers: Vec<(String, String)>,
    /// The full body (de-chunked if it was sent chunked).
    pub body: Vec<u8>,
}

impl Recorded {
    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON; panics with the body text if it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        match serde_json::from_slice(&self.body) {
            Ok(value) => value,
            Err(err) => panic!(
                "recorded {} {} body is not JSON ({err}): {}",
                self.method,
                self.path,
                String::from_utf8_lossy(&self.body)
            ),
        }
    }

    /// The body as (lossy UTF-8) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A scripted answer to one request.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    /// Sent as given, in order. The fake adds the framing header (`content-length` or
    /// `transfer-encoding: chunked`) unless a header of that name is already here, and adds
    /// `connection: close` when it will close the connection after this reply.
    pub headers: Vec<(String, String)>,
    pub body: ReplyBody,
}

/// How a [`Reply`] is delivered.
#[derive(Clone, Debug)]
pub enum ReplyBody {
    /// Sent with Content-Length (the length is still sent, without the body, for a HEAD
    /// request; a 1xx/204/304 status gets neither).
    Full(Vec<u8>),
    /// Sent with `Transfer-Encoding: chunked`, the head at once, then before each chunk its
    /// delay. Empty chunks are skipped (an empty chunk would end the body). If `abort` is true,
    /// the TCP connection is closed after the last listed chunk WITHOUT the terminating 0-chunk
    /// (a provider dying mid-stream).
    Chunked {
        chunks: Vec<(Duration, Vec<u8>)>,
        abort: bool,
    },
    /// Sent with the `Content-Length` of all the pieces, the head at once, then before each
    /// piece its delay (no framing: a file streamed as it is made, its length known up front).
    Paced(Vec<(Duration, Vec<u8>)>),
    /// Read (and record) the request, then close the connection without answering.
    Hangup,
    /// Read (and record) the request, then send nothing for this long, then close.
    Stall(Duration),
}

impl Reply {
    /// A `Content-Length` reply with `content-type: application/json`.
    pub fn json(status: u16, body: serde_json::Value) -> Reply {
        Reply::bytes(
            status,
            "application/json",
            serde_json::to_vec(&body).expect("serialize JSON reply"),
        )
    }

    /// A `Content-Length` reply with the given content type.
    pub fn bytes(status: u16, content_type: &str, body: Vec<u8>) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".to_string(), content_type.to_string())],
            body: ReplyBody::Full(body),
        }
    }

    /// A 200 `text/event-stream` reply, chunked, one event string per chunk, sent as given
    /// (the caller includes `data: ...\n\n`), each after its delay.
    pub fn sse(events: Vec<(Duration, String)>) -> Reply {
        Reply::chunked(
            200,
            "text/event-stream",
            events
                .into_iter()
                .map(|(delay, event)| (delay, event.into_bytes()))
                .collect(),
            false,
        )
    }

    /// A chunked reply with the given content type (see [`ReplyBody::Chunked`]).
    pub fn chunked(
        status: u16,
        content_type: &str,
        chunks: Vec<(Duration, Vec<u8>)>,
        abort: bool,
    ) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".to_string(), content_type.to_string())],
            body: ReplyBody::Chunked { chunks, abort },
        }
    }

    /// A reply with a `Content-Length`, its body sent in pieces (see [`ReplyBody::Paced`]).
    pub fn paced(status: u16, content_type: &str, pieces: Vec<(Duration, Vec<u8>)>) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".to_string(), content_type.to_string())],
            body: ReplyBody::Paced(pieces),
        }
    }

    /// Close the connection after reading the request, without answering.
    pub fn hangup() -> Reply {
        Reply {
            status: 0,
            headers: Vec::new(),
            body: ReplyBody::Hangup,
        }
    }

    /// Read the request, answer nothing for `duration`, then close.
    pub fn stall(duration: Duration) -> Reply {
        Reply {
            status: 0,
            headers: Vec::new(),
            body: ReplyBody::Stall(duration),
        }
    }

    /// Add a header (appended after the existing ones).
    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    fn has_header(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    }

    /// Whether the reply itself asks for the connection to be closed after it.
    fn closes(&self) -> bool {
        self.headers
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case("connection") && has_token(v, "close"))
    }
}

/// Answers a request from what it carries (a stateful emulator, e.g. of a task API); `None`
/// falls back to the queue and the default.
pub type Handler = Box<dyn FnMut(&Recorded) -> Option<Reply> + Send>;

struct State {
    handler: Option<Handler>,
    queue: VecDeque<Reply>,
    default: Reply,
    requests: Vec<Recorded>,
    connections: usize,
}

struct Shared {
    state: Mutex<State>,
    recorded: Condvar,
}

impl Shared {
    /// Lock the state, ignoring poisoning (a panicking test must not cascade into Drop).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A fake HTTP/1.1 provider listening on 127.0.0.1; stopped when dropped.
pub struct FakeProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeProvider {
    /// Start listening on 127.0.0.1:0 on a dedicated background thread with its own tokio
    /// runtime. The socket is bound and listening when this returns.
    pub fn start() -> FakeProvider {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("fake provider: bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("fake provider: set_nonblocking");
        let addr = listener.local_addr().expect("fake provider: local_addr");
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                handler: None,
                queue: VecDeque::new(),
                default: Reply::json(500, serde_json::json!({"error": "no scripted reply"})),
                requests: Vec::new(),
                connections: 0,
            }),
            recorded: Condvar::new(),
        });
        let (shutdown_tx, shutdown_rx) = oneshot::channel();
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("fake-provider-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake provider: build tokio runtime");
                runtime.block_on(accept_loop(listener, thread_shared, shutdown_rx));
                // Dropping the runtime here cancels every connection task, closing its socket.
            })
            .expect("fake provider: spawn thread");
        FakeProvider {
            addr,
            shared,
            shutdown: Some(shutdown_tx),
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queue a reply; each incoming request takes the next queued reply (FIFO).
    pub fn push(&self, reply: Reply) {
        self.shared.lock().queue.push_back(reply);
    }

    /// Answer requests with `handler` first (it sees each request as recorded); where it returns
    /// `None`, the queue and the default answer as usual.
    pub fn set_handler(&self, handler: impl FnMut(&Recorded) -> Option<Reply> + Send + 'static) {
        self.shared.lock().handler = Some(Box::new(handler));
    }

    /// The reply used when the queue is empty (initially 500 `{"error":"no scripted reply"}`).
    pub fn set_default(&self, reply: Reply) {
        self.shared.lock().default = reply;
    }

    /// Everything received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.lock().requests.clone()
    }

    /// Number of TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.lock().connections
    }

    /// Block until at least `n` requests were recorded and return all recorded so far; panics
    /// if that does not happen within `timeout`.
    pub fn wait_requests(&self, n: usize, timeout: Duration) -> Vec<Recorded> {
        let guard = self.shared.lock();
        let (guard, _) = self
            .shared
            .recorded
            .wait_timeout_while(guard, timeout, |state| state.requests.len() < n)
            .unwrap_or_else(PoisonError::into_inner);
        if guard.requests.len() < n {
            let seen: Vec<String> = guard
                .requests
                .iter()
                .map(|r| format!("{} {}", r.method, r.path))
                .collect();
            drop(guard);
            panic!(
                "fake provider {}: waited {timeout:?} for {n} request(s), got {}: {seen:?}",
                self.addr,
                seen.len()
            );
        }
        guard.requests.clone()
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    mut shutdown: oneshot::Receiver<()>,
) {
    let listener = TcpListener::from_std(listener).expect("fake provider: register listener");
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    shared.lock().connections += 1;
                    tokio::spawn(serve_connection(stream, Arc::clone(&shared)));
                }
            }
        }
    }
}

/// Why reading a request stopped.
enum Fail {
    /// The peer closed or the socket failed: drop the connection silently.
    Closed,
    /// The request is malformed: answer with this status and close.
    Bad(u16, &'static str),
}

impl From<io::Error> for Fail {
    fn from(_: io::Error) -> Fail {
        Fail::Closed
    }
}

/// A parsed request head.
struct Head {
    method: String,
    path: String,
    version: u8,
    headers: Vec<(String, String)>,
    len: usize,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    // Bytes read but not yet consumed (a partial head, body bytes, a pipelined request...).
    let mut buf = Vec::new();
    loop {
        let head = match read_head(&stream, &mut buf).await {
            Ok(Some(head)) => head,
            Ok(None) | Err(Fail::Closed) => return,
            Err(Fail::Bad(status, why)) => return reject(&stream, status, why).await,
        };
        buf.drain(..head.len);

        if head.version == 1
            && head
                .header("expect")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("100-continue"))
            && write_all(&stream, b"HTTP/1.1 100 Continue\r\n\r\n")
                .await
                .is_err()
        {
            return;
        }

        let body = match read_body(&stream, &mut buf, &head).await {
            Ok(body) => body,
            Err(Fail::Closed) => return,
            Err(Fail::Bad(status, why)) => return reject(&stream, status, why).await,
        };

        let connection = head.header("connection").unwrap_or("");
        let client_close = has_token(connection, "close")
            || (head.version == 0 && !has_token(connection, "keep-alive"));
        let is_head = head.method.eq_ignore_ascii_case("HEAD");

        let reply = {
            let mut state = shared.lock();
            let recorded = Recorded {
                method: head.method,
                path: head.path,
                headers: head.headers,
                body,
            };
            let handled = state.handler.as_mut().and_then(|h| h(&recorded));
            state.requests.push(recorded);
            match handled.or_else(|| state.queue.pop_front()) {
                Some(reply) => reply,
                None => state.default.clone(),
            }
        };
        shared.recorded.notify_all();

        if !send_reply(&stream, &reply, is_head, client_close).await {
            return;
        }
    }
}

/// Read until a complete request head is buffered. `Ok(None)`: clean close between requests.
async fn read_head(stream: &TcpStream, buf: &mut Vec<u8>) -> Result<Option<Head>, Fail> {
    loop {
        if !buf.is_empty() {
            if let Some(head) = parse_head(buf)? {
                return Ok(Some(head));
            }
            if buf.len() > MAX_HEAD {
                return Err(Fail::Bad(431, "request head too large"));
            }
        }
        if read_more(stream, buf).await? == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(Fail::Closed)
            };
        }
    }
}

/// Parse a request head with httparse; `Ok(None)` when more bytes are needed.
fn parse_head(buf: &[u8]) -> Result<Option<Head>, Fail> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut fields);
    match request.parse(buf) {
        Ok(httparse::Status::Complete(len)) => Ok(Some(Head {
            method: request.method.unwrap_or("").to_string(),
            path: request.path.unwrap_or("").to_string(),
            version: request.version.unwrap_or(1),
            headers: request
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
        })),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(Fail::Bad(431, "too many header fields")),
        Err(_) => Err(Fail::Bad(400, "malformed request head")),
    }
}

async fn read_body(stream: &TcpStream, buf: &mut Vec<u8>, head: &Head) -> Result<Vec<u8>, Fail> {
    let chunked = head
        .headers
        .iter()
        .filter(|(n, _)| n == "transfer-encoding")
        .any(|(_, v)| {
            v.rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"))
        });
    if chunked {
        return read_chunked_body(stream, buf).await;
    }
    let length = match head.header("content-length") {
        None => return Ok(Vec::new()),
        Some(value) => value
            .trim()
            .parse::<usize>()
            .map_err(|_| Fail::Bad(400, "bad content-length"))?,
    };
    fill(stream, buf, length).await?;
    let body = buf[..length].to_vec();
    buf.drain(..length);
    Ok(body)
}

async fn read_chunked_body(stream: &TcpStream, buf: &mut Vec<u8>) -> Result<Vec<u8>, Fail> {
    let mut body = Vec::new();
    loop {
        let line = read_line(stream, buf).await?;
        // Chunk extensions (";name=value") are ignored.
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .ok()
            .filter(|size| *size <= MAX_CHUNK)
            .ok_or(Fail::Bad(400, "bad chunk size"))?;
        if size == 0 {
            // Trailer fields (ignored) up to the empty line.
            while !read_line(stream, buf).await?.is_empty() {}
            return Ok(body);
        }
        fill(stream, buf, size + 2).await?;
        if &buf[size..size + 2] != b"\r\n" {
            return Err(Fail::Bad(400, "chunk data not followed by CRLF"));
        }
        body.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
    }
}

/// Take one CRLF-terminated line (without the CRLF) from the buffer, reading as needed.
async fn read_line(stream: &TcpStream, buf: &mut Vec<u8>) -> Result<String, Fail> {
    let mut scanned = 0;
    loop {
        if let Some(pos) = buf[scanned..].windows(2).position(|w| w == b"\r\n") {
            let end = scanned + pos;
            let line = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 2);
            return Ok(line);
        }
        if buf.len() > MAX_HEAD {
            return Err(Fail::Bad(400, "line too long in chunked body"));
        }
        scanned = buf.len().saturating_sub(1);
        if read_more(stream, buf).await? == 0 {
            return Err(Fail::Closed);
        }
    }
}

/// Read until the buffer holds at least `n` bytes.
async fn fill(stream: &TcpStream, buf: &mut Vec<u8>, n: usize) -> Result<(), Fail> {
    while buf.len() < n {
        if read_more(stream, buf).await? == 0 {
            return Err(Fail::Closed);
        }
    }
    Ok(())
}

/// Append whatever the socket has (waiting for at least one byte); 0 means end of stream.
async fn read_more(stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    let start = buf.len();
    buf.resize(start + READ_CHUNK, 0);
    let result = loop {
        if let Err(err) = stream.readable().await {
            break Err(err);
        }
        match stream.try_read(&mut buf[start..]) {
            Ok(n) => break Ok(n),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
            Err(err) => break Err(err),
        }
    };
    buf.truncate(start + result.as_ref().map_or(0, |n| *n));
    result
}

async fn write_all(stream: &TcpStream, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        stream.writable().await?;
        match stream.try_write(data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// Answer a malformed request and close.
async fn reject(stream: &TcpStream, status: u16, why: &str) {
    let response = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{why}",
        reason(status),
        why.len()
    );
    let _ = write_all(stream, response.as_bytes()).await;
}

/// Send a reply; returns whether the connection stays open for another request.
async fn send_reply(stream: &TcpStream, reply: &Reply, is_head: bool, client_close: bool) -> bool {
    let close = client_close || reply.closes();
    match &reply.body {
        ReplyBody::Hangup => false,
        ReplyBody::Stall(duration) => {
            tokio::time::sleep(*duration).await;
            false
        }
        ReplyBody::Full(body) => {
            let bodiless_status = matches!(reply.status, 100..=199 | 204 | 304);
            let framing = (!bodiless_status).then(|| ("content-length", body.len().to_string()));
            let mut out = reply_head(reply, framing, close);
            if !is_head && !bodiless_status {
                out.extend_from_slice(body);
            }
            write_all(stream, &out).await.is_ok() && !close
        }
        ReplyBody::Paced(pieces) => {
            let length: usize = pieces.iter().map(|(_, p)| p.len()).sum();
            let head = reply_head(reply, Some(("content-length", length.to_string())), close);
            if write_all(stream, &head).await.is_err() {
                return false;
            }
            if is_head {
                return !close;
            }
            for (delay, piece) in pieces {
                if !delay.is_zero() {
                    tokio::time::sleep(*delay).await;
                }
                if write_all(stream, piece).await.is_err() {
                    return false;
                }
            }
            !close
        }
        ReplyBody::Chunked { chunks, abort } => {
            let head = reply_head(
                reply,
                Some(("transfer-encoding", "chunked".to_string())),
                close,
            );
            if !is_head && !*abort && chunks.iter().all(|(delay, _)| delay.is_zero()) {
                // The whole answer in hand: one write, as a server with the body ready sends it.
                let whole = [head, chunked_whole(chunks)].concat();
                return write_all(stream, &whole).await.is_ok() && !close;
            }
            if write_all(stream, &head).await.is_err() {
                return false;
            }
            if is_head {
                return !close;
            }
            for (delay, data) in chunks {
                if !delay.is_zero() {
                    tokio::time::sleep(*delay).await;
                }
                if data.is_empty() {
                    continue;
                }
                if write_all(stream, &chunk_frame(data)).await.is_err() {
                    return false;
                }
            }
            if *abort {
                return false;
            }
            write_all(stream, b"0\r\n\r\n").await.is_ok() && !close
        }
    }
}

/// One chunk of a chunked body: its size, its data, its end.
fn chunk_frame(data: &[u8]) -> Vec<u8> {
    let mut frame = format!("{:x}\r\n", data.len()).into_bytes();
    frame.extend_from_slice(data);
    frame.extend_from_slice(b"\r\n");
    frame
}

/// `chunks` framed as one chunked body, terminator included.
fn chunked_whole(chunks: &[(Duration, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (_, data) in chunks.iter().filter(|(_, d)| !d.is_empty()) {
        out.extend_from_slice(&chunk_frame(data));
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

fn reply_head(reply: &Reply, framing: Option<(&str, String)>, close: bool) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some((name, value)) = framing {
        if !reply.has_header(name) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    if close && !reply.has_header("connection") {
        head.push_str("connection: close\r\n");
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// Whether a comma-separated header value contains this token (case-insensitive).
fn has_token(value: &str, token: &str) -> bool {
    value
        .split(',')
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}
