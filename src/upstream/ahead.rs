//! Reading a provider's answer in as few reads as its size allows.
//!
//! Pingora's HTTP/1 client reads an answer's head into a 4 KiB buffer, and its client streams
//! have no read buffer of their own (`Stream::from(TcpStream)`: read capacity 0, and setting one
//! is private to Pingora). So an answer larger than 4 KiB that is already all in the socket (a
//! 20 KiB audio file, a JSON answer with a long list) takes two reads: the head's 4 KiB, then the
//! rest. Each read is a system call, and on loopback or in a datacenter a read that frees the
//! receive window can make the kernel send an acknowledgement as well.
//!
//! [`Ahead`] serves such a small read from one read of up to [`READ_AHEAD`] bytes into a
//! scratch buffer of the thread: the caller gets what it asked for and the rest is kept, in an
//! allocation of its own size, for the next read, which takes it without a system call. A read
//! of [`READ_AHEAD`] bytes or more (Pingora's body reads, 64 KiB) goes to the socket directly,
//! as before. Bytes are served in order and never held back: a read only ever returns what has
//! already arrived, so streamed answers flow as they did.
//!
//! What is kept belongs to the connection. A connection put back in the pool with bytes kept
//! (a provider that sent more than its answer) looks to Pingora's idle check exactly as one with
//! those bytes in the socket would: readable, so it is closed, never reused.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, ReadBuf};

/// The most one read takes ahead of a small read (Pingora's body buffer size).
pub(crate) const READ_AHEAD: usize = 64 * 1024;

thread_local! {
    /// Where a small read lands first, one per worker thread (made on its first use).
    static SCRATCH: RefCell<Box<[u8]>> = RefCell::new(Box::default());
}

/// Bytes read from a connection ahead of its caller.
#[derive(Debug, Default)]
pub(crate) struct Ahead {
    kept: BytesMut,
}

impl Ahead {
    /// Whether bytes are kept.
    pub(crate) fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    /// Copy kept bytes into `buf`, as many as fit; the memory goes once all are served, so an
    /// idle connection keeps none.
    fn serve(&mut self, buf: &mut ReadBuf<'_>) {
        let n = self.kept.len().min(buf.remaining());
        buf.put_slice(&self.kept[..n]);
        self.kept.advance(n);
        if self.kept.is_empty() {
            self.kept = BytesMut::new();
        }
    }

    /// Copy kept bytes into `buf`, as many as fit, keeping them.
    pub(crate) fn peek(&self, buf: &mut [u8]) -> usize {
        let n = self.kept.len().min(buf.len());
        buf[..n].copy_from_slice(&self.kept[..n]);
        n
    }

    /// Read from `inner` into `buf`: kept bytes first (no read), else a read of `inner` (through
    /// the thread's scratch buffer when `buf` has room for less than [`READ_AHEAD`]).
    pub(crate) fn poll_read<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        inner: &mut R,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        if !self.kept.is_empty() {
            self.serve(buf);
            return Poll::Ready(Ok(()));
        }
        if buf.remaining() >= READ_AHEAD {
            return Pin::new(inner).poll_read(cx, buf);
        }
        SCRATCH.with(|scratch| {
            // Only a read of another connection on this thread, inside this one, could find it
            // taken; none does, but such a read would just go to its socket directly.
            let Ok(mut scratch) = scratch.try_borrow_mut() else {
                return Pin::new(&mut *inner).poll_read(cx, buf);
            };
            if scratch.is_empty() {
                *scratch = vec![0; READ_AHEAD].into_boxed_slice();
            }
            let mut into = ReadBuf::new(&mut scratch[..]);
            ready!(Pin::new(&mut *inner).poll_read(cx, &mut into))?;
            let got = into.filled();
            let n = got.len().min(buf.remaining());
            buf.put_slice(&got[..n]);
            if got.len() > n {
                self.kept = BytesMut::from(&got[n..]);
            }
            Poll::Ready(Ok(()))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;
    use crate::common::io_wrap::testing::Sends;

    /// A connection read through an [`Ahead`], over the shared test stream that counts the reads
    /// reaching it.
    struct Counted {
        inner: Sends,
        ahead: Ahead,
    }

    impl AsyncRead for Counted {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            this.ahead.poll_read(&mut this.inner, cx, buf)
        }
    }

    fn counted(ours: DuplexStream) -> (Counted, Arc<AtomicUsize>) {
        let reads = Arc::new(AtomicUsize::new(0));
        let inner = Sends {
            inner: Box::new(ours),
            sends: Default::default(),
            vectored: true,
            reads: reads.clone(),
        };
        let c = Counted {
            inner,
            ahead: Ahead::default(),
        };
        (c, reads)
    }

    #[tokio::test]
    async fn a_small_read_takes_what_has_arrived_and_the_next_reads_are_served_without_a_read() {
        let (ours, mut provider) = tokio::io::duplex(1 << 20);
        let answer: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        provider.write_all(&answer).await.unwrap();
        let (mut reader, reads) = counted(ours);
        let mut head = [0; 4096];
        assert_eq!(reader.read(&mut head).await.unwrap(), 4096);
        let mut rest = vec![0; 64 * 1024];
        let n = reader.read(&mut rest).await.unwrap();
        assert_eq!(n, answer.len() - 4096);
        assert_eq!([&head[..], &rest[..n]].concat(), answer);
        assert_eq!(reads.load(Ordering::Relaxed), 1, "one read of the stream");
        assert!(reader.ahead.is_empty() && reader.ahead.kept.capacity() == 0);
    }

    #[tokio::test]
    async fn bytes_come_out_in_order_whatever_the_read_sizes() {
        let (ours, mut provider) = tokio::io::duplex(1 << 20);
        let sent: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        let writer = {
            let sent = sent.clone();
            tokio::spawn(async move {
                for piece in sent.chunks(7_001) {
                    provider.write_all(piece).await.unwrap();
                }
            })
        };
        let (mut reader, _) = counted(ours);
        let mut got = Vec::new();
        let sizes = [1, 4096, 70_000, 3, 64 * 1024, 100, 9_999];
        let mut i = 0;
        while got.len() < sent.len() {
            let mut buf = vec![0; sizes[i % sizes.len()]];
            let n = reader.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..n]);
            i += 1;
        }
        writer.await.unwrap();
        assert_eq!(got, sent);
    }

    #[tokio::test]
    async fn kept_bytes_are_peeked_first_and_an_idle_check_finds_them() {
        let (ours, mut provider) = tokio::io::duplex(1 << 20);
        provider.write_all(b"HTTP/1.1 200 OK\r\n").await.unwrap();
        let (mut reader, _) = counted(ours);
        let mut two = [0; 2];
        assert_eq!(reader.read(&mut two).await.unwrap(), 2);
        let mut next = [0; 6];
        assert_eq!(reader.ahead.peek(&mut next), 6);
        assert_eq!(&next, b"TP/1.1");
        // Pingora's idle check of a pooled connection reads one byte: data means "close it".
        let mut one = [0; 1];
        assert_eq!(reader.read(&mut one).await.unwrap(), 1);
        assert_eq!(&one, b"T");
    }

    #[tokio::test]
    async fn a_large_read_goes_to_the_stream_and_end_of_stream_is_reported() {
        let (ours, mut provider) = tokio::io::duplex(1 << 20);
        provider.write_all(b"abc").await.unwrap();
        drop(provider);
        let (mut reader, reads) = counted(ours);
        let mut buf = vec![0; READ_AHEAD];
        assert_eq!(reader.read(&mut buf).await.unwrap(), 3);
        assert!(reader.ahead.is_empty());
        let mut small = [0; 1];
        assert_eq!(reader.read(&mut small).await.unwrap(), 0, "end of stream");
        assert_eq!(reads.load(Ordering::Relaxed), 2);
    }
}
