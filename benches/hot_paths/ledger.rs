//! `Ledger::record`, the usage ledger's only call on the request path, with its writer running
//! against a live PostgreSQL (taking batches off the queue as they fill) and with its writer
//! stalled on a database that refuses connections (holding every record, retrying). The issue's
//! figure is the ratio: a request's latency must not change with the database down.
//!
//! Each sample times `record` alone over records built beforehand. The live database is
//! `SWITCHYARD_TEST_POSTGRES_URL` (default `postgresql://postgres:postgres@127.0.0.1:5432/postgres`,
//! as the tests use), written into a schema of the bench's own, dropped afterwards; without one
//! only the stalled case runs.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use pingora::services::background::BackgroundService;
use switchyard::internals::ledger::LedgerSettings;
use switchyard::internals::ledger::{Ledger, Record, Usage};
use switchyard::internals::metrics::Metrics;
use tokio::runtime::Runtime;
use tokio::sync::watch;

/// A finished rerank request, as the gateway would record it.
fn record(i: usize) -> Record {
    let mut r = Record::new("public", "/api/v1/rerank", 200);
    r.request_id = Some(format!("bench-{i}"));
    r.caller = Some("key:bench".into());
    r.operation = Some("rerank".into());
    r.model = Some("rerank-v3.5".into());
    r.provider = Some("cohere".into());
    r.native_model = Some("rerank-v3.5".into());
    r.usage = Usage {
        tokens: 4_000,
        ..Usage::default()
    };
    r.cost_nanos = Some(2_000_000);
    r.currency = Some("USD".into());
    r.cost_basis = Some("provider".into());
    r.attempts = 1;
    r
}

/// One ledger and its running writer.
struct Running {
    ledger: Ledger,
    stop: watch::Sender<bool>,
    writer: tokio::task::JoinHandle<()>,
}

fn settings(url: &str, schema: &str) -> LedgerSettings {
    LedgerSettings {
        database_url: url.to_string(),
        schema: schema.to_string(),
        // Room for every record of a sample: the stalled case must hold them, not drop them.
        queue_records: usize::MAX,
        batch_records: 500,
        flush_interval: Duration::from_millis(100),
        write_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(2),
    }
}

fn start(rt: &Runtime, settings: &LedgerSettings) -> Running {
    let ledger = Ledger::new(settings, Metrics::off());
    let writer = ledger.writer();
    let (stop, watch) = watch::channel(false);
    let writer = rt.spawn(async move { writer.start(watch).await });
    Running {
        ledger,
        stop,
        writer,
    }
}

/// Time `record` over `iters` records made beforehand.
fn timed(ledger: &Ledger, iters: u64) -> Duration {
    let records: Vec<Record> = (0..iters as usize).map(record).collect();
    let started = Instant::now();
    for r in records {
        ledger.record(black_box(r));
    }
    started.elapsed()
}

/// Whether the live database answers, within two seconds.
fn reachable(rt: &Runtime, url: &str) -> bool {
    rt.block_on(async {
        matches!(
            tokio::time::timeout(
                Duration::from_secs(2),
                tokio_postgres::connect(url, tokio_postgres::NoTls)
            )
            .await,
            Ok(Ok(_))
        )
    })
}

fn drop_schema(rt: &Runtime, url: &str, schema: &str) {
    rt.block_on(async {
        if let Ok((client, conn)) = tokio_postgres::connect(url, tokio_postgres::NoTls).await {
            tokio::spawn(conn);
            let _ = client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                .await;
        }
    });
}

pub fn bench(c: &mut Criterion) {
    let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    else {
        return;
    };
    let live = std::env::var("SWITCHYARD_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgresql://postgres:postgres@127.0.0.1:5432/postgres".into());
    let schema = format!("switchyard_bench_{}", std::process::id());
    let (port, _refusing) = rt.block_on(async {
        let s = tokio::net::TcpSocket::new_v4().unwrap();
        s.bind(([127, 0, 0, 1], 0).into()).unwrap();
        (s.local_addr().unwrap().port(), s)
    });
    let down = format!("postgresql://postgres@127.0.0.1:{port}/postgres");

    let mut g = c.benchmark_group("ledger");
    let mut per_record = Vec::new();
    // The stopped writers, still making their last write: waited for before the schema goes.
    let mut stopped = Vec::new();
    let mut cases = vec![("record_db_down", down)];
    if reachable(&rt, &live) {
        cases.insert(0, ("record_db_up", live.clone()));
    } else {
        eprintln!("ledger: no PostgreSQL at the test URL; only the stalled writer is measured");
    }
    // Short: a stalled writer holds every record of a sample in memory.
    g.warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_millis(500))
        .sample_size(10);
    for (name, url) in cases {
        let mut total = (Duration::ZERO, 0u64);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                // A fresh ledger per sample, so memory is one sample's records at most; the
                // stopped writer gives up what it cannot write (counted as dropped).
                let running = start(&rt, &settings(&url, &schema));
                let took = timed(&running.ledger, iters);
                let _ = running.stop.send(true);
                stopped.push(running.writer);
                total = (total.0 + took, total.1 + iters);
                took
            })
        });
        per_record.push((name, total.0.as_nanos() as f64 / total.1.max(1) as f64));
    }
    g.finish();
    if let [(up, a), (down, b)] = per_record[..] {
        println!(
            "ledger: {up} {a:.1} ns/record, {down} {b:.1} ns/record, ratio down/up {:.2}",
            b / a
        );
    }
    rt.block_on(async {
        for writer in stopped {
            let _ = writer.await;
        }
    });
    drop_schema(&rt, &live, &schema);
}
