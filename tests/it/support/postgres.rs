//! The PostgreSQL the ledger tests use: `SWITCHYARD_TEST_POSTGRES_URL`, default
//! `postgresql://postgres:postgres@127.0.0.1:5432/postgres` (`scripts/test` starts one). Each
//! test writes into a schema of its own ([`Schema`], dropped at the end), so tests and runs never
//! see each other's records. Tests fail, never skip, without a database.
//!
//! [`PgProc`] is a private server the outage test starts, stops and starts again: `initdb` into
//! a temporary directory, `pg_ctl` on a free loopback port (as the `postgres` user when the
//! tests run as root, which PostgreSQL refuses to run as).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio_postgres::{Client, NoTls};

use super::free_port;

pub fn postgres_url() -> String {
    std::env::var("SWITCHYARD_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgresql://postgres:postgres@127.0.0.1:5432/postgres".into())
}

/// A direct connection to `url`, to look at what the ledger wrote. Fails the test, with what to
/// do, when there is no database.
pub async fn raw(url: &str) -> Client {
    let connected =
        tokio::time::timeout(Duration::from_secs(10), tokio_postgres::connect(url, NoTls)).await;
    match connected {
        Ok(Ok((client, connection))) => {
            tokio::spawn(connection);
            client
        }
        Ok(Err(e)) => panic!(
            "no PostgreSQL at {url} ({e}): start one (scripts/test does) or set \
             SWITCHYARD_TEST_POSTGRES_URL"
        ),
        Err(_) => panic!("PostgreSQL at {url} did not answer within 10 s"),
    }
}

/// A schema name no other test or run uses; dropped (with what the ledger wrote in it) when
/// this is dropped.
pub struct Schema {
    pub name: String,
    url: String,
}

impl Schema {
    pub fn new(url: &str) -> Schema {
        Schema {
            name: format!("switchyard_test_{}", uuid::Uuid::new_v4().simple()),
            url: url.to_string(),
        }
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        // Its own thread and runtime: the drop may run inside a test's runtime.
        let (url, name) = (self.url.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok(Ok((client, connection))) = tokio::time::timeout(
                    Duration::from_secs(5),
                    tokio_postgres::connect(&url, NoTls),
                )
                .await
                {
                    tokio::spawn(connection);
                    let _ = client
                        .batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                        .await;
                }
            });
        })
        .join();
    }
}

/// Where PostgreSQL's server programs are: on PATH, else Debian's versioned directory.
fn bin(program: &str) -> PathBuf {
    let on_path = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|p| !p.is_empty());
    if let Some(p) = on_path {
        return p.into();
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    versions.sort();
    versions
        .last()
        .map(|v| v.join("bin").join(program))
        .filter(|p| p.exists())
        .unwrap_or_else(|| panic!("no {program}: install PostgreSQL's server (Debian: postgresql)"))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// A private PostgreSQL server, killed (immediate stop) and its directory removed when dropped.
pub struct PgProc {
    pub port: u16,
    dir: PathBuf,
    as_postgres: bool,
}

impl PgProc {
    /// Create a cluster (trust authentication, user `postgres`) and start it on a free port.
    pub fn start() -> PgProc {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("switchyard-pg-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let proc = PgProc {
            port,
            dir,
            as_postgres: is_root(),
        };
        let dir = proc.dir.to_string_lossy().into_owned();
        proc.run(
            "initdb",
            &[
                "-D",
                &dir,
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
        );
        proc.up();
        proc
    }

    /// Run one of PostgreSQL's programs (as `postgres` when root), which must succeed.
    fn run(&self, program: &str, args: &[&str]) {
        let program = bin(program);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program);
            c
        } else {
            Command::new(&program)
        };
        let out = cmd
            .args(args)
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
        assert!(
            out.status.success(),
            "{} {args:?}: {}{}",
            program.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Start the server and wait until it accepts connections.
    pub fn up(&self) {
        let dir = self.dir.to_string_lossy().into_owned();
        let options = format!(
            "-p {} -k {dir} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port
        );
        let log = self.dir.join("server.log").to_string_lossy().into_owned();
        self.run(
            "pg_ctl",
            &[
                "-D", &dir, "-l", &log, "-o", &options, "-w", "-t", "60", "start",
            ],
        );
    }

    /// Stop the server (fast: clients are disconnected) and wait until it is down.
    pub fn down(&self) {
        let dir = self.dir.to_string_lossy().into_owned();
        self.run("pg_ctl", &["-D", &dir, "-m", "fast", "-w", "stop"]);
    }

    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PgProc {
    fn drop(&mut self) {
        let dir = self.dir.to_string_lossy().into_owned();
        let program = bin("pg_ctl");
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program);
            c
        } else {
            Command::new(&program)
        };
        let _ = cmd
            .args(["-D", &dir, "-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Poll `cond` (async) until it holds, failing with `what` after `limit`.
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !cond().await {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
