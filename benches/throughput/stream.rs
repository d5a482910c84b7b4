//! Streaming scenarios: memory while a 100 MiB audio answer streams through, and the delay each
//! timed SSE event (or raw audio piece) picks up between the fake's write and the client's read.
//!
//! Every timed event carries the fake's send time (Unix ns: `"t"` in OpenAI's SSE, the first 8
//! bytes of each ElevenLabs audio piece). The client notes the time the event's last byte was read;
//! the difference is the event's delay. Pieces are found by fixed size in the concatenated audio,
//! so the result does not depend on how any hop re-chunks the stream.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use base64::Engine;
use tokio::net::TcpStream;

use crate::fake::{unix_ns, PIECE, SSE_EVENTS};
use crate::http::{read_response, write_all, Buf};
use crate::procs::{rss_kib, RssSampler};

/// A 100 MiB answer streamed through one process.
#[derive(Debug, Clone, Copy, Default)]
pub struct BigOutcome {
    pub bytes: u64,
    pub secs: f64,
    /// RSS just before, and the sampled peak during, KiB (0 without a process to watch).
    pub rss_before: u64,
    pub rss_peak: u64,
    pub status: u16,
}

/// Send `request` and read the whole (large) answer, watching `pid`'s memory.
pub async fn big(addr: SocketAddr, request: &[u8], pid: Option<u32>) -> Result<BigOutcome, String> {
    let s = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let rss_before = pid.map_or(0, rss_kib);
    let sampler = pid.map(|p| RssSampler::start(p, Duration::from_millis(5)));
    let t0 = Instant::now();
    write_all(&s, request).await.map_err(|e| e.to_string())?;
    let mut buf = Buf::default();
    let mut bytes = 0u64;
    let status = read_response(&s, &mut buf, |d, _| bytes += d.len() as u64)
        .await
        .map_err(|e| format!("reading the long answer: {e}"))?;
    let secs = t0.elapsed().as_secs_f64();
    let rss_peak = sampler.map_or(0, RssSampler::finish);
    Ok(BigOutcome {
        bytes,
        secs,
        rss_before,
        rss_peak,
        status,
    })
}

/// How the timed stream arrives at the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// SSE whose events carry `"t"` (OpenAI's own events, passed through).
    StampedEvents,
    /// The gateway's SSE wrapping base64 audio whose pieces start with a stamp (ElevenLabs).
    AudioEvents,
    /// Raw audio whose pieces start with a stamp (ElevenLabs, direct or through the proxy).
    RawAudio,
}

/// Per-event delays over `streams` sequential streams on one connection, nanoseconds, sorted;
/// plus the number of events that were expected but did not arrive.
pub async fn delays(
    addr: SocketAddr,
    request: &[u8],
    shape: Shape,
    streams: usize,
) -> Result<(Vec<i64>, usize), String> {
    let s = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut buf = Buf::default();
    let mut all = Vec::new();
    let mut missing = 0;
    for _ in 0..streams {
        write_all(&s, request).await.map_err(|e| e.to_string())?;
        let mut timer = Timer::new(shape);
        let status = read_response(&s, &mut buf, |d, _| timer.feed(d, unix_ns()))
            .await
            .map_err(|e| format!("reading a timed stream: {e}"))?;
        if status != 200 {
            return Err(format!("timed stream answered HTTP {status}"));
        }
        missing += SSE_EVENTS.saturating_sub(timer.delays.len());
        all.extend(timer.delays);
    }
    all.sort_unstable();
    Ok((all, missing))
}

/// Finds timed events in a stream as its bytes arrive.
struct Timer {
    shape: Shape,
    text: Vec<u8>,
    audio: Vec<u8>,
    delays: Vec<i64>,
}

impl Timer {
    fn new(shape: Shape) -> Timer {
        Timer {
            shape,
            text: Vec::new(),
            audio: Vec::new(),
            delays: Vec::new(),
        }
    }

    fn feed(&mut self, data: &[u8], now: u64) {
        if self.shape == Shape::RawAudio {
            self.audio.extend_from_slice(data);
            self.take_pieces(now);
            return;
        }
        self.text.extend_from_slice(data);
        while let Some(end) = find(&self.text, b"\n\n") {
            let event: Vec<u8> = self.text.drain(..end + 2).collect();
            match self.shape {
                Shape::StampedEvents => {
                    if let Some(t) = after(&event, b"\"t\":").and_then(leading_number) {
                        self.delays.push(now as i64 - t as i64);
                    }
                }
                _ => {
                    if let Some(b64) = after(&event, b"\"audio\":\"") {
                        let end = b64.iter().position(|b| *b == b'"').unwrap_or(b64.len());
                        if let Ok(bytes) =
                            base64::engine::general_purpose::STANDARD.decode(&b64[..end])
                        {
                            self.audio.extend_from_slice(&bytes);
                        }
                    }
                    self.take_pieces(now);
                }
            }
        }
    }

    fn take_pieces(&mut self, now: u64) {
        while self.audio.len() >= PIECE {
            let mut stamp = [0u8; 8];
            stamp.copy_from_slice(&self.audio[..8]);
            self.delays
                .push(now as i64 - u64::from_le_bytes(stamp) as i64);
            self.audio.drain(..PIECE);
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn after<'a>(hay: &'a [u8], needle: &[u8]) -> Option<&'a [u8]> {
    find(hay, needle).map(|i| &hay[i + needle.len()..])
}

fn leading_number(s: &[u8]) -> Option<u64> {
    let end = s
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(s.len());
    std::str::from_utf8(&s[..end]).ok()?.parse().ok()
}

/// Quantile `q` of sorted `v`, in milliseconds.
pub fn ms(v: &[i64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * q).round() as usize] as f64 / 1e6
}
