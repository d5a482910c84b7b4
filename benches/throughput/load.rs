//! The load client: N keep-alive HTTP/1.1 connections, each sending the same pre-built request
//! bytes one at a time and reading the answer with minimal parsing (head, then `Content-Length` or
//! `chunked` framing; the body is skipped).
//!
//! Closed loop (the default): each connection sends its next request as soon as the answer is in,
//! which measures capacity. Paced (`rate`): the connections share a fixed request rate, each
//! sending on its own schedule, which measures latency at a load the server can carry. A request
//! is timed from just before its first byte is written to the last byte of its answer.
//!
//! A run is a warm-up, then a measured window: only answers that complete inside the window count,
//! and only those that also started inside it are timed. `mark(true)`/`mark(false)` are called at
//! the window's edges so the caller can read CPU counters there.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use crate::http::{read_response, write_all, Buf};

/// One load run.
#[derive(Clone)]
pub struct Spec {
    pub addr: SocketAddr,
    pub request: Arc<Vec<u8>>,
    pub conns: usize,
    pub warmup: Duration,
    pub measure: Duration,
    /// Total requests per second across all connections; `None` for a closed loop.
    pub rate: Option<f64>,
}

/// What a run measured.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    /// 200 answers completed in the window.
    pub ok: u64,
    /// Other statuses, I/O errors and failed connects in the window.
    pub errors: u64,
    /// Paced runs: sends more than 1 ms behind schedule (the server could not keep up).
    pub late: u64,
    pub secs: f64,
    /// Latencies of timed requests, nanoseconds, sorted.
    pub lat_ns: Vec<u64>,
}

impl Outcome {
    pub fn rps(&self) -> f64 {
        self.ok as f64 / self.secs.max(1e-9)
    }

    /// Latency at quantile `q` (0..=1), milliseconds.
    pub fn ms(&self, q: f64) -> f64 {
        if self.lat_ns.is_empty() {
            return f64::NAN;
        }
        let i = ((self.lat_ns.len() - 1) as f64 * q).round() as usize;
        self.lat_ns[i] as f64 / 1e6
    }
}

struct Shared {
    recording: AtomicBool,
    stop: AtomicBool,
}

#[derive(Default)]
struct TaskResult {
    ok: u64,
    errors: u64,
    late: u64,
    lat_ns: Vec<u64>,
}

/// Run `spec` on the current tokio runtime.
pub async fn run(spec: &Spec, mut mark: impl FnMut(bool)) -> Outcome {
    let shared = Arc::new(Shared {
        recording: AtomicBool::new(false),
        stop: AtomicBool::new(false),
    });
    let start = Instant::now();
    let period = spec
        .rate
        .map(|r| Duration::from_secs_f64(spec.conns as f64 / r.max(1.0)));
    let mut tasks = Vec::with_capacity(spec.conns);
    for i in 0..spec.conns {
        let shared = shared.clone();
        let req = spec.request.clone();
        let addr = spec.addr;
        // Paced connections start spread over one period, so sends do not come in bursts.
        let pace = period.map(|p| (start + p.mul_f64(i as f64 / spec.conns as f64), p));
        tasks.push(tokio::spawn(async move {
            conn_loop(addr, &req, &shared, pace).await
        }));
    }
    tokio::time::sleep(spec.warmup).await;
    mark(true);
    shared.recording.store(true, Ordering::SeqCst);
    let window = Instant::now();
    tokio::time::sleep(spec.measure).await;
    shared.recording.store(false, Ordering::SeqCst);
    let secs = window.elapsed().as_secs_f64();
    mark(false);
    shared.stop.store(true, Ordering::SeqCst);

    let mut out = Outcome {
        secs,
        ..Outcome::default()
    };
    for t in tasks {
        if let Ok(r) = t.await {
            out.ok += r.ok;
            out.errors += r.errors;
            out.late += r.late;
            out.lat_ns.extend(r.lat_ns);
        } else {
            out.errors += 1;
        }
    }
    out.lat_ns.sort_unstable();
    out
}

async fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    Ok(s)
}

async fn conn_loop(
    addr: SocketAddr,
    req: &[u8],
    shared: &Shared,
    pace: Option<(Instant, Duration)>,
) -> TaskResult {
    let mut r = TaskResult {
        lat_ns: Vec::with_capacity(4096),
        ..TaskResult::default()
    };
    let mut buf = Buf::default();
    let mut next = pace.map(|(first, _)| first);
    let mut conn: Option<TcpStream> = None;
    while !shared.stop.load(Ordering::Relaxed) {
        if let (Some(at), Some((_, period))) = (next.as_mut(), pace) {
            let now = Instant::now();
            if now < *at {
                tokio::time::sleep_until((*at).into()).await;
                if shared.stop.load(Ordering::Relaxed) {
                    break;
                }
            } else if now - *at > Duration::from_millis(1)
                && shared.recording.load(Ordering::Relaxed)
            {
                r.late += 1;
            }
            *at += period;
        }
        let s = match conn.take() {
            Some(s) => s,
            None => match connect(addr).await {
                Ok(s) => s,
                Err(_) => {
                    if shared.recording.load(Ordering::Relaxed) {
                        r.errors += 1;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let began_recording = shared.recording.load(Ordering::Relaxed);
        let t0 = Instant::now();
        buf.clear();
        let result = match write_all(&s, req).await {
            Ok(()) => read_response(&s, &mut buf, |_, _| {}).await,
            Err(e) => Err(e),
        };
        let t1 = Instant::now();
        let counted = shared.recording.load(Ordering::Relaxed);
        match result {
            Ok(200) => {
                if counted {
                    r.ok += 1;
                    if began_recording {
                        r.lat_ns.push((t1 - t0).as_nanos() as u64);
                    }
                }
                conn = Some(s);
            }
            Ok(_) => {
                if counted {
                    r.errors += 1;
                }
                conn = Some(s);
            }
            Err(_) => {
                // The connection is unusable: open a new one for the next request.
                if counted {
                    r.errors += 1;
                }
            }
        }
    }
    r
}
