//! OpenTelemetry traces, exported over OTLP/HTTP in the protobuf encoding (`tracing:` in the
//! configuration, off by default; the `otel` cargo feature).
//!
//! The request path only ever hands a finished [`Span`] to [`Tracer::record`]: a plain
//! function that takes a mutex for one `push_back` onto a bounded queue (or counts a drop) and
//! returns. [`export::Exporter`], a background service, takes the queue in batches, encodes
//! them (`otlp.rs`) and posts them to the collector; a collector that is slow or down delays
//! no request, and what could not be queued or sent is counted
//! (`switchyard_trace_spans_total{outcome}`). Without a `tracing.endpoint` the tracer is off:
//! no span is built and sampling answers no.

pub(crate) mod span;

#[cfg(feature = "otel")]
pub(crate) mod export;
#[cfg(feature = "otel")]
pub(crate) mod otlp;

#[cfg(feature = "otel")]
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};

pub(crate) use span::{Event, Kind, Link, Span, Status};

use crate::common::trace_context::TraceId;
use crate::metrics::Metrics;

/// Where and how spans are exported (`switchyard.tracing`), as the configuration checked it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TracingSettings {
    /// The collector's host (a name or an address).
    pub(crate) host: String,
    /// Its port.
    pub(crate) port: u16,
    /// The path spans are posted to (`/v1/traces`).
    pub(crate) path: String,
    /// Headers sent with each export (a collector's API key), marked sensitive.
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
    /// The share of new traces sampled, 0 to 1 (a caller's `sampled` flag is followed).
    pub(crate) sample_ratio: f64,
    /// Most spans held in memory waiting for export.
    pub(crate) queue_spans: usize,
    /// Most spans per export request.
    pub(crate) batch_spans: usize,
    /// Longest a span waits for its batch.
    pub(crate) flush_interval: Duration,
    /// Longest one export (connect, send, answer) may take.
    pub(crate) timeout: Duration,
    /// The resource's `service.name`.
    pub(crate) service_name: String,
}

/// The handle the gateway records spans through; cheap to clone; off without `tracing:`.
#[derive(Clone, Default)]
pub(crate) struct Tracer {
    #[cfg(feature = "otel")]
    queue: Option<Arc<export::Queue>>,
    /// The sampling threshold: a new trace is sampled when its id's last 8 bytes, as a number,
    /// are below it (0: never; `u64::MAX`: always).
    threshold: u64,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer").field("on", &self.is_on()).finish()
    }
}

impl Tracer {
    /// A tracer exporting as `settings` say (`None`: off), counting in `metrics`.
    pub(crate) fn new(settings: Option<&TracingSettings>, metrics: Metrics) -> Tracer {
        let Some(s) = settings else {
            return Tracer::default();
        };
        let threshold = if s.sample_ratio >= 1.0 {
            u64::MAX
        } else {
            (s.sample_ratio.max(0.0) * u64::MAX as f64) as u64
        };
        #[cfg(feature = "otel")]
        {
            Tracer {
                queue: Some(Arc::new(export::Queue::new(s.clone(), metrics))),
                threshold,
            }
        }
        #[cfg(not(feature = "otel"))]
        {
            let _ = (metrics, threshold);
            Tracer::default()
        }
    }

    /// Whether spans are exported at all.
    pub(crate) fn is_on(&self) -> bool {
        #[cfg(feature = "otel")]
        {
            self.queue.is_some()
        }
        #[cfg(not(feature = "otel"))]
        {
            false
        }
    }

    /// Whether a trace this gateway starts is sampled (the ratio-by-trace-id rule, so every
    /// instance decides the same for one trace id).
    pub(crate) fn sample(&self, trace_id: &TraceId) -> bool {
        if !self.is_on() {
            return false;
        }
        let mut low = [0u8; 8];
        low.copy_from_slice(&trace_id[8..]);
        self.threshold == u64::MAX || u64::from_be_bytes(low) < self.threshold
    }

    /// Hand a finished span to the export queue (counted as dropped when the queue is full).
    pub(crate) fn record(&self, span: Span) {
        #[cfg(feature = "otel")]
        if let Some(q) = &self.queue {
            q.push(span);
        }
        #[cfg(not(feature = "otel"))]
        let _ = span;
    }

    /// The background service that exports the queue (`None` when off).
    #[cfg(feature = "otel")]
    pub(crate) fn exporter(&self, instance: &str) -> Option<export::Exporter> {
        self.queue
            .as_ref()
            .map(|q| export::Exporter::new(q.clone(), instance))
    }
}
