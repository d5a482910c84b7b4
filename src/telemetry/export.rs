//! The export queue and its background exporter. [`Queue::push`] is the request path's only
//! contact: one mutex, one `push_back` or a counted drop. [`Exporter`] wakes when a batch is full
//! or every `flush_interval`, encodes up to `batch_spans` spans and posts them to the collector
//! (OTLP/HTTP, `application/x-protobuf`) on a connection of its own, bounded by `timeout`. A
//! batch the collector refuses or that cannot be sent is counted (`failed`) and not retried:
//! holding it would hold the queue, and spans are diagnostics, not records.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

use super::span::Span;
use super::{otlp, TracingSettings};
use crate::metrics::{inc, Metrics};

/// Spans waiting for export, bounded.
pub(crate) struct Queue {
    spans: Mutex<VecDeque<Span>>,
    full: Notify,
    settings: TracingSettings,
    metrics: Metrics,
}

impl Queue {
    pub(crate) fn new(settings: TracingSettings, metrics: Metrics) -> Queue {
        Queue {
            spans: Mutex::new(VecDeque::new()),
            full: Notify::new(),
            settings,
            metrics,
        }
    }

    /// Queue `span`, or count it dropped when `queue_spans` are already waiting.
    pub(crate) fn push(&self, span: Span) {
        let held = {
            let mut q = self.spans.lock().unwrap_or_else(PoisonError::into_inner);
            if q.len() >= self.settings.queue_spans {
                None
            } else {
                q.push_back(span);
                Some(q.len())
            }
        };
        match held {
            None => self.count("dropped", 1),
            Some(n) if n == self.settings.batch_spans => self.full.notify_one(),
            Some(_) => {}
        }
    }

    fn take(&self) -> Vec<Span> {
        let mut q = self.spans.lock().unwrap_or_else(PoisonError::into_inner);
        let n = q.len().min(self.settings.batch_spans);
        q.drain(..n).collect()
    }

    fn count(&self, outcome: &str, n: u64) {
        self.metrics.with(|f| inc(&f.trace_spans, &[outcome], n));
    }
}

/// The background service that sends the queue to the collector.
pub(crate) struct Exporter {
    queue: Arc<Queue>,
    instance: String,
}

impl Exporter {
    pub(crate) fn new(queue: Arc<Queue>, instance: &str) -> Exporter {
        Exporter {
            queue,
            instance: instance.to_string(),
        }
    }

    /// Export what is queued, batch by batch, until the queue is empty.
    async fn drain(&self) {
        loop {
            let batch = self.queue.take();
            if batch.is_empty() {
                return;
            }
            let n = batch.len() as u64;
            let s = &self.queue.settings;
            let body = otlp::export_request(&batch, &s.service_name, &self.instance);
            drop(batch);
            match tokio::time::timeout(s.timeout, post(s, &body)).await {
                Ok(Ok(())) => self.queue.count("exported", n),
                Ok(Err(why)) => {
                    log::debug!("trace export failed: {why}");
                    self.queue.count("failed", n);
                }
                Err(_) => {
                    log::debug!("trace export timed out");
                    self.queue.count("failed", n);
                }
            }
        }
    }
}

#[async_trait]
impl BackgroundService for Exporter {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let every = self.queue.settings.flush_interval;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = self.queue.full.notified() => {}
                _ = shutdown.changed() => {
                    self.drain().await;
                    return;
                }
            }
            self.drain().await;
        }
    }
}

/// POST `body` to the collector; `Ok` on a 2xx answer.
async fn post(s: &TracingSettings, body: &[u8]) -> Result<(), String> {
    let mut conn = tokio::net::TcpStream::connect((s.host.as_str(), s.port))
        .await
        .map_err(|e| format!("connecting to {}:{}: {e}", s.host, s.port))?;
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/x-protobuf\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        s.path,
        s.host,
        s.port,
        body.len()
    )
    .into_bytes();
    for (name, value) in &s.headers {
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    conn.write_all(&head).await.map_err(|e| e.to_string())?;
    conn.write_all(body).await.map_err(|e| e.to_string())?;
    // The status line is all that is read: `HTTP/1.1 200 …`.
    let mut buf = [0u8; 64];
    let mut got = 0;
    while got < 12 {
        let n = conn
            .read(&mut buf[got..])
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the collector closed the connection without an answer".into());
        }
        got += n;
    }
    match &buf[9..10] {
        b"2" => Ok(()),
        _ => Err(format!(
            "the collector answered {}",
            String::from_utf8_lossy(&buf[..got.min(32)]).trim()
        )),
    }
}
