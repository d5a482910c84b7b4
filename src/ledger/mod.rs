//! The usage ledger: one [`Record`] per finished request (who asked, what for, what it used and
//! cost, how it ended), written durably to PostgreSQL for operators to query and bill from, and
//! `switchyard spend` to read it back without SQL.
//!
//! The request path only ever calls [`Ledger::record`], a plain function that puts the record in
//! a bounded in-memory queue and returns: it never waits on the database. The [`LedgerWriter`],
//! a Pingora background service, writes the queue in batches; while the database is slow or
//! down it holds up to `queue_records` records and retries, and every record dropped past that
//! bound is counted ([`Ledger::dropped`], the `switchyard_ledger_records_total{outcome="dropped"}`
//! metric) and logged with its count — never silently lost.
//!
//! - `record.rs`: what a record holds;
//! - `queue.rs`: the bounded hand-over and its exact counts;
//! - `writer.rs`: the background service (batches, retries, shutdown);
//! - `schema.rs`: the table, created when absent, and the batch insert;
//! - `db.rs`: a connection within a deadline;
//! - `report.rs`: grouped sums read back (per caller, model, provider, day or month, in each
//!   currency), which every reader below asks through;
//! - `spend.rs` and `cli.rs`: `switchyard spend`, spend and usage per caller, model or day;
//! - `reader.rs`: reads on a request's behalf (`GET /api/v1/usage`), through a small pool of
//!   connections, each read bounded by `read_timeout_ms`.
//!
//! The settings come from the configuration's `ledger:` section (`config::ledger`).

pub(crate) mod cli;
pub(crate) mod db;
mod queue;
mod reader;
pub(crate) mod record;
pub(crate) mod report;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod report_tests;
pub(crate) mod schema;
pub(crate) mod spend;
mod writer;

use std::sync::Arc;

pub use record::{Record, Usage};
pub(crate) use writer::LedgerWriter;

use crate::config::ledger::LedgerSettings;
use crate::metrics::Metrics;
use queue::Queue;

/// The request path's handle on the ledger: cheap to clone (the clones share one queue).
#[derive(Clone)]
pub struct Ledger {
    queue: Arc<Queue>,
    settings: Arc<LedgerSettings>,
    metrics: Metrics,
    /// Reads on a request's behalf (`GET /api/v1/usage`), connected on first use.
    reader: Arc<reader::Reader>,
}

impl Ledger {
    /// A ledger writing where `settings` say. Records are held until its writer runs
    /// ([`Ledger::writer`]). `metrics` counts written and dropped records.
    pub fn new(settings: &LedgerSettings, metrics: Metrics) -> Ledger {
        let queue = Arc::new(Queue::new(
            settings.queue_records,
            settings.batch_records,
            metrics.clone(),
        ));
        Ledger {
            queue,
            settings: Arc::new(settings.clone()),
            metrics,
            reader: Arc::new(reader::Reader::new(settings)),
        }
    }

    /// The background service that writes this ledger's records: add it to the Pingora server
    /// once ([`LedgerWriter::service`] names it), or run its `BackgroundService::start` with a
    /// shutdown watch. (A second writer would drain the same queue over a second connection.)
    pub fn writer(&self) -> LedgerWriter {
        LedgerWriter {
            queue: self.queue.clone(),
            settings: (*self.settings).clone(),
            metrics: self.metrics.clone(),
        }
    }

    /// Hand `record` to the writer. Never waits: when `queue_records` records are already held
    /// (the database is slow or down), the record is dropped and counted instead.
    pub fn record(&self, record: Record) {
        self.queue.push(record);
    }

    /// Records dropped since start: refused for want of room, or still unwritten when the server
    /// stopped.
    pub fn dropped(&self) -> u64 {
        self.queue.dropped()
    }

    /// Records written to the database since start.
    pub fn written(&self) -> u64 {
        self.queue.written_total()
    }

    /// The ledger's sums of the requests `filter` names, grouped by `by`, read within
    /// `ledger.read_timeout_ms` (`reader.rs`). The error is for the operator's log.
    pub(crate) async fn report(
        &self,
        filter: &report::Filter,
        by: &[report::GroupBy],
    ) -> Result<report::Report, String> {
        self.reader.report(filter, by).await
    }

    /// Records held in memory, not yet written.
    pub fn held(&self) -> usize {
        self.queue.held()
    }
}
