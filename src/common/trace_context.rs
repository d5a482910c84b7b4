//! W3C Trace Context (<https://www.w3.org/TR/trace-context/>): the `traceparent` a caller sends
//! is continued (same trace id, the caller's span as the parent of the gateway's), or a trace is
//! started; each upstream attempt sends its own `traceparent` (a new span id in the same trace)
//! with the caller's `tracestate` as it came — only when the caller's `traceparent` was continued
//! (a state beside an invalid one is dropped, as the specification says).
//!
//! Ids are fixed-size arrays and the context is `Copy`: continuing or starting a trace allocates
//! nothing, and new ids come from the thread's random generator (no system call per request).

use http::HeaderValue;

use super::request_id::hex_into;

/// The request header that carries the context.
pub(crate) const TRACEPARENT: &str = "traceparent";
/// The vendors' state beside it, passed on as it came.
pub(crate) const TRACESTATE: &str = "tracestate";
/// The longest `tracestate` passed on (the length the specification asks every party to keep);
/// a longer one is dropped.
pub(crate) const TRACESTATE_MAX: usize = 512;

/// A trace id: 16 bytes, never all zero.
pub(crate) type TraceId = [u8; 16];
/// A span id: 8 bytes, never all zero.
pub(crate) type SpanId = [u8; 8];

/// A request's place in a trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TraceContext {
    /// The trace: the caller's, or a new one.
    pub trace_id: TraceId,
    /// The caller's span, the parent of the gateway's (`None`: the gateway started the trace).
    pub parent: Option<SpanId>,
    /// The gateway's span for this request (the server span).
    pub span_id: SpanId,
    /// The `sampled` flag the request carries on: the caller's, or the gateway's own decision.
    pub sampled: bool,
}

impl TraceContext {
    /// The caller's trace continued when its `traceparent` is valid, else a new trace whose
    /// `sampled` flag is `sample`'s answer for its trace id.
    pub(crate) fn of(headers: &http::HeaderMap, sample: impl Fn(&TraceId) -> bool) -> TraceContext {
        if let Some((trace_id, parent, flags)) = headers
            .get(TRACEPARENT)
            .and_then(|v| parse_traceparent(v.as_bytes()))
        {
            return TraceContext {
                trace_id,
                parent: Some(parent),
                span_id: new_span_id(),
                sampled: flags & 1 == 1,
            };
        }
        let trace_id = new_trace_id();
        TraceContext {
            trace_id,
            parent: None,
            span_id: new_span_id(),
            sampled: sample(&trace_id),
        }
    }

    /// Whether this is a trace at all (a context made by `Default` is not).
    pub(crate) fn is_set(&self) -> bool {
        self.trace_id != [0; 16]
    }

    /// The trace id as 32 lowercase hex digits.
    pub(crate) fn trace_hex(&self) -> [u8; 32] {
        let mut out = [0; 32];
        hex_into(&self.trace_id, &mut out);
        out
    }

    /// The trace id as text (`None` when unset), for the ledger.
    #[cfg_attr(not(feature = "ledger"), allow(dead_code))]
    pub(crate) fn trace_id_string(&self) -> Option<String> {
        self.is_set()
            .then(|| String::from_utf8_lossy(&self.trace_hex()).into_owned())
    }

    /// The `traceparent` naming `span` in this trace, with this context's `sampled` flag.
    pub(crate) fn traceparent(&self, span: &SpanId) -> HeaderValue {
        let mut out = *b"00-00000000000000000000000000000000-0000000000000000-00";
        hex_into(&self.trace_id, &mut out[3..35]);
        hex_into(span, &mut out[36..52]);
        if self.sampled {
            out[54] = b'1';
        }
        // Hex digits and dashes only.
        HeaderValue::from_bytes(&out).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

/// The caller's `tracestate`, when `trace` continues the caller's `traceparent` (it parsed) and
/// the state is not too long.
///
/// W3C Trace Context §3.3 (Tracestate Header, <https://www.w3.org/TR/trace-context/#tracestate-header>,
/// also `spec/20-http_request_header_format.md` in github.com/w3c/trace-context, read 2026-12-02):
/// "If the vendor failed to parse `traceparent`, it MUST NOT attempt to parse `tracestate`." A
/// state that came with a `traceparent` the gateway could not parse (or with none) belongs to a
/// position in a trace the gateway did not continue, so it is dropped, never sent on beside the
/// fresh `traceparent` of the trace the gateway started.
pub(crate) fn tracestate(headers: &http::HeaderMap, trace: &TraceContext) -> Option<HeaderValue> {
    // `parent` is set exactly when the caller's `traceparent` parsed (`TraceContext::of`).
    trace.parent?;
    let v = headers.get(TRACESTATE)?;
    (!v.is_empty() && v.len() <= TRACESTATE_MAX).then(|| v.clone())
}

/// A fresh span id.
pub(crate) fn new_span_id() -> SpanId {
    loop {
        let id: u64 = rand::random();
        if id != 0 {
            return id.to_be_bytes();
        }
    }
}

/// A fresh trace id.
pub(crate) fn new_trace_id() -> TraceId {
    loop {
        let id: u128 = rand::random();
        if id != 0 {
            return id.to_be_bytes();
        }
    }
}

/// `version-traceid-parentid-flags`, by the specification's rules: lowercase hex, version
/// `ff` invalid, a version-00 header exactly 55 characters, a later version's at least that
/// with a `-` after the flags when longer; neither id all zeros.
pub(crate) fn parse_traceparent(raw: &[u8]) -> Option<(TraceId, SpanId, u8)> {
    if raw.len() < 55 || raw[2] != b'-' || raw[35] != b'-' || raw[52] != b'-' {
        return None;
    }
    let version = hex_byte(&raw[0..2])?;
    match version {
        0xff => return None,
        0 if raw.len() != 55 => return None,
        _ if raw.len() > 55 && raw[55] != b'-' => return None,
        _ => {}
    }
    let mut trace_id = [0u8; 16];
    for (i, b) in trace_id.iter_mut().enumerate() {
        *b = hex_byte(&raw[3 + 2 * i..5 + 2 * i])?;
    }
    let mut span = [0u8; 8];
    for (i, b) in span.iter_mut().enumerate() {
        *b = hex_byte(&raw[36 + 2 * i..38 + 2 * i])?;
    }
    let flags = hex_byte(&raw[53..55])?;
    if trace_id == [0; 16] || span == [0; 8] {
        return None;
    }
    Some((trace_id, span, flags))
}

fn hex_byte(two: &[u8]) -> Option<u8> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    Some(digit(two[0])? << 4 | digit(two[1])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_is_continued() {
        let mut h = http::HeaderMap::new();
        h.insert(TRACEPARENT, GOOD.parse().unwrap());
        h.insert(TRACESTATE, "congo=t61rcWkgMzE".parse().unwrap());
        let c = TraceContext::of(&h, |_| false);
        assert_eq!(
            std::str::from_utf8(&c.trace_hex()).unwrap(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(
            c.parent,
            Some([0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7])
        );
        assert!(c.sampled);
        assert_ne!(c.span_id, [0; 8]);
        let sent = c.traceparent(&[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            sent,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0102030405060708-01"
        );
        assert_eq!(tracestate(&h, &c).unwrap(), "congo=t61rcWkgMzE");
    }

    #[test]
    fn an_invalid_traceparent_starts_a_new_trace() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(bad.as_bytes()).is_none(), "{bad}");
        }
        // A later version may carry more fields after a dash.
        assert!(parse_traceparent(
            b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes"
        )
        .is_some());
        let c = TraceContext::of(&http::HeaderMap::new(), |_| true);
        assert!(c.is_set() && c.parent.is_none() && c.sampled);
        assert!(!TraceContext::default().is_set());
        let mut h = http::HeaderMap::new();
        h.insert(TRACESTATE, "a=b".parse().unwrap());
        let c = TraceContext::of(&h, |_| false);
        assert!(
            tracestate(&h, &c).is_none(),
            "no tracestate without a traceparent"
        );
        // Nor beside a traceparent that did not parse (W3C Trace Context §3.3).
        h.insert(
            TRACEPARENT,
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"
                .parse()
                .unwrap(),
        );
        let c = TraceContext::of(&h, |_| false);
        assert!(c.parent.is_none());
        assert!(
            tracestate(&h, &c).is_none(),
            "no tracestate beside an invalid traceparent"
        );
    }
}
