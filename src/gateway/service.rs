//! [`Gateway`], the Pingora `ProxyHttp` service of one entry point. It answers every request
//! itself in `request_filter` (dispatching to an endpoint or operation, `dispatch.rs`),
//! records the outcome, charges the caller's usage once, and answers a failure; `logging`
//! counts the request and writes its access line (`record.rs`).

use std::sync::Arc;

use async_trait::async_trait;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use pingora::upstreams::peer::HttpPeer;
use pingora::{Error as PError, ErrorType};

use super::admission::Admission;
use super::client_conn::Clocked;
use super::ctx::Ctx;
use super::outcome::Failure;
use super::{lifecycle, limited, mount, respond, GatewayState};
use crate::common::error::GatewayError;
use crate::config::Listener;
use crate::engine::trace;
use crate::metrics;

/// The gateway as a Pingora `ProxyHttp` service for one entry point.
pub(crate) struct Gateway {
    pub(super) state: Arc<GatewayState>,
    pub(super) listener: String,
    pub(super) region: String,
    pub(super) admission: Arc<Admission>,
    /// This entry point's in-flight gauge, resolved once.
    pub(super) in_flight: metrics::Gauge,
    /// Where its routes sit in the server's paths (the binary: the root, every path its own).
    pub(super) mount: mount::Mount,
}

impl Gateway {
    /// `admission` holds the entry point's caps; its connections are counted by whoever accepts
    /// them (`server::add_services`).
    pub(crate) fn new(
        state: Arc<GatewayState>,
        listener: &Listener,
        admission: Arc<Admission>,
    ) -> Gateway {
        Gateway::mounted(
            state,
            &listener.name,
            &listener.region,
            admission,
            mount::Mount::root(),
        )
    }

    /// A gateway at `mount` in its server's paths, for the entry point named `name` (metrics and
    /// access lines) in `region` (providers' regional base URLs).
    pub(crate) fn mounted(
        state: Arc<GatewayState>,
        name: &str,
        region: &str,
        admission: Arc<Admission>,
        mount: mount::Mount,
    ) -> Gateway {
        let in_flight = state.metrics.in_flight(name);
        Gateway {
            state,
            listener: name.to_string(),
            region: region.to_string(),
            admission,
            in_flight,
            mount,
        }
    }

    /// Where its routes sit.
    pub(crate) fn mount(&self) -> &mount::Mount {
        &self.mount
    }

    /// The entry point's name in metrics and access lines.
    pub(crate) fn entry_point(&self) -> &str {
        &self.listener
    }

    /// The state it serves from.
    pub(crate) fn state(&self) -> &Arc<GatewayState> {
        &self.state
    }

    /// A context for a request under `prefix` (`None`: at the root), as [`ProxyHttp::new_ctx`]
    /// makes one at the root.
    pub(crate) fn ctx_under(&self, prefix: Option<Arc<str>>) -> Ctx {
        Ctx::new(self.state.settings(), prefix)
    }
}

/// An answer that cannot be finished. The access log says why ([`Gateway::logging`]), and the
/// error returned makes Pingora drop the connection without finishing the body, which the client
/// sees as a truncated answer.
fn abandon(session: &mut Session, ctx: &mut Ctx, failure: Failure) -> Box<PError> {
    session.set_keepalive(None);
    let why = match failure {
        Failure::ClientGone => {
            ctx.client_gone = true;
            "client went away".to_string()
        }
        Failure::Abort(why) => why,
        Failure::Answer(err) => err.message(),
    };
    ctx.aborted = Some(why.clone());
    PError::explain(ErrorType::Custom("answer abandoned"), why)
}

#[async_trait]
impl ProxyHttp for Gateway {
    type CTX = Ctx;

    fn new_ctx(&self) -> Ctx {
        Ctx::new(self.state.settings(), None)
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut Ctx) -> pingora::Result<bool> {
        if let Some(clock) = session.stream().and_then(Clocked::clock_of) {
            clock.serving();
        }
        // A client that stops taking an answer's bytes is cut off; one that reads slowly is not.
        session.set_write_timeout(Some(ctx.settings.clients.write_timeout));
        ctx.request = trace::RequestContext::of(&session.req_header().headers, &self.state.tracer);
        let (outcome, noted) = {
            let request = ctx.request.clone();
            let mut traced = std::pin::pin!(trace::traced(request, self.dispatch(session, ctx)));
            let outcome = traced.as_mut().await;
            (outcome, trace::noted(traced))
        };
        ctx.trace = noted;
        let mut outcome = outcome;
        let answer = outcome.answer.take();
        let mut handled = ctx.record(outcome);
        // The one place a request's usage is charged to its caller. The answer is out (or is an
        // error about to be written): its usage is charged and its concurrent slot given back
        // now, not after Pingora's own end of request, so that a client sending its next request
        // the moment it has this answer finds the slot free. With the limits in Redis the charge
        // is queued on the connection here and its reply awaited off the request's path
        // (`limits::Limiter::charge`): the answer does not wait for a round trip. A request that never gets here (its future dropped) gives its
        // slot back as its context drops, and has delivered nothing to charge.
        limited::charge(&self.state, ctx).await;
        // A complete JSON answer goes out after its charge (`outcome::Call::json`).
        if let (Ok(()), Some(mut a)) = (&handled, answer) {
            a.headers.extend(ctx.id_header());
            handled = respond::json(session, 200, a.body, &a.headers)
                .await
                .map_err(|e| Failure::written("writing answer", e));
        }
        match handled {
            Ok(()) => Ok(true),
            Err(Failure::Answer(err)) => {
                if matches!(err, GatewayError::Overloaded(_)) {
                    // Shedding load includes the connection: the client comes back on a new one.
                    session.set_keepalive(None);
                }
                ctx.status = err.status();
                ctx.code = Some(err.code());
                match &err {
                    GatewayError::Internal(m) => log::error!("internal error: {m}"),
                    // The caller is told only that the store is unavailable; the why is ours.
                    GatewayError::Store(m) => {
                        self.state.metrics.store_error("request");
                        log::warn!("store unavailable: {m}")
                    }
                    GatewayError::LedgerUnavailable(m) => log::warn!("ledger unavailable: {m}"),
                    _ => {}
                }
                // An error about a deprecated model says so too (the lifecycle headers).
                let mut extra = ctx
                    .model
                    .as_deref()
                    .map(|m| mount::link_headers(lifecycle::headers(m), ctx.prefix()))
                    .unwrap_or_default();
                // A cached model's error answer says what the cache did (`miss`, `bypass`).
                extra.extend(
                    ctx.cache
                        .map(|c| (super::cached::HEADER, c.status.as_str().to_string())),
                );
                let id = ctx.request.id.as_str();
                match respond::error_with(session, &err, ctx.surface, id, &extra).await {
                    Ok(()) => Ok(true),
                    Err(e) => Err(abandon(session, ctx, Failure::written("writing error", e))),
                }
            }
            Err(failure) => Err(abandon(session, ctx, failure)),
        }
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        _ctx: &mut Ctx,
    ) -> pingora::Result<Box<HttpPeer>> {
        // Every request is answered in request_filter; reaching here is a bug, not a route.
        Err(PError::explain(
            ErrorType::InternalError,
            "no upstream peer: the gateway answers every request itself",
        ))
    }

    async fn fail_to_proxy(&self, session: &mut Session, e: &PError, ctx: &mut Ctx) -> FailToProxy {
        if ctx.aborted.is_some() || session.response_written().is_some() {
            return FailToProxy {
                error_code: 0,
                can_reuse_downstream: false,
            };
        }
        let err = GatewayError::Internal(e.to_string());
        ctx.status = err.status();
        let id = ctx.request.id.as_str();
        if let Err(write) = respond::error_with(session, &err, ctx.surface, id, &[]).await {
            log::debug!("could not write error answer: {write}");
        }
        FailToProxy {
            error_code: err.status(),
            can_reuse_downstream: false,
        }
    }

    /// A client that went away is the access log's `aborted="client went away"`, not an error:
    /// it is the client's doing, and at the end of a load test there are hundreds. Every other
    /// failure keeps Pingora's error line.
    fn suppress_error_log(&self, _session: &Session, ctx: &Ctx, _error: &PError) -> bool {
        ctx.client_gone
    }

    async fn logging(&self, session: &mut Session, _e: Option<&PError>, ctx: &mut Ctx) {
        if let Some(clock) = session.stream().and_then(Clocked::clock_of) {
            clock.served();
        }
        self.record(session, ctx);
    }
}
