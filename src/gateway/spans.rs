//! A finished request's server span (when its spans are recorded): the root of the gateway's
//! part of the trace, a child of the caller's span when it sent a `traceparent`. Its attributes
//! are the access line's, under OpenTelemetry's HTTP and GenAI semantic-convention names where
//! one applies: never a credential, never the caller's text or documents.

use std::time::SystemTime;

use pingora::proxy::Session;

use super::access_log;
use super::ctx::Ctx;
use super::service::Gateway;
use crate::common::Operation;
use crate::telemetry::{Kind, Span, Status};

impl Gateway {
    /// Record `ctx`'s server span.
    pub(super) fn server_span(&self, session: &Session, ctx: &Ctx) {
        let Some(tracer) = &ctx.request.recording else {
            return;
        };
        let t = &ctx.request.trace;
        let h = session.req_header();
        let start = SystemTime::now()
            .checked_sub(ctx.start.elapsed())
            .unwrap_or_else(SystemTime::now);
        let path = access_log::logged_path_under(h.uri.path(), ctx.prefix()).into_owned();
        let name = format!("{} {path}", h.method.as_str());
        let mut s = Span::new(t.trace_id, t.span_id, t.parent, name, Kind::Server, start);
        s.set("http.request.method", h.method.as_str().to_string());
        s.set("url.path", path);
        s.set("http.response.status_code", i64::from(ctx.status));
        s.set("switchyard.request_id", ctx.request.id.as_str().to_string());
        s.set("switchyard.entry_point", self.listener.clone());
        if let Some(op) = ctx.operation {
            s.set("gen_ai.operation.name", op.as_str());
        }
        if let Some(m) = &ctx.model {
            s.set("gen_ai.request.model", m.name.clone());
        }
        if let Some(target) = ctx.trace.target(ctx.model.as_deref()) {
            s.set("gen_ai.provider.name", target.provider.kind.clone());
            s.set("switchyard.provider.account", target.provider.name.clone());
            s.set("gen_ai.response.model", target.native_model.clone());
        }
        s.set("switchyard.attempts", i64::from(ctx.trace.attempts));
        let u = ctx.usage;
        if ctx.operation == Some(Operation::Rerank) && u.tokens > 0 {
            s.set("gen_ai.usage.input_tokens", u.tokens);
        }
        if u.characters > 0 {
            s.set("switchyard.usage.characters", u.characters);
        }
        if u.images > 0 {
            s.set("switchyard.usage.images", u.images);
        }
        if let Some(ttfb) = ctx.ttfb {
            s.set("switchyard.first_byte_ms", ttfb.as_millis() as u64);
        }
        if let Some(code) = ctx.code {
            s.set("error.type", code);
        }
        // HTTP's convention for a server span: a 5xx is the server's error, a 4xx the caller's.
        if ctx.status >= 500 || ctx.aborted.is_some() {
            s.status = Status::Error(ctx.code.unwrap_or("aborted").to_string());
        }
        tracer.record(s);
    }
}
