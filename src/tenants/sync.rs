//! The background service that keeps an instance's snapshot of the database keys
//! (`auth::db_keys`): it listens on the schema's channel and reads the tables in full when a
//! change is notified (within a round trip or two of its commit), and every
//! `tenants.refresh_seconds` whatever it heard (a notification sent while this instance was not
//! listening is not replayed).
//!
//! The database lost (the connection ends, a read fails or times out): the snapshot in hand is
//! kept and served, and reconnection is tried with a doubling back-off; past
//! `tenants.serve_stale_seconds` since the last full read, an empty snapshot replaces it, so
//! database keys are refused (YAML keys and tokens are not affected), until a read succeeds
//! again. `switchyard_tenants_sync_age_seconds` is the time since the last full read, and
//! `switchyard_tenants_stale` is 0 (fresh), 1 (serving a snapshot it cannot refresh) or 2
//! (refusing database keys), both updated every second.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_postgres::Client;

use super::set;
use super::store::{StoreError, Tables};
use crate::auth::db_keys::{DbKeyHandle, DbKeys};
use crate::config::tenants::TenantsSettings;
use crate::metrics::Metrics;

/// The first wait before reconnecting; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How often the gauges (and the stale bound) are looked at.
const TICK: Duration = Duration::from_secs(1);

/// The YAML keys' principals in force (they win a clash), read at each full read.
pub(crate) type YamlPrincipals = Arc<dyn Fn() -> HashSet<String> + Send + Sync>;

/// The sync service of one gateway.
pub(crate) struct TenantsSync {
    pub(crate) settings: TenantsSettings,
    pub(crate) handle: DbKeyHandle,
    pub(crate) metrics: Metrics,
    pub(crate) yaml: YamlPrincipals,
}

/// What the service knows across connections.
struct Run {
    started: Instant,
    /// When the tables were last read in full.
    last_read: Option<Instant>,
    /// The database is lost (the outage has been logged).
    failing: bool,
    /// The stale bound passed: database keys are refused.
    refused: bool,
    /// Clashes already logged.
    clashes: HashSet<String>,
}

impl TenantsSync {
    fn tables(&self) -> Tables {
        Tables {
            schema: self.settings.schema.clone(),
        }
    }

    /// Read the tables in full and put the snapshot in force.
    async fn read(&self, client: &Client, run: &mut Run) -> Result<(), StoreError> {
        let tables = self.tables();
        let (tenants, keys) = tokio::time::timeout(self.settings.timeout, tables.usable(client))
            .await
            .map_err(|_| StoreError::Db("the full read took too long".into()))??;
        let (snapshot, built) = set::build(&tenants, &keys, &(self.yaml)());
        for principal in built.clashes {
            if run.clashes.insert(principal.clone()) {
                log::warn!(
                    "tenants: database key {principal} has the name of a YAML key \
                     (auth.api_keys), which wins: the database key is refused"
                );
            }
        }
        for problem in built.unreadable {
            log::warn!("tenants: stored limits not readable, left out: {problem}");
        }
        self.handle.store(snapshot);
        run.last_read = Some(Instant::now());
        if run.failing || run.refused {
            log::info!(
                "tenants: the database is back; {} key digests loaded",
                self.handle.load().len()
            );
        }
        run.failing = false;
        run.refused = false;
        self.gauges(run);
        Ok(())
    }

    /// The gauges, and the stale bound: past it, database keys are refused.
    fn gauges(&self, run: &mut Run) {
        let since = run.last_read.unwrap_or(run.started);
        let age = since.elapsed();
        if run.failing
            && !run.refused
            && (run.last_read.is_none() || age > self.settings.serve_stale)
        {
            if run.last_read.is_some() {
                log::warn!(
                    "tenants: the database has been lost for longer than \
                     tenants.serve_stale_seconds ({} s): database keys are refused until it is back",
                    self.settings.serve_stale.as_secs()
                );
            }
            self.handle.store(DbKeys::default());
            run.refused = true;
        }
        let stale = match (run.failing, run.refused) {
            (_, true) => 2,
            (true, false) => 1,
            (false, false) => 0,
        };
        self.metrics.tenants_sync(age.as_secs(), stale);
    }

    /// One connection's life: listen, read, and read again on each notification and every
    /// refresh interval, until the connection or a read fails (`Ok`) or the server stops
    /// (`Err(())`).
    async fn connected(&self, run: &mut Run, shutdown: &mut ShutdownWatch) -> Result<(), ()> {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let client = match super::db::open(&self.settings, Some(tx)).await {
            Ok(c) => c,
            Err(e) => {
                self.lost(run, &e);
                return Ok(());
            }
        };
        let listen = format!("LISTEN {}", super::channel(&self.settings.schema));
        if let Err(e) = client.batch_execute(&listen).await {
            self.lost(run, &crate::ledger::db::clean(&e));
            return Ok(());
        }
        let mut tick = tokio::time::interval(TICK);
        let mut due = Instant::now();
        loop {
            if Instant::now() >= due {
                if let Err(e) = self.read(&client, run).await {
                    self.lost(run, &describe(&e));
                    return Ok(());
                }
                due = Instant::now() + self.settings.refresh;
            }
            tokio::select! {
                _ = shutdown.changed() => return Err(()),
                heard = rx.recv() => match heard {
                    // Changes notified together are read once.
                    Some(()) => { while rx.try_recv().is_ok() {} due = Instant::now(); }
                    None => { self.lost(run, "the connection ended"); return Ok(()); }
                },
                _ = tick.tick() => self.gauges(run),
            }
        }
    }

    /// The database is lost: logged when the outage starts.
    fn lost(&self, run: &mut Run, why: &str) {
        if !run.failing {
            log::warn!(
                "tenants: the database cannot be reached ({why}); serving the keys loaded last for \
                 up to {} s",
                self.settings.serve_stale.as_secs()
            );
        }
        run.failing = true;
        self.gauges(run);
    }
}

fn describe(e: &StoreError) -> String {
    match e {
        StoreError::Db(text) => text.clone(),
        other => format!("{other:?}"),
    }
}

#[async_trait]
impl BackgroundService for TenantsSync {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut run = Run {
            started: Instant::now(),
            last_read: None,
            failing: false,
            refused: false,
            clashes: HashSet::new(),
        };
        let mut backoff = FIRST_BACKOFF;
        loop {
            let began = Instant::now();
            if self.connected(&mut run, &mut shutdown).await.is_err() {
                return;
            }
            // A connection that lasted was a good one: the next wait starts short again.
            if began.elapsed() > MAX_BACKOFF {
                backoff = FIRST_BACKOFF;
            }
            let until = Instant::now() + backoff;
            while Instant::now() < until {
                tokio::select! {
                    _ = shutdown.changed() => return,
                    _ = tokio::time::sleep(TICK.min(until - Instant::now())) => self.gauges(&mut run),
                }
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}
