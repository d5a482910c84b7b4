//! Taking a pooled HTTP/1 connection without a system call per request.
//!
//! Pingora's `TransportConnector::reused_stream` checks a pooled connection against its peer with
//! `Peer::matches_fd`, whose default asks the kernel for the socket's peer (`getpeername`) every
//! time a connection is reused: one system call per provider request (strace, issue 32). The
//! connection's own socket digest already holds that address, recorded by Pingora's connector when
//! it connected (`SocketDigest::peer_addr`, filled at connect), so the same check is made here
//! against the digest instead, in memory. Both checks guard the same thing — that a connection
//! found under a peer's reuse hash really goes to that peer's address — and a mismatch is dropped
//! (closed) exactly as Pingora drops it. A broken idle connection is still caught as before:
//! Pingora's pool watches every idle connection, and `reused_stream` still reads it once
//! (`test_reusable_stream`) before handing it out.
//!
//! Known loss, not ours to fix here: with more than one worker thread, Pingora 0.9.1's
//! `reused_stream` can drop a healthy pooled connection it is handing out (it takes the stream
//! with `Arc::try_unwrap` once the idle watcher's lock is free, which another worker may reach
//! before the watcher let go of its reference; cloudflare/pingora#998, open on 2026-11-29). The
//! request then connects afresh: correct, one handshake more.

use std::fmt;

use pingora::connectors::TransportConnector;
use pingora::protocols::Stream;
use pingora::upstreams::peer::{HttpPeer, Peer, PeerOptions, Proxy};

/// `peer` as the pool sees it, with the address check left to [`reused_stream`].
#[derive(Clone)]
struct Pooled<'a>(&'a HttpPeer);

impl fmt::Display for Pooled<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.0, f)
    }
}

impl Peer for Pooled<'_> {
    fn address(&self) -> &pingora::protocols::l4::socket::SocketAddr {
        self.0.address()
    }

    fn tls(&self) -> bool {
        self.0.tls()
    }

    fn sni(&self) -> &str {
        self.0.sni()
    }

    fn reuse_hash(&self) -> u64 {
        self.0.reuse_hash()
    }

    fn get_proxy(&self) -> Option<&Proxy> {
        self.0.get_proxy()
    }

    fn get_peer_options(&self) -> Option<&PeerOptions> {
        self.0.get_peer_options()
    }

    /// Checked by [`reused_stream`] against the connection's digest, without a system call.
    #[cfg(unix)]
    fn matches_fd<V: std::os::unix::io::AsRawFd>(&self, _fd: V) -> bool {
        true
    }
}

/// A pooled connection to `peer`, if there is one fit for reuse (see the module docs).
pub(crate) async fn reused_stream(h1: &TransportConnector, peer: &HttpPeer) -> Option<Stream> {
    if peer.get_proxy().is_some() {
        // Through a proxy the socket goes to the proxy: Pingora's own check knows that case.
        return h1.reused_stream(peer).await;
    }
    let stream = h1.reused_stream(&Pooled(peer)).await?;
    if connected_to(&stream, peer) {
        Some(stream)
    } else {
        log::error!("pooled connection for {peer} goes elsewhere; closed");
        None
    }
}

/// Whether `stream`'s socket was connected to `peer`'s address (as its connector recorded it).
fn connected_to(stream: &Stream, peer: &HttpPeer) -> bool {
    stream
        .get_socket_digest()
        .is_some_and(|d| d.peer_addr() == Some(peer.address()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pingora::connectors::ConnectorOptions;

    /// A connection made to one address is reused for a peer of that address, and pooled under
    /// another peer's hash it is refused (closed) rather than handed out.
    #[tokio::test]
    async fn a_pooled_connection_is_checked_against_its_recorded_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accept = tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let (s, _) = listener.accept().await.unwrap();
                held.push(s);
            }
        });
        let h1 = TransportConnector::new(Some(ConnectorOptions::new(4)));
        let peer = HttpPeer::new(addr, false, String::new());
        let (stream, reused) = h1.get_stream(&peer).await.unwrap();
        assert!(!reused);
        h1.release_stream(stream, peer.reuse_hash(), None);
        let again = reused_stream(&h1, &peer).await;
        assert!(again.is_some(), "the pooled connection is reused");

        // The same connection pooled under a peer at another address is not handed out.
        let other_addr: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
        let other = HttpPeer::new(other_addr, false, String::new());
        h1.release_stream(again.unwrap(), other.reuse_hash(), None);
        assert!(reused_stream(&h1, &other).await.is_none());
        accept.abort();
    }
}
