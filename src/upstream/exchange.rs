//! One exchange with a provider over Pingora's pooled client connector.
//!
//! Switchyard owns the upstream exchange instead of using Pingora's proxy path (docs/architecture.md, "The upstream exchange": the
//! proxy path can only re-send request bodies up to 64 KiB). [`Upstream::send`] writes the native
//! request and reads the response header; the body is then read chunk by chunk ([`Response::chunk`])
//! for streaming, or whole ([`Response::read_all`]) for JSON. A connection goes back to the pool only
//! after its body was read to the end; one abandoned mid-body is closed. A WebSocket answer
//! (`upstream/socket.rs`: OpenAI's Realtime API) is a [`Response`] too, its body the incoming text
//! messages, one per chunk.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use pingora::connectors::http::Connector;
use pingora::connectors::TransportConnector;
use pingora::http::RequestHeader;
use pingora::protocols::http::client::HttpSession;
use pingora::protocols::http::v1::client::HttpSession as H1Session;
use pingora::protocols::Stream;
use pingora::upstreams::peer::{HttpPeer, Peer, PeerOptions};
use pingora::{Error as PError, ErrorType};

use crate::common::error::UpstreamError;
use crate::common::error::UpstreamErrorKind;
use crate::common::native::NativeRequest;
use crate::common::native::PollRequest;
use crate::metrics::Metrics;
use crate::upstream::dns::Resolver;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::gather::Gathered;
use crate::upstream::health::{Clock, EjectionPolicy, Health};
use crate::upstream::provider::{Provider, Signable};
use crate::upstream::retry::RetryPolicy;

/// Makes a request's header again (see [`Upstream::exchange_at`]).
pub(crate) type Rebuild<'a> = &'a (dyn Fn() -> pingora::Result<RequestHeader> + Sync);

/// The shared client side: connection pool, resolver and retry policy.
pub struct Upstream {
    /// Connections to HTTP/1.1-only peers (every provider today: no peer offers h2 in its ALPN),
    /// used directly (as Pingora's own `v1::Connector` does) so that the futures of the common
    /// paths stay small: see [`Upstream::session_for`] and [`Response::release`].
    h1: TransportConnector,
    /// Peers that may speak HTTP/2.
    connector: Connector,
    resolver: Resolver,
    /// The back-off between attempts; a configuration reload replaces it (read once per retry).
    pub retry: arc_swap::ArcSwap<RetryPolicy>,
    /// Where attempts are counted (the engine records through it; empty without metrics).
    pub metrics: Metrics,
    /// Targets' health: which to avoid while they fail (kept across configuration reloads).
    pub health: Health,
}

/// A provider's answer whose header has arrived and whose body is still to be read.
pub struct Response<'u> {
    upstream: &'u Upstream,
    wire: Wire,
    provider: String,
    pub status: u16,
}

/// What a [`Response`]'s body is read from.
// The HTTP case is the large one and the one every request takes: boxing it would cost an
// allocation per exchange; the rare WebSocket is boxed instead.
#[allow(clippy::large_enum_variant)]
enum Wire {
    /// An HTTP answer on a connection of the pool.
    Http {
        session: HttpSession,
        peer: HttpPeer,
    },
    /// An open WebSocket (boxed: rare, and the HTTP case is the one every future holds).
    Socket(Box<super::socket::Socket>),
}

impl Upstream {
    pub fn new(
        retry: RetryPolicy,
        dns_ttl: Duration,
        ejection: EjectionPolicy,
        metrics: Metrics,
    ) -> Upstream {
        Upstream {
            health: Health::new(ejection, Clock::System, metrics.clone()),
            h1: TransportConnector::new(None),
            connector: Connector::new(None),
            resolver: Resolver::new(dns_ttl),
            retry: arc_swap::ArcSwap::from_pointee(retry),
            metrics,
        }
    }

    /// Send `req` to `provider` (the endpoint for `region`) and wait for the response header.
    pub async fn send(
        &self,
        provider: &Provider,
        region: &str,
        req: &NativeRequest,
    ) -> Result<Response<'_>, UpstreamError> {
        let ep = provider.endpoint(region).ok_or_else(|| {
            UpstreamError::new(
                UpstreamErrorKind::Connect,
                &provider.name,
                "no base_url configured",
            )
        })?;
        let path = ep.path(&req.path);
        provider.credentials_ready().await?;
        let build = || build_header(provider, ep.authority.as_str(), &path, req);
        let header = build().map_err(|e| classify(&provider.name, &e))?;
        self.exchange(&provider.name, ep, header, &build, &req.body)
            .await
    }

    /// Read a provider task's state: a request to its API, or a `GET` of the polling URL its
    /// answer gave (which the adapter checked is the provider's own), with its credentials.
    pub async fn poll(
        &self,
        provider: &Provider,
        region: &str,
        req: &PollRequest,
    ) -> Result<Response<'_>, UpstreamError> {
        match req {
            PollRequest::Api(native) => self.send(provider, region, native).await,
            PollRequest::Url(url) => {
                let bad = |m: String| {
                    UpstreamError::new(UpstreamErrorKind::BadResponse, &provider.name, m)
                };
                let (ep, path) = result_endpoint(provider, region, url).map_err(bad)?;
                let get = NativeRequest::get(path.clone());
                let build = || build_header(provider, ep.authority.as_str(), &path, &get);
                let header = build().map_err(|e| classify(&provider.name, &e))?;
                self.exchange(&provider.name, &ep, header, &build, &get.body)
                    .await
            }
        }
    }

    /// Download a result file a provider's answer points to (`GET url`, no credentials: the
    /// provider key is only ever sent to the provider's API). Only the provider's own hosts and its
    /// configured `result_hosts` are reachable this way.
    pub async fn fetch(
        &self,
        provider: &Provider,
        url: &str,
    ) -> Result<Response<'_>, UpstreamError> {
        let bad = |m: String| UpstreamError::new(UpstreamErrorKind::BadResponse, &provider.name, m);
        let (ep, path) = result_endpoint(provider, "", url).map_err(bad)?;
        if !provider.result_host_allowed(&ep.host) {
            return Err(bad(format!(
                "result host {} is not one of the provider's result hosts",
                ep.host
            )));
        }
        let build = || -> pingora::Result<RequestHeader> {
            let mut h = RequestHeader::build(http::Method::GET, path.as_bytes(), Some(2))?;
            h.insert_header(http::header::HOST, ep.authority.as_str())?;
            Ok(h)
        };
        let h = build().map_err(|e| classify(&provider.name, &e))?;
        let resp = self
            .exchange(&provider.name, &ep, h, &build, &Bytes::new())
            .await?;
        if !(200..300).contains(&resp.status) {
            let status = resp.status;
            resp.release_unread().await;
            return Err(UpstreamError::new(
                UpstreamErrorKind::BadResponse,
                &provider.name,
                format!("result file download answered HTTP {status}"),
            ));
        }
        Ok(resp)
    }

    /// Resolved addresses of `host:port` (cached).
    pub(crate) async fn resolve(
        &self,
        host: &str,
        port: u16,
    ) -> Result<std::sync::Arc<[std::net::SocketAddr]>, String> {
        self.resolver.resolve(host, port).await
    }

    /// One request/response-header exchange with `ep`.
    async fn exchange(
        &self,
        provider: &str,
        ep: &Endpoint,
        header: RequestHeader,
        rebuild: Rebuild<'_>,
        body: &Bytes,
    ) -> Result<Response<'_>, UpstreamError> {
        let addrs = self
            .resolver
            .resolve(&ep.host, ep.port)
            .await
            .map_err(|m| UpstreamError::new(UpstreamErrorKind::Connect, provider, m))?;
        self.exchange_at(provider, ep, addrs[0], header, rebuild, body)
            .await
    }

    /// One exchange with `ep` at an address already resolved (and, for caller-given URLs, checked).
    /// `header` is sent; `rebuild` makes it again only for the one fresh try after a reused
    /// connection failed (a header is consumed by sending, and copying it for every request in
    /// case of that retry cost 3.4k instructions per request, callgrind).
    pub(crate) async fn exchange_at(
        &self,
        provider: &str,
        ep: &Endpoint,
        addr: std::net::SocketAddr,
        header: RequestHeader,
        rebuild: Rebuild<'_>,
        body: &Bytes,
    ) -> Result<Response<'_>, UpstreamError> {
        let mut peer = HttpPeer::new(addr, ep.tls, ep.host.clone());
        peer.options = ep.options.clone();
        peer.group_key = ep.pool_group;

        // A pooled connection may have been closed by the provider while idle; a failure on a
        // reused connection before any answer is worth one immediate fresh try.
        let mut fresh_retry_left = true;
        let mut header = Some(header);
        loop {
            let header = match header.take() {
                Some(h) => h,
                None => rebuild().map_err(|e| classify(provider, &e))?,
            };
            let (mut session, reused) = self
                .session_for(&peer)
                .await
                .map_err(|e| classify(provider, &e))?;
            // The connector applies only connect timeouts; reads and writes are the session's.
            session.set_read_timeout(peer.options.read_timeout);
            session.set_write_timeout(peer.options.write_timeout);
            match write_and_read_header(&mut session, header, body).await {
                Ok(status) => {
                    return Ok(Response {
                        upstream: self,
                        wire: Wire::Http { session, peer },
                        provider: provider.to_string(),
                        status,
                    })
                }
                Err(e) if reused && fresh_retry_left && !is_timeout(&e) => {
                    log::debug!("{provider}: reused connection failed ({e}); reconnecting");
                    fresh_retry_left = false;
                }
                Err(e) => return Err(classify(provider, &e)),
            }
        }
    }
}

impl Upstream {
    /// Open `req`'s WebSocket (`upstream/socket.rs`) and send its messages: its answer's body is
    /// the provider's incoming messages. Its status is the handshake's 101.
    pub(crate) async fn send_socket(
        &self,
        provider: &Provider,
        region: &str,
        req: &crate::common::native::SocketRequest,
    ) -> Result<Response<'_>, UpstreamError> {
        let socket = self.open(provider, region, req).await?;
        Ok(Response {
            upstream: self,
            wire: Wire::Socket(Box::new(socket)),
            provider: provider.name.clone(),
            status: 101,
        })
    }

    /// Connect to `provider`'s endpoint for `region` as to an HTTP/1 peer (the account's CA,
    /// resolver and timeouts; ALPN http/1.1 only), then open `req`'s WebSocket on that stream.
    async fn open(
        &self,
        provider: &Provider,
        region: &str,
        req: &crate::common::native::SocketRequest,
    ) -> Result<super::socket::Socket, UpstreamError> {
        let name = provider.name.as_str();
        let ep = provider.endpoint(region).ok_or_else(|| {
            UpstreamError::new(UpstreamErrorKind::Connect, name, "no base_url configured")
        })?;
        provider.credentials_ready().await?;
        let addrs = self
            .resolve(&ep.host, ep.port)
            .await
            .map_err(|m| UpstreamError::new(UpstreamErrorKind::Connect, name, m))?;
        let mut peer = HttpPeer::new(addrs[0], ep.tls, ep.host.clone());
        peer.options = ep.options.clone();
        peer.options.alpn = pingora::protocols::ALPN::H1;
        peer.group_key = ep.pool_group;
        let stream = Box::pin(self.h1.new_stream(&peer))
            .await
            .map_err(|e| classify(name, &e))?;
        super::socket::handshake(stream, provider, ep, req).await
    }

    /// A connection to `peer`: a pooled one when there is one, else a new one.
    ///
    /// Why not just the connector's `get_http_session`: its future holds the connect and TLS
    /// handshake state (8.8 KB), and held inline it made every future around an exchange, up
    /// to the request's own, that much bigger; those futures are copied when they are boxed or
    /// collected, several times per request (benches/README.md, "Profiling"). A pooled
    /// connection is found with a small future; only a new connection pays for the connect,
    /// boxed.
    async fn session_for(&self, peer: &HttpPeer) -> pingora::Result<(HttpSession, bool)> {
        if !h1_only(peer) {
            return Box::pin(self.connector.get_http_session(peer)).await;
        }
        if let Some(stream) = super::reuse::reused_stream(&self.h1, peer).await {
            return Ok((
                HttpSession::H1(H1Session::new_with_options(gathered(stream), peer)),
                true,
            ));
        }
        let (stream, reused) = Box::pin(self.h1.get_stream(peer)).await?;
        Ok((
            HttpSession::H1(H1Session::new_with_options(gathered(stream), peer)),
            reused,
        ))
    }

    /// Give back an HTTP/1 connection: to the pool (under `key`, its peer's reuse hash) when
    /// its answer was read to the end and it can be reused, closed otherwise. What Pingora's
    /// `v1::Connector::release_http_session` does, holding only the session.
    async fn release_h1(&self, mut h1: H1Session, key: u64, idle: Option<Duration>) {
        if !h1.is_body_done() {
            h1.shutdown().await;
            return;
        }
        h1.respect_keepalive();
        if let Some(stream) = h1.reuse().await {
            self.h1.release_stream(stream, key, idle);
        }
    }

    /// [`Upstream::release_h1`] for a connection of the mixed connector (HTTP/2 capable).
    async fn release_other(&self, mut session: HttpSession, peer: HttpPeer) {
        if !session.response_done() {
            session.shutdown().await;
            return;
        }
        let idle = peer.options.idle_timeout;
        self.connector
            .release_http_session(session, &peer, idle)
            .await
    }
}

/// `stream`, sending each request's head with its body ([`Gathered`]). A pooled connection is
/// one already.
fn gathered(stream: Stream) -> Stream {
    if stream.as_any().is::<Gathered>() {
        stream
    } else {
        Box::new(Gathered::new(stream))
    }
}

/// Whether `peer` speaks HTTP/1.x only (no h2 in its ALPN): its connections live in the
/// `h1` transport's pool, from the first connect to their release.
fn h1_only(peer: &HttpPeer) -> bool {
    peer.get_peer_options()
        .is_none_or(|o| o.alpn.get_max_http_version() == 1)
}

/// A URL from a provider's answer (a result file, a polling URL), reached with the provider's
/// connection settings: its timeouts and the CA it trusts.
fn result_endpoint(
    provider: &Provider,
    region: &str,
    url: &str,
) -> Result<(Endpoint, String), String> {
    match provider.endpoint(region) {
        Some(base) => Endpoint::parse_result_url(url, &base.options, base.pool_group),
        None => Endpoint::parse_result_url(url, &PeerOptions::new(), 0),
    }
}

fn build_header(
    provider: &Provider,
    authority: &str,
    path: &str,
    req: &NativeRequest,
) -> pingora::Result<RequestHeader> {
    let mut h = RequestHeader::build(
        req.method.clone(),
        path.as_bytes(),
        Some(6 + req.headers.len()),
    )?;
    h.insert_header(http::header::HOST, authority)?;
    // A GET (a task poll) carries no body, so no body headers either.
    let has_body = req.method != http::Method::GET;
    if has_body {
        h.insert_header(http::header::CONTENT_TYPE, req.content_type.as_ref())?;
        h.insert_header(http::header::CONTENT_LENGTH, req.body.len().to_string())?;
    }
    let signable = Signable {
        method: &req.method,
        authority,
        path,
        content_type: has_body.then_some(req.content_type.as_ref()),
        body: &req.body,
    };
    let auth = provider
        .auth_headers(&signable)
        .map_err(|m| PError::explain(ErrorType::InternalError, m))?;
    for (name, value) in auth.iter() {
        h.insert_header(name.clone(), value.clone())?;
    }
    for (name, value) in &req.headers {
        h.insert_header(name.clone(), value.clone())?;
    }
    Ok(h)
}

async fn write_and_read_header(
    session: &mut HttpSession,
    header: RequestHeader,
    body: &Bytes,
) -> pingora::Result<u16> {
    session.write_request_header(Box::new(header)).await?;
    if !body.is_empty() {
        session.write_request_body(body.clone(), true).await?;
    }
    session.finish_request_body().await?;
    session.read_response_header().await?;
    session
        .response_header()
        .map(|h| h.status.as_u16())
        .ok_or_else(|| PError::explain(ErrorType::H1Error, "no response header"))
}

fn is_timeout(e: &PError) -> bool {
    matches!(
        e.etype(),
        ErrorType::ConnectTimedout
            | ErrorType::ReadTimedout
            | ErrorType::WriteTimedout
            | ErrorType::TLSHandshakeTimedout
    )
}

/// Map a Pingora client error to the gateway's classification.
pub(super) fn classify(provider: &str, e: &PError) -> UpstreamError {
    if let Some(reason) = certificate_refusal(e) {
        log::warn!("{provider}: TLS certificate refused: {e}");
        return UpstreamError::certificate_refused(provider, reason);
    }
    let kind = match e.etype() {
        ErrorType::ConnectTimedout
        | ErrorType::ReadTimedout
        | ErrorType::WriteTimedout
        | ErrorType::TLSHandshakeTimedout => UpstreamErrorKind::Timeout,
        ErrorType::ConnectRefused
        | ErrorType::ConnectNoRoute
        | ErrorType::ConnectError
        | ErrorType::ConnectProxyFailure
        | ErrorType::TLSHandshakeFailure
        | ErrorType::TLSWantX509Lookup
        | ErrorType::InvalidCert
        | ErrorType::HandshakeError
        | ErrorType::BindError
        | ErrorType::SocketError => UpstreamErrorKind::Connect,
        _ => UpstreamErrorKind::Failure,
    };
    UpstreamError::new(kind, provider, e.etype().as_str().to_string())
}

/// Why the provider's certificate was refused, when that is what failed the TLS handshake.
///
/// Pingora keeps only the text of rustls's error (`… invalid peer certificate: <reason> …`), so
/// the reason is read from it; the known reasons are named in plain words and anything else is
/// given as rustls put it. Only handshake failures are read: a certificate refused is always one.
fn certificate_refusal(e: &PError) -> Option<String> {
    if !matches!(e.etype(), ErrorType::TLSHandshakeFailure) {
        return None;
    }
    let text = e.to_string();
    let (_, rest) = text.split_once("invalid peer certificate: ")?;
    // The reason ends where Pingora appends the SNI or the next cause.
    let reason = rest
        .split([',', ';'])
        .next()
        .unwrap_or(rest)
        .split(" cause:")
        .next()
        .unwrap_or(rest)
        .trim();
    let has = |needles: &[&str]| needles.iter().any(|n| reason.contains(n));
    let plain = if has(&["UnknownIssuer"]) {
        "it is not signed by a trusted certificate authority (unknown issuer)".to_string()
    } else if has(&["certificate expired", "Expired"]) {
        "it has expired".to_string()
    } else if has(&["not valid yet", "NotValidYet"]) {
        "it is not valid yet".to_string()
    } else if has(&["not valid for name", "NotValidForName"]) {
        "it is not valid for the provider's host name".to_string()
    } else if has(&["Revoked"]) {
        "it has been revoked".to_string()
    } else if has(&["BadSignature"]) {
        "its signature is invalid".to_string()
    } else {
        let mut raw = reason.to_string();
        if raw.len() > 120 {
            let mut cut = 120;
            while !raw.is_char_boundary(cut) {
                cut -= 1;
            }
            raw.truncate(cut);
        }
        format!("it is invalid ({raw})")
    };
    Some(plain)
}

/// A release off the common path (a mixed-connector session, a WebSocket), boxed.
type Rare<'u> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'u>>;

impl<'u> Response<'u> {
    /// The provider (by name) this answer came from.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The answer's headers (none for a WebSocket: its messages are the answer).
    pub fn headers(&self) -> Option<&http::HeaderMap> {
        match &self.wire {
            Wire::Http { session, .. } => session.response_header().map(|h| &h.headers),
            Wire::Socket(_) => None,
        }
    }

    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.headers()?.get(name)?.to_str().ok()
    }

    /// The next piece of the body (a WebSocket's next text message), `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, UpstreamError> {
        match &mut self.wire {
            Wire::Http { session, .. } => session
                .read_response_body()
                .await
                .map_err(|e| classify(&self.provider, &e)),
            Wire::Socket(socket) => socket.next(&self.provider).await,
        }
    }

    /// The whole body, refusing more than `limit` bytes; the connection returns to the pool.
    pub async fn read_all(mut self, limit: usize) -> Result<Bytes, UpstreamError> {
        let mut buf = BytesMut::new();
        let mut first: Option<Bytes> = None;
        while let Some(chunk) = self.chunk().await? {
            // The common case is a body in one piece: keep it without copying.
            if first.is_none() && buf.is_empty() {
                first = Some(chunk);
                continue;
            }
            if let Some(f) = first.take() {
                // A body in several pieces (anything past one read): room for all of it at once
                // when the provider said how long it is, so a megabyte answer is copied once
                // rather than again at every doubling of the buffer.
                let stated = self
                    .header_str("content-length")
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                buf.reserve(
                    stated
                        .min(limit.saturating_add(1))
                        .max(f.len() + chunk.len()),
                );
                buf.extend_from_slice(&f);
            }
            buf.extend_from_slice(&chunk);
            if buf.len() > limit {
                return Err(self.too_large(limit));
            }
        }
        let body = match first {
            Some(f) => f,
            None => buf.freeze(),
        };
        if body.len() > limit {
            return Err(self.too_large(limit));
        }
        self.release().await;
        Ok(body)
    }

    fn too_large(&self, limit: usize) -> UpstreamError {
        UpstreamError::new(
            UpstreamErrorKind::BadResponse,
            &self.provider,
            format!("answer larger than {limit} bytes"),
        )
    }

    /// Close the connection without reading the body (an answer the gateway will not use).
    pub async fn release_unread(self) {
        match self.wire {
            Wire::Http { mut session, .. } => session.shutdown().await,
            Wire::Socket(socket) => socket.close().await,
        }
    }

    /// Return the connection to the pool (only sound once the body was read to its end; else
    /// it is closed).
    ///
    /// Not an `async fn`: that would hold the whole answer, then its parts again (5.3 KB, in
    /// every future that releases a connection, up to the request's own); the HTTP/1 path's
    /// future holds the session alone (the peer is only needed for its reuse hash), and the
    /// rare other path is boxed.
    pub fn release(self) -> impl std::future::Future<Output = ()> + Send + 'u {
        use futures_util::future::Either;
        let Response { upstream, wire, .. } = self;
        match wire {
            Wire::Http {
                session: HttpSession::H1(h1),
                peer,
            } if h1_only(&peer) => {
                let (key, idle) = (peer.reuse_hash(), peer.options.idle_timeout);
                Either::Left(upstream.release_h1(h1, key, idle))
            }
            Wire::Http { session, peer } => {
                let other: Rare<'u> = Box::pin(upstream.release_other(session, peer));
                Either::Right(other)
            }
            Wire::Socket(socket) => {
                let closing: Rare<'u> = Box::pin(socket.close());
                Either::Right(closing)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pingora::tls::{CertificateError, RusTlsError, ServerName, UnixTime};

    /// A handshake failure as Pingora's rustls connector reports it: rustls's error inside the
    /// stream's error, whose text the handshake's error repeats with the SNI.
    fn handshake_failure(rustls: RusTlsError) -> Box<PError> {
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, rustls);
        let inner = PError::because(ErrorType::TLSHandshakeFailure, "tls connect error", io);
        PError::explain(
            ErrorType::TLSHandshakeFailure,
            format!("TLS connect() failed: {inner}, SNI: api.example.com"),
        )
    }

    fn reason(e: CertificateError) -> Option<String> {
        certificate_refusal(&handshake_failure(RusTlsError::InvalidCertificate(e)))
    }

    #[test]
    fn certificate_refusals_are_named_in_plain_words() {
        let t = |s| UnixTime::since_unix_epoch(std::time::Duration::from_secs(s));
        let cases = [
            (
                CertificateError::UnknownIssuer,
                "it is not signed by a trusted certificate authority (unknown issuer)",
            ),
            (
                CertificateError::ExpiredContext {
                    time: t(2_000_000_000),
                    not_after: t(1_600_000_000),
                },
                "it has expired",
            ),
            (CertificateError::Expired, "it has expired"),
            (
                CertificateError::NotValidForNameContext {
                    expected: ServerName::try_from("api.example.com").unwrap(),
                    presented: vec!["DnsName(\"other.example\")".into()],
                },
                "it is not valid for the provider's host name",
            ),
            (
                CertificateError::NotValidYetContext {
                    time: t(1_000),
                    not_before: t(2_000),
                },
                "it is not valid yet",
            ),
            (CertificateError::Revoked, "it has been revoked"),
            (CertificateError::BadSignature, "its signature is invalid"),
            (
                CertificateError::UnhandledCriticalExtension,
                "it is invalid (UnhandledCriticalExtension)",
            ),
        ];
        for (error, expected) in cases {
            assert_eq!(reason(error).as_deref(), Some(expected));
        }
    }

    #[test]
    fn other_failures_are_not_certificate_refusals() {
        let alert = handshake_failure(RusTlsError::DecryptError);
        assert_eq!(certificate_refusal(&alert), None);
        let refused = PError::explain(
            ErrorType::ConnectRefused,
            "invalid peer certificate: UnknownIssuer",
        );
        assert_eq!(certificate_refusal(&refused), None);
        let e = classify("p", &alert);
        assert_eq!(e.kind, UpstreamErrorKind::Connect);
        assert!(!e.certificate_refused && e.retryable());
        let e = classify(
            "p",
            &handshake_failure(RusTlsError::InvalidCertificate(
                CertificateError::UnknownIssuer,
            )),
        );
        assert_eq!(e.kind, UpstreamErrorKind::Connect);
        assert!(e.certificate_refused && !e.retryable());
    }
}
