//! The response cache's time to first audio byte (issue 29): a speech hit against a miss, through
//! the gateway, one request at a time on a kept-alive connection. A miss asks the fake provider
//! (each request's `input` differs, so none is a hit); a hit answers from the cache (one input,
//! stored by a first request that is not counted). Raw audio (`tts-1-cached`) and SSE
//! (`tts-1-sse-cached`).

use std::net::SocketAddr;
use std::time::Instant;

use tokio::net::TcpStream;

use crate::http::{read_response, write_all, Buf};
use crate::workload::http_post;

/// `(stream, hit_ns, miss_ns)`: time from a request's last byte written to its answer's first
/// body byte, `n` of each, for each stream format.
pub async fn ttfb(
    addr: SocketAddr,
    n: usize,
) -> Result<Vec<(&'static str, Vec<i64>, Vec<i64>)>, String> {
    let s = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut buf = Buf::default();
    let mut out = Vec::new();
    let run = std::process::id();
    for (name, model, sse) in [
        ("raw audio", "tts-1-cached", ""),
        ("sse", "tts-1-sse-cached", r#","stream_format":"sse""#),
    ] {
        let body = |input: &str| format!(r#"{{"model":"{model}","input":"{input}"{sse}}}"#);
        let hit_input = format!("cached greeting {run}");
        one(
            &s,
            &mut buf,
            http_post("/api/v1/audio/speech", &body(&hit_input), true),
        )
        .await?;
        let mut hits = Vec::with_capacity(n);
        let mut misses = Vec::with_capacity(n);
        for i in 0..n {
            hits.push(
                one(
                    &s,
                    &mut buf,
                    http_post("/api/v1/audio/speech", &body(&hit_input), true),
                )
                .await?,
            );
            let miss_input = format!("uncached line {run} {i}");
            misses.push(
                one(
                    &s,
                    &mut buf,
                    http_post("/api/v1/audio/speech", &body(&miss_input), true),
                )
                .await?,
            );
        }
        hits.sort_unstable();
        misses.sort_unstable();
        out.push((name, hits, misses));
    }
    Ok(out)
}

/// One request on `s`: the time from its last byte written to its answer's first body byte
/// (also `speech_ttfb`'s measure).
pub async fn one(s: &TcpStream, buf: &mut Buf, req: Vec<u8>) -> Result<i64, String> {
    write_all(s, &req).await.map_err(|e| e.to_string())?;
    let sent = Instant::now();
    let mut first: Option<Instant> = None;
    let status = read_response(s, buf, |_, at| {
        first.get_or_insert(at);
    })
    .await
    .map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("speech: status {status}"));
    }
    let first = first.ok_or("an answer without a body")?;
    Ok((first - sent).as_nanos() as i64)
}

/// The Markdown table of [`ttfb`]'s figures.
pub fn table(rows: &[(&'static str, Vec<i64>, Vec<i64>)]) -> String {
    let ms = |v: &[i64], q: f64| crate::stream::ms(v, q);
    let mut t = String::from(
        "### Speech time to first byte: cache hit against miss\n\n| stream | hit p50 ms | hit p99 ms | miss p50 ms | miss p99 ms |\n|---|---:|---:|---:|---:|\n",
    );
    for (name, hits, misses) in rows {
        t.push_str(&format!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} |\n",
            ms(hits, 0.5),
            ms(hits, 0.99),
            ms(misses, 0.5),
            ms(misses, 0.99)
        ));
    }
    t
}
