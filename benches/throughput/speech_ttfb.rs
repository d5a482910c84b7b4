//! Speech through OpenAI's Realtime API against the HTTP speech path (issue 45, item 5): time to
//! first body byte, one request at a time (`speech-ttfb`), and what a new Realtime socket costs
//! against a response on a socket already open (`realtime-socket`, the measurement behind the
//! session-pooling decision in docs/providers/openai.md).
//!
//! `speech-ttfb`: each row has its own kept-alive connection; the rows take turns, one request
//! each, `n` rounds, so that drift on a noisy machine touches them alike. The HTTP rows are
//! `tts-1`'s 20 KiB chunked answer directly from the fake, through the plain proxy and through
//! the gateway; the Realtime rows go through the gateway only (the proxy cannot speak WebSocket to
//! a provider for an HTTP caller), one per `response_format`.
//!
//! `realtime-socket`: the bench itself is the WebSocket client (tokio-tungstenite, the gateway's
//! own client library), straight to the fake's Realtime listener: `n` new sessions (TCP connect,
//! WebSocket handshake, `session.created`, a `session.update` and its `session.updated`), each
//! then asked for one response (`response.create` to the first delta and to `response.done`),
//! then `n` more responses on one open session. Wall times, and CPU (this process and the fake)
//! per new session and per response.

use std::net::SocketAddr;
use std::time::Instant;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::http::Buf;
use crate::procs::cpu_ns;
use crate::stream::ms;
use crate::workload::{http_post, Workload};

/// One `speech-ttfb` row: its name, where it goes, the request; then its sorted times (ns).
pub struct Row {
    pub name: String,
    addr: SocketAddr,
    request: Vec<u8>,
    pub ttfb_ns: Vec<i64>,
}

/// The rows: HTTP speech direct, through the proxy and the gateway; then the Realtime path
/// through the gateway in each format (`fake`, `proxy`, `gateway` are the three addresses).
pub fn rows(fake: SocketAddr, proxy: SocketAddr, gateway: SocketAddr) -> Vec<Row> {
    let (native_path, native_body) = Workload::Speech.native();
    let native = http_post(native_path, &native_body, false);
    let (path, body) = Workload::Speech.public();
    let mut rows = vec![
        row("HTTP `tts-1`, direct (the fake)", fake, native.clone()),
        row("HTTP `tts-1`, plain proxy", proxy, native),
        row(
            "HTTP `tts-1`, gateway",
            gateway,
            http_post(path, &body, true),
        ),
    ];
    for w in [
        Workload::SpeechRealtime,
        Workload::SpeechRealtimeMp3,
        Workload::SpeechRealtimeOpus,
        Workload::SpeechRealtimeAac,
        Workload::SpeechRealtimeFlac,
    ] {
        let (path, body) = w.public();
        let format = w.realtime_format().unwrap_or("pcm");
        let name = format!("Realtime `{format}`, gateway");
        rows.push(row(&name, gateway, http_post(path, &body, true)));
    }
    rows
}

fn row(name: &str, addr: SocketAddr, request: Vec<u8>) -> Row {
    Row {
        name: name.to_string(),
        addr,
        request,
        ttfb_ns: Vec::new(),
    }
}

/// Measure `n` requests of each row, taking turns (one warm-up request each first, uncounted).
pub async fn ttfb(rows: &mut [Row], n: usize) -> Result<(), String> {
    let mut conns = Vec::with_capacity(rows.len());
    for r in rows.iter() {
        let s = TcpStream::connect(r.addr)
            .await
            .map_err(|e| e.to_string())?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        conns.push((s, Buf::default()));
    }
    for i in 0..=n {
        for (r, (s, buf)) in rows.iter_mut().zip(conns.iter_mut()) {
            let t = crate::cache::one(s, buf, r.request.clone())
                .await
                .map_err(|e| format!("{}: {e}", r.name))?;
            if i > 0 {
                r.ttfb_ns.push(t);
            }
        }
    }
    for r in rows.iter_mut() {
        r.ttfb_ns.sort_unstable();
    }
    Ok(())
}

/// The Markdown table of [`ttfb`]'s figures.
pub fn ttfb_table(rows: &[Row]) -> String {
    let http = rows
        .iter()
        .find(|r| r.name.starts_with("HTTP `tts-1`, gateway"))
        .map_or(f64::NAN, |r| ms(&r.ttfb_ns, 0.5));
    let mut t = String::from(
        "### Speech time to first body byte: Realtime against HTTP\n\n| path | p50 ms | p99 ms | p50 − the gateway's HTTP p50, ms |\n|---|---:|---:|---:|\n",
    );
    for r in rows {
        let p50 = ms(&r.ttfb_ns, 0.5);
        t.push_str(&format!(
            "| {} | {p50:.3} | {:.3} | {:+.3} |\n",
            r.name,
            ms(&r.ttfb_ns, 0.99),
            p50 - http
        ));
    }
    t
}

/// What `realtime-socket` measured (sorted ns, and CPU ns summed over the runs).
pub struct SocketCosts {
    pub connect: Vec<i64>,
    pub handshake: Vec<i64>,
    pub session_update: Vec<i64>,
    /// A new session's response: `response.create` to its first delta, and to `response.done`.
    pub first_delta_new: Vec<i64>,
    pub done_new: Vec<i64>,
    /// The same on one session kept open.
    pub first_delta_open: Vec<i64>,
    pub done_open: Vec<i64>,
    /// CPU of this process and of the fake: over the new sessions' setup, and over the
    /// responses on the open session.
    pub setup_cpu: (u64, u64),
    pub open_cpu: (u64, u64),
    pub n: usize,
}

type Ws = WebSocketStream<TcpStream>;

/// Read events until one whose text contains `kind`; the time it came.
async fn until(ws: &mut Ws, kind: &str) -> Result<Instant, String> {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) if t.contains(kind) => return Ok(Instant::now()),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err(format!("the session ended before {kind}")),
        }
    }
}

const SESSION_UPDATE: &str = r#"{"type":"session.update","session":{"type":"realtime","output_modalities":["audio"],"audio":{"output":{"format":{"type":"audio/pcm","rate":24000},"voice":"alloy","speed":1.0}}}}"#;
const RESPONSE_CREATE: &str = r#"{"type":"response.create","response":{"conversation":"none","output_modalities":["audio"],"instructions":"Read the user's message aloud exactly as it is written.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Hello from Switchyard."}]}]}}"#;

/// A new session: connect, handshake, `session.created`, `session.update` → `session.updated`;
/// the socket and the three times (ns).
async fn open(rt: SocketAddr) -> Result<(Ws, [i64; 3]), String> {
    let t0 = Instant::now();
    let s = TcpStream::connect(rt).await.map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let t1 = Instant::now();
    let url = format!("ws://{rt}/v1/realtime?model=gpt-realtime-2.1-mini");
    let (mut ws, _) = tokio_tungstenite::client_async(url, s)
        .await
        .map_err(|e| e.to_string())?;
    let t2 = Instant::now();
    until(&mut ws, "session.created").await?;
    let t3 = Instant::now();
    ws.send(Message::text(SESSION_UPDATE))
        .await
        .map_err(|e| e.to_string())?;
    let t4 = until(&mut ws, "session.updated").await?;
    let ns = |a: Instant, b: Instant| (b - a).as_nanos() as i64;
    Ok((ws, [ns(t0, t1), ns(t1, t2), ns(t3, t4)]))
}

/// One response on `ws`: times to its first delta and to `response.done` (ns).
async fn respond(ws: &mut Ws) -> Result<(i64, i64), String> {
    let t0 = Instant::now();
    ws.send(Message::text(RESPONSE_CREATE))
        .await
        .map_err(|e| e.to_string())?;
    let first = until(ws, "response.output_audio.delta").await?;
    let done = until(ws, r#""response.done""#).await?;
    Ok((
        (first - t0).as_nanos() as i64,
        (done - t0).as_nanos() as i64,
    ))
}

/// Run `realtime-socket`: `n` new sessions (each with one response), then `n` responses on one.
pub async fn socket_costs(rt: SocketAddr, fake_pid: u32, n: usize) -> Result<SocketCosts, String> {
    let me = std::process::id();
    let cpu = || (cpu_ns(me), cpu_ns(fake_pid));
    let mut c = SocketCosts {
        connect: Vec::new(),
        handshake: Vec::new(),
        session_update: Vec::new(),
        first_delta_new: Vec::new(),
        done_new: Vec::new(),
        first_delta_open: Vec::new(),
        done_open: Vec::new(),
        setup_cpu: (0, 0),
        open_cpu: (0, 0),
        n,
    };
    for _ in 0..n {
        let before = cpu();
        let (mut ws, [connect, handshake, update]) = open(rt).await?;
        let after = cpu();
        c.setup_cpu.0 += after.0 - before.0;
        c.setup_cpu.1 += after.1 - before.1;
        c.connect.push(connect);
        c.handshake.push(handshake);
        c.session_update.push(update);
        let (first, done) = respond(&mut ws).await?;
        c.first_delta_new.push(first);
        c.done_new.push(done);
        let _ = ws.close(None).await;
    }
    let (mut ws, _) = open(rt).await?;
    respond(&mut ws).await?; // the session's first response, uncounted
    let before = cpu();
    for _ in 0..n {
        let (first, done) = respond(&mut ws).await?;
        c.first_delta_open.push(first);
        c.done_open.push(done);
    }
    let after = cpu();
    c.open_cpu = (after.0 - before.0, after.1 - before.1);
    let _ = ws.close(None).await;
    for v in [
        &mut c.connect,
        &mut c.handshake,
        &mut c.session_update,
        &mut c.first_delta_new,
        &mut c.done_new,
        &mut c.first_delta_open,
        &mut c.done_open,
    ] {
        v.sort_unstable();
    }
    Ok(c)
}

/// The Markdown table of [`socket_costs`]'s figures.
pub fn socket_table(c: &SocketCosts) -> String {
    let mut t = format!(
        "### A new Realtime socket against a response on an open one (loopback, {} each)\n\n| step | p50 ms | p99 ms |\n|---|---:|---:|\n",
        c.n
    );
    for (name, v) in [
        ("TCP connect", &c.connect),
        ("WebSocket handshake (101)", &c.handshake),
        ("`session.update` → `session.updated`", &c.session_update),
        (
            "new session: `response.create` → first delta",
            &c.first_delta_new,
        ),
        (
            "new session: `response.create` → `response.done`",
            &c.done_new,
        ),
        (
            "open session: `response.create` → first delta",
            &c.first_delta_open,
        ),
        (
            "open session: `response.create` → `response.done`",
            &c.done_open,
        ),
    ] {
        t.push_str(&format!(
            "| {name} | {:.3} | {:.3} |\n",
            ms(v, 0.5),
            ms(v, 0.99)
        ));
    }
    let us = |ns: u64| ns as f64 / c.n.max(1) as f64 / 1e3;
    t.push_str(&format!(
        "\nCPU per new session's setup (connect, handshake, session round trip): client {:.1} µs, fake {:.1} µs; \
         per response on an open session (5 deltas, 1 s of PCM): client {:.1} µs, fake {:.1} µs.\n",
        us(c.setup_cpu.0),
        us(c.setup_cpu.1),
        us(c.open_cpu.0),
        us(c.open_cpu.1),
    ));
    t
}
