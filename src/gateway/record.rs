//! What a finished request leaves behind: its counts in the metrics and its access line, both
//! from the outcome recorded in its [`Ctx`].

use std::time::SystemTime;

use pingora::proxy::Session;

use super::access_log;
use super::ctx::Ctx;
use super::service::Gateway;
use crate::common::error::GatewayError;
use crate::common::Operation;
use crate::metrics;

/// An HTTP status as its three digits, without allocating (`000` when none was set).
fn status_digits(status: u16) -> [u8; 3] {
    let s = status.min(999);
    [
        b'0' + (s / 100) as u8,
        b'0' + (s / 10 % 10) as u8,
        b'0' + (s % 10) as u8,
    ]
}

impl Gateway {
    /// Count a request refused by load shedding, by the cap it hit.
    pub(super) fn count_shed(&self, e: &GatewayError) {
        let GatewayError::Overloaded(why) = e else {
            return;
        };
        let cause = if *why == super::admission::TOO_MANY_CONNECTIONS {
            "connections"
        } else {
            "in_flight"
        };
        self.state
            .metrics
            .with(|f| metrics::inc(&f.shed, &[&self.listener, cause], 1));
    }

    /// The request is over: count it, take it out of the in-flight gauge, write its access line.
    pub(super) fn record(&self, session: &Session, ctx: &mut Ctx) {
        let bytes_out = session.as_downstream().body_bytes_sent() as u64;
        self.count(ctx, bytes_out);
        // Dropped here, not when Pingora drops the context: the gauge counts requests being served.
        ctx.gauge = None;
        #[cfg(feature = "ledger")]
        self.ledger(session, ctx);
        self.server_span(session, ctx);
        if !log::log_enabled!(target: "access", log::Level::Info) {
            return;
        }
        let h = session.req_header();
        let target = ctx.trace.target(ctx.model.as_deref());
        let cost = ctx.cost.as_ref().and_then(|c| c.cost());
        let trace_hex = ctx.request.trace.trace_hex();
        let record = access_log::Record {
            time: SystemTime::now(),
            entry_point: &self.listener,
            method: h.method.as_str(),
            path: &access_log::logged_path_under(h.uri.path(), ctx.prefix()),
            principal: ctx.principal.as_ref().map(|p| p.id.as_str()),
            operation: ctx.operation.map(Operation::as_str),
            model: ctx.model.as_ref().map(|m| m.name.as_str()),
            provider: target.map(|t| t.provider.name.as_str()),
            native_model: target.map(|t| t.native_model.as_str()),
            status: ctx.status,
            code: ctx.code,
            attempts: ctx.trace.attempts,
            duration_ms: access_log::ms(ctx.start.elapsed()),
            ttfb_ms: ctx.ttfb.map(access_log::ms),
            bytes_in: session.as_downstream().body_bytes_read() as u64,
            bytes_out,
            usage: ctx.usage,
            cost: cost.map(|c| c.amount),
            currency: cost.map(|c| c.currency),
            cost_basis: cost.map(|c| c.basis.as_str()),
            cost_note: ctx.cost.as_ref().and_then(|c| c.note()),
            aborted: ctx.aborted.as_deref(),
            cache: ctx.cache.map(|c| c.status.as_str()),
            cost_saved: ctx.cache.and_then(|c| c.saved).map(|s| s.0),
            cost_saved_currency: ctx.cache.and_then(|c| c.saved).map(|s| s.1),
            request_id: ctx.request.id.as_str(),
            request_id_made: ctx.request.id.made(),
            trace_id: ctx
                .request
                .trace
                .is_set()
                .then(|| std::str::from_utf8(&trace_hex).unwrap_or("")),
        };
        access_log::write(ctx.settings.access_log, &record);
    }

    /// The finished request's record in the usage ledger (when there is one): what the access
    /// line says of it, for billing. An operation's requests only: a health check or a model
    /// list is nobody's spend.
    #[cfg(feature = "ledger")]
    fn ledger(&self, session: &Session, ctx: &Ctx) {
        let (Some(ledger), Some(op)) = (&self.state.ledger, ctx.operation) else {
            return;
        };
        let h = session.req_header();
        let target = ctx.trace.target(ctx.model.as_deref());
        let cost = ctx.cost.as_ref().and_then(|c| c.cost());
        let path = access_log::logged_path_under(h.uri.path(), ctx.prefix());
        let mut r = crate::ledger::Record::new(&self.listener, &path, ctx.status);
        r.caller = ctx.principal.as_ref().map(|p| p.id.clone());
        r.tenant = ctx
            .principal
            .as_ref()
            .and_then(|p| p.tenant_name())
            .map(str::to_string);
        r.operation = Some(op.as_str().to_string());
        r.model = ctx.model.as_ref().map(|m| m.name.clone());
        r.provider = target.map(|t| t.provider.name.clone());
        r.native_model = target.map(|t| t.native_model.clone());
        r.usage = crate::ledger::Usage {
            tokens: ctx.usage.tokens,
            characters: ctx.usage.characters,
            images: ctx.usage.images,
            detail: ctx.usage_detail.clone(),
        };
        r.cost_nanos = cost.and_then(|c| i64::try_from(c.amount.nanos()).ok());
        r.currency = cost.map(|c| c.currency.as_str().to_string());
        r.cost_basis = match (cost, &ctx.cost) {
            (Some(c), _) => Some(c.basis.as_str().to_string()),
            (None, Some(why)) => why.reason().map(str::to_string),
            (None, None) => None,
        };
        r.attempts = ctx.trace.attempts;
        r.cache = ctx.cache.map(|c| c.status.as_str().to_string());
        r.request_id = (!ctx.request.id.is_empty()).then(|| ctx.request.id.as_str().to_string());
        r.trace_id = ctx.request.trace.trace_id_string();
        ledger.record(r);
    }

    /// Count the finished request in the metrics.
    fn count(&self, ctx: &Ctx, bytes_out: u64) {
        self.state.metrics.with(|f| {
            let operation = ctx.operation.map_or("-", Operation::as_str);
            let model = ctx.model.as_ref().map_or("-", |m| m.name.as_str());
            let digits = status_digits(ctx.status);
            let status = std::str::from_utf8(&digits).unwrap_or("0");
            let entry = self.listener.as_str();
            let code = ctx.code.unwrap_or("");
            metrics::inc(&f.requests, &[entry, operation, model, status, code], 1);
            metrics::observe(
                &f.request_duration,
                &[entry, operation, model],
                ctx.start.elapsed().as_secs_f64(),
            );
            if bytes_out > 0 {
                metrics::inc(&f.response_bytes, &[entry, operation, model], bytes_out);
            }
            if let Some(ttfb) = ctx.ttfb {
                metrics::observe(&f.speech_first_byte, &[entry, model], ttfb.as_secs_f64());
            }
            if ctx.code == Some("request_timeout") {
                metrics::inc(&f.client_timeouts, &[entry, "body"], 1);
            }
            if let (Some(c), Some(op)) = (ctx.cache, ctx.operation) {
                // Only answered requests: a refused one never reached the cache.
                if ctx.status == 200 {
                    metrics::inc(
                        &f.cache_requests,
                        &[op.as_str(), model, c.status.as_str()],
                        1,
                    );
                }
                if let Some((amount, currency)) = c.saved.filter(|_| c.status.served()) {
                    metrics::inc(
                        &f.cache_saved_nanos,
                        &[model, currency.as_str()],
                        amount.nanos(),
                    );
                }
            }
            let u = ctx.usage;
            if let Some(p) = &ctx.principal {
                let key = metrics::key_label(&p.id);
                // Tokens are rerank's unit in the metrics; a token-billed speech or image
                // answer's tokens are in its cost (and the access line and ledger), not here.
                let rerank_tokens = match ctx.operation {
                    Some(Operation::Rerank) => u.tokens,
                    _ => 0,
                };
                for (family, n) in [
                    (&f.rerank_tokens, rerank_tokens),
                    (&f.speech_characters, u.characters),
                    (&f.images_generated, u.images),
                ] {
                    if n > 0 {
                        metrics::inc(family, &[model, key], n);
                    }
                }
                if let Some(c) = ctx.cost.as_ref().and_then(|c| c.cost()) {
                    let nanos = c.amount.nanos();
                    if nanos > 0 {
                        metrics::inc(&f.cost_nanos, &[model, key, c.currency.as_str()], nanos);
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::status_digits;

    #[test]
    fn statuses_are_three_digits() {
        assert_eq!(&status_digits(200), b"200");
        assert_eq!(&status_digits(0), b"000");
        assert_eq!(&status_digits(5000), b"999");
    }
}
