//! Authentication end to end: every accepted credential form, and 401 for everything else.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::support;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::json;
use support::fake::{FakeProvider, Reply};
use support::{client, TestGateway, JWT_SECRET, KEY, PROVIDER_KEY};

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn claims(exp_offset: i64) -> serde_json::Value {
    json!({"sub": "user-1", "iss": "switchyard-tests", "exp": (now() as i64 + exp_offset), "nbf": now() - 10})
}

fn hs256(claims: &serde_json::Value, secret: &str) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

fn pem_token(alg: Algorithm, file: &str) -> String {
    let pem = std::fs::read(support::fixture(file)).unwrap();
    let key = match alg {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&pem).unwrap(),
        _ => EncodingKey::from_ec_pem(&pem).unwrap(),
    };
    encode(&Header::new(alg), &claims(600), &key).unwrap()
}

fn rerank_body() -> serde_json::Value {
    json!({"model": "rerank-v3.5", "query": "q", "documents": ["a", "b"]})
}

fn cohere_ok() -> Reply {
    Reply::json(
        200,
        json!({"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]}),
    )
}

fn call(gw: &TestGateway, headers: &[(&str, &str)]) -> client::Response {
    client::post_json(gw.addr, "/api/v1/rerank", headers, &rerank_body())
}

#[test]
fn every_accepted_form_works_and_is_never_forwarded() {
    let fake = FakeProvider::start();
    fake.set_default(cohere_ok());
    let gw = TestGateway::start(&fake);
    let bearer = format!("Bearer {KEY}");
    let jwt = format!("Bearer {}", hs256(&claims(600), JWT_SECRET));
    let rs = format!(
        "Bearer {}",
        pem_token(Algorithm::RS256, "jwt/rsa_private.pem")
    );
    let es = format!(
        "Bearer {}",
        pem_token(Algorithm::ES256, "jwt/ec_private.pem")
    );
    let forms: Vec<Vec<(&str, &str)>> = vec![
        vec![("Service-API-Key", KEY)],
        vec![("Authorization", &bearer)],
        vec![("Authorization", KEY)],
        vec![("authorization", "bearer hashed-secret-key")],
        vec![("Authorization", &jwt)],
        vec![("Authorization", &rs)],
        vec![("Authorization", &es)],
    ];
    for headers in &forms {
        let resp = call(&gw, headers);
        assert_eq!(resp.status, 200, "{headers:?}: {}", resp.text());
    }
    let seen = fake.requests();
    assert_eq!(seen.len(), forms.len());
    for r in seen {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {PROVIDER_KEY}").as_str())
        );
        assert_eq!(r.header("service-api-key"), None);
    }
}

#[test]
fn bad_credentials_are_401_in_the_error_shape() {
    let fake = FakeProvider::start();
    fake.set_default(cohere_ok());
    let gw = TestGateway::start(&fake);
    let expired = format!("Bearer {}", hs256(&claims(-600), JWT_SECRET));
    let wrong_key = format!(
        "Bearer {}",
        hs256(&claims(600), "another-secret-another-secret-another")
    );
    let mut wrong_iss = claims(600);
    wrong_iss["iss"] = json!("someone-else");
    let wrong_iss = format!("Bearer {}", hs256(&wrong_iss, JWT_SECRET));
    // alg none: header {"alg":"none","typ":"JWT"}, no signature.
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let none = format!(
        "Bearer {}.{}.",
        b64.encode(br#"{"alg":"none","typ":"JWT"}"#),
        b64.encode(claims(600).to_string())
    );
    let cases: Vec<Vec<(&str, &str)>> = vec![
        vec![],
        vec![("Service-API-Key", "nope")],
        vec![("Authorization", "Bearer nope")],
        vec![("Authorization", &expired)],
        vec![("Authorization", &wrong_key)],
        vec![("Authorization", &wrong_iss)],
        vec![("Authorization", &none)],
    ];
    for headers in &cases {
        let resp = call(&gw, headers);
        assert_eq!(resp.status, 401, "{headers:?}");
        let body = resp.json();
        assert_eq!(body["code"], "unauthorized");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    assert!(
        fake.requests().is_empty(),
        "an unauthenticated request reached the provider"
    );
}

#[test]
fn health_needs_no_credentials() {
    let fake = FakeProvider::start();
    let gw = TestGateway::start(&fake);
    let resp = client::request(gw.addr, "GET", "/healthz", &[], b"");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.json()["status"], "ok");
}
