//! Links to hosted images are built from trusted parts only: `images.public_base_url`, or a
//! `Host` that is a plain `host[:port]`. A hostile `Host` is refused with a 400 naming `host`, is
//! never reflected, and costs no provider call.

use serde_json::{json, Value};

use crate::support;
use support::fake::{FakeProvider, Reply};
use support::image_conformance::{b64, png};
use support::{client, TestGateway, KEY};

fn answer() -> Reply {
    Reply::json(200, json!({"data": [{"b64_json": b64(&png(64, 1))}]}))
}

fn body(format: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"model": "gpt-image-1", "prompt": "p", "response_format": format}))
        .unwrap()
}

/// POST an image request with exactly these header lines (raw bytes: no `Host` is added).
fn generate_raw(gw: &TestGateway, version: &str, headers: &[u8], format: &str) -> client::Response {
    let body = body(format);
    let mut req = format!("POST /api/v1/images/generations {version}\r\n").into_bytes();
    req.extend_from_slice(headers);
    req.extend_from_slice(
        format!(
            "Service-API-Key: {KEY}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    req.extend_from_slice(&body);
    client::raw(gw.addr, &req)
}

fn generate(
    gw: &TestGateway,
    host: &str,
    extra: &[(&str, &str)],
    format: &str,
) -> client::Response {
    let mut headers = vec![("Host", host)];
    headers.extend_from_slice(extra);
    headers.extend_from_slice(&support::auth());
    client::post_json(
        gw.addr,
        "/api/v1/images/generations",
        &headers,
        &serde_json::from_slice::<Value>(&body(format)).unwrap(),
    )
}

fn url_of(resp: &client::Response) -> String {
    assert_eq!(resp.status, 200, "{}", resp.text());
    resp.json()["data"][0]["url"].as_str().unwrap().to_string()
}

fn assert_refused(resp: &client::Response, raw: &[u8]) {
    let shown = String::from_utf8_lossy(raw);
    assert_eq!(resp.status, 400, "{shown:?}: {}", resp.text());
    assert_eq!(
        resp.header("content-type"),
        Some("application/json"),
        "{shown:?}"
    );
    let body = resp.json();
    assert_eq!(body["code"], "validation_error", "{shown:?}");
    assert!(body["details"]["host"].is_string(), "{shown:?}: {body}");
    let text = resp.text();
    if raw.len() > 3 {
        assert!(!text.contains(&*shown), "{shown:?} reflected: {text}");
    }
    for marker in ["<img", "<script", "evil", "/path"] {
        assert!(
            !text.contains(marker),
            "{shown:?}: {marker} reflected: {text}"
        );
    }
}

#[test]
fn hostile_hosts_are_refused_and_never_reflected() {
    let fake = FakeProvider::start();
    fake.set_default(answer());
    let gw = TestGateway::start(&fake);
    let overlong = format!("{}.example", "a".repeat(300));
    let many_labels = vec!["abcdefghi"; 40].join(".");
    let hostile: Vec<&[u8]> = vec![
        b"evil.example\"><img src=x onerror=alert(1)>",
        b"<script>alert(1)</script>",
        b"evil.example 'x'",
        b"evil.example/path",
        b"",
        overlong.as_bytes(),
        many_labels.as_bytes(),
        b"evil.example:99999",
        b"evil.example:0",
        b"evil.example:abc",
        b"evil\xff.example",
    ];
    for raw in hostile {
        let mut headers = b"Host: ".to_vec();
        headers.extend_from_slice(raw);
        headers.extend_from_slice(b"\r\n");
        let resp = generate_raw(&gw, "HTTP/1.1", &headers, "url");
        assert_refused(&resp, raw);
    }
    // HTTP/1.0, where Host is optional: none at all.
    let resp = generate_raw(&gw, "HTTP/1.0", b"", "url");
    assert_refused(&resp, b"");
    // Nothing was generated (or billed) for any of them.
    assert_eq!(fake.requests().len(), 0);
}

/// Pingora itself refuses some authorities while reading the request head, before any hook of
/// the gateway runs: userinfo, two `Host` fields, an absolute-form target with userinfo or not
/// matching `Host`. The client still gets the gateway's answer (`gateway/client_conn.rs` writes
/// it in place of Pingora's bare 400): `400 invalid_request` in the spec's shape with a request
/// id, and the connection closes: nothing reflected either.
#[test]
fn authorities_pingora_refuses_get_the_gateways_400() {
    let fake = FakeProvider::start();
    fake.set_default(answer());
    let gw = TestGateway::start(&fake);
    let body = body("url");
    let rest = format!(
        "Service-API-Key: {KEY}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    for (target, hosts) in [
        ("/api/v1/images/generations", "Host: user@evil.example\r\n"),
        (
            "/api/v1/images/generations",
            "Host: gw.example\r\nHost: evil.example\r\n",
        ),
        (
            "http://user@evil.example/api/v1/images/generations",
            "Host: user@evil.example\r\n",
        ),
        (
            "http://evil.example/api/v1/images/generations",
            "Host: gw.example\r\n",
        ),
    ] {
        let mut req = format!("POST {target} HTTP/1.1\r\n{hosts}{rest}").into_bytes();
        req.extend_from_slice(&body);
        let resp = client::raw(gw.addr, &req);
        assert_eq!(resp.status, 400, "{target} {hosts:?}");
        assert_eq!(
            resp.json()["code"],
            "invalid_request",
            "{target} {hosts:?}: {}",
            resp.text()
        );
        assert!(!resp.text().contains("evil"), "{}", resp.text());
        assert!(resp.headers.iter().all(|(_, v)| !v.contains("evil")));
        assert!(resp.header("x-request-id").is_some_and(|id| id.len() == 32));
        assert_eq!(resp.header("connection"), Some("close"));
    }
    // Nothing was generated (or billed) for any of them.
    assert_eq!(fake.requests().len(), 0);
}

#[test]
fn a_plain_host_port_makes_the_links() {
    let fake = FakeProvider::start();
    fake.set_default(answer());
    let gw = TestGateway::start(&fake);
    let url = url_of(&generate(&gw, "gw.example:8443", &[], "url"));
    assert!(
        url.starts_with("http://gw.example:8443/api/v1/files/"),
        "{url}"
    );
    let url = url_of(&generate(&gw, "[::1]:8080", &[], "url"));
    assert!(url.starts_with("http://[::1]:8080/api/v1/files/"), "{url}");
    // A proxy in front that terminated TLS says so; a value that means nothing changes nothing.
    for (proto, scheme) in [
        ("https", "https"),
        ("HTTPS, http", "https"),
        ("http", "http"),
        ("javascript", "http"),
        ("https\"><x", "http"),
    ] {
        let url = url_of(&generate(
            &gw,
            "gw.example",
            &[("X-Forwarded-Proto", proto)],
            "url",
        ));
        assert!(
            url.starts_with(&format!("{scheme}://gw.example/api/v1/files/")),
            "{proto}: {url}"
        );
    }
    // Inline images build no link: the host is not needed, nor judged.
    let resp = generate(&gw, "evil.example\"><x", &[], "b64_json");
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.json()["data"][0]["b64_json"].is_string());
    assert!(!resp.text().contains("evil"));
}

#[test]
fn a_configured_public_base_url_ignores_the_host() {
    let fake = FakeProvider::start();
    fake.set_default(answer());
    let gw = TestGateway::start_with(|ports| {
        support::config(&fake.base_url(), ports).replace(
            "images: {allow_private_urls: true,",
            "images: {public_base_url: \"https://ai.example.com/\", allow_private_urls: true,",
        )
    });
    for host in ["gw.example:8443", "evil.example\"><img src=x>", ""] {
        let url = url_of(&generate(
            &gw,
            host,
            &[("X-Forwarded-Proto", "http")],
            "url",
        ));
        assert!(
            url.starts_with("https://ai.example.com/api/v1/files/"),
            "{host:?}: {url}"
        );
    }
}
