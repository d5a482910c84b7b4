//! Client deadlines and load shedding over real sockets: a trickled head, a silent connection, an
//! idle keep-alive connection and a trickled body are cut off on time (the body with `408`), a
//! body at a steady rate and a long streamed answer are not, and requests past an entry point's
//! in-flight or connection cap get a fast `503 overloaded` with `Retry-After`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::client::{self, read_response};
use crate::support::fake::{FakeProvider, Reply};
use crate::support::{self, TestGateway, KEY};

const HEAD_MS: u64 = 400;
const BODY_MS: u64 = 400;
const IDLE_MS: u64 = 600;

/// The standard test config with short client deadlines and `caps` on the domestic entry point.
fn gateway(fake: &FakeProvider, caps: &str) -> TestGateway {
    TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports)
            .replace(
                "  limits:\n",
                &format!(
                    "  clients: {{head_timeout_ms: {HEAD_MS}, body_timeout_ms: {BODY_MS}, \
                     body_min_rate_bytes: 1000, idle_timeout_ms: {IDLE_MS}, write_timeout_ms: 5000}}\n  limits:\n"
                ),
            )
            .replace(
                "region: cn, address: ",
                &format!("region: cn, {caps} address: "),
            )
    })
}

/// Read until the server closes the connection; how long that took, and what arrived.
fn until_closed(stream: &mut TcpStream) -> (Duration, Vec<u8>) {
    let start = Instant::now();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return (start.elapsed(), got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

fn audio(len: usize) -> Vec<u8> {
    let mut a = b"ID3\x04\x00\x00\x00\x00\x00\x00".to_vec();
    a.resize(len, 0x55);
    a
}

#[test]
fn a_connection_that_sends_nothing_is_closed_after_the_head_timeout() {
    let fake = FakeProvider::start();
    let gw = gateway(&fake, "");
    let mut s = client::connect(gw.addr);
    let (took, got) = until_closed(&mut s);
    assert!(
        got.is_empty(),
        "nothing is said to a client that asked nothing"
    );
    assert!(
        took >= Duration::from_millis(HEAD_MS - 50) && took < Duration::from_secs(3),
        "closed after {took:?}"
    );
}

#[test]
fn a_trickled_head_is_cut_off_on_time() {
    let fake = FakeProvider::start();
    let gw = gateway(&fake, "");
    let mut s = client::connect(gw.addr);
    let mut writer = s.try_clone().unwrap();
    let start = Instant::now();
    // One byte every 100 ms: each read resets Pingora's own timeout, never the head deadline.
    let trickle = std::thread::spawn(move || {
        for b in b"POST /api/v1/rerank HTTP/1.1\r\nHost: x\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
            if writer.write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let (_, got) = until_closed(&mut s);
    let took = start.elapsed();
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    assert!(
        took >= Duration::from_millis(HEAD_MS - 50) && took < Duration::from_secs(3),
        "closed after {took:?}; the whole trickle would take 7 s"
    );
    trickle.join().unwrap();
}

#[test]
fn an_idle_keepalive_connection_is_closed_after_the_idle_timeout() {
    let fake = FakeProvider::start();
    let gw = gateway(&fake, "");
    let mut s = client::connect(gw.addr);
    // Within the idle timeout, the connection serves the next request.
    for _ in 0..2 {
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
            .unwrap();
        assert_eq!(read_response(&mut s, "GET").status, 200);
        std::thread::sleep(Duration::from_millis(IDLE_MS / 3));
    }
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s, "GET").status, 200);
    let (took, got) = until_closed(&mut s);
    assert!(got.is_empty());
    assert!(
        took >= Duration::from_millis(IDLE_MS - 100) && took < Duration::from_secs(3),
        "closed after {took:?}"
    );
}

fn rerank_head(len: usize) -> String {
    format!(
        "POST /api/v1/rerank HTTP/1.1\r\nHost: gw\r\nService-API-Key: {KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
    )
}

#[test]
fn a_trickled_body_gets_408_and_the_connection_closes() {
    let fake = FakeProvider::start();
    let gw = gateway(&fake, "");
    let mut s = client::connect(gw.addr);
    s.write_all(rerank_head(200).as_bytes()).unwrap();
    let mut writer = s.try_clone().unwrap();
    let start = Instant::now();
    let trickle = std::thread::spawn(move || {
        for _ in 0..200 {
            if writer.write_all(b" ").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let resp = read_response(&mut s, "POST");
    let took = start.elapsed();
    assert_eq!(resp.status, 408, "{}", resp.text());
    assert_eq!(resp.json()["code"], "request_timeout");
    assert!(took < Duration::from_secs(3), "answered after {took:?}");
    let (_, rest) = until_closed(&mut s);
    assert!(rest.is_empty(), "the connection closes after the 408");
    assert!(fake.requests().is_empty(), "nothing went upstream");
    trickle.join().unwrap();
}

#[test]
fn a_body_at_a_steady_rate_and_a_long_answer_are_not_cut_off() {
    let fake = FakeProvider::start();
    fake.set_default(Reply::json(
        200,
        json!({"results": [{"index": 0, "relevance_score": 0.5}], "id": "x", "meta": {}}),
    ));
    let gw = gateway(&fake, "");
    // 3,000 bytes at about 2,000 B/s: well past body_timeout_ms, but above the minimum rate.
    let body = serde_json::to_vec(&json!({
        "model": "rerank-v3.5", "query": "q", "documents": ["a"], "x": " ".repeat(2900)
    }))
    .unwrap();
    let mut s = client::connect(gw.addr);
    s.write_all(rerank_head(body.len()).as_bytes()).unwrap();
    let start = Instant::now();
    for piece in body.chunks(100) {
        s.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let resp = read_response(&mut s, "POST");
    assert!(start.elapsed() > Duration::from_millis(BODY_MS));
    // The gateway read the whole body and judged it (an unknown field is a 400, not a 408).
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert_eq!(resp.json()["code"], "validation_error");

    // A speech answer streaming for longer than every client deadline arrives whole.
    let pieces: Vec<(Duration, Vec<u8>)> = (0..8)
        .map(|i| {
            (
                Duration::from_millis(200),
                audio(if i == 0 { 1000 } else { 500 }),
            )
        })
        .collect();
    let expected: Vec<u8> = pieces.iter().flat_map(|(_, p)| p.clone()).collect();
    fake.push(Reply::chunked(200, "audio/mpeg", pieces, false));
    let resp = client::post_json(
        gw.addr,
        "/api/v1/audio/speech",
        &[("Service-API-Key", KEY)],
        &json!({"model": "tts-1", "input": "hi", "voice": "alloy"}),
    );
    assert_eq!(resp.status, 200);
    assert!(resp.complete);
    assert_eq!(resp.body, expected);
}

fn speech(addr: SocketAddr) -> client::Response {
    client::post_json(
        addr,
        "/api/v1/audio/speech",
        &[("Service-API-Key", KEY)],
        &json!({"model": "tts-1", "input": "hi", "voice": "alloy"}),
    )
}

#[test]
fn requests_past_the_in_flight_cap_get_a_fast_503() {
    let fake = FakeProvider::start();
    fake.set_default(Reply::bytes(200, "audio/mpeg", audio(100)));
    let gw = gateway(&fake, "max_in_flight: 2,");
    // Two requests held by a provider that answers only after 2 s.
    fake.push(Reply::stall(Duration::from_secs(2)));
    fake.push(Reply::stall(Duration::from_secs(2)));
    let addr = gw.addr;
    let held: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(move || speech(addr)))
        .collect();
    fake.wait_requests(2, Duration::from_secs(5));

    let start = Instant::now();
    let shed = speech(gw.addr);
    assert!(
        start.elapsed() < Duration::from_millis(500),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(shed.status, 503, "{}", shed.text());
    assert_eq!(shed.json()["code"], "overloaded");
    assert_eq!(shed.header("retry-after"), Some("1"));
    assert_eq!(
        fake.requests().len(),
        2,
        "a shed request never reaches the provider"
    );
    // The load balancer's health check still gets through.
    assert_eq!(
        client::request(gw.addr, "GET", "/healthz", &[], b"").status,
        200
    );
    // The other entry point has its own cap.
    assert_eq!(speech(gw.overseas).status, 200);

    for h in held {
        h.join().unwrap();
    }
    // A slot is given back as its request ends, which may be just after its client read the
    // answer.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let status = speech(gw.addr).status;
        if status == 200 {
            break;
        }
        assert_eq!(status, 503);
        assert!(Instant::now() < deadline, "capacity was never given back");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn connections_past_the_cap_get_503_and_are_closed() {
    let fake = FakeProvider::start();
    fake.set_default(Reply::bytes(200, "audio/mpeg", audio(100)));
    let gw = gateway(&fake, "max_connections: 2,");
    // Two kept-alive connections, each proven counted by an answer.
    let mut open: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = client::connect(gw.addr);
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
                .unwrap();
            assert_eq!(read_response(&mut s, "GET").status, 200);
            s
        })
        .collect();

    let start = Instant::now();
    let shed = speech(gw.addr);
    assert!(start.elapsed() < Duration::from_millis(500));
    assert_eq!(shed.status, 503, "{}", shed.text());
    assert_eq!(shed.json()["code"], "overloaded");
    assert_eq!(shed.header("retry-after"), Some("1"));
    assert!(fake.requests().is_empty());

    // A connection over the cap is closed after its answer, even when the client asked to keep it.
    let mut third = client::connect(gw.addr);
    third
        .write_all(b"GET /api/v1/openapi.json HTTP/1.1\r\nHost: gw\r\n\r\n")
        .unwrap();
    let resp = read_response(&mut third, "GET");
    assert_eq!(resp.status, 503);
    assert!(until_closed(&mut third).1.is_empty());

    // Once a connection closes, a new one is served (the gateway notices the close promptly).
    open.pop();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let status = speech(gw.addr).status;
        if status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still {status} after a connection closed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A request head that Pingora's parser (httparse) refuses — a header value holding a control
/// byte: 0x01, ESC (0x1b), DEL (0x7f) in `X-Request-Id`, and NUL, vertical tab or a bare CR in
/// other headers — is answered by the gateway, not with Pingora's bare 400: `400
/// invalid_request` in the spec's Error shape, a generated `X-Request-Id` (the caller's could not
/// be read), the connection closed, and one access line naming the id. Also on a kept-alive
/// connection after a first request was served. A byte httparse lets through (obs-text, 0x80 and
/// up) reaches the gateway, which answers as usual with a generated id instead of the caller's.
#[test]
fn a_request_head_with_a_control_byte_gets_the_gateways_400_and_one_access_line() {
    let fake = FakeProvider::start();
    let base = fake.base_url();
    let bin = crate::logs::Binary::start(
        |port| {
            support::config(&base, (port, support::free_port())).replacen(
                "switchyard:\n",
                "switchyard:\n  access_log: {format: json}\n",
                1,
            )
        },
        "warn,access=info",
    );
    let refused: [(&str, &[u8]); 6] = [
        ("X-Request-Id", b"caller-\x01-id"),
        ("X-Request-Id", b"caller-\x1b[31m-id"),
        ("X-Request-Id", b"caller-\x7f-id"),
        ("User-Agent", b"agent\x00nul"),
        ("X-Note", b"vertical\x0btab"),
        ("X-Note", b"bare\rcr"),
    ];
    let head = |name: &str, value: &[u8]| {
        let mut h = format!(
            "POST /api/v1/rerank HTTP/1.1\r\nHost: gw\r\nService-API-Key: {KEY}\r\n\
             Content-Type: application/json\r\nContent-Length: 2\r\n{name}: "
        )
        .into_bytes();
        h.extend_from_slice(value);
        h.extend_from_slice(b"\r\n\r\n{}");
        h
    };
    let mut ids = Vec::new();
    for (i, (name, value)) in refused.iter().enumerate() {
        let mut stream = client::connect(bin.addr);
        // The last one on a connection that has served a request already.
        if i == refused.len() - 1 {
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
                .unwrap();
            assert_eq!(read_response(&mut stream, "GET").status, 200);
        }
        stream.write_all(&head(name, value)).unwrap();
        let resp = read_response(&mut stream, "POST");
        let what = format!("{name}: {:?}", String::from_utf8_lossy(value));
        assert_eq!(resp.status, 400, "{what}: {:?}", resp.headers);
        assert_eq!(
            resp.header("content-type"),
            Some("application/json"),
            "{what}"
        );
        let body = resp.json();
        assert_eq!(body["code"], "invalid_request", "{what}: {body}");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert_eq!(resp.header("server"), None, "Pingora's own answer: {what}");
        let id = resp
            .header("x-request-id")
            .expect("a request id")
            .to_string();
        assert!(
            id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{what}: {id}"
        );
        assert_eq!(body["request_id"], id.as_str(), "{what}: {body}");
        // The connection is closed after the answer.
        let (_, rest) = until_closed(&mut stream);
        assert!(
            rest.is_empty(),
            "{what}: {:?}",
            String::from_utf8_lossy(&rest)
        );
        ids.push(id);
    }
    let mut distinct = ids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), ids.len(), "one id per answer: {ids:?}");

    // obs-text passes the parser: the gateway's usual answer, with a generated id.
    let mut stream = client::connect(bin.addr);
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: gw\r\nX-Request-Id: caf\xc3\xa9\r\n\r\n")
        .unwrap();
    let health = read_response(&mut stream, "GET");
    assert_eq!(health.status, 200);
    let generated = health.header("x-request-id").unwrap();
    assert!(generated.len() == 32 && generated.bytes().all(|b| b.is_ascii_hexdigit()));

    // One access line per refused head: status 400, `invalid_request`, its id.
    let text = bin.output_when("the refused heads' access lines", |t| {
        ids.iter().all(|id| t.contains(id.as_str()))
    });
    for id in &ids {
        let lines: Vec<serde_json::Value> = text
            .lines()
            .filter(|l| l.contains(" access] ") && l.contains(id.as_str()))
            .map(|l| serde_json::from_str(l.split_once(" access] ").unwrap().1).unwrap())
            .collect();
        assert_eq!(lines.len(), 1, "access lines naming {id}:\n{text}");
        let line = &lines[0];
        assert_eq!(line["status"], 400, "{line}");
        assert_eq!(line["code"], "invalid_request", "{line}");
        assert_eq!(line["request_id"], id.as_str(), "{line}");
    }
    // Nothing reached the provider.
    assert!(fake.requests().is_empty());
}
