//! Local `redis-server` processes the Redis Cluster and Sentinel tests start themselves, each on
//! free loopback ports in a temporary directory of its own, and kill (SIGKILL) when dropped, so a
//! failing test leaves no server behind. `redis-server` must be on PATH (CI installs it); without
//! it the tests fail, never skip.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::free_port;

/// How long a local server may take to come up, a cluster to agree, a failover to finish: a
/// bound for a loaded 2-core machine, not a wait (every use polls a condition).
pub const PATIENCE: Duration = Duration::from_secs(30);

/// One `redis-server` (or sentinel) process.
pub struct RedisProc {
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
}

impl RedisProc {
    /// A server on a free port with `args` (beyond port, bind, directory and no persistence).
    pub fn start(args: &[&str]) -> RedisProc {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("switchyard-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let port_s = port.to_string();
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port_s, "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .args(args);
        RedisProc::launch(cmd, port, dir)
    }

    /// Run `cmd` (a `redis-server` listening on `port`, its files in `dir`) and wait until it
    /// answers `PING`.
    fn launch(mut cmd: Command, port: u16, dir: PathBuf) -> RedisProc {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start redis-server (is it on PATH?): {e}"));
        let mut server = RedisProc {
            port,
            child: Some(child),
            dir,
        };
        server.wait_ping();
        server
    }

    /// A sentinel on a free port monitoring `master` (named `name`, quorum 1) with short
    /// timeouts, so a killed primary is failed over within a few seconds.
    pub fn sentinel(name: &str, master: u16) -> RedisProc {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("switchyard-sentinel-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Sentinel rewrites its file (it records what it learns), so it gets one of its own.
        let file = dir.join("sentinel.conf");
        std::fs::write(
            &file,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {name} 127.0.0.1 {master} 1\n\
                 sentinel down-after-milliseconds {name} 500\n\
                 sentinel failover-timeout {name} 3000\n\
                 sentinel parallel-syncs {name} 2\n",
                dir.display()
            ),
        )
        .unwrap();
        let mut cmd = Command::new("redis-server");
        cmd.arg(&file).arg("--sentinel");
        RedisProc::launch(cmd, port, dir)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn wait_ping(&mut self) {
        let deadline = Instant::now() + PATIENCE;
        while self.query::<String>(&["PING"]).is_err() {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!(
                    "redis-server on port {} exited at startup: {status}",
                    self.port
                );
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} did not answer PING",
                self.port
            );
            std::thread::park_timeout(Duration::from_millis(20));
        }
    }

    /// One command on a fresh connection (bounded: a stopped server fails it, never hangs it).
    pub fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let client = redis::Client::open(self.url())?;
        let mut conn = client.get_connection_with_timeout(Duration::from_secs(2))?;
        conn.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut conn)
    }

    /// [`RedisProc::query`] that must succeed.
    pub fn must<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        self.query(args)
            .unwrap_or_else(|e| panic!("{args:?} on port {}: {e}", self.port))
    }

    /// Send a signal to the process (`STOP`, `CONT`).
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{signal} {pid}");
    }

    /// Kill it (SIGKILL: no goodbye to anyone) and reap it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisProc {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Poll `cond` until it holds, failing with `what` after [`PATIENCE`].
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

/// A three-node Redis Cluster (three primaries, no replicas), slots split evenly, joined by hand
/// (`CLUSTER ADDSLOTSRANGE` and `CLUSTER MEET` with each node's own bus port), ready when every
/// node says `cluster_state:ok`.
pub struct Cluster {
    pub nodes: Vec<RedisProc>,
}

impl Cluster {
    pub fn start() -> Cluster {
        let ranges = [(0, 5460), (5461, 10922), (10923, 16383)];
        let nodes: Vec<RedisProc> = ranges
            .iter()
            .map(|_| {
                let bus = free_port().to_string();
                RedisProc::start(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    &bus,
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ])
            })
            .collect();
        for (node, (from, to)) in nodes.iter().zip(ranges) {
            let _: () = node.must(&[
                "CLUSTER",
                "ADDSLOTSRANGE",
                &from.to_string(),
                &to.to_string(),
            ]);
        }
        for node in &nodes[1..] {
            let bus: String = node
                .must::<Vec<String>>(&["CONFIG", "GET", "cluster-port"])
                .pop()
                .unwrap();
            let _: () =
                nodes[0].must(&["CLUSTER", "MEET", "127.0.0.1", &node.port.to_string(), &bus]);
        }
        eventually("the cluster never reached cluster_state:ok", || {
            nodes.iter().all(|n| {
                n.query::<String>(&["CLUSTER", "INFO"]).is_ok_and(|i| {
                    i.contains("cluster_state:ok") && i.contains("cluster_known_nodes:3")
                })
            })
        });
        Cluster { nodes }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisProc::url).collect()
    }
}
