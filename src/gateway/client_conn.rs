//! The deadlines of one HTTP/1.x client connection.
//!
//! Pingora's read timeout is per read and reset by every byte, and between keep-alive requests it
//! waits with none at all, so a client trickling its head, or idling on a kept-alive connection,
//! would hold a socket and a task for ever. Here a connection is always in one phase, each with its
//! own deadline: `Idle` (waiting for the next request: `idle_timeout`, or `head_timeout` for the
//! first one), `Head` (its first byte arrived: the whole head within `head_timeout`) and `Serving`
//! (the gateway has the head: no deadline here — the body has its own, in `gateway/body.rs`, and an
//! answer may stream as long as it needs).
//!
//! [`Clocked`] wraps the connection's stream and notices the first byte of each head; the gateway
//! marks the start and end of serving ([`ConnClock::serving`], [`ConnClock::served`]), reaching the
//! clock through the session's stream; `server::edge` waits on [`ConnClock::expired`] beside the
//! connection and drops it when a deadline passes. Everything runs on the connection's one task, so
//! the atomics are only there to make the clock `Sync`.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, Ssl, Stream, UniqueID,
    UniqueIDType,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Where a connection is in its request cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Idle = 0,
    Head = 1,
    Serving = 2,
}

impl Phase {
    fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Idle,
            1 => Phase::Head,
            _ => Phase::Serving,
        }
    }

    /// What the access log says of a connection dropped in this phase.
    pub fn expiry(self) -> &'static str {
        match self {
            Phase::Idle => "idle connection closed",
            Phase::Head => "request head not received in time",
            Phase::Serving => "deadline passed while serving",
        }
    }
}

/// No deadline.
const NONE: u64 = u64::MAX;

/// One connection's phase and deadline.
#[derive(Debug)]
pub struct ConnClock {
    epoch: Instant,
    head_timeout: Duration,
    idle_timeout: Duration,
    phase: AtomicU8,
    /// Milliseconds since `epoch`, or [`NONE`].
    deadline_ms: AtomicU64,
    changed: Notify,
}

impl ConnClock {
    /// A newly accepted connection: its first head must be complete within `head_timeout`.
    pub fn new(head_timeout: Duration, idle_timeout: Duration) -> ConnClock {
        let clock = ConnClock {
            epoch: Instant::now(),
            head_timeout,
            idle_timeout,
            phase: AtomicU8::new(Phase::Idle as u8),
            deadline_ms: AtomicU64::new(NONE),
            changed: Notify::new(),
        };
        clock.enter(Phase::Idle, Some(head_timeout));
        clock
    }

    pub fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::Relaxed))
    }

    fn enter(&self, phase: Phase, within: Option<Duration>) {
        let at = within.map_or(NONE, |d| {
            (self.epoch.elapsed() + d)
                .as_millis()
                .min(u128::from(NONE - 1)) as u64
        });
        self.phase.store(phase as u8, Ordering::Relaxed);
        self.deadline_ms.store(at, Ordering::Relaxed);
        // A stored permit if the watcher is not waiting yet: it re-reads the deadline either way.
        self.changed.notify_one();
    }

    /// Bytes arrived: if the connection was idle, a request head has begun.
    fn bytes_arrived(&self) {
        if self.phase() == Phase::Idle {
            self.enter(Phase::Head, Some(self.head_timeout));
        }
    }

    /// The gateway has the request's head and serves it.
    pub fn serving(&self) {
        self.enter(Phase::Serving, None);
    }

    /// The answer is done; the connection waits for the next request.
    pub fn served(&self) {
        self.enter(Phase::Idle, Some(self.idle_timeout));
    }

    fn deadline(&self) -> Option<Instant> {
        match self.deadline_ms.load(Ordering::Relaxed) {
            NONE => None,
            ms => Some(self.epoch + Duration::from_millis(ms)),
        }
    }

    /// Resolves when the current phase's deadline passes, with that phase.
    pub async fn expired(&self) -> Phase {
        loop {
            match self.deadline() {
                None => self.changed.notified().await,
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {
                            if self.deadline().is_some_and(|d| d <= Instant::now()) {
                                return self.phase();
                            }
                        }
                        _ = self.changed.notified() => {}
                    }
                }
            }
        }
    }
}

/// A client stream that tells its [`ConnClock`] when bytes arrive.
#[derive(Debug)]
pub struct Clocked {
    inner: Stream,
    clock: Arc<ConnClock>,
}

impl Clocked {
    pub fn new(inner: Stream, clock: Arc<ConnClock>) -> Clocked {
        Clocked { inner, clock }
    }

    /// The clock of the connection a session's stream belongs to (HTTP/1.x only).
    pub fn clock_of(stream: &Stream) -> Option<&Arc<ConnClock>> {
        stream.as_any().downcast_ref::<Clocked>().map(|c| &c.clock)
    }
}

impl AsyncRead for Clocked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.clock.bytes_arrived();
        }
        polled
    }
}

impl AsyncWrite for Clocked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[async_trait]
impl Shutdown for Clocked {
    async fn shutdown(&mut self) {
        self.inner.shutdown().await
    }
}

impl UniqueID for Clocked {
    fn id(&self) -> UniqueIDType {
        self.inner.id()
    }
}

impl Ssl for Clocked {
    fn get_ssl(&self) -> Option<&pingora::protocols::tls::TlsRef> {
        self.inner.get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<pingora::protocols::tls::SslDigest>> {
        self.inner.get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<pingora::protocols::ALPN> {
        self.inner.selected_alpn_proto()
    }
}

impl GetTimingDigest for Clocked {
    fn get_timing_digest(&self) -> Vec<Option<pingora::protocols::TimingDigest>> {
        self.inner.get_timing_digest()
    }

    fn get_read_pending_time(&self) -> Duration {
        self.inner.get_read_pending_time()
    }

    fn get_write_pending_time(&self) -> Duration {
        self.inner.get_write_pending_time()
    }
}

impl GetProxyDigest for Clocked {
    fn get_proxy_digest(&self) -> Option<Arc<pingora::protocols::raw_connect::ProxyDigest>> {
        self.inner.get_proxy_digest()
    }

    fn set_proxy_digest(&mut self, digest: pingora::protocols::raw_connect::ProxyDigest) {
        self.inner.set_proxy_digest(digest)
    }
}

impl GetSocketDigest for Clocked {
    fn get_socket_digest(&self) -> Option<Arc<pingora::protocols::SocketDigest>> {
        self.inner.get_socket_digest()
    }

    fn set_socket_digest(&mut self, digest: pingora::protocols::SocketDigest) {
        self.inner.set_socket_digest(digest)
    }
}

#[async_trait]
impl Peek for Clocked {
    async fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        self.inner.try_peek(buf).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn each_phase_has_its_deadline() {
        let clock = ConnClock::new(Duration::from_secs(10), Duration::from_secs(60));
        // A new connection must send its head within the head timeout.
        let t0 = Instant::now();
        assert_eq!(clock.expired().await, Phase::Idle);
        assert_eq!(t0.elapsed().as_secs(), 10);

        // Serving has no deadline; once served, the idle timeout runs.
        clock.serving();
        let waited = tokio::time::timeout(Duration::from_secs(3600), clock.expired()).await;
        assert!(waited.is_err(), "serving must not expire");
        clock.served();
        let t1 = Instant::now();
        assert_eq!(clock.expired().await, Phase::Idle);
        assert_eq!(t1.elapsed().as_secs(), 60);

        // The first byte of a head starts the head deadline.
        clock.served();
        clock.bytes_arrived();
        let t2 = Instant::now();
        assert_eq!(clock.expired().await, Phase::Head);
        assert_eq!(t2.elapsed().as_secs(), 10);
    }
}
