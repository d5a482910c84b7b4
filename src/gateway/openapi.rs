//! The API's OpenAPI 3.1 document (`openapi/openapi.json`), served at `GET /api/v1/openapi.json`.
//!
//! The file is compiled into the binary and answered as it is: no work per request, and the
//! document a gateway serves is always the one it was built with. Its tests keep it and the router
//! in step: every path the router serves has an entry, every entry routes with exactly its
//! methods, and each documents its errors in the shape its route answers them in (the rerank
//! compatibility surfaces' own). Whether answers match it is the client suite's contract test
//! (`tests/clients/test_contract.py`).

use bytes::Bytes;

/// The document's bytes, as committed.
pub(crate) const DOCUMENT: &[u8] = include_bytes!("../../openapi/openapi.json");

/// The document as an answer body (a static slice: nothing is copied).
pub(crate) fn document() -> Bytes {
    Bytes::from_static(DOCUMENT)
}

/// The document as a gateway mounted under `prefix` serves it (`gateway/mount.rs`): its paths
/// unchanged, its one server's URL the prefix, so a client or generator that joins the server URL
/// and a path reaches the mount. Built once per mount; `""` is the committed document. The
/// committed text is kept as written around the `servers` entry (key order, layout).
pub(crate) fn mounted(prefix: &str) -> Bytes {
    if prefix.is_empty() {
        return document();
    }
    let servers = serde_json::json!([{
        "url": prefix,
        "description": "The gateway, mounted under this path prefix of its host server.",
    }]);
    let text = String::from_utf8_lossy(DOCUMENT);
    // The committed `servers` array, replaced in place: it holds no `[` or `]` of its own.
    let spliced = text.find("\"servers\": [").and_then(|at| {
        let open = at + text[at..].find('[')?;
        let close = open + text[open..].find(']')?;
        Some(format!("{}{servers}{}", &text[..open], &text[close + 1..]))
    });
    match spliced {
        Some(doc)
            if serde_json::from_str::<serde_json::Value>(&doc)
                .is_ok_and(|d| d["servers"] == servers) =>
        {
            Bytes::from(doc)
        }
        // The committed document always has the entry (a test holds it); were it ever moved,
        // the document is rebuilt whole rather than served without the prefix.
        _ => {
            let Ok(mut doc) = serde_json::from_slice::<serde_json::Value>(DOCUMENT) else {
                return document();
            };
            doc["servers"] = servers;
            serde_json::to_vec_pretty(&doc).map_or_else(|_| document(), Bytes::from)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::compat::Surface;
    use crate::common::Operation;
    use crate::gateway::route::{route, Route};
    use serde_json::Value;

    fn doc() -> Value {
        serde_json::from_slice(DOCUMENT).expect("openapi/openapi.json is JSON")
    }

    fn paths() -> serde_json::Map<String, Value> {
        doc()["paths"]
            .as_object()
            .expect("the document has paths")
            .clone()
    }

    /// A concrete path for a template: each `{param}` becomes a sample segment.
    fn concrete(template: &str) -> String {
        let mut out = String::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let close = rest[open..].find('}').expect("closed parameter") + open;
            out.push_str("0b5e3c1a");
            rest = &rest[close + 1..];
        }
        out.push_str(rest);
        out
    }

    const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];

    #[test]
    fn a_mounted_document_names_its_prefix_as_server() {
        assert_eq!(mounted(""), document());
        let served = mounted("/ai");
        let d: Value = serde_json::from_slice(&served).unwrap();
        assert_eq!(d["servers"][0]["url"], "/ai");
        assert_eq!(d["servers"].as_array().unwrap().len(), 1);
        assert_eq!(d["paths"], doc()["paths"]);
        let mut rest = d.clone();
        rest["servers"] = doc()["servers"].clone();
        assert_eq!(rest, doc());
        // Spliced in place: the committed text around it is unchanged.
        let text = String::from_utf8(served.to_vec()).unwrap();
        let committed = std::str::from_utf8(DOCUMENT).unwrap();
        let servers_at = committed.find("\"servers\"").unwrap();
        assert_eq!(text[..servers_at], committed[..servers_at]);
    }

    #[test]
    fn is_openapi_3_1_with_auth_schemes() {
        let d = doc();
        assert_eq!(d["openapi"], "3.1.0");
        assert_eq!(d["info"]["version"], "1.0.0");
        let schemes = d["components"]["securitySchemes"].as_object().unwrap();
        assert_eq!(schemes["bearerAuth"]["scheme"], "bearer");
        assert_eq!(schemes["serviceApiKey"]["name"], "Service-API-Key");
        assert_eq!(schemes["authorizationKey"]["name"], "Authorization");
    }

    /// Every documented path and method routes, and the router refuses every other method of the
    /// path with a 405 whose `Allow` lists exactly the documented ones.
    #[test]
    fn every_documented_operation_routes_with_its_methods() {
        for (template, item) in paths() {
            let path = concrete(&template);
            let documented: Vec<String> = item
                .as_object()
                .unwrap()
                .keys()
                .map(|m| m.to_ascii_uppercase())
                .filter(|m| METHODS.contains(&m.as_str()))
                .collect();
            assert!(!documented.is_empty(), "{template} documents no method");
            for m in METHODS {
                let method = http::Method::from_bytes(m.as_bytes()).unwrap();
                match route(&method, &path) {
                    Ok(_) => assert!(
                        documented.iter().any(|d| d == m),
                        "{m} {template} routes but is not documented"
                    ),
                    Err(e) => {
                        assert_eq!(e.status(), 405, "{m} {template}: {e}");
                        assert!(
                            !documented.iter().any(|d| d == m),
                            "{m} {template} is documented but refused"
                        );
                        let mut allowed: Vec<String> = e
                            .extra_headers()
                            .into_iter()
                            .find(|(h, _)| *h == "allow")
                            .map(|(_, v)| v.split(", ").map(str::to_string).collect())
                            .unwrap_or_default();
                        let mut want = documented.clone();
                        allowed.sort();
                        want.sort();
                        assert_eq!(allowed, want, "Allow of {template}");
                    }
                }
            }
        }
    }

    /// Every path literal of the router (an exact path, or a prefix ending in `/` followed by one
    /// parameter) has a document entry: a new route without one fails here.
    #[test]
    fn every_routed_path_is_documented() {
        let source = include_str!("route.rs");
        let code = source.split("#[cfg(test)]").next().unwrap();
        let documented = paths();
        let literals: Vec<&str> = code
            .split('"')
            .skip(1)
            .step_by(2)
            .filter(|s| s.starts_with('/'))
            .collect();
        assert!(literals.len() >= 6, "found only {literals:?}");
        for lit in literals {
            let found = if lit.ends_with('/') {
                documented.keys().any(|p| {
                    p.strip_prefix(lit).is_some_and(|rest| {
                        rest.starts_with('{') && rest.ends_with('}') && !rest.contains('/')
                    })
                })
            } else {
                documented.contains_key(lit)
            };
            assert!(
                found,
                "the router serves `{lit}`, the document has no entry for it"
            );
        }
    }

    /// Each kind of route maps to its document entries (exhaustive: a new kind, or a new rerank
    /// surface, must choose them), each documented with the method that routes to that kind.
    #[test]
    fn every_route_kind_is_documented() {
        let documented = paths();
        let kinds = [
            Route::Health,
            Route::OpenApi,
            Route::File,
            Route::Task,
            Route::Operation(Operation::Speech),
            Route::Operation(Operation::Images),
            Route::Operation(Operation::Rerank),
            Route::ImageEdit,
            Route::Compat(Surface::CohereV1),
            Route::Compat(Surface::CohereV2),
            Route::Compat(Surface::Jina),
            Route::Models,
            Route::Model,
            Route::Voices,
            Route::Usage,
        ];
        for kind in kinds {
            let entries: &[(&str, &str)] = match kind {
                Route::Health => &[("/healthz", "get"), ("/healthz", "head")],
                Route::OpenApi => &[("/api/v1/openapi.json", "get")],
                Route::File => &[
                    ("/api/v1/files/{id}", "get"),
                    ("/api/v1/files/{id}", "head"),
                ],
                Route::Task => &[("/api/v1/images/{task_id}", "get")],
                Route::Models => &[("/api/v1/models", "get")],
                Route::Model => &[("/api/v1/models/{id}", "get")],
                Route::Voices => &[("/api/v1/audio/voices", "get")],
                Route::Usage => &[("/api/v1/usage", "get")],
                Route::Operation(op) => match op {
                    Operation::Speech => &[("/api/v1/audio/speech", "post")],
                    Operation::Images => &[("/api/v1/images/generations", "post")],
                    Operation::Rerank => &[("/api/v1/rerank", "post")],
                },
                Route::ImageEdit => &[("/api/v1/images/edits", "post")],
                Route::Compat(surface) => match surface {
                    // The gateway's own shape is `/api/v1/rerank` (above), never a compat route.
                    Surface::Native => panic!("Route::Compat(Surface::Native) is not routed"),
                    Surface::CohereV1 => &[("/compat/cohere/v1/rerank", "post")],
                    Surface::CohereV2 => &[("/compat/cohere/v2/rerank", "post")],
                    Surface::Jina => &[("/compat/jina/v1/rerank", "post"), ("/v1/rerank", "post")],
                },
            };
            for (path, method) in entries {
                assert!(
                    documented
                        .get(*path)
                        .is_some_and(|item| item.get(*method).is_some()),
                    "{method} {path}"
                );
                let m = http::Method::from_bytes(method.to_ascii_uppercase().as_bytes()).unwrap();
                assert_eq!(route(&m, &concrete(path)).unwrap(), kind, "{path}");
            }
        }
    }

    /// The error answers each operation documents are in the shape its route answers them in: the
    /// rerank compatibility surfaces' own (Cohere's, Jina's), every other path the gateway's.
    #[test]
    fn error_answers_are_documented_in_each_surface_shape() {
        for (template, item) in paths() {
            for (method, op) in item.as_object().unwrap() {
                let m = http::Method::from_bytes(method.to_ascii_uppercase().as_bytes()).unwrap();
                let want = match route(&m, &concrete(&template)).unwrap() {
                    Route::Compat(Surface::CohereV1 | Surface::CohereV2) => "Cohere",
                    Route::Compat(Surface::Jina) => "Jina",
                    _ => "",
                };
                let responses = op["responses"].as_object().unwrap();
                for (status, response) in responses {
                    if status.starts_with('2') {
                        continue;
                    }
                    let name = response["$ref"]
                        .as_str()
                        .and_then(|r| r.strip_prefix("#/components/responses/"))
                        .unwrap_or_else(|| panic!("{method} {template} {status}: not a $ref"));
                    let shape = ["Cohere", "Jina"]
                        .into_iter()
                        .find(|s| name.starts_with(s))
                        .unwrap_or("");
                    assert_eq!(shape, want, "{method} {template} {status}: {name}");
                }
            }
        }
    }

    /// The `code` values schema `name` of the document allows.
    fn codes_of(schemas: &Value, name: &str) -> Vec<String> {
        let code = &schemas[name]["properties"]["code"];
        match (code.get("const"), code.get("enum")) {
            (Some(c), _) => vec![c.as_str().unwrap().to_string()],
            (_, Some(e)) => e
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect(),
            _ => panic!("{name} has no code"),
        }
    }

    /// Every kind of gateway error, with the error schema that documents it.
    fn error_cases() -> Vec<(crate::common::error::GatewayError, &'static str)> {
        use crate::common::error::{GatewayError, UpstreamError, UpstreamErrorKind as K};
        let up = |k| GatewayError::Upstream(UpstreamError::new(k, "p", "m"));
        vec![
            (GatewayError::NotFound, "NotFound"),
            (GatewayError::ModelNotFound, "NotFound"),
            (
                GatewayError::MethodNotAllowed { allowed: "GET" },
                "MethodNotAllowed",
            ),
            (
                GatewayError::Unauthorized(crate::auth::AuthError::Missing),
                "Unauthorized",
            ),
            (
                GatewayError::ModelNotAllowed { model: "m".into() },
                "ModelNotAllowed",
            ),
            (
                GatewayError::PayloadTooLarge { limit: 1 },
                "PayloadTooLarge",
            ),
            (
                GatewayError::InputTooLong {
                    model: "m".into(),
                    length: 2,
                    unit: "characters",
                    limit: 1,
                },
                "SpeechTooLarge",
            ),
            (GatewayError::field("f", "bad"), "ValidationError"),
            (
                GatewayError::ModelUnavailable {
                    model: "m".into(),
                    reason: "r".into(),
                },
                "Unavailable",
            ),
            (GatewayError::Store("s".into()), "StoreUnavailable"),
            (GatewayError::NotConfigured("n"), "NotConfigured"),
            (
                GatewayError::LedgerUnavailable("l".into()),
                "LedgerUnavailable",
            ),
            (GatewayError::Internal("i".into()), "InternalError"),
            (up(K::InvalidRequest), "ProviderRejection"),
            (up(K::ContentPolicy), "ProviderRejection"),
            (up(K::UnknownVoice), "ProviderRejection"),
            (up(K::RateLimited), "RateLimited"),
            (up(K::Timeout), "UpstreamTimeout"),
            (up(K::UnknownModel), "Unavailable"),
            (up(K::Connect), "UpstreamFailure"),
            (up(K::AuthRejected), "UpstreamFailure"),
            (up(K::Failure), "UpstreamFailure"),
            (up(K::BadResponse), "UpstreamFailure"),
        ]
    }

    /// Each error schema's status.
    const STATUSES: [(&str, u16); 16] = [
        ("ValidationError", 400),
        ("ProviderRejection", 400),
        ("Unauthorized", 401),
        ("ModelNotAllowed", 403),
        ("NotFound", 404),
        ("MethodNotAllowed", 405),
        ("PayloadTooLarge", 413),
        ("SpeechTooLarge", 413),
        ("RateLimited", 429),
        ("InternalError", 500),
        ("NotConfigured", 501),
        ("UpstreamFailure", 502),
        ("Unavailable", 503),
        ("StoreUnavailable", 503),
        ("LedgerUnavailable", 503),
        ("UpstreamTimeout", 504),
    ];

    /// The error codes the document lists are exactly the gateway's own, status by status.
    #[test]
    fn error_codes_match_the_error_model() {
        let d = doc();
        let schemas = &d["components"]["schemas"];
        for (err, schema) in error_cases() {
            assert!(
                codes_of(schemas, schema).iter().any(|c| c == err.code()),
                "{} is not in {schema}",
                err.code()
            );
            let status = STATUSES.iter().find(|(s, _)| *s == schema).unwrap().1;
            assert_eq!(err.status(), status, "{}", err.code());
            body_shapes_match(schemas, &err, schema);
        }
    }

    /// `err`'s body has the keys of its `schema` (and names the request), on every surface.
    fn body_shapes_match(schemas: &Value, err: &crate::common::error::GatewayError, schema: &str) {
        // Inside a request, an error body names the request (its `X-Request-Id`).
        let body: Value = serde_json::from_slice(&err.body_for("req-1")).unwrap();
        assert_eq!(body["request_id"], "req-1");
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        let allowed: Vec<&String> = schemas[schema]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert!(
            keys.iter().all(|k| allowed.contains(k)),
            "{}: {keys:?}",
            err.code()
        );
        // The compatibility surfaces answer the same error in their own shape.
        for (surface, shape) in [
            (Surface::CohereV1, "CohereError"),
            (Surface::CohereV2, "CohereError"),
            (Surface::Jina, "JinaError"),
        ] {
            let body: Value = serde_json::from_slice(&surface.error_body(err, "req-1")).unwrap();
            let mut keys: Vec<&String> = body.as_object().unwrap().keys().collect();
            let mut want: Vec<&String> = schemas[shape]["properties"]
                .as_object()
                .unwrap()
                .keys()
                .collect();
            keys.sort();
            want.sort();
            assert_eq!(keys, want, "{shape} of {}", err.code());
            assert_eq!(body["code"], err.code(), "{shape}");
        }
    }

    /// The headers the gateway sends are declared, once each in `components.headers`, on the
    /// answers that carry them: `X-Request-Id` on every answer; an operation's cost on its
    /// successes; the response cache's on the successes of the cacheable operations; a retiring
    /// model's lifecycle headers (and the cache's status) on the answers about a model, errors
    /// included. And rerank's `metadata.cost` is in its result.
    #[test]
    fn the_answer_headers_are_declared() {
        let d = doc();
        let declared = d["components"]["headers"].as_object().unwrap();
        let lifecycle = ["Deprecation", "Sunset", "Link", "Switchyard-Served-Model"];
        let cache = [
            super::super::cached::HEADER,
            super::super::cached::KEY_HEADER,
            "Age",
        ];
        let id = "X-Request-Id";
        let cost = super::super::costing::HEADER;
        for name in lifecycle.iter().chain(&cache).chain([&id, &cost]) {
            assert!(declared.contains_key(*name), "{name} is not declared");
        }
        // Lowercase on the wire, the same names.
        assert!(id.eq_ignore_ascii_case(crate::common::request_id::HEADER));
        assert!(lifecycle[3].eq_ignore_ascii_case(super::super::lifecycle::SERVED_MODEL));
        let resolve = |r: &Value| -> Value {
            match r["$ref"].as_str() {
                Some(name) => {
                    let name = name.rsplit('/').next().unwrap();
                    d["components"]["responses"][name].clone()
                }
                None => r.clone(),
            }
        };
        let has = |r: &Value, name: &str| {
            r["headers"][name]["$ref"] == format!("#/components/headers/{name}").as_str()
        };
        for (template, item) in paths() {
            for (method, op) in item.as_object().unwrap() {
                let m = http::Method::from_bytes(method.to_ascii_uppercase().as_bytes()).unwrap();
                let kind = route(&m, &concrete(&template)).unwrap();
                let (operation, cached) = match kind {
                    Route::Operation(_) | Route::Compat(_) => (true, true),
                    Route::ImageEdit => (true, false),
                    _ => (false, false),
                };
                for (status, response) in op["responses"].as_object().unwrap() {
                    let r = resolve(response);
                    let at = format!("{method} {template} {status}");
                    assert!(has(&r, id), "{at}: no {id}");
                    let success = status.starts_with('2');
                    if operation && success {
                        assert!(has(&r, cost), "{at}: no {cost}");
                    }
                    if cached && success {
                        for name in cache {
                            assert!(has(&r, name), "{at}: no {name}");
                        }
                    }
                    if operation && (success || status == "503") {
                        for name in lifecycle {
                            assert!(has(&r, name), "{at}: no {name}");
                        }
                    }
                    if !success {
                        assert!(!has(&r, cost), "{at}: an error carries no cost");
                    }
                }
            }
        }
        let metadata = &d["components"]["schemas"]["RerankResult"]["properties"]["metadata"];
        let cost = &metadata["properties"]["cost"]["properties"];
        for field in ["amount", "currency", "basis", "partial"] {
            assert!(cost.get(field).is_some(), "metadata.cost.{field}");
        }
    }

    /// A compatibility surface documents, status by status, exactly the error codes of
    /// `/api/v1/rerank` (the same pipeline), in its own shape.
    #[test]
    fn compat_error_codes_are_the_rerank_ones() {
        let d = doc();
        let resolve = |v: &Value| -> Value {
            let name = v["$ref"].as_str().unwrap().rsplit('/').next().unwrap();
            d["components"]["responses"][name].clone()
        };
        let codes = |schema: &Value| -> Vec<String> {
            fn of(d: &Value, s: &Value) -> Vec<String> {
                if let Some(r) = s["$ref"].as_str() {
                    let name = r.rsplit('/').next().unwrap();
                    return of(d, &d["components"]["schemas"][name]);
                }
                if let Some(alts) = s["oneOf"].as_array() {
                    return alts.iter().flat_map(|a| of(d, a)).collect();
                }
                if let Some(parts) = s["allOf"].as_array() {
                    return parts.iter().flat_map(|a| of(d, a)).collect();
                }
                let code = &s["properties"]["code"];
                match (code.get("const"), code.get("enum")) {
                    (Some(c), _) => vec![c.as_str().unwrap().to_string()],
                    (_, Some(e)) => e
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_str().unwrap().to_string())
                        .collect(),
                    _ => vec![],
                }
            }
            let mut c = of(&d, &schema["content"]["application/json"]["schema"]);
            c.sort();
            c
        };
        let native = d["paths"]["/api/v1/rerank"]["post"]["responses"].clone();
        for path in [
            "/compat/cohere/v1/rerank",
            "/compat/cohere/v2/rerank",
            "/compat/jina/v1/rerank",
            "/v1/rerank",
        ] {
            let compat = d["paths"][path]["post"]["responses"]
                .as_object()
                .unwrap()
                .clone();
            let statuses: Vec<&String> = compat.keys().collect();
            let want: Vec<&String> = native.as_object().unwrap().keys().collect();
            assert_eq!(statuses, want, "{path}");
            for (status, response) in &compat {
                if status == "200" {
                    continue;
                }
                let (ours, theirs) = (resolve(response), resolve(&native[status]));
                assert_eq!(codes(&ours), codes(&theirs), "{path} {status}");
                assert!(!codes(&ours).is_empty(), "{path} {status}");
                assert_eq!(ours["headers"], theirs["headers"], "{path} {status}");
            }
        }
    }
}
