//! What the attempt loop learned about the request being served — how many attempts, which target
//! answered (or failed last) — for its access line, and what the request carries down to it —
//! its id and its place in a trace ([`RequestContext`]) — without threading a parameter through
//! every function between the gateway and the loop: the gateway runs the request inside
//! [`traced`], and the loop notes into it and reads from it. Outside [`traced`] (background
//! tasks) noting does nothing and the context is empty.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::time::SystemTime;

use http::{HeaderName, HeaderValue};
use tokio::task::futures::TaskLocalFuture;

use crate::catalog::{Model, Target};
use crate::common::error::GatewayError;
use crate::common::request_id::RequestId;
use crate::common::trace_context::{self, SpanId, TraceContext};
use crate::telemetry::{Kind, Link, Span, Status, Tracer};

tokio::task_local! {
    static TRACE: Scope;
}

/// What a [`traced`] future carries: what is noted, and the request's context.
pub(crate) struct Scope {
    noted: Cell<Trace>,
    request: RequestContext,
}

/// Who a request is to the records and to the providers: its id and its trace.
#[derive(Debug, Clone, Default)]
pub(crate) struct RequestContext {
    /// The caller's `X-Request-Id` when sane, else generated.
    pub id: RequestId,
    /// The caller's trace continued, or a new one.
    pub trace: TraceContext,
    /// The caller's `tracestate`, passed on as it came (`None`: none, the usual case, or its
    /// `traceparent` was invalid: then the state is dropped).
    pub tracestate: Option<HeaderValue>,
    /// Where its spans go, when they are recorded (tracing on and the trace sampled).
    pub recording: Option<Tracer>,
}

impl RequestContext {
    /// A request's context from its head: its id, and its trace continued or (sampled as
    /// `tracer` says) started.
    pub(crate) fn of(headers: &http::HeaderMap, tracer: &Tracer) -> RequestContext {
        let trace = TraceContext::of(headers, |id| tracer.sample(id));
        RequestContext {
            id: RequestId::of(headers),
            trace,
            tracestate: trace_context::tracestate(headers, &trace),
            recording: (trace.sampled && tracer.is_on()).then(|| tracer.clone()),
        }
    }

    /// Record a span of this request's trace, a child of its server span, named `name` and
    /// started at `start`; `fill` adds what it says. Nothing when spans are not recorded.
    pub(crate) fn span(
        &self,
        id: Option<SpanId>,
        name: &'static str,
        kind: Kind,
        start: SystemTime,
        fill: impl FnOnce(&mut Span),
    ) {
        if let Some(tracer) = &self.recording {
            let id = id.unwrap_or_else(trace_context::new_span_id);
            let t = &self.trace;
            let mut s = Span::new(t.trace_id, id, Some(t.span_id), name, kind, start);
            fill(&mut s);
            tracer.record(s);
        }
    }
}

impl RequestContext {
    /// A background job's own trace (an asynchronous image task's work): a new trace, recorded
    /// when the request that created the task was (`from`: its server span, as the task record
    /// keeps it, linked from the job's span; on whichever instance runs the job, a takeover
    /// included), or, for a task whose creating request was not recorded, as `tracer` samples a
    /// new trace.
    pub(crate) fn background(tracer: &Tracer, from: Option<Link>) -> RequestContext {
        let trace_id = trace_context::new_trace_id();
        let sampled = from.is_some() || tracer.sample(&trace_id);
        RequestContext {
            id: RequestId::generate(),
            trace: TraceContext {
                trace_id,
                parent: None,
                span_id: trace_context::new_span_id(),
                sampled,
            },
            tracestate: None,
            recording: (sampled && tracer.is_on()).then(|| tracer.clone()),
        }
    }

    /// Record this context's own span (a background job's root, a root of its trace), linked
    /// to `link` when there is one.
    pub(crate) fn root_span(
        &self,
        name: &'static str,
        start: SystemTime,
        link: Option<Link>,
        fill: impl FnOnce(&mut Span),
    ) {
        if let Some(tracer) = &self.recording {
            let t = &self.trace;
            let mut s = Span::new(t.trace_id, t.span_id, None, name, Kind::Internal, start);
            s.links.extend(link);
            fill(&mut s);
            tracer.record(s);
        }
    }
}

/// The server span of the request this runs for, to link later work to, when its spans are
/// recorded.
pub(crate) fn link() -> Option<Link> {
    TRACE
        .try_with(|s| {
            s.request.recording.as_ref().map(|_| Link {
                trace_id: s.request.trace.trace_id,
                span_id: s.request.trace.span_id,
            })
        })
        .ok()
        .flatten()
}

/// The time now when this request's spans are recorded (`None` otherwise, and outside a
/// [`traced`] future): what a span's start is taken from, so an unrecorded request reads no
/// clock for it.
pub(crate) fn now() -> Option<SystemTime> {
    TRACE
        .try_with(|s| s.request.recording.is_some().then(SystemTime::now))
        .ok()
        .flatten()
}

/// Record one step of the request (authentication and limits, validation) as an internal span
/// started at `start`, failed with `err` when it did.
pub(crate) fn step(name: &'static str, start: Option<SystemTime>, err: Option<&GatewayError>) {
    span(None, name, Kind::Internal, start, |s| {
        if let Some(e) = err {
            s.set("error.type", e.code());
            s.status = Status::Error(e.code().to_string());
        }
    });
}

/// Record a span of the request this runs for ([`RequestContext::span`]), started at `start`
/// (from [`now`]; `None`: nothing is recorded).
pub(crate) fn span(
    id: Option<SpanId>,
    name: &'static str,
    kind: Kind,
    start: Option<SystemTime>,
    fill: impl FnOnce(&mut Span),
) {
    let Some(start) = start else {
        return;
    };
    let _ = TRACE.try_with(|s| s.request.span(id, name, kind, start, fill));
}

/// A request's attempts, as its access line reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Trace {
    /// Attempts sent (to providers, or to an in-process one), over all native calls.
    pub attempts: u32,
    /// The last target tried, as its position in the model's `targets`.
    pub target: Option<usize>,
}

impl Trace {
    /// The target this trace names, in `model`.
    pub(crate) fn target<'m>(&self, model: Option<&'m Model>) -> Option<&'m Target> {
        model?.targets.get(self.target?)
    }
}

/// `fut` with a fresh trace: await it (pinned), then read the trace with [`noted`].
///
/// Not an `async fn` wrapping `fut`: that would hold the request's future three times over (the
/// argument, the inner block's copy and the task-local future's), 40 KB that every request
/// moved around; this holds it once.
pub(crate) fn traced<F: Future>(request: RequestContext, fut: F) -> TaskLocalFuture<Scope, F> {
    let scope = Scope {
        noted: Cell::new(Trace::default()),
        request,
    };
    TRACE.scope(scope, fut)
}

/// What was noted into a finished [`traced`] future.
pub(crate) fn noted<F: Future>(fut: Pin<&mut TaskLocalFuture<Scope, F>>) -> Trace {
    fut.take_value()
        .map(|s| s.noted.into_inner())
        .unwrap_or_default()
}

/// The id of the request this runs for (empty outside a [`traced`] future).
pub(crate) fn request_id() -> RequestId {
    TRACE.try_with(|s| s.request.id).unwrap_or_default()
}

/// Note one attempt at `target` of `model`.
pub(crate) fn attempt(model: &Model, target: &Target) {
    let _ = TRACE.try_with(|s| {
        let mut t = s.noted.get();
        t.attempts += 1;
        t.target = model.targets.iter().position(|x| std::ptr::eq(x, target));
        s.noted.set(t);
    });
}

/// Give an upstream attempt its own place in the request's trace: a new span id, sent to the
/// provider as `traceparent` (with the caller's `tracestate`) unless its account opted out
/// (`trace_context: false`). `headers` are the native request's (an HTTP request's, or a
/// WebSocket handshake's). The span id comes back (`None` outside a traced request).
pub(crate) fn propagate(
    headers: &mut Vec<(HeaderName, http::HeaderValue)>,
    send: bool,
) -> Option<SpanId> {
    TRACE
        .try_with(|s| {
            let c = &s.request;
            if !c.trace.is_set() {
                return None;
            }
            let span = trace_context::new_span_id();
            if send {
                headers.push((
                    HeaderName::from_static(trace_context::TRACEPARENT),
                    c.trace.traceparent(&span),
                ));
                if let Some(state) = &c.tracestate {
                    headers.push((
                        HeaderName::from_static(trace_context::TRACESTATE),
                        state.clone(),
                    ));
                }
            }
            Some(span)
        })
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_trace_starts_empty_and_comes_back() {
        let mut fut = std::pin::pin!(traced(RequestContext::default(), async {}));
        fut.as_mut().await;
        let t = noted(fut);
        assert_eq!(t, Trace::default());
        assert!(t.target(None).is_none());
    }
}
