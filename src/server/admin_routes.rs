//! The management API's routes: which template a request's method and path match, with the
//! path's parameters. [`ROUTES`] is the one list: the router matches against it, and the OpenAPI
//! document's test holds the document to it.

/// Every route: method and path template (`{name}` is one path segment).
pub(crate) const ROUTES: &[(&str, &str)] = &[
    ("GET", "/admin/v1/whoami"),
    ("GET", "/admin/v1/tenants"),
    ("POST", "/admin/v1/tenants"),
    ("GET", "/admin/v1/tenants/{name}"),
    ("PATCH", "/admin/v1/tenants/{name}"),
    ("DELETE", "/admin/v1/tenants/{name}"),
    ("GET", "/admin/v1/keys"),
    ("POST", "/admin/v1/keys"),
    ("GET", "/admin/v1/keys/{id}"),
    ("PATCH", "/admin/v1/keys/{id}"),
    ("DELETE", "/admin/v1/keys/{id}"),
    ("POST", "/admin/v1/keys/{id}/rotate"),
    ("POST", "/admin/v1/keys/{id}/revoke"),
    ("GET", "/admin/v1/spend"),
    ("GET", "/admin/v1/models"),
    ("GET", "/admin/v1/audit"),
    ("GET", "/admin/v1/openapi.json"),
];

/// What a request's path matched.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Matched<'a> {
    /// The route `ROUTES[index]`, with the path's parameters in order.
    Route(&'static str, &'static str, Vec<&'a str>),
    /// A path some route has, but not with this method: the methods it takes.
    WrongMethod(String),
    /// No route has this path.
    NotFound,
}

/// The parameters of `path` under `template`, if it matches.
fn params<'a>(template: &str, path: &'a str) -> Option<Vec<&'a str>> {
    let (mut t, mut p) = (template.split('/'), path.split('/'));
    let mut out = Vec::new();
    loop {
        match (t.next(), p.next()) {
            (None, None) => return Some(out),
            (Some(ts), Some(ps)) if ts.starts_with('{') && !ps.is_empty() => out.push(ps),
            (Some(ts), Some(ps)) if ts == ps => {}
            _ => return None,
        }
    }
}

/// The route `method` and `path` match.
pub(crate) fn route<'a>(method: &str, path: &'a str) -> Matched<'a> {
    let mut methods = Vec::new();
    for (m, template) in ROUTES {
        if let Some(found) = params(template, path) {
            if *m == method {
                return Matched::Route(m, template, found);
            }
            methods.push(*m);
        }
    }
    if methods.is_empty() {
        Matched::NotFound
    } else {
        Matched::WrongMethod(methods.join(", "))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    fn doc() -> serde_json::Value {
        let text = include_str!("../../openapi/admin_openapi.json");
        serde_json::from_str(text).unwrap()
    }

    /// Every `$ref` in `v`, collected.
    fn refs<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a str>) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(serde_json::Value::String(r)) = m.get("$ref") {
                    out.push(r);
                }
                m.values().for_each(|v| refs(v, out));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn the_document_lists_exactly_the_routes_the_router_serves() {
        let d = doc();
        assert_eq!(d["openapi"], "3.1.0");
        let mut documented = Vec::new();
        for (path, item) in d["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                documented.push((method.to_uppercase(), path.clone()));
                let op = &item[method];
                assert!(
                    op["responses"]["401"].is_object(),
                    "{method} {path}: no 401"
                );
            }
        }
        let mut served: Vec<(String, String)> = ROUTES
            .iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        documented.sort();
        served.sort();
        assert_eq!(documented, served);
    }

    #[test]
    fn every_reference_in_the_document_resolves() {
        let d = doc();
        let mut all = Vec::new();
        refs(&d, &mut all);
        assert!(!all.is_empty());
        for r in all {
            let pointer = r.strip_prefix('#').unwrap();
            assert!(d.pointer(pointer).is_some(), "{r} does not resolve");
        }
    }

    #[test]
    fn paths_match_their_templates_with_their_parameters() {
        assert_eq!(
            route("POST", "/admin/v1/keys/abc/rotate"),
            Matched::Route("POST", "/admin/v1/keys/{id}/rotate", vec!["abc"])
        );
        assert_eq!(
            route("PUT", "/admin/v1/tenants/a"),
            Matched::WrongMethod("GET, PATCH, DELETE".into())
        );
        assert_eq!(route("GET", "/admin/v1/tenants/"), Matched::NotFound);
        assert_eq!(route("GET", "/admin/v1/nope"), Matched::NotFound);
    }
}
