//! What a wrapper around a Pingora [`Stream`] needs besides reading
//! and writing: Pingora's per-connection traits (`Shutdown`, `UniqueID`, `Ssl`, the digests,
//! `Peek`), each passed to the wrapped stream.
//!
//! The gateway wraps streams in two places (the client connection's clock, `gateway/client_conn.rs`;
//! the provider connection's gathered writes, `upstream/gather.rs`); both change only how bytes
//! move, so everything else is the inner stream's. Both hold a message's head back to send it with
//! the first write after it ([`Held`]).

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pingora::protocols::Stream;
use tokio::io::AsyncWrite;

/// Implements Pingora's connection traits for `$ty` by passing each call to its field `$inner`
/// (a `Stream`, or anything that derefs to a Pingora `IO`).
macro_rules! delegate_stream_traits {
    ($ty:ty, $inner:ident) => {
        $crate::common::io_wrap::delegate_stream_traits!($ty, $inner, own_peek);

        #[async_trait::async_trait]
        impl pingora::protocols::Peek for $ty {
            async fn try_peek(&mut self, buf: &mut [u8]) -> std::io::Result<bool> {
                pingora::protocols::Peek::try_peek(&mut *self.$inner, buf).await
            }
        }
    };
    // All but `Peek`, for a wrapper that holds bytes read ahead of its caller and so peeks itself.
    ($ty:ty, $inner:ident, own_peek) => {
        #[async_trait::async_trait]
        impl pingora::protocols::Shutdown for $ty {
            async fn shutdown(&mut self) {
                pingora::protocols::Shutdown::shutdown(&mut *self.$inner).await
            }
        }

        impl pingora::protocols::UniqueID for $ty {
            fn id(&self) -> pingora::protocols::UniqueIDType {
                pingora::protocols::UniqueID::id(&*self.$inner)
            }
        }

        impl pingora::protocols::Ssl for $ty {
            fn get_ssl(&self) -> Option<&pingora::protocols::tls::TlsRef> {
                pingora::protocols::Ssl::get_ssl(&*self.$inner)
            }

            fn get_ssl_digest(&self) -> Option<std::sync::Arc<pingora::protocols::tls::SslDigest>> {
                pingora::protocols::Ssl::get_ssl_digest(&*self.$inner)
            }

            fn selected_alpn_proto(&self) -> Option<pingora::protocols::ALPN> {
                pingora::protocols::Ssl::selected_alpn_proto(&*self.$inner)
            }
        }

        impl pingora::protocols::GetTimingDigest for $ty {
            fn get_timing_digest(&self) -> Vec<Option<pingora::protocols::TimingDigest>> {
                pingora::protocols::GetTimingDigest::get_timing_digest(&*self.$inner)
            }

            fn get_read_pending_time(&self) -> std::time::Duration {
                pingora::protocols::GetTimingDigest::get_read_pending_time(&*self.$inner)
            }

            fn get_write_pending_time(&self) -> std::time::Duration {
                pingora::protocols::GetTimingDigest::get_write_pending_time(&*self.$inner)
            }
        }

        impl pingora::protocols::GetProxyDigest for $ty {
            fn get_proxy_digest(
                &self,
            ) -> Option<std::sync::Arc<pingora::protocols::raw_connect::ProxyDigest>> {
                pingora::protocols::GetProxyDigest::get_proxy_digest(&*self.$inner)
            }

            fn set_proxy_digest(&mut self, digest: pingora::protocols::raw_connect::ProxyDigest) {
                pingora::protocols::GetProxyDigest::set_proxy_digest(&mut *self.$inner, digest)
            }
        }

        impl pingora::protocols::GetSocketDigest for $ty {
            fn get_socket_digest(
                &self,
            ) -> Option<std::sync::Arc<pingora::protocols::SocketDigest>> {
                pingora::protocols::GetSocketDigest::get_socket_digest(&*self.$inner)
            }

            fn set_socket_digest(&mut self, digest: pingora::protocols::SocketDigest) {
                pingora::protocols::GetSocketDigest::set_socket_digest(&mut *self.$inner, digest)
            }
        }
    };
}

pub(crate) use delegate_stream_traits;

/// Bytes written to a stream but held back to go out with the next write: one `writev` where the
/// stream writes vectored (plain TCP), else one buffer when the next write is small (TLS, where
/// each write is a record). Used by the wrappers that send a message's head with its body
/// (`upstream/gather.rs` for requests, `gateway/client_conn.rs` for answers).
#[derive(Debug, Default)]
pub(crate) struct Held {
    bytes: Vec<u8>,
    /// Bytes of `bytes` already written.
    sent: usize,
}

/// A next write up to this size is copied behind what is held when the stream cannot write
/// vectored: one copy of a few KiB costs far less than a second record and `send`.
pub(crate) const JOIN_BYTES: usize = 16 * 1024;
/// Capacity kept once written (a head's worth), so an idle connection holds no more than this.
const KEEP_BYTES: usize = 2 * 1024;

impl Held {
    pub(crate) fn is_empty(&self) -> bool {
        self.sent == self.bytes.len()
    }

    /// Hold `buf` (it counts as written).
    pub(crate) fn hold(&mut self, buf: &[u8]) {
        self.bytes.extend_from_slice(buf);
    }

    /// Write out what is held; `Ready(Ok)` once all of it has gone.
    pub(crate) fn poll_drain(
        &mut self,
        inner: &mut Stream,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        while self.sent < self.bytes.len() {
            let n = ready!(Pin::new(&mut *inner).poll_write(cx, &self.bytes[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.emptied();
        Poll::Ready(Ok(()))
    }

    /// Send what is held, then flush `inner`.
    pub(crate) fn poll_flush(
        &mut self,
        inner: &mut Stream,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(inner, cx))?;
        Pin::new(inner).poll_flush(cx)
    }

    /// Send what is held, then shut `inner` down.
    pub(crate) fn poll_shutdown(
        &mut self,
        inner: &mut Stream,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(inner, cx))?;
        Pin::new(inner).poll_shutdown(cx)
    }

    fn emptied(&mut self) {
        self.bytes.clear();
        self.sent = 0;
        if self.bytes.capacity() > KEEP_BYTES {
            self.bytes = Vec::new();
        }
    }

    /// Write `bufs` after what is held, together where possible: returns how much of `bufs` was
    /// taken (what a vectored write took of the held bytes is taken off first). On a stream that
    /// cannot write vectored, small `bufs` are copied behind the held bytes and everything goes
    /// at the next flush.
    pub(crate) fn poll_write_after(
        &mut self,
        inner: &mut Stream,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if !inner.is_write_vectored() {
            if !self.is_empty() && self.bytes.len() + total <= JOIN_BYTES {
                // Taken now, sent at the next flush (or write past this size).
                for buf in bufs {
                    self.hold(buf);
                }
                return Poll::Ready(Ok(total));
            }
            ready!(self.poll_drain(inner, cx))?;
            return Pin::new(inner).poll_write_vectored(cx, bufs);
        }
        // The held bytes and as many of `bufs` as fit one `writev` here (a write may take less
        // than it is given).
        const PARTS: usize = 8;
        loop {
            let head = &self.bytes[self.sent..];
            if head.is_empty() {
                self.emptied();
                return Pin::new(inner).poll_write_vectored(cx, bufs);
            }
            let mut parts = [IoSlice::new(&[]); PARTS];
            parts[0] = IoSlice::new(head);
            let taken = bufs.len().min(PARTS - 1);
            parts[1..=taken].copy_from_slice(&bufs[..taken]);
            let n = ready!(Pin::new(&mut *inner).poll_write_vectored(cx, &parts[..=taken]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            if n <= head.len() {
                self.sent += n;
                continue;
            }
            let of_bufs = n - head.len();
            self.emptied();
            return Poll::Ready(Ok(of_bufs));
        }
    }
}

/// A stream for tests that records every write it is handed, as the socket would see it.
#[cfg(test)]
pub(crate) mod testing {
    use std::io::{self, IoSlice};
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::{ready, Context, Poll};

    use pingora::protocols::Stream;
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

    /// A stream that keeps what each write call handed it, vectored or not, as the socket would
    /// see it: one entry per `send`; and counts the reads that returned, one per `recv`.
    #[derive(Debug)]
    pub(crate) struct Sends {
        pub inner: Stream,
        pub sends: Arc<Mutex<Vec<Vec<u8>>>>,
        pub vectored: bool,
        pub reads: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl AsyncRead for Sends {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
            if poll.is_ready() {
                this.reads
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            poll
        }
    }

    impl AsyncWrite for Sends {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.poll_write_vectored(cx, &[IoSlice::new(buf)])
        }

        fn poll_write_vectored(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            let bytes: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &bytes))?;
            this.sends.lock().unwrap().push(bytes[..n].to_vec());
            Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            self.vectored
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_flush(cx)
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
        }
    }

    crate::common::io_wrap::delegate_stream_traits!(Sends, inner);
}
