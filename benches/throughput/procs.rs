//! The benchmark's processes: starting them (pinned to a core with `taskset` where the machine
//! has two), stopping them, and reading their CPU time and memory from `/proc`.
//!
//! CPU time is the sum of every thread's on-CPU nanoseconds (`/proc/<pid>/task/*/schedstat`, first
//! field), which is exact where `utime + stime` in `/proc/<pid>/stat` counts 10 ms ticks. Memory is
//! `VmRSS` (sampled) and `VmHWM` (the kernel's own peak) from `/proc/<pid>/status`.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where each process runs: the process under test on one core, the load client and the fake on
/// the other. `None` when the machine has one core or `taskset` is missing.
#[derive(Debug, Clone, Copy)]
pub struct Cores {
    pub server: usize,
    pub client: usize,
}

/// Decide the pinning and pin this process (the load client; children inherit it).
pub fn pin_self() -> Option<Cores> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    if n < 2 || !Path::new("/usr/bin/taskset").exists() && !Path::new("/bin/taskset").exists() {
        return None;
    }
    let cores = Cores {
        server: 0,
        client: 1,
    };
    let ok = Command::new("taskset")
        .args(["-a", "-p", "-c", &cores.client.to_string()])
        .arg(std::process::id().to_string())
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(cores)
}

/// A child process, killed when dropped. Its stdin is held open: the bench's own children exit
/// when it closes, so they never outlive a crashed run.
pub struct Proc {
    pub name: &'static str,
    child: Child,
    _stdin: Option<ChildStdin>,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Still running?
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    /// SIGTERM first (a graceful stop lets a profiler wrapping the process write its data), then
    /// SIGKILL if it is still running after 5 s.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `program args` with `envs`, on `core` when given.
pub fn spawn(
    name: &'static str,
    program: &Path,
    args: &[&str],
    envs: &[(&str, String)],
    core: Option<usize>,
    stdout: Stdio,
    stderr: Stdio,
) -> std::io::Result<Proc> {
    let mut cmd = match core {
        Some(c) => {
            let mut cmd = Command::new("taskset");
            cmd.args(["-c", &c.to_string()]).arg(program);
            cmd
        }
        None => Command::new(program),
    };
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(stderr);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn()?;
    let stdin = child.stdin.take();
    Ok(Proc {
        name,
        child,
        _stdin: stdin,
    })
}

/// Read the line a child prints once listening (the fake's ports and CA file).
pub fn read_line(p: &mut Proc) -> Result<String, String> {
    let out = p
        .child
        .stdout
        .take()
        .ok_or_else(|| format!("{}: no stdout", p.name))?;
    let mut line = String::new();
    BufReader::new(out)
        .read_line(&mut line)
        .map_err(|e| format!("{}: {e}", p.name))?;
    Ok(line)
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Wait until `addr` accepts connections (at most 120 s: a gateway run under valgrind for a
/// profile starts slowly).
pub fn wait_listening(p: &mut Proc, addr: SocketAddr) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
        if !p.alive() {
            return Err(format!("{} exited before listening on {addr}", p.name));
        }
        if Instant::now() > deadline {
            return Err(format!("{} did not listen on {addr} within 120 s", p.name));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Nanoseconds on CPU of all of `pid`'s threads.
pub fn cpu_ns(pid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    dir.flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// Resident set now, KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// The kernel's record of the process's peak resident set, KiB.
pub fn hwm_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM:")
}

/// Samples a process's resident set every `every` on a thread of its own and keeps the peak.
pub struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl RssSampler {
    pub fn start(pid: u32, every: Duration) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(rss_kib(pid)));
        let (s, p) = (stop.clone(), peak.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(rss_kib(pid), Ordering::Relaxed);
                std::thread::sleep(every);
            }
            p.fetch_max(rss_kib(pid), Ordering::Relaxed);
        });
        RssSampler {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    /// Stop and return the peak, KiB.
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}
