//! Reads of the ledger on a request's behalf (`GET /api/v1/usage`): the one place the request
//! path waits on the ledger's database, so every read is bounded and none can hang.
//!
//! A small pool: at most [`CONNECTIONS`] connections read at once, and as many are kept open
//! between reads, so a read is usually one round trip. Each read — waiting for a connection,
//! connecting, the query — must finish within `ledger.read_timeout_ms`, else it is abandoned
//! (its connection dropped) and the request answered `503 ledger_unavailable`. A connection is
//! opened read-only (`default_transaction_read_only`) with the same bound as the server's
//! `statement_timeout`, so the server stops a query the gateway has given up on. A kept
//! connection the server has closed since (a restart) fails its first query: the read is then
//! tried once more on a new connection, within the same bound.
//!
//! A ledger whose table does not exist yet (the writer creates it on its first connection) has
//! no rows: its report is empty, not an error.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

use super::db::{clean, connect};
use super::report::{self, Filter, GroupBy, Report};
use crate::config::ledger::LedgerSettings;

/// Most connections reading at once, and most kept open between reads.
const CONNECTIONS: usize = 4;

/// The pool of read connections of one ledger.
pub(crate) struct Reader {
    url: String,
    schema: String,
    timeout: Duration,
    /// Connections open and idle, most recently used last.
    idle: Mutex<Vec<Client>>,
    /// One permit per connection that may be in use.
    permits: Semaphore,
}

impl Reader {
    /// A pool for `settings`' database; nothing is connected before the first read.
    pub(crate) fn new(settings: &LedgerSettings) -> Reader {
        Reader {
            url: settings.database_url.clone(),
            schema: settings.schema.clone(),
            timeout: settings.read_timeout,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(CONNECTIONS),
        }
    }

    /// The report of `filter` grouped by `by`, within the read timeout. The error says why, for
    /// the operator's log (credentials blanked); the caller is told only that the ledger is
    /// unavailable.
    pub(crate) async fn report(&self, filter: &Filter, by: &[GroupBy]) -> Result<Report, String> {
        let read = async {
            let _permit = self
                .permits
                .acquire()
                .await
                .map_err(|_| "the read pool is closed".to_string())?;
            if let Some(client) = self.take() {
                match self.ask(&client, filter, by).await {
                    Ok(report) => {
                        self.keep(client);
                        return Ok(report);
                    }
                    // Closed under it: a new connection is tried below.
                    Err(e) if e.is_closed() || client.is_closed() => {}
                    Err(e) => return Err(clean(&e)),
                }
            }
            let client = self.open().await?;
            let report = self.ask(&client, filter, by).await.map_err(|e| clean(&e))?;
            self.keep(client);
            Ok(report)
        };
        tokio::time::timeout(self.timeout, read)
            .await
            .map_err(|_| format!("no answer within {} ms", self.timeout.as_millis()))?
    }

    /// The report on `client`; a table (or schema) not created yet holds no rows.
    async fn ask(
        &self,
        client: &Client,
        filter: &Filter,
        by: &[GroupBy],
    ) -> Result<Report, tokio_postgres::Error> {
        match report::run(client, &self.schema, filter, by).await {
            Err(e)
                if e.code() == Some(&SqlState::UNDEFINED_TABLE)
                    || e.code() == Some(&SqlState::INVALID_SCHEMA_NAME) =>
            {
                Ok(Report {
                    by: by.to_vec(),
                    rows: Vec::new(),
                })
            }
            asked => asked,
        }
    }

    /// A new connection, read-only, whose statements the server stops at the read timeout.
    async fn open(&self) -> Result<Client, String> {
        let client = connect(&self.url, self.timeout).await?;
        let ms = self.timeout.as_millis();
        client
            .batch_execute(&format!(
                "SET default_transaction_read_only = on; SET statement_timeout = {ms}"
            ))
            .await
            .map_err(|e| clean(&e))?;
        Ok(client)
    }

    /// An idle connection still open, if any.
    fn take(&self) -> Option<Client> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(client) = idle.pop() {
            if !client.is_closed() {
                return Some(client);
            }
        }
        None
    }

    /// Keep `client` for the next read (within the pool's size).
    fn keep(&self, client: Client) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < CONNECTIONS && !client.is_closed() {
            idle.push(client);
        }
    }
}
