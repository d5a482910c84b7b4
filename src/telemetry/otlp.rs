//! OTLP's trace export request (`ExportTraceServiceRequest`, opentelemetry-proto's
//! `collector/trace/v1`) in the protobuf encoding, written by hand: the gateway sends only this
//! one message, a few nested messages of bytes, strings, varints and fixed64s, so a protobuf
//! library and generated code would weigh far more than these functions. Field numbers are the
//! `.proto` files' (`trace/v1/trace.proto`, `common/v1/common.proto`,
//! `resource/v1/resource.proto`).

use std::time::{SystemTime, UNIX_EPOCH};

use super::span::{Event, Link, Span, Status, Value};

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

/// The instrumentation scope's name (`InstrumentationScope.name`).
pub(crate) const SCOPE: &str = "switchyard";

/// `spans` as one `ExportTraceServiceRequest`, from the resource named `service` (its
/// `service.name`) and `instance` (`service.instance.id`).
pub(crate) fn export_request(spans: &[Span], service: &str, instance: &str) -> Vec<u8> {
    // ResourceSpans { resource = 1, scope_spans = 2 }
    let mut resource = Vec::new();
    key_value(
        &mut resource,
        1,
        "service.name",
        &Value::Str(service.to_string().into()),
    );
    key_value(
        &mut resource,
        1,
        "service.instance.id",
        &Value::Str(instance.to_string().into()),
    );
    let mut scope_spans = Vec::new();
    // ScopeSpans { scope = 1, spans = 2 }; InstrumentationScope { name = 1, version = 2 }
    let mut scope = Vec::new();
    string(&mut scope, 1, SCOPE);
    string(&mut scope, 2, env!("CARGO_PKG_VERSION"));
    message(&mut scope_spans, 1, &scope);
    for s in spans {
        message(&mut scope_spans, 2, &span(s));
    }
    let mut resource_spans = Vec::new();
    message(&mut resource_spans, 1, &resource);
    message(&mut resource_spans, 2, &scope_spans);
    let mut out = Vec::with_capacity(resource_spans.len() + 8);
    message(&mut out, 1, &resource_spans);
    out
}

/// One `Span`.
fn span(s: &Span) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    bytes(&mut out, 1, &s.trace_id);
    bytes(&mut out, 2, &s.span_id);
    if let Some(parent) = &s.parent {
        bytes(&mut out, 4, parent);
    }
    string(&mut out, 5, &s.name);
    varint_field(&mut out, 6, s.kind as u64);
    fixed64(&mut out, 7, nanos(s.start));
    fixed64(&mut out, 8, nanos(s.end));
    for (k, v) in &s.attributes {
        key_value(&mut out, 9, k, v);
    }
    for e in &s.events {
        message(&mut out, 11, &event(e));
    }
    for l in &s.links {
        message(&mut out, 13, &link(l));
    }
    let mut status = Vec::new();
    match &s.status {
        Status::Unset => {}
        Status::Error(m) => {
            string(&mut status, 2, m);
            varint_field(&mut status, 3, 2);
        }
    }
    if !status.is_empty() {
        message(&mut out, 15, &status);
    }
    out
}

/// `Span.Event { time_unix_nano = 1, name = 2, attributes = 3 }`.
fn event(e: &Event) -> Vec<u8> {
    let mut out = Vec::new();
    fixed64(&mut out, 1, nanos(e.time));
    string(&mut out, 2, e.name);
    for (k, v) in &e.attributes {
        key_value(&mut out, 3, k, v);
    }
    out
}

/// `Span.Link { trace_id = 1, span_id = 2 }`.
fn link(l: &Link) -> Vec<u8> {
    let mut out = Vec::new();
    bytes(&mut out, 1, &l.trace_id);
    bytes(&mut out, 2, &l.span_id);
    out
}

/// A `KeyValue { key = 1, value = 2 }` as field `field`; `AnyValue { string_value = 1,
/// bool_value = 2, int_value = 3 }`.
fn key_value(out: &mut Vec<u8>, field: u32, k: &str, v: &Value) {
    let mut any = Vec::new();
    match v {
        Value::Str(s) => string(&mut any, 1, s),
        Value::Bool(b) => varint_field(&mut any, 2, u64::from(*b)),
        Value::Int(n) => varint_field(&mut any, 3, *n as u64),
    }
    let mut kv = Vec::with_capacity(k.len() + any.len() + 4);
    string(&mut kv, 1, k);
    message(&mut kv, 2, &any);
    message(out, field, &kv);
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, u64::from(field) << 3 | u64::from(wire));
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn varint_field(out: &mut Vec<u8>, field: u32, n: u64) {
    tag(out, field, VARINT);
    varint(out, n);
}

fn fixed64(out: &mut Vec<u8>, field: u32, n: u64) {
    tag(out, field, FIXED64);
    out.extend_from_slice(&n.to_le_bytes());
}

fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    tag(out, field, LEN);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    bytes(out, field, s.as_bytes());
}

fn message(out: &mut Vec<u8>, field: u32, encoded: &[u8]) {
    bytes(out, field, encoded);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_little_endian_base_128() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
        out.clear();
        varint(&mut out, 1);
        assert_eq!(out, [1]);
    }

    #[test]
    fn a_span_encodes_its_ids_name_and_attributes() {
        let mut s = Span::new(
            [1; 16],
            [2; 8],
            Some([3; 8]),
            "rerank",
            super::super::Kind::Server,
            UNIX_EPOCH,
        );
        s.set("http.response.status_code", 200i64);
        let enc = span(&s);
        // trace_id: field 1, length 16.
        assert_eq!(&enc[..2], &[0x0a, 16]);
        assert_eq!(&enc[2..18], &[1; 16]);
        // span_id: field 2, length 8.
        assert_eq!(&enc[18..20], &[0x12, 8]);
        // parent_span_id: field 4.
        assert_eq!(&enc[28..30], &[0x22, 8]);
        // name: field 5.
        assert_eq!(&enc[38..46], b"\x2a\x06rerank");
        // kind: field 6 = SERVER (2).
        assert_eq!(&enc[46..48], &[0x30, 2]);
        let request = export_request(&[s], "switchyard", "i-1");
        assert_eq!(request[0], 0x0a);
    }
}
