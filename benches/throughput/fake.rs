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
//! | `/v1/audio/speech` | [`SPEECH_BYTES`] of audio, chunked |
//! | `/length/v1/audio/speech` | [`SPEECH_BYTES`] of audio with its `Content-Length` (head and body in one write) |
//! | `/big/v1/audio/speech` | [`BIG_TOTAL`] of audio in 64 KiB chunks, as fast as the reader takes it |
//! | `/sse/v1/audio/speech` | OpenAI speech SSE: [`SSE_EVENTS`] delta events every [`SSE_INTERVAL`], each carrying its send time as `"t"` (Unix ns) |
//! | `…/v1/text-to-speech/…` | ElevenLabs raw audio: [`SSE_EVENTS`] pieces of [`PIECE`] bytes every [`SSE_INTERVAL`], each starting with its send time (Unix ns, little-endian u64) |

use std::io::{self, BufRead, Write};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use tokio::net::{TcpListener, TcpStream};

use crate::http::{parse_request_head, write_all, Buf};
use crate::workload::{audio, rerank_answer, IMAGE_ANSWER};

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
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let mut out = std::io::stdout().lock();
        writeln!(out, "PORT {port}")?;
        out.flush()?;
        drop(out);
        let canned = Arc::new(Canned::new());
        loop {
            let (s, _) = listener.accept().await?;
            let canned = canned.clone();
            tokio::spawn(async move {
                let _ = serve(s, &canned).await;
            });
        }
    })
}

async fn serve(s: TcpStream, canned: &Canned) -> io::Result<()> {
    s.set_nodelay(true)?;
    let mut buf = Buf::default();
    loop {
        let head = loop {
            if let Some(h) = parse_request_head(buf.bytes())? {
                break h;
            }
            if buf.read_from(&s).await? == 0 {
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
            if buf.read_from(&s).await? == 0 {
                return Ok(());
            }
        }
        respond(&s, &head.path, canned).await?;
    }
}

async fn respond(s: &TcpStream, path: &str, c: &Canned) -> io::Result<()> {
    if path.ends_with("/v2/rerank") {
        let body = if path.starts_with("/d100/") {
            &c.rerank100
        } else {
            &c.rerank10
        };
        write_all(s, body).await
    } else if path.ends_with("/v1/images/generations") {
        write_all(s, &c.image).await
    } else if path == "/v1/audio/speech" {
        write_all(s, &c.speech).await
    } else if path == "/length/v1/audio/speech" {
        write_all(s, &c.speech_length).await
    } else if path == "/big/v1/audio/speech" {
        write_all(s, format!("{CHUNKED_HEAD}audio/mpeg\r\n\r\n").as_bytes()).await?;
        for _ in 0..BIG_TOTAL / BIG_CHUNK {
            write_all(s, &c.big_chunk).await?;
        }
        write_all(s, b"0\r\n\r\n").await
    } else if path == "/sse/v1/audio/speech" {
        openai_sse(s).await
    } else if path.contains("/v1/text-to-speech/") {
        elevenlabs_raw(s).await
    } else {
        write_all(s, &c.not_found).await
    }
}

/// OpenAI's speech SSE, each delta stamped with its send time.
async fn openai_sse(s: &TcpStream) -> io::Result<()> {
    write_all(
        s,
        format!("{CHUNKED_HEAD}text/event-stream\r\n\r\n").as_bytes(),
    )
    .await?;
    let b64 = base64::engine::general_purpose::STANDARD.encode(audio(PIECE));
    for _ in 0..SSE_EVENTS {
        tokio::time::sleep(SSE_INTERVAL).await;
        let event = format!(
            "data: {{\"type\":\"speech.audio.delta\",\"audio\":\"{b64}\",\"t\":{}}}\n\n",
            unix_ns()
        );
        write_all(s, &chunk(event.as_bytes())).await?;
    }
    let done = "data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":5,\"output_tokens\":120,\"total_tokens\":125}}\n\n";
    let mut tail = chunk(done.as_bytes());
    tail.extend_from_slice(b"0\r\n\r\n");
    write_all(s, &tail).await
}

/// ElevenLabs' streaming endpoint: raw audio pieces, each starting with its send time.
async fn elevenlabs_raw(s: &TcpStream) -> io::Result<()> {
    write_all(s, format!("{CHUNKED_HEAD}audio/mpeg\r\n\r\n").as_bytes()).await?;
    let mut piece = audio(PIECE);
    for _ in 0..SSE_EVENTS {
        tokio::time::sleep(SSE_INTERVAL).await;
        piece[..8].copy_from_slice(&unix_ns().to_le_bytes());
        write_all(s, &chunk(&piece)).await?;
    }
    write_all(s, b"0\r\n\r\n").await
}
