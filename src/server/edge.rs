//! Each entry point's connections, around Pingora's HTTP app: counted against the entry point's
//! connection cap (`gateway::admission`), and, for HTTP/1.x, held to the client deadlines of
//! `gateway::client_conn` — a connection whose head or idle deadline passes is dropped, without a
//! word to a client that has sent no complete request (as nginx does), and with one access-log
//! line when a request head was left unfinished. A request head Pingora cannot parse gets the
//! gateway's `400 invalid_request` (written by `client_conn::Clocked` in place of Pingora's bare
//! one) and one access line and count here, as no `ProxyHttp` hook sees it.
//!
//! HTTP/2 connections frame their own streams: an idle one is closed by Pingora's h2 idle timeout
//! (set in `server::build_service`), and each request's body is held to the gateway's body deadline.
//!
//! It wraps any `ProxyHttp` app, not only the gateway's: a host that embeds the gateway (the
//! crate's `embed` module) puts its own service inside it. The deadlines need each request marked
//! as being served from `request_filter` to `logging`; the gateway does so for its requests, and
//! the embedding façade for every request of a host that delegates to it.

use std::sync::Arc;

use async_trait::async_trait;
use pingora::apps::ServerApp;
use pingora::protocols::{Stream, ALPN};
use pingora::proxy::{HttpProxy, ProxyHttp};
use pingora::server::ShutdownWatch;

use crate::common::error::GatewayError;
use crate::common::request_id::RequestId;
use crate::config::ClientLimits;
use crate::gateway::access_log;
use crate::gateway::admission::Admission;
use crate::gateway::client_conn::{Clocked, ConnClock, Phase};
use crate::gateway::GatewayState;
use crate::metrics::{self, IntCounter};

/// The app one entry point's listening service runs: `SV` is the gateway (the binary) or a
/// host's own `ProxyHttp` that delegates to it.
pub(crate) struct EdgeApp<SV> {
    /// The proxy that serves each accepted connection's requests.
    pub(crate) http: Arc<HttpProxy<SV>>,
    /// This entry point's load shedding: its connection and in-flight counts and caps.
    pub(crate) admission: Arc<Admission>,
    /// Deadlines on what clients send.
    pub(crate) clients: ClientLimits,
    /// The entry point's name, for logs and access lines.
    pub(crate) listener: String,
    /// For the access-log format in force (it reloads).
    pub(crate) state: Arc<GatewayState>,
    /// This entry point's head and idle deadline expiries, resolved once.
    pub(crate) expired: [Option<IntCounter>; 2],
}

#[async_trait]
impl<SV> ServerApp for EdgeApp<SV>
where
    SV: ProxyHttp + Send + Sync + 'static,
    SV::CTX: Send + Sync,
{
    async fn process_new(
        self: &Arc<Self>,
        stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        let _open = self.admission.connect(|| {
            stream
                .get_socket_digest()
                .and_then(|d| d.peer_addr().and_then(|a| a.as_inet().copied()))
        });
        if matches!(stream.selected_alpn_proto(), Some(ALPN::H2)) {
            return self.http.process_new(stream, shutdown).await;
        }
        let clock = Arc::new(ConnClock::new(
            self.clients.head_timeout,
            self.clients.idle_timeout,
        ));
        let stream: Stream = Box::new(Clocked::new(stream, clock.clone()));
        let done = tokio::select! {
            done = self.http.process_new(stream, shutdown) => done,
            phase = clock.expired() => {
                // Dropping the connection's future closes its socket.
                let counter = &self.expired[usize::from(phase != Phase::Head)];
                if let Some(counter) = counter {
                    counter.inc();
                }
                if phase == Phase::Head {
                    self.head_expired(phase.expiry());
                } else {
                    log::debug!("{}: {}", self.listener, phase.expiry());
                }
                None
            }
        };
        if let Some(id) = clock.take_refused() {
            self.head_refused(&id);
        }
        done
    }

    async fn cleanup(&self) {
        self.http.cleanup().await
    }
}

impl<SV> EdgeApp<SV> {
    /// The access line of a connection dropped with its request head unfinished: no method,
    /// path or caller is known.
    fn head_expired(&self, why: &str) {
        self.head_line(0, Some("request_timeout"), Some(why), ("-", true));
    }

    /// A request head Pingora could not parse, answered `400 invalid_request` with the
    /// generated request id `id`: counted, and its access line (no method, path or caller is
    /// known: the head could not be read).
    fn head_refused(&self, id: &RequestId) {
        let err = GatewayError::MalformedHead;
        let status = err.status().to_string();
        self.state.metrics.with(|f| {
            let labels = [self.listener.as_str(), "-", "-", &status, err.code()];
            metrics::inc(&f.requests, &labels, 1);
        });
        self.head_line(
            err.status(),
            Some(err.code()),
            None,
            (id.as_str(), id.made()),
        );
    }

    /// The access line of a request whose head was never read.
    fn head_line(
        &self,
        status: u16,
        code: Option<&'static str>,
        aborted: Option<&str>,
        (request_id, request_id_made): (&str, bool),
    ) {
        if !log::log_enabled!(target: "access", log::Level::Info) {
            return;
        }
        let record = access_log::Record {
            time: std::time::SystemTime::now(),
            entry_point: &self.listener,
            method: "-",
            path: "-",
            principal: None,
            operation: None,
            model: None,
            provider: None,
            native_model: None,
            status,
            code,
            attempts: 0,
            duration_ms: 0.0,
            ttfb_ms: None,
            bytes_in: 0,
            bytes_out: 0,
            usage: access_log::Usage::default(),
            cost: None,
            currency: None,
            cost_basis: None,
            cost_note: None,
            aborted,
            cache: None,
            cost_saved: None,
            cost_saved_currency: None,
            request_id,
            request_id_made,
            trace_id: None,
        };
        access_log::write(self.state.settings().access_log, &record);
    }
}
