//! `GET /api/v1/openapi.json`: the committed OpenAPI document, byte for byte, without credentials,
//! on every entry point; other methods are 405.

use crate::support;
use support::client;
use support::fake::FakeProvider;
use support::TestGateway;

const DOCUMENT: &[u8] = include_bytes!("../../openapi/openapi.json");

#[test]
fn the_document_is_served_as_committed_without_credentials() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    for addr in [gw.addr, gw.overseas] {
        let resp = client::request(addr, "GET", "/api/v1/openapi.json", &[], b"");
        assert_eq!(resp.status, 200, "{}", resp.text());
        assert_eq!(resp.header("content-type"), Some("application/json"));
        assert_eq!(
            resp.header("content-length"),
            Some(DOCUMENT.len().to_string().as_str())
        );
        assert!(resp.body == DOCUMENT, "the served document is not the file");
        let doc = resp.json();
        assert_eq!(doc["openapi"], "3.1.0");
        assert!(doc["paths"]["/api/v1/openapi.json"]["get"].is_object());
    }
    // Credentials, right or wrong, change nothing: the document is public.
    let resp = client::request(
        gw.addr,
        "GET",
        "/api/v1/openapi.json",
        &[("Service-API-Key", "wrong")],
        b"",
    );
    assert_eq!(resp.status, 200);
    assert!(resp.body == DOCUMENT);
    assert!(fake.requests().is_empty());
}

#[test]
fn other_methods_are_405_naming_get() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let resp = client::request(
        gw.addr,
        "POST",
        "/api/v1/openapi.json",
        &support::auth(),
        b"{}",
    );
    assert_eq!(resp.status, 405, "{}", resp.text());
    assert_eq!(resp.header("allow"), Some("GET"));
    assert_eq!(resp.json()["code"], "method_not_allowed");
}
