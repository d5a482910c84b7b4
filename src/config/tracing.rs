//! The `tracing:` section checked into the exporter's [`TracingSettings`]: where spans go
//! (an OTLP/HTTP collector), how they are sent, and which share of new traces is sampled.
//! Absent, or with an empty `endpoint`: no export (request ids and trace context propagation
//! work regardless). A build without the `otel` cargo feature refuses an endpoint at load.

use std::time::Duration;

use http::{HeaderName, HeaderValue};

use super::file::TracingFile;
use crate::telemetry::TracingSettings;

const AT: &str = "switchyard.tracing";

/// The checked section (`None`: no export). Problems go to `errors`, each with its key path.
pub(crate) fn tracing_settings(
    f: Option<&TracingFile>,
    errors: &mut Vec<String>,
) -> Option<TracingSettings> {
    let f = f?;
    let endpoint = f.endpoint.trim();
    if endpoint.is_empty() {
        return None;
    }
    if !cfg!(feature = "otel") {
        errors.push(format!(
            "{AT}.endpoint: this build of Switchyard exports no traces (built without the \
             `otel` cargo feature)"
        ));
        return None;
    }
    let before = errors.len();
    if f.protocol != "http/protobuf" {
        errors.push(format!(
            "{AT}.protocol: `{}` is not supported; only http/protobuf (OTLP over HTTP, port \
             4318 by convention) is",
            f.protocol
        ));
    }
    let endpoint = parse_endpoint(endpoint)
        .map_err(|m| errors.push(format!("{AT}.endpoint: {m}")))
        .ok();
    if !(0.0..=1.0).contains(&f.sample_ratio) {
        errors.push(format!(
            "{AT}.sample_ratio: {} is not between 0 and 1",
            f.sample_ratio
        ));
    }
    if f.queue_spans == 0 || f.batch_spans == 0 || f.batch_spans > f.queue_spans {
        errors.push(format!(
            "{AT}: queue_spans and batch_spans must be at least 1, batch_spans at most queue_spans"
        ));
    }
    if f.flush_interval_ms == 0 || f.timeout_ms == 0 {
        errors.push(format!(
            "{AT}: flush_interval_ms and timeout_ms must be at least 1"
        ));
    }
    let mut headers = Vec::new();
    for (name, value) in &f.headers {
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            (Ok(n), Ok(mut v)) => {
                v.set_sensitive(true);
                headers.push((n, v));
            }
            _ => errors.push(format!("{AT}.headers.{name}: not a valid HTTP header")),
        }
    }
    let (host, port, path) = endpoint?;
    (errors.len() == before).then(|| TracingSettings {
        host,
        port,
        path,
        headers,
        sample_ratio: f.sample_ratio,
        queue_spans: f.queue_spans,
        batch_spans: f.batch_spans,
        flush_interval: Duration::from_millis(f.flush_interval_ms),
        timeout: Duration::from_millis(f.timeout_ms),
        service_name: f.service_name.clone(),
    })
}

/// `http://host[:port][/path]` → host, port (default 80), path (`/v1/traces` when none).
fn parse_endpoint(url: &str) -> Result<(String, u16, String), String> {
    let rest = if let Some(rest) = url.strip_prefix("http://") {
        rest
    } else if url.starts_with("https://") {
        return Err(
            "https is not supported by the built-in exporter: send to a collector on the \
             same host or network over http (an OpenTelemetry Collector forwards over TLS)"
                .into(),
        );
    } else {
        return Err(format!("`{url}` is not an http:// URL"));
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let path = if path.is_empty() || path == "/" {
        "/v1/traces"
    } else {
        path
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (
            h,
            p.parse::<u16>()
                .map_err(|_| format!("`{p}` is not a port"))?,
        ),
        _ => (authority, 80),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || path.bytes().any(|b| b <= b' ') {
        return Err(format!("`{url}` has no host, or a path with spaces"));
    }
    Ok((host.to_string(), port, path.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_http_urls_with_the_traces_path_by_default() {
        assert_eq!(
            parse_endpoint("http://collector:4318").unwrap(),
            ("collector".into(), 4318, "/v1/traces".into())
        );
        assert_eq!(
            parse_endpoint("http://127.0.0.1:9/otlp/v1/traces").unwrap(),
            ("127.0.0.1".into(), 9, "/otlp/v1/traces".into())
        );
        assert_eq!(parse_endpoint("http://c/").unwrap().1, 80);
        assert!(parse_endpoint("https://c:4318")
            .unwrap_err()
            .contains("https"));
        assert!(parse_endpoint("grpc://c:4317").is_err());
        assert!(parse_endpoint("http://c:port").is_err());
    }
}
