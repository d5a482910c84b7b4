//! TLS and HTTP/2 at the edge: an entry point with `tls:` serves TLS 1.2 and 1.3, HTTP/2 chosen
//! by ALPN and HTTP/1.1 alongside, and takes a replaced certificate without a restart while the
//! connections already open go on. Certificates come from a CA made here; clients are `h2` and
//! raw HTTP/1.1 over `tokio-rustls`, on real sockets.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ProtocolVersion, RootCertStore, SupportedProtocolVersion};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::support;
use support::fake::{FakeProvider, Reply};
use support::speech_conformance::decoded_audio;
use support::{client, TestGateway, KEY};

// ---------------------------------------------------------------------------------------------
// Certificates

/// A certificate authority made for one test.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    der: CertificateDer<'static>,
}

impl Ca {
    fn new() -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "Switchyard test CA");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).unwrap();
        Ca {
            issuer: Issuer::new(params, key),
            der: cert.der().clone(),
        }
    }

    /// A server certificate for `localhost` and 127.0.0.1, told apart by `name` (its CN).
    fn leaf(&self, name: &str) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }
}

struct Leaf {
    cert_pem: String,
    key_pem: String,
    der: CertificateDer<'static>,
}

/// A directory of its own for one test's files, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new() -> Dir {
        let path =
            std::env::temp_dir().join(format!("switchyard-edge-tls-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&path).unwrap();
        Dir(path)
    }

    fn cert(&self) -> PathBuf {
        self.0.join("cert.pem")
    }

    fn key(&self) -> PathBuf {
        self.0.join("key.pem")
    }

    /// Install `leaf` as an operator would: each file written aside and renamed into place, the
    /// key first.
    fn install(&self, leaf: &Leaf) {
        replace(&self.key(), leaf.key_pem.as_bytes());
        replace(&self.cert(), leaf.cert_pem.as_bytes());
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn replace(path: &Path, bytes: &[u8]) {
    let aside = path.with_extension("new");
    std::fs::write(&aside, bytes).unwrap();
    std::fs::rename(&aside, path).unwrap();
}

// ---------------------------------------------------------------------------------------------
// The gateway

/// Checks of the certificate files in the tests (short: reloads are waited for).
const RELOAD_MS: u64 = 20;

/// A gateway whose domestic entry point serves TLS with the files in `dir`; the overseas one
/// stays plain.
fn start(fake: &FakeProvider, dir: &Dir) -> TestGateway {
    start_with(fake, dir, "")
}

/// [`start`], with `settings` (lines of the `switchyard:` section) added.
fn start_with(fake: &FakeProvider, dir: &Dir, settings: &str) -> TestGateway {
    let (cert, key) = (dir.cert(), dir.key());
    TestGateway::start_with(|ports| {
        let plain = format!("address: \"127.0.0.1:{}\"}}", ports.0);
        let with_tls = format!(
            "address: \"127.0.0.1:{}\", tls: {{cert_file: \"{}\", key_file: \"{}\", reload_interval_ms: {RELOAD_MS}}}}}",
            ports.0,
            cert.display(),
            key.display()
        );
        let yaml = support::config(&fake.base_url(), ports)
            .replace("  limits:\n", &format!("{settings}  limits:\n"));
        assert!(yaml.contains(&plain));
        yaml.replace(&plain, &with_tls)
    })
}

// ---------------------------------------------------------------------------------------------
// Clients

const TLS12: &[&SupportedProtocolVersion] = &[&rustls::version::TLS12];
const TLS13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];
const ANY_TLS: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];

fn client_config(
    ca: &Ca,
    versions: &[&'static SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.der.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// A TLS connection to `addr` checked against `config`'s roots, for the name `localhost`.
async fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    TlsConnector::from(config).connect(name, tcp).await.unwrap()
}

/// The certificate the server presented.
fn peer_cert(tls: &TlsStream<TcpStream>) -> CertificateDer<'static> {
    tls.get_ref().1.peer_certificates().unwrap()[0]
        .clone()
        .into_owned()
}

type H2 = h2::client::SendRequest<Bytes>;

/// An HTTP/2 connection over `tls` (which must have negotiated `h2`).
async fn h2_over(tls: TlsStream<TcpStream>) -> H2 {
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (send, connection) = h2::client::handshake(tls).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    send
}

/// An answer over HTTP/2: its head, its body, and each DATA frame's arrival.
struct H2Answer {
    head: http::response::Parts,
    body: Vec<u8>,
    frames: Vec<Instant>,
}

impl H2Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.head.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// No HTTP/1.1 connection header may reach an HTTP/2 client (RFC 9113 §8.2.2).
    fn assert_no_connection_headers(&self) {
        for name in ["transfer-encoding", "connection", "keep-alive", "upgrade"] {
            assert!(
                self.head.headers.get(name).is_none(),
                "{name} sent over h2: {:?}",
                self.head.headers
            );
        }
    }
}

/// Send one request on `h2` (`:authority` from the URI, no `Host`) and read its whole answer.
async fn h2_request(
    h2: &H2,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> H2Answer {
    let mut req = http::Request::builder()
        .method(method)
        .uri(format!("https://localhost{path}"));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let mut send = h2.clone().ready().await.unwrap();
    let (answer, mut stream) = send
        .send_request(req.body(()).unwrap(), body.is_none())
        .unwrap();
    if let Some(body) = body {
        send_body(&mut stream, body).await;
    }
    read_answer(answer).await
}

/// Send `body` within the stream's flow-control window, then end the stream.
async fn send_body(stream: &mut h2::SendStream<Bytes>, body: &[u8]) {
    let mut rest = Bytes::copy_from_slice(body);
    while !rest.is_empty() {
        stream.reserve_capacity(rest.len());
        let granted = std::future::poll_fn(|cx| stream.poll_capacity(cx))
            .await
            .unwrap()
            .unwrap();
        let piece = rest.split_to(granted.min(rest.len()));
        stream.send_data(piece, false).unwrap();
    }
    stream.send_data(Bytes::new(), true).unwrap();
}

async fn read_answer(answer: h2::client::ResponseFuture) -> H2Answer {
    let (head, mut recv) = answer.await.unwrap().into_parts();
    let mut body = Vec::new();
    let mut frames = Vec::new();
    while let Some(data) = recv.data().await {
        let data = data.unwrap();
        recv.flow_control().release_capacity(data.len()).unwrap();
        if !data.is_empty() {
            frames.push(Instant::now());
        }
        body.extend_from_slice(&data);
    }
    H2Answer { head, body, frames }
}

async fn h2_post(h2: &H2, path: &str, body: &Value) -> H2Answer {
    let bytes = serde_json::to_vec(body).unwrap();
    h2_request(
        h2,
        "POST",
        path,
        &[
            ("service-api-key", KEY),
            ("content-type", "application/json"),
        ],
        Some(&bytes),
    )
    .await
}

/// One HTTP/1.1 request over `tls`, `Connection: close`; the status, head and body.
async fn h1_request(
    mut tls: TlsStream<TcpStream>,
    path: &str,
    body: &Value,
) -> (u16, String, Vec<u8>) {
    let body = serde_json::to_vec(body).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nService-API-Key: {KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(&body).await.unwrap();
    let mut answer = Vec::new();
    // A TLS close_notify or a plain close both end the answer here.
    let _ = tls.read_to_end(&mut answer).await;
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no answer head: {}", String::from_utf8_lossy(&answer)));
    let head = String::from_utf8_lossy(&answer[..split]).into_owned();
    let status = head[9..12].parse().unwrap();
    (status, head, answer[split + 4..].to_vec())
}

// ---------------------------------------------------------------------------------------------
// Requests

fn rerank_body() -> Value {
    json!({"model": "rerank-v3.5", "query": "capital of France",
           "documents": ["Berlin is in Germany.", "Paris is the capital of France."]})
}

fn rerank_reply() -> Reply {
    Reply::json(
        200,
        json!({"id": "r1", "results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}],
               "meta": {"billed_units": {"search_units": 1}}}),
    )
}

fn assert_reranked(body: &Value) {
    assert_eq!(body["model"], "rerank-v3.5", "{body}");
    assert_eq!(body["results"][0]["index"], 1, "{body}");
    assert_eq!(
        body["results"][0]["document"],
        "Paris is the capital of France."
    );
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test]
async fn h2_is_chosen_by_alpn_and_answers_rerank() {
    let ca = Ca::new();
    let dir = Dir::new();
    dir.install(&ca.leaf("gateway"));
    let fake = FakeProvider::start();
    fake.set_default(rerank_reply());
    let gw = start(&fake, &dir);

    let tls = connect(gw.addr, client_config(&ca, ANY_TLS, &[b"h2", b"http/1.1"])).await;
    let h2 = h2_over(tls).await;
    let answer = h2_post(&h2, "/api/v1/rerank", &rerank_body()).await;
    assert_eq!(
        answer.head.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(
        answer.header("content-length"),
        Some(answer.body.len().to_string().as_str())
    );
    answer.assert_no_connection_headers();
    assert_reranked(&answer.json());
    // The provider got an ordinary HTTP/1.1 request with its own key.
    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v2/rerank");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {}", support::PROVIDER_KEY).as_str())
    );

    // The plain entry point is untouched by the other's TLS.
    let plain = support::post(
        &TestGateway::attach(gw.overseas),
        "/api/v1/rerank",
        &rerank_body(),
    );
    assert_eq!(plain.status, 200, "{}", plain.text());
}

#[tokio::test]
async fn speech_streams_over_h2_raw_and_sse() {
    let ca = Ca::new();
    let dir = Dir::new();
    dir.install(&ca.leaf("gateway"));
    let fake = FakeProvider::start();
    let gw = start(&fake, &dir);
    let h2 = h2_over(connect(gw.addr, client_config(&ca, ANY_TLS, &[b"h2"])).await).await;

    // Raw audio, streamed as it comes: pieces apart in time arrive as separate DATA frames.
    let gap = Duration::from_millis(60);
    let pieces: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i + 1; 3000]).collect();
    fake.push(Reply::chunked(
        200,
        "application/octet-stream",
        pieces
            .iter()
            .enumerate()
            .map(|(i, p)| (if i == 0 { Duration::ZERO } else { gap }, p.clone()))
            .collect(),
        false,
    ));
    let answer = h2_post(
        &h2,
        "/api/v1/audio/speech",
        &json!({"model": "tts-1", "input": "hello", "voice": "alloy", "response_format": "mp3"}),
    )
    .await;
    assert_eq!(
        answer.head.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_eq!(answer.header("content-type"), Some("audio/mpeg"));
    answer.assert_no_connection_headers();
    assert_eq!(answer.body, pieces.concat(), "the audio bytes, unchanged");
    assert!(
        answer.frames.len() >= pieces.len(),
        "{} DATA frames for {} pieces sent apart: held back",
        answer.frames.len(),
        pieces.len()
    );

    // Raw audio turned into SSE by the gateway, on the same connection.
    fake.push(Reply::chunked(
        200,
        "audio/mpeg",
        pieces.iter().map(|p| (Duration::ZERO, p.clone())).collect(),
        false,
    ));
    let answer = h2_post(
        &h2,
        "/api/v1/audio/speech",
        &json!({"model": "eleven-multilingual-v2", "input": "hi", "stream_format": "sse"}),
    )
    .await;
    assert_eq!(
        answer.head.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_eq!(answer.header("content-type"), Some("text/event-stream"));
    answer.assert_no_connection_headers();
    let events: Vec<Value> = client::sse_events(&answer.body)
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert_eq!(decoded_audio(&events), pieces.concat());
    assert_eq!(
        events.last().unwrap()["type"],
        "speech.audio.done",
        "{events:?}"
    );
}

/// The body of an answer whose stream may be reset: the bytes received, and whether it ended
/// cleanly (END_STREAM) rather than by a reset.
async fn read_may_reset(answer: h2::client::ResponseFuture) -> (u16, Vec<u8>, bool) {
    let (head, mut recv) = answer.await.unwrap().into_parts();
    let mut body = Vec::new();
    while let Some(data) = recv.data().await {
        match data {
            Ok(data) => {
                recv.flow_control().release_capacity(data.len()).unwrap();
                body.extend_from_slice(&data);
            }
            Err(_) => return (head.status.as_u16(), body, false),
        }
    }
    (head.status.as_u16(), body, true)
}

#[tokio::test]
async fn a_speech_stream_cut_upstream_is_reset_not_ended_over_h2() {
    let ca = Ca::new();
    let dir = Dir::new();
    dir.install(&ca.leaf("gateway"));
    let fake = FakeProvider::start();
    fake.set_default(rerank_reply());
    let gw = start(&fake, &dir);
    let h2 = h2_over(connect(gw.addr, client_config(&ca, ANY_TLS, &[b"h2"])).await).await;

    // The provider dies after two pieces: an HTTP/2 client must not take the answer for whole.
    fake.push(Reply::chunked(
        200,
        "application/octet-stream",
        vec![
            (Duration::ZERO, vec![1; 3000]),
            (Duration::from_millis(30), vec![2; 3000]),
        ],
        true,
    ));
    let body = serde_json::to_vec(
        &json!({"model": "tts-1", "input": "hello", "voice": "alloy", "response_format": "mp3", "retries": 0}),
    )
    .unwrap();
    let mut send = h2.clone().ready().await.unwrap();
    let req = http::Request::post("https://localhost/api/v1/audio/speech")
        .header("service-api-key", KEY)
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let (pending, mut stream) = send.send_request(req, false).unwrap();
    send_body(&mut stream, &body).await;
    let (status, got, ended) = read_may_reset(pending).await;
    assert_eq!(status, 200);
    assert!(
        !ended,
        "a cut stream ended cleanly after {} bytes",
        got.len()
    );
    // What arrived is the start of the audio (a reset may discard frames still queued).
    let sent = [vec![1; 3000], vec![2; 3000]].concat();
    assert!(
        sent.starts_with(&got),
        "{} bytes, not the audio sent",
        got.len()
    );
    // The other streams of the connection are not affected.
    let answer = h2_post(&h2, "/api/v1/rerank", &rerank_body()).await;
    assert_eq!(answer.head.status, 200);
}

#[tokio::test]
async fn many_requests_share_one_h2_connection() {
    let ca = Ca::new();
    let dir = Dir::new();
    dir.install(&ca.leaf("gateway"));
    let fake = FakeProvider::start();
    fake.set_default(rerank_reply());
    let gw = start(&fake, &dir);
    let h2 = h2_over(connect(gw.addr, client_config(&ca, ANY_TLS, &[b"h2"])).await).await;

    let requests: Vec<_> = (0..8)
        .map(|_| {
            let h2 = h2.clone();
            tokio::spawn(async move { h2_post(&h2, "/api/v1/rerank", &rerank_body()).await })
        })
        .collect();
    for request in requests {
        let answer = request.await.unwrap();
        assert_eq!(
            answer.head.status,
            200,
            "{}",
            String::from_utf8_lossy(&answer.body)
        );
        assert_reranked(&answer.json());
    }
    assert_eq!(fake.requests().len(), 8);
}

#[tokio::test]
async fn an_idle_h2_connection_is_closed_after_the_idle_timeout() {
    let ca = Ca::new();
    let dir = Dir::new();
    dir.install(&ca.leaf("gateway"));
    let fake = FakeProvider::start();
    fake.set_default(rerank_reply());
    let gw = start_with(&fake, &dir, "  clients: {idle_timeout_ms: 500}\n");
    let tls = connect(gw.addr, client_config(&ca, ANY_TLS, &[b"h2"])).await;
    let (h2, connection) = h2::client::handshake(tls).await.unwrap();
    // The connection's future ends when the gateway closes it.
    let (closed_tx, closed) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let _ = connection.await;
        let _ = closed_tx.send(Instant::now());
    });
    let answer = h2_post(&h2, "/api/v1/rerank", &rerank_body()).await;
    assert_eq!(answer.head.status, 200);
    let idle = Instant::now();
    let at = tokio::time::timeout(Duration::from_secs(5), closed)
        .await
        .expect("an idle HTTP/2 connection is closed")
        .unwrap();
    assert!(at - idle >= Duration::from_millis(400), "{:?}", at - idle);
}

#[tokio::test]
async fn h2_bodies_continue_and_errors() {
    let ca = Ca::new();
    let dir = Dir::new();
    dir.install(&ca.leaf("gateway"));
    let fake = FakeProvider::start();
    fake.set_default(rerank_reply());
    let gw = start(&fake, &dir);
    let h2 = h2_over(connect(gw.addr, client_config(&ca, ANY_TLS, &[b"h2"])).await).await;

    // A body larger than a flow-control window (64 KiB), in many DATA frames.
    let documents: Vec<String> = (0..400)
        .map(|i| format!("document {i} {}", "x".repeat(400)))
        .collect();
    let big = json!({"model": "rerank-v3.5", "query": "q", "documents": documents, "top_n": 1});
    let answer = h2_post(&h2, "/api/v1/rerank", &big).await;
    assert_eq!(
        answer.head.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let sent = fake.requests().pop().unwrap().json();
    assert_eq!(sent["documents"].as_array().unwrap().len(), 400);

    // `Expect: 100-continue`: HTTP/2 has no interim answer to give it, the body comes anyway.
    let body = serde_json::to_vec(&rerank_body()).unwrap();
    let length = body.len().to_string();
    let answer = h2_request(
        &h2,
        "POST",
        "/api/v1/rerank",
        &[
            ("service-api-key", KEY),
            ("content-type", "application/json"),
            ("content-length", &length),
            ("expect", "100-continue"),
        ],
        Some(&body),
    )
    .await;
    assert_eq!(
        answer.head.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_reranked(&answer.json());

    // A declared length over the limit is refused before any of the body is sent.
    let mut send = h2.clone().ready().await.unwrap();
    let req = http::Request::post("https://localhost/api/v1/audio/speech")
        .header("service-api-key", KEY)
        .header("content-type", "application/json")
        .header("content-length", "10000000")
        .header("expect", "100-continue")
        .body(())
        .unwrap();
    let (pending, _stream) = send.send_request(req, false).unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), read_answer(pending))
        .await
        .expect("413 without the body");
    assert_eq!(answer.head.status, 413);
    assert_eq!(
        answer.json()["code"],
        "payload_too_large",
        "{}",
        answer.json()
    );

    // Errors in the spec's shape, and the connection still serves.
    let answer = h2_request(&h2, "POST", "/api/v1/rerank", &[], Some(b"{}")).await;
    assert_eq!(answer.head.status, 401);
    assert_eq!(answer.json()["code"], "unauthorized", "{}", answer.json());
    let answer = h2_request(
        &h2,
        "GET",
        "/api/v1/nowhere",
        &[("service-api-key", KEY)],
        None,
    )
    .await;
    assert_eq!(answer.head.status, 404);
    assert!(answer.json()["code"].is_string(), "{}", answer.json());
    let answer = h2_post(&h2, "/api/v1/rerank", &json!({"model": "rerank-v3.5"})).await;
    assert_eq!(answer.head.status, 400);
    assert_eq!(
        answer.json()["code"],
        "validation_error",
        "{}",
        answer.json()
    );
    assert!(answer.json()["details"].is_object(), "{}", answer.json());
    let answer = h2_post(&h2, "/api/v1/rerank", &rerank_body()).await;
    assert_eq!(answer.head.status, 200);
}

#[tokio::test]
async fn hosted_image_links_use_the_h2_authority_and_https() {
    let ca = Ca::new();
    let dir = Dir::new();
    dir.install(&ca.leaf("gateway"));
    let fake = FakeProvider::start();
    fake.push(Reply::json(
        200,
        json!({"created": 1, "data": [{"b64_json": "iVBORw0KGgo="}]}),
    ));
    let gw = start(&fake, &dir);
    let h2 = h2_over(connect(gw.addr, client_config(&ca, ANY_TLS, &[b"h2"])).await).await;
    let answer = h2_post(
        &h2,
        "/api/v1/images/generations",
        &json!({"model": "gpt-image-2", "prompt": "a fox", "response_format": "url"}),
    )
    .await;
    assert_eq!(
        answer.head.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let url = answer.json()["data"][0]["url"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(url.starts_with("https://localhost/api/v1/files/"), "{url}");
    // And the link is served over the same connection.
    let path = url.strip_prefix("https://localhost").unwrap();
    let file = h2_request(&h2, "GET", path, &[], None).await;
    assert_eq!(file.head.status, 200);
    assert_eq!(file.header("content-type"), Some("image/png"));
}

#[tokio::test]
async fn http1_over_tls_with_or_without_alpn() {
    let ca = Ca::new();
    let dir = Dir::new();
    dir.install(&ca.leaf("gateway"));
    let fake = FakeProvider::start();
    fake.set_default(rerank_reply());
    let gw = start(&fake, &dir);

    for alpn in [&[&b"http/1.1"[..]][..], &[]] {
        let tls = connect(gw.addr, client_config(&ca, ANY_TLS, alpn)).await;
        let chosen = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        assert_eq!(chosen, alpn.first().map(|p| p.to_vec()));
        let (status, head, body) = h1_request(tls, "/api/v1/rerank", &rerank_body()).await;
        assert_eq!(status, 200, "{head}");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_reranked(&serde_json::from_slice(&body).unwrap());
    }
    // A client that speaks plain HTTP to the TLS port gets a TLS alert and a closed connection,
    // never an answer.
    let mut plain = TcpStream::connect(gw.addr).await.unwrap();
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), plain.read_to_end(&mut got))
        .await
        .expect("the connection is closed");
    assert!(
        !got.starts_with(b"HTTP/"),
        "{}",
        String::from_utf8_lossy(&got)
    );
}

#[tokio::test]
async fn tls12_only_and_tls13_only_clients_connect() {
    let ca = Ca::new();
    let dir = Dir::new();
    dir.install(&ca.leaf("gateway"));
    let fake = FakeProvider::start();
    fake.set_default(rerank_reply());
    let gw = start(&fake, &dir);

    for (versions, want) in [
        (TLS12, ProtocolVersion::TLSv1_2),
        (TLS13, ProtocolVersion::TLSv1_3),
    ] {
        let tls = connect(gw.addr, client_config(&ca, versions, &[b"h2"])).await;
        assert_eq!(tls.get_ref().1.protocol_version(), Some(want));
        let h2 = h2_over(tls).await;
        let answer = h2_post(&h2, "/api/v1/rerank", &rerank_body()).await;
        assert_eq!(answer.head.status, 200, "{want:?}");
        assert_reranked(&answer.json());
    }
}

/// New handshakes, a few milliseconds apart, until one presents `want` (at most 10 s).
async fn wait_for_cert(addr: SocketAddr, config: &Arc<ClientConfig>, want: &CertificateDer<'_>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let tls = connect(addr, config.clone()).await;
        if peer_cert(&tls) == *want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the new certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_replaced_certificate_is_served_and_open_connections_go_on() {
    let ca = Ca::new();
    let dir = Dir::new();
    let (a, b, c) = (ca.leaf("cert A"), ca.leaf("cert B"), ca.leaf("cert C"));
    dir.install(&a);
    let fake = FakeProvider::start();
    fake.set_default(rerank_reply());
    let gw = start(&fake, &dir);
    let config = client_config(&ca, ANY_TLS, &[b"h2"]);

    let before = connect(gw.addr, config.clone()).await;
    assert_eq!(peer_cert(&before), a.der);
    let before = h2_over(before).await;
    assert_eq!(
        h2_post(&before, "/api/v1/rerank", &rerank_body())
            .await
            .head
            .status,
        200
    );
    // And an HTTP/1.1 connection opened before the change, its request sent after it.
    let before_h1 = connect(gw.addr, client_config(&ca, ANY_TLS, &[])).await;

    dir.install(&b);
    wait_for_cert(gw.addr, &config, &b.der).await;
    let answer = h2_post(&before, "/api/v1/rerank", &rerank_body()).await;
    assert_eq!(
        answer.head.status, 200,
        "the connection opened before the change"
    );
    assert_reranked(&answer.json());
    let (status, head, _) = h1_request(before_h1, "/api/v1/rerank", &rerank_body()).await;
    assert_eq!(status, 200, "{head}");

    // Broken replacements are refused: B stays, for many checks of the files.
    let other_key = KeyPair::generate().unwrap().serialize_pem();
    for (cert, key) in [
        (c.cert_pem.as_str(), other_key.as_str()),
        (
            "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
            c.key_pem.as_str(),
        ),
        ("", c.key_pem.as_str()),
    ] {
        replace(&dir.key(), key.as_bytes());
        replace(&dir.cert(), cert.as_bytes());
        let until = Instant::now() + Duration::from_millis(RELOAD_MS * 10);
        while Instant::now() < until {
            let tls = connect(gw.addr, config.clone()).await;
            assert_eq!(peer_cert(&tls), b.der, "a broken replacement was served");
            let h2 = h2_over(tls).await;
            assert_eq!(
                h2_post(&h2, "/api/v1/rerank", &rerank_body())
                    .await
                    .head
                    .status,
                200
            );
        }
    }
    // And the check goes on after refusals: a good one is taken.
    dir.install(&c);
    wait_for_cert(gw.addr, &config, &c.der).await;
    assert_eq!(
        h2_post(&before, "/api/v1/rerank", &rerank_body())
            .await
            .head
            .status,
        200
    );
}
