//! The fake provider: a fast HTTP/1.1 server on 127.0.0.1 answering with canned provider bodies.
//!
//! It runs as its own process (the bench executable re-run with `SWITCHYARD_BENCH_ROLE=fake`) on a
//! current-thread tokio runtime, so its CPU time is measured apart from the load client's. It
//! prints `PORT <n>` on stdout once listening and exits when its stdin closes (the parent died).
//!
//! Routes (by path, whatever the method and body; bodies are read and discarded):
//!
//! | path | answer |
//! |---|---|
//! | `…/v2/rerank` | Cohere v2 rerank JSON, 10 results (`/d100/…`: 100 results) |
//! | `…/v1/images/generations` | an image answer linking to its image (`{created, data: [{url}]}`, as Ark sends it) |
//! | `/b64/v1/images/generations` | a GPT image answer with its image inline (`b64_json`, about 1.5 MB) |
//! | `/v1/audio/speech` | [`SPEECH_BYTES`] of audio, chunked |
//! | `/length/v1/audio/speech` | [`SPEECH_BYTES`] of audio with its `Content-Length` (head and body in one write) |
//! | `/big/v1/audio/speech` | [`BIG_TOTAL`] of audio in 64 KiB chunks, as fast as the reader takes it |
//! | `/sse/v1/audio/speech` | OpenAI speech SSE: [`SSE_EVENTS`] delta events every [`SSE_INTERVAL`], each carrying its send time as `"t"` (Unix ns) |
//! | `…/v1/text-to-speech/…` | ElevenLabs raw audio: [`SSE_EVENTS`] pieces of [`PIECE`] bytes every [`SSE_INTERVAL`], each starting with its send time (Unix ns, little-endian u64) |
//! | `/_bench/tls-stats` | the TLS listener's counts: `accepted full resumed` ([`crate::tls::Counts`]) |
//!
//! A second listener speaks TLS (a certificate for 127.0.0.1 and `localhost` from a CA made at
//! start, [`crate::tls`]) and answers the same routes with the same bytes, so a scenario over
//! HTTPS differs from its plaintext twin only by the TLS. A leading `/tls` in a path is ignored
//! on both listeners: it is how the baseline proxy tells its HTTPS requests from the others, and
//! the gateway's HTTPS providers use it too, so both send the fake the same paths.
//!
//! A third listener is OpenAI's Realtime API: a WebSocket over plain TCP ([`crate::realtime`]),
//! for the `speech-realtime*` workloads.
//!
//! Stdout gets one line once all listen: `PORT <plain> TLS <tls> RT <realtime> CA <CA PEM path>`;
//! the CA file goes to `SWITCHYARD_BENCH_DIR` (the bench's temporary directory).

use std::io::{self, BufRead, Write};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::http::{parse_request_head, write_all, Buf};
use crate::tls::Counts;
use crate::workload::{audio, image_b64_answer, rerank_answer, IMAGE_ANSWER};

/// Size of the canned speech answer.
pub const SPEECH_BYTES: usize = 20 * 1024;
/// Size of the long audio answer.
pub const BIG_TOTAL: usize = 100 * 1024 * 1024;
const BIG_CHUNK: usize = 64 * 1024;
/// Events (or raw pieces) in one timed stream.
pub const SSE_EVENTS: usize = 50;
/// Spacing of timed events.
pub const SSE_INTERVAL: Duration = Duration::from_millis(5);
/// Audio bytes per timed event or piece.
pub const PIECE: usize = 1024;

/// Unix time in nanoseconds (the same clock in every process on this machine).
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The canned answers, built once.
struct Canned {
    rerank10: Vec<u8>,
    rerank100: Vec<u8>,
    image: Vec<u8>,
    image_b64: Vec<u8>,
    speech: Vec<u8>,
    speech_length: Vec<u8>,
    big_chunk: Vec<u8>,
    not_found: Vec<u8>,
}

fn fixed(content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

const CHUNKED_HEAD: &str = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: ";

fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

impl Canned {
    fn new() -> Canned {
        let mut speech = format!("{CHUNKED_HEAD}audio/mpeg\r\n\r\n").into_bytes();
        speech.extend(chunk(&audio(SPEECH_BYTES)));
        speech.extend_from_slice(b"0\r\n\r\n");
        Canned {
            rerank10: fixed("application/json", rerank_answer(10).as_bytes()),
            rerank100: fixed("application/json", rerank_answer(100).as_bytes()),
            image: fixed("application/json", IMAGE_ANSWER.as_bytes()),
            image_b64: fixed("application/json", image_b64_answer().as_bytes()),
            speech,
            speech_length: fixed("audio/mpeg", &audio(SPEECH_BYTES)),
            big_chunk: chunk(&audio(BIG_CHUNK)),
            not_found: b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_vec(),
        }
    }
}

/// Run the fake: bind, print the port, serve until stdin closes.
pub fn main() -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::spawn(|| {
        // The parent holds our stdin; when it goes away, so do we.
        let mut line = String::new();
        while std::io::stdin().lock().read_line(&mut line).unwrap_or(0) > 0 {
            line.clear();
        }
        std::process::exit(0);
    });
    let dir = std::env::var_os("SWITCHYARD_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let tls_listener = TcpListener::bind("127.0.0.1:0").await?;
        let tls_port = tls_listener.local_addr()?.port();
        let rt_listener = TcpListener::bind("127.0.0.1:0").await?;
        let rt_port = rt_listener.local_addr()?.port();
        let (acceptor, ca_file) = crate::tls::acceptor(&dir)?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "PORT {port} TLS {tls_port} RT {rt_port} CA {ca_file}")?;
        out.flush()?;
        drop(out);
        let canned = Arc::new(Canned::new());
        let counts = Arc::new(Counts::default());
        tokio::spawn(crate::realtime::serve(
            rt_listener,
            Arc::new(crate::realtime::Events::canned()),
        ));
        tokio::spawn(accept_tls(
            tls_listener,
            acceptor,
            canned.clone(),
            counts.clone(),
        ));
        loop {
            let (mut s, _) = listener.accept().await?;
            let canned = canned.clone();
            let counts = counts.clone();
            tokio::spawn(async move {
                let _ = serve(&mut s, &canned, &counts).await;
            });
        }
    })
}

/// The TLS listener: each connection is counted, its handshake finished and counted by kind,
/// then served exactly as a plain one.
async fn accept_tls(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    canned: Arc<Canned>,
    counts: Arc<Counts>,
) -> io::Result<()> {
    loop {
        let (s, _) = listener.accept().await?;
        counts
            .accepted
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (acceptor, canned, counts) = (acceptor.clone(), canned.clone(), counts.clone());
        tokio::spawn(async move {
            s.set_nodelay(true)?;
            let mut tls = acceptor.accept(s).await?;
            counts.handshake(tls.get_ref().1.handshake_kind());
            serve(&mut tls, &canned, &counts).await
        });
    }
}

/// A connection the fake serves: a plain socket (read and written by readiness, as before TLS
/// was added, so the plaintext scenarios' fake is unchanged) or a TLS stream.
trait Conn {
    /// Read more of the request into `buf`; 0 when the peer closed.
    async fn fill(&mut self, buf: &mut Buf) -> io::Result<usize>;
    /// Write all of `bytes` and push them out: a TLS stream holds written bytes in its records
    /// until flushed, and a timed event must leave when it is written.
    async fn send(&mut self, bytes: &[u8]) -> io::Result<()>;
    fn nodelay(&self) -> io::Result<()>;
}

impl Conn for TcpStream {
    async fn fill(&mut self, buf: &mut Buf) -> io::Result<usize> {
        buf.read_from(self).await
    }

    async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        write_all(self, bytes).await
    }

    fn nodelay(&self) -> io::Result<()> {
        self.set_nodelay(true)
    }
}

impl Conn for TlsStream<TcpStream> {
    async fn fill(&mut self, buf: &mut Buf) -> io::Result<usize> {
        buf.read_from_io(self).await
    }

    async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.write_all(bytes).await?;
        self.flush().await
    }

    /// Set on the socket before the handshake.
    fn nodelay(&self) -> io::Result<()> {
        Ok(())
    }
}

async fn serve<C: Conn>(s: &mut C, canned: &Canned, counts: &Counts) -> io::Result<()> {
    s.nodelay()?;
    let mut buf = Buf::default();
    loop {
        let head = loop {
            if let Some(h) = parse_request_head(buf.bytes())? {
                break h;
            }
            if s.fill(&mut buf).await? == 0 {
                return Ok(());
            }
        };
        buf.consume(head.len);
        let mut left = head.content_length;
        loop {
            let n = left.min(buf.bytes().len());
            buf.consume(n);
            left -= n;
            if left == 0 {
                break;
            }
            if s.fill(&mut buf).await? == 0 {
                return Ok(());
            }
        }
        let path = head
            .path
            .strip_prefix("/tls")
            .filter(|p| p.starts_with('/'))
            .unwrap_or(&head.path);
        if path == "/_bench/tls-stats" {
            s.send(&fixed("text/plain", counts.line().as_bytes()))
                .await?;
            continue;
        }
        respond(s, path, canned).await?;
    }
}

async fn respond<C: Conn>(s: &mut C, path: &str, c: &Canned) -> io::Result<()> {
    if path.ends_with("/v2/rerank") {
        let body = if path.starts_with("/d100/") {
            &c.rerank100
        } else {
            &c.rerank10
        };
        s.send(body).await
    } else if path == "/b64/v1/images/generations" {
        s.send(&c.image_b64).await
    } else if path.ends_with("/v1/images/generations") {
        s.send(&c.image).await
    } else if path == "/v1/audio/speech" {
        s.send(&c.speech).await
    } else if path == "/length/v1/audio/speech" {
        s.send(&c.speech_length).await
    } else if path == "/big/v1/audio/speech" {
        s.send(format!("{CHUNKED_HEAD}audio/mpeg\r\n\r\n").as_bytes())
            .await?;
        for _ in 0..BIG_TOTAL / BIG_CHUNK {
            s.send(&c.big_chunk).await?;
        }
        s.send(b"0\r\n\r\n").await
    } else if path == "/sse/v1/audio/speech" {
        openai_sse(s).await
    } else if path.contains("/v1/text-to-speech/") {
        elevenlabs_raw(s).await
    } else {
        s.send(&c.not_found).await
    }
}

/// OpenAI's speech SSE, each delta stamped with its send time.
async fn openai_sse<C: Conn>(s: &mut C) -> io::Result<()> {
    s.send(format!("{CHUNKED_HEAD}text/event-stream\r\n\r\n").as_bytes())
        .await?;
    let b64 = base64::engine::general_purpose::STANDARD.encode(audio(PIECE));
    for _ in 0..SSE_EVENTS {
        tokio::time::sleep(SSE_INTERVAL).await;
        let event = format!(
            "data: {{\"type\":\"speech.audio.delta\",\"audio\":\"{b64}\",\"t\":{}}}\n\n",
            unix_ns()
        );
        s.send(&chunk(event.as_bytes())).await?;
    }
    let done = "data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":5,\"output_tokens\":120,\"total_tokens\":125}}\n\n";
    let mut tail = chunk(done.as_bytes());
    tail.extend_from_slice(b"0\r\n\r\n");
    s.send(&tail).await
}

/// ElevenLabs' streaming endpoint: raw audio pieces, each starting with its send time.
async fn elevenlabs_raw<C: Conn>(s: &mut C) -> io::Result<()> {
    s.send(format!("{CHUNKED_HEAD}audio/mpeg\r\n\r\n").as_bytes())
        .await?;
    let mut piece = audio(PIECE);
    for _ in 0..SSE_EVENTS {
        tokio::time::sleep(SSE_INTERVAL).await;
        piece[..8].copy_from_slice(&unix_ns().to_le_bytes());
        s.send(&chunk(&piece)).await?;
    }
    s.send(b"0\r\n\r\n").await
}
