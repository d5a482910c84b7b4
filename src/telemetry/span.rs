//! A finished span as the gateway records it: ids, name, kind, times, attributes (names from
//! the OpenTelemetry semantic conventions where one applies), events, links and status. Never a
//! credential, never the caller's text or documents: only what the access line already says.

use std::borrow::Cow;
use std::time::SystemTime;

use crate::common::trace_context::{self, SpanId, TraceContext, TraceId};

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Str(Cow<'static, str>),
    Int(i64),
    Bool(bool),
}

impl From<&'static str> for Value {
    fn from(s: &'static str) -> Value {
        Value::Str(Cow::Borrowed(s))
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(Cow::Owned(s))
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Int(n)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

/// A span's kind (OTLP's `SpanKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Internal = 1,
    Server = 2,
    Client = 3,
}

/// How a span ended (OTLP's `Status`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Status {
    #[default]
    Unset,
    Error(String),
}

/// Something that happened at a moment inside a span.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    pub time: SystemTime,
    pub name: &'static str,
    pub attributes: Vec<(&'static str, Value)>,
}

/// Another span this one follows from (an asynchronous task's later work and the request
/// that created it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Link {
    pub trace_id: TraceId,
    pub span_id: SpanId,
}

impl Link {
    /// The linked span as a W3C `traceparent` (sampled): how a task record keeps it, so that
    /// another instance taking the task over links to the same span.
    pub(crate) fn traceparent(&self) -> String {
        let context = TraceContext {
            trace_id: self.trace_id,
            parent: None,
            span_id: self.span_id,
            sampled: true,
        };
        String::from_utf8_lossy(context.traceparent(&self.span_id).as_bytes()).into_owned()
    }

    /// The span a `traceparent` names (`None` when it is not a valid one).
    pub(crate) fn parse(traceparent: &str) -> Option<Link> {
        trace_context::parse_traceparent(traceparent.as_bytes())
            .map(|(trace_id, span_id, _)| Link { trace_id, span_id })
    }
}

/// One finished span.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Span {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    /// The parent span (`None`: the trace's root).
    pub parent: Option<SpanId>,
    pub name: Cow<'static, str>,
    pub kind: Kind,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Vec<(&'static str, Value)>,
    pub events: Vec<Event>,
    pub links: Vec<Link>,
    pub status: Status,
}

impl Span {
    /// A span of `kind` named `name` in `trace_id`, from `start` to now, with nothing else yet.
    pub(crate) fn new(
        trace_id: TraceId,
        span_id: SpanId,
        parent: Option<SpanId>,
        name: impl Into<Cow<'static, str>>,
        kind: Kind,
        start: SystemTime,
    ) -> Span {
        Span {
            trace_id,
            span_id,
            parent,
            name: name.into(),
            kind,
            start,
            end: SystemTime::now(),
            attributes: Vec::new(),
            events: Vec::new(),
            links: Vec::new(),
            status: Status::Unset,
        }
    }

    /// Add the attribute `key`.
    pub(crate) fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        self.attributes.push((key, value.into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_goes_through_its_traceparent_unchanged() {
        let link = Link {
            trace_id: trace_context::new_trace_id(),
            span_id: trace_context::new_span_id(),
        };
        let text = link.traceparent();
        assert_eq!(text.len(), 55);
        assert!(text.starts_with("00-") && text.ends_with("-01"), "{text}");
        assert_eq!(Link::parse(&text), Some(link));
        assert_eq!(Link::parse("not a traceparent"), None);
    }
}
