//! A provider connection that sends a request's head and body in one write, and reads an answer
//! in as few reads as its size allows (`upstream/ahead.rs`).
//!
//! Pingora's HTTP/1 client writes the request head and flushes it, then writes the body: two
//! `send`s per request on a client stream that Pingora leaves unbuffered. On loopback and in
//! a datacenter each `send` costs the sender the receiver's wake-up as well (the profile of the
//! peer benchmark put a third of the gateway's CPU in the kernel, most of it there), and each is
//! a packet of its own on the wire (and a TLS record of its own). [`Gathered`] holds the head
//! until the body comes and writes both at once: with `writev` when the stream can, else as one
//! buffer when the body is small. The bytes and their order are unchanged; only the number of
//! writes is.
//!
//! It follows Pingora's write pattern without being told where a request starts: what is written
//! after a read (or on a new connection) is a head, held until the next flush; the first flush only
//! marks the head complete; the next write (the body) goes out with it, and the next flush sends
//! whatever is still held. A request without a body is sent at `finish_body`'s flush.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pingora::protocols::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::ahead::Ahead;
use crate::common::io_wrap::Held;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Writes are a request head: held.
    Head,
    /// The head is complete (flushed once): the next write goes out with it.
    Body,
    /// Everything held has gone: writes pass straight through until the next read.
    Through,
}

/// A client stream to a provider that writes a request's head together with its body and reads
/// ahead of a small read.
#[derive(Debug)]
pub(crate) struct Gathered {
    inner: Stream,
    held: Held,
    phase: Phase,
    ahead: Ahead,
}

impl Gathered {
    pub(crate) fn new(inner: Stream) -> Gathered {
        Gathered {
            inner,
            held: Held::default(),
            phase: Phase::Head,
            ahead: Ahead::default(),
        }
    }
}

impl AsyncRead for Gathered {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // Pingora always flushes before it reads; this only keeps a request from being stranded
        // if it ever did not.
        ready!(this.held.poll_drain(&mut this.inner, cx))?;
        this.phase = Phase::Head;
        this.ahead.poll_read(&mut this.inner, cx, buf)
    }
}

impl AsyncWrite for Gathered {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match this.phase {
            Phase::Head => {
                this.held.hold(buf);
                Poll::Ready(Ok(buf.len()))
            }
            Phase::Body => {
                let bufs = [io::IoSlice::new(buf)];
                let n = ready!(this.held.poll_write_after(&mut this.inner, cx, &bufs))?;
                if this.held.is_empty() {
                    this.phase = Phase::Through;
                }
                Poll::Ready(Ok(n))
            }
            // (Behind anything still held, should a flush have been left unfinished.)
            Phase::Through => {
                this.held
                    .poll_write_after(&mut this.inner, cx, &[io::IoSlice::new(buf)])
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.phase == Phase::Head && !this.held.is_empty() {
            // The head's own flush: hold it for the body.
            this.phase = Phase::Body;
            return Poll::Ready(Ok(()));
        }
        if this.phase == Phase::Body {
            this.phase = Phase::Through;
        }
        this.held.poll_flush(&mut this.inner, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.held.poll_shutdown(&mut this.inner, cx)
    }
}

crate::common::io_wrap::delegate_stream_traits!(Gathered, inner, own_peek);

#[async_trait::async_trait]
impl pingora::protocols::Peek for Gathered {
    /// Bytes read ahead come first: they are the stream's next bytes.
    async fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        if self.ahead.is_empty() {
            pingora::protocols::Peek::try_peek(&mut *self.inner, buf).await
        } else {
            self.ahead.peek(buf);
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use pingora::http::RequestHeader;
    use pingora::protocols::http::v1::client::HttpSession;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;
    use crate::common::io_wrap::testing::Sends;

    type Log = Arc<Mutex<Vec<Vec<u8>>>>;

    fn connection(vectored: bool) -> (HttpSession, DuplexStream, Log) {
        let (session, provider, sends, _) = counted(vectored);
        (session, provider, sends)
    }

    /// [`connection`], with the count of reads that reached the connection.
    fn counted(vectored: bool) -> (HttpSession, DuplexStream, Log, Arc<AtomicUsize>) {
        let (ours, provider) = tokio::io::duplex(1 << 20);
        let sends = Log::default();
        let reads = Arc::new(AtomicUsize::new(0));
        let stream = Sends {
            inner: Box::new(ours),
            sends: sends.clone(),
            vectored,
            reads: reads.clone(),
        };
        let session = HttpSession::new(Box::new(Gathered::new(Box::new(stream))));
        (session, provider, sends, reads)
    }

    fn header(method: &str, body: usize) -> Box<RequestHeader> {
        let mut h = RequestHeader::build(method, b"/v2/rerank", None).unwrap();
        h.insert_header("Host", "provider.test").unwrap();
        if method != "GET" {
            h.insert_header("Content-Length", body.to_string()).unwrap();
        }
        Box::new(h)
    }

    /// Sends one request the way `upstream::exchange` does and answers it; returns what the
    /// provider received.
    async fn exchange(
        session: &mut HttpSession,
        provider: &mut DuplexStream,
        method: &str,
        body: &[u8],
    ) -> Vec<u8> {
        session
            .write_request_header(header(method, body.len()))
            .await
            .unwrap();
        if !body.is_empty() {
            session.write_body(body).await.unwrap();
        }
        session.finish_body().await.unwrap();
        let mut got = vec![0; 64 * 1024];
        let mut n = 0;
        while !got[..n].ends_with(body) || !got[..n].windows(4).any(|w| w == b"\r\n\r\n") {
            n += provider.read(&mut got[n..]).await.unwrap();
        }
        got.truncate(n);
        provider
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .await
            .unwrap();
        session.read_response().await.unwrap();
        while session.read_body_bytes().await.unwrap().is_some() {}
        got
    }

    #[tokio::test]
    async fn a_head_and_its_body_go_in_one_send_on_plain_and_tls_streams() {
        for vectored in [true, false] {
            let (mut session, mut provider, sends) = connection(vectored);
            let got = exchange(&mut session, &mut provider, "POST", b"{\"query\":\"q\"}").await;
            let sends = sends.lock().unwrap().clone();
            assert_eq!(sends.len(), 1, "vectored {vectored}: {sends:?}");
            assert_eq!(sends[0], got, "the provider gets exactly what was sent");
            assert!(got.starts_with(b"POST /v2/rerank HTTP/1.1\r\n"));
            assert!(got.ends_with(b"\r\n\r\n{\"query\":\"q\"}"));
        }
    }

    #[tokio::test]
    async fn each_request_on_a_kept_connection_is_gathered_and_a_get_goes_whole() {
        let (mut session, mut provider, sends) = connection(true);
        // As `Upstream::release_h1` and the pool do: the stream is kept, a new session takes it.
        async fn kept(mut session: HttpSession) -> HttpSession {
            session.respect_keepalive();
            let stream = session.reuse().await.unwrap();
            assert!(stream.as_any().is::<Gathered>());
            HttpSession::new(stream)
        }
        exchange(&mut session, &mut provider, "POST", b"first").await;
        let mut session = kept(session).await;
        exchange(&mut session, &mut provider, "POST", b"second").await;
        let mut session = kept(session).await;
        let got = exchange(&mut session, &mut provider, "GET", b"").await;
        let sends = sends.lock().unwrap().clone();
        assert_eq!(sends.len(), 3, "{sends:?}");
        assert!(sends[1].ends_with(b"\r\n\r\nsecond"));
        assert_eq!(sends[2], got);
        assert!(got.starts_with(b"GET /v2/rerank") && got.ends_with(b"\r\n\r\n"));
    }

    #[tokio::test]
    async fn a_big_body_on_a_tls_stream_follows_its_head_uncopied_and_intact() {
        let (mut session, mut provider, sends) = connection(false);
        let body: Vec<u8> = (0..crate::common::io_wrap::JOIN_BYTES + 100)
            .map(|i| b'a' + (i % 26) as u8)
            .collect();
        let got = exchange(&mut session, &mut provider, "POST", &body).await;
        let sends = sends.lock().unwrap().clone();
        assert_eq!(sends.len(), 2, "the head, then the body");
        assert_eq!(sends.concat(), got);
        assert!(got.ends_with(&body));
    }
    /// An answer of 20 KiB, all arrived: Pingora reads its head with a 4 KiB buffer, yet the
    /// connection is read once; on the kept connection the next answer is read whole again, and
    /// a provider that sends more than its answer gets its connection closed, not reused.
    #[tokio::test]
    async fn an_answer_that_has_arrived_is_read_in_one_read() {
        let (mut session, mut provider, _, reads) = counted(true);
        let body: Vec<u8> = (0..20 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
        let mut answer =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
        answer.extend_from_slice(&body);
        for round in 0..2 {
            session
                .write_request_header(header("GET", 0))
                .await
                .unwrap();
            session.finish_body().await.unwrap();
            let mut got = vec![0; 4096];
            let _ = provider.read(&mut got).await.unwrap();
            provider.write_all(&answer).await.unwrap();
            let before = reads.load(Ordering::Relaxed);
            session.read_response().await.unwrap();
            let mut read = Vec::new();
            while let Some(piece) = session.read_body_bytes().await.unwrap() {
                read.extend_from_slice(&piece);
            }
            assert_eq!(read, body, "round {round}");
            assert_eq!(reads.load(Ordering::Relaxed) - before, 1, "round {round}");
            session.respect_keepalive();
            let stream = session.reuse().await.unwrap();
            session = HttpSession::new(stream);
        }
        // More than the answer (the start of another): Pingora sees the bytes after the body
        // and does not reuse the connection, as when they were still in the socket.
        session
            .write_request_header(header("GET", 0))
            .await
            .unwrap();
        session.finish_body().await.unwrap();
        let _ = provider.read(&mut vec![0; 4096]).await.unwrap();
        provider
            .write_all(&[&answer[..], b"HTTP/1.1 200 OK\r\n"].concat())
            .await
            .unwrap();
        session.read_response().await.unwrap();
        while session.read_body_bytes().await.unwrap().is_some() {}
        session.respect_keepalive();
        assert!(session.reuse().await.is_none());
    }
}
