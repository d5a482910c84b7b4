//! A 100 MiB audio answer streams through while the gateway's memory stays flat.
//!
//! The gateway runs as its own process (the real binary) so that its resident set can be read
//! from `/proc` apart from the fake provider and the client, which live in this test. The client
//! discards what it reads; the gateway's RSS is sampled every few MiB and its growth over the
//! figure taken after a small warm-up answer must stay far below the 100 MiB that went through.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support;
use support::fake::{FakeProvider, Reply};
use support::{free_port, wait_listening, KEY};

const MIB: usize = 1 << 20;
const TOTAL: usize = 100 * MIB;
const CHUNK: usize = 64 * 1024;
/// Allowed RSS growth while 100 MiB stream through.
const MAX_GROWTH: usize = 16 * MIB;

struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Gateway {
    fn rss(&self) -> usize {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.0.id())).unwrap();
        let kb: usize = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap();
        kb * 1024
    }
}

fn start_gateway(fake: &FakeProvider) -> (Gateway, u16) {
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("switchyard-mem-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gateway.yaml");
    let base = fake.base_url();
    std::fs::write(
        &file,
        format!(
            r#"
version: 1
threads: 2
switchyard:
  listeners: [{{name: main, address: "127.0.0.1:{port}"}}]
  auth: {{api_keys: [{{name: t, key: "{KEY}"}}]}}
  providers:
    openai: {{kind: openai, api_key: "sk-mem-test", base_url: "{base}/v1"}}
    elevenlabs: {{kind: elevenlabs, api_key: "xi-mem-test", base_url: "{base}"}}
  models:
    tts-1: {{family: openai-tts, targets: [{{provider: openai, model: tts-1}}]}}
    eleven: {{family: elevenlabs-tts, default_voice: JBFqnCBsd6RMkjVDRZzb, targets: [{{provider: elevenlabs, model: eleven_multilingual_v2}}]}}
"#
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["-c", file.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let gw = Gateway(child);
    wait_listening(format!("127.0.0.1:{port}").parse().unwrap());
    (gw, port)
}

fn audio_reply(total: usize) -> Reply {
    let chunk: Vec<u8> = (0..CHUNK).map(|i| (i % 251) as u8).collect();
    let chunks = (0..total / CHUNK)
        .map(|_| (Duration::ZERO, chunk.clone()))
        .collect();
    Reply::chunked(200, "audio/mpeg", chunks, false)
}

/// Post a speech request and read the answer, discarding it; returns (bytes read, peak RSS seen).
fn stream_through(gw: &Gateway, port: u16, body: &str) -> (usize, usize) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST /api/v1/audio/speech HTTP/1.1\r\nHost: x\r\nService-API-Key: {KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0;
    let mut next_sample = 0;
    let mut peak = 0;
    let mut tail = Vec::new();
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n;
        // Keep the last bytes to check the answer ended properly.
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 64 {
            tail.drain(..tail.len() - 64);
        }
        if total >= next_sample {
            peak = peak.max(gw.rss());
            next_sample += 4 * MIB;
        }
    }
    assert!(
        tail.ends_with(b"0\r\n\r\n"),
        "answer did not end with the terminating chunk"
    );
    (total, peak.max(gw.rss()))
}

/// The measured figures, on stderr (shown with `--nocapture`).
fn report(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[test]
fn a_100_mib_answer_streams_with_flat_memory() {
    // Hundreds of MiB pass through this process (fake and client): no timing test beside it.
    let _alone = support::timing_lock();
    let fake = FakeProvider::start();
    let (gw, port) = start_gateway(&fake);

    // Warm up (connection pools, buffers, tokenizer) with small answers of both kinds.
    fake.push(audio_reply(4 * CHUNK));
    stream_through(&gw, port, r#"{"model":"tts-1","input":"warm up"}"#);
    fake.push(audio_reply(4 * CHUNK));
    stream_through(
        &gw,
        port,
        r#"{"model":"eleven","input":"warm up","stream_format":"sse"}"#,
    );
    let baseline = gw.rss();

    // Raw audio passes through as it arrives.
    fake.push(audio_reply(TOTAL));
    let (read, peak) = stream_through(&gw, port, r#"{"model":"tts-1","input":"long"}"#);
    assert!(read >= TOTAL, "only {read} bytes arrived");
    let growth = peak.saturating_sub(baseline);
    report(&format!(
        "raw audio: {} MiB through, RSS baseline {} KiB, peak {} KiB, growth {} KiB",
        read / MIB,
        baseline / 1024,
        peak / 1024,
        growth / 1024
    ));
    assert!(
        growth <= MAX_GROWTH,
        "RSS grew {growth} bytes while streaming"
    );

    // Decoded and re-encoded as SSE events, one piece in flight at a time.
    fake.push(audio_reply(TOTAL));
    let (read, peak) = stream_through(
        &gw,
        port,
        r#"{"model":"eleven","input":"long","stream_format":"sse"}"#,
    );
    assert!(read >= TOTAL * 4 / 3, "only {read} bytes arrived");
    let growth = peak.saturating_sub(baseline);
    report(&format!(
        "SSE: {} MiB through, RSS peak {} KiB, growth {} KiB",
        read / MIB,
        peak / 1024,
        growth / 1024
    ));
    assert!(
        growth <= MAX_GROWTH,
        "RSS grew {growth} bytes while streaming SSE"
    );
}
