//! The ledger's writer, run as a Pingora background service: it takes the queued records in
//! batches (a full batch at once, a partial one after the flush interval) and writes each in one
//! statement. When the database is slow or down, the batch in hand is retried with a doubling
//! back-off (the queue keeps filling up to its bound meanwhile; see `queue.rs`), the outage is
//! logged once when it starts and once when it ends, and records dropped for want of room are
//! reported with their count. On shutdown, what is still held gets one last write within the
//! write timeout; whatever that cannot write is counted as dropped and logged.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::{background_service, BackgroundService, GenBackgroundService};
use tokio::time::Instant;
use tokio_postgres::{Client, Statement};
use uuid::Uuid;

use super::db::{clean, connect};
use super::queue::Queue;
use super::record::Record;
use super::schema;
use crate::config::ledger::LedgerSettings;
use crate::metrics::Metrics;

/// The first wait before a failed write is tried again; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// The longest wait between two tries while the database is down.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// The background service writing a `Ledger`'s records (`Ledger::writer`).
pub struct LedgerWriter {
    pub(crate) queue: Arc<Queue>,
    pub(crate) settings: LedgerSettings,
    pub(crate) metrics: Metrics,
}

/// An open connection with the batch insert prepared on it.
struct Conn {
    client: Client,
    insert: Statement,
}

/// The writer's state across batches.
struct Run {
    conn: Option<Conn>,
    /// The batch taken and not yet written (ids chosen, so a retry is recognised).
    pending: Vec<(Uuid, Record)>,
    /// Whether the database is failing (the outage has been logged).
    failing: bool,
    backoff: Duration,
    /// The dropped count last reported in the log.
    reported_dropped: u64,
}

impl LedgerWriter {
    /// This writer as a service to add to the Pingora server (`server.add_service(...)`).
    pub fn service(self) -> GenBackgroundService<LedgerWriter> {
        background_service("switchyard ledger", self)
    }

    /// Write batches until nothing waits. `false`: the server is stopping (with a batch possibly
    /// still pending).
    async fn drain(&self, run: &mut Run, shutdown: &mut ShutdownWatch) -> bool {
        loop {
            if run.pending.is_empty() {
                let batch = self.queue.take(self.settings.batch_records);
                if batch.is_empty() {
                    self.report(run);
                    return true;
                }
                run.pending = batch.into_iter().map(|r| (Uuid::new_v4(), r)).collect();
            }
            match self.write(run).await {
                Ok(()) => {
                    if run.failing {
                        log::info!(
                            "ledger: the database takes records again; {} still to write",
                            self.queue.held()
                        );
                    }
                    run.failing = false;
                    run.backoff = FIRST_BACKOFF;
                }
                Err(e) => {
                    if run.failing {
                        log::debug!("ledger: write failed again: {e}");
                    } else {
                        log::warn!(
                            "ledger: cannot write to the database ({e}); holding {} records (at \
                             most {}) and retrying",
                            self.queue.held(),
                            self.queue.bound()
                        );
                    }
                    run.failing = true;
                    self.report(run);
                    tokio::select! {
                        _ = stopping(shutdown) => return false,
                        _ = tokio::time::sleep(run.backoff) => {}
                    }
                    run.backoff = (run.backoff * 2).min(MAX_BACKOFF);
                }
            }
            self.report(run);
        }
    }

    /// Write the pending batch, connecting first when there is no connection. Any failure drops
    /// the connection (a timed-out statement may still be running on it).
    async fn write(&self, run: &mut Run) -> Result<(), String> {
        let timeout = self.settings.write_timeout;
        if run.conn.is_none() {
            run.conn = Some(self.open().await?);
        }
        let Some(conn) = &run.conn else {
            return Err("no connection".into());
        };
        let wrote = tokio::time::timeout(
            timeout,
            schema::insert(&conn.client, &conn.insert, &run.pending),
        )
        .await;
        match wrote {
            Ok(Ok(_)) => {
                self.queue.written(run.pending.len());
                run.pending.clear();
                Ok(())
            }
            Ok(Err(e)) => {
                run.conn = None;
                Err(clean(&e))
            }
            Err(_) => {
                run.conn = None;
                Err(format!("no answer within {} ms", timeout.as_millis()))
            }
        }
    }

    /// Connect, create the table when absent and prepare the insert, all within the write
    /// timeout.
    async fn open(&self) -> Result<Conn, String> {
        let timeout = self.settings.write_timeout;
        let client = connect(&self.settings.database_url, timeout).await?;
        let schema = &self.settings.schema;
        let ready = tokio::time::timeout(timeout, async {
            schema::ensure(&client, schema).await?;
            schema::prepare_insert(&client, schema).await
        })
        .await;
        match ready {
            Ok(Ok(insert)) => Ok(Conn { client, insert }),
            Ok(Err(e)) => Err(clean(&e)),
            Err(_) => Err(format!(
                "the table was not ready within {} ms",
                timeout.as_millis()
            )),
        }
    }

    /// Log the records dropped since the last report, and update the held gauge.
    fn report(&self, run: &mut Run) {
        let dropped = self.queue.dropped();
        if dropped > run.reported_dropped {
            log::warn!(
                "ledger: {} records dropped since the last report ({dropped} in all): at most {} \
                 are held while the database is unavailable",
                dropped - run.reported_dropped,
                self.queue.bound()
            );
            run.reported_dropped = dropped;
        }
        let held = i64::try_from(self.queue.held()).unwrap_or(i64::MAX);
        self.metrics.with(|f| {
            if let Ok(g) = f.ledger_held.get_metric_with_label_values(&[] as &[&str]) {
                g.set(held);
            }
        });
    }

    /// The server is stopping: one last try at everything held, within the write timeout;
    /// what remains is counted as dropped.
    async fn finish(&self, run: &mut Run) {
        let deadline = Instant::now() + self.settings.write_timeout;
        let last_try = async {
            loop {
                if run.pending.is_empty() {
                    let batch = self.queue.take(self.settings.batch_records);
                    if batch.is_empty() {
                        return Ok::<(), String>(());
                    }
                    run.pending = batch.into_iter().map(|r| (Uuid::new_v4(), r)).collect();
                }
                self.write(run).await?;
            }
        };
        let outcome = tokio::time::timeout_at(deadline, last_try).await;
        let lost = run.pending.len() + self.queue.take(usize::MAX).len();
        run.pending.clear();
        if lost > 0 {
            self.queue.lost(lost);
            let why = match outcome {
                Ok(Err(e)) => e,
                _ => "the write timeout ran out".into(),
            };
            log::warn!(
                "ledger: {lost} records not written before the server stopped ({why}); {} \
                 dropped in all",
                self.queue.dropped()
            );
        }
        self.report(run);
    }
}

#[async_trait]
impl BackgroundService for LedgerWriter {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut run = Run {
            conn: None,
            pending: Vec::new(),
            failing: false,
            backoff: FIRST_BACKOFF,
            reported_dropped: 0,
        };
        loop {
            // A full batch is written at once; a partial one after the flush interval.
            if self.queue.waiting() < self.settings.batch_records {
                tokio::select! {
                    _ = stopping(&mut shutdown) => break,
                    _ = self.queue.wake.notified() => {}
                    _ = tokio::time::sleep(self.settings.flush_interval) => {}
                }
            }
            if !self.drain(&mut run, &mut shutdown).await {
                break;
            }
        }
        self.finish(&mut run).await;
    }
}

/// Resolves when the server starts to stop (or its watch is gone).
async fn stopping(shutdown: &mut ShutdownWatch) {
    loop {
        if *shutdown.borrow() {
            return;
        }
        if shutdown.changed().await.is_err() {
            return;
        }
    }
}
