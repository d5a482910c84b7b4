use serde_json::json;

use super::Surface;
use crate::common::error::GatewayError;

fn translate(surface: Surface, body: &str) -> Result<super::Translated<'_>, GatewayError> {
    surface
        .translate(body.as_bytes())
        .map(|t| t.expect("a compatibility surface translates"))
}

#[test]
fn the_native_surface_is_not_translated() {
    assert!(Surface::Native.translate(b"{}").unwrap().is_none());
}

#[test]
fn documents_become_strings_keeping_their_literals() {
    let body = r#"{"model":"m","documents":["caf\u00e9",{"text":"a \"b\"","id":7}],"query":"q","top_n":null,"max_tokens_per_doc":5,"return_documents":true}"#;
    let t = translate(Surface::CohereV2, body).unwrap();
    assert_eq!(
        std::str::from_utf8(&t.body).unwrap(),
        r#"{"documents":["caf\u00e9","a \"b\""],"model":"m","query":"q","max_tokens_per_doc":5}"#
    );
    assert!(t.return_documents);
    assert_eq!(t.originals.len(), 2);
    assert_eq!(t.originals[1].get(), r#"{"text":"a \"b\"","id":7}"#);
}

#[test]
fn return_documents_defaults_per_surface() {
    let body = r#"{"model":"m","query":"q","documents":["a"]}"#;
    assert!(!translate(Surface::CohereV1, body).unwrap().return_documents);
    assert!(!translate(Surface::CohereV2, body).unwrap().return_documents);
    assert!(translate(Surface::Jina, body).unwrap().return_documents);
}

#[test]
fn bad_documents_rank_fields_and_flags_are_named() {
    let body =
        r#"{"documents":["a",{"text":1},3],"rank_fields":["title"],"return_documents":"yes"}"#;
    let Err(GatewayError::Validation(v)) = translate(Surface::CohereV1, body) else {
        panic!("expected a validation error");
    };
    let d = v.details();
    for field in [
        "documents[1]",
        "documents[2]",
        "rank_fields",
        "return_documents",
    ] {
        assert!(d.contains_key(field), "{d:?}");
    }
    // Jina has no rank_fields: it is left for the gateway's own check (an unknown field).
    let t = translate(Surface::Jina, r#"{"rank_fields":["text"]}"#).unwrap();
    assert_eq!(t.body, br#"{"rank_fields":["text"]}"#);
}

#[test]
fn errors_in_each_shape() {
    let mut v = crate::common::error::ValidationErrors::default();
    v.add("top_n", "must be at least 1");
    v.add("documents[0]", "must not be empty");
    let err = GatewayError::Validation(v);
    let cohere: serde_json::Value =
        serde_json::from_slice(&Surface::CohereV2.error_body(&err, "req-7")).unwrap();
    assert_eq!(
        cohere,
        json!({"message": "request validation failed: documents[0]: must not be empty; top_n: must be at least 1", "code": "validation_error", "request_id": "req-7"})
    );
    let jina: serde_json::Value =
        serde_json::from_slice(&Surface::Jina.error_body(&err, "req-7")).unwrap();
    assert_eq!(jina["detail"], cohere["message"]);
    assert_eq!(jina["request_id"], "req-7");
    let native: serde_json::Value =
        serde_json::from_slice(&Surface::Native.error_body(&err, "req-7")).unwrap();
    assert_eq!(native["request_id"], "req-7");
    // Outside a request (no id), no field.
    let bare: serde_json::Value =
        serde_json::from_slice(&Surface::Jina.error_body(&err, "")).unwrap();
    assert!(bare.get("request_id").is_none());
    assert_eq!(native["details"]["top_n"], "must be at least 1");
}
