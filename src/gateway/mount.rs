//! Where a gateway's routes sit in its server's path space, and which requests are its own.
//!
//! The binary's entry points are the gateway's alone: every path is its own, answered (404/405
//! for paths it does not serve) at the root ([`Mount::root`]). A gateway hosted beside another
//! application's routes (the crate's `embed` module) may sit under a path prefix (`/ai`) and
//! takes only the requests under it, plus, if asked, the root-level routes that clients expect at
//! a server's root (`/healthz`, LiteLLM's `/v1/rerank`); everything else is the host's
//! ([`Mount::claim`]).
//! Under a prefix, hosted-file links, lifecycle `Link` headers and the served OpenAPI
//! document's `servers` carry it.

use std::sync::Arc;

use bytes::Bytes;

use super::openapi;
use super::route;

/// The paths served at a server's root by convention rather than under the API's own prefix.
const ROOT_ROUTES: [&str; 2] = ["/healthz", "/v1/rerank"];

/// A gateway's place in its server's path space.
#[derive(Debug, Clone)]
pub(crate) struct Mount {
    /// `""` at the root; else `/segment[/segment...]`, without a trailing `/`.
    prefix: Arc<str>,
    /// Whether requests the gateway does not route are the host's (`false`: the gateway answers
    /// every request, 404/405 included).
    shared: bool,
    /// Whether `/healthz` and `/v1/rerank` are also served at the server's root when a prefix is
    /// set (always, at the root mount).
    root_routes: bool,
    /// The OpenAPI document as served under this mount.
    openapi: Bytes,
}

/// Which of a server's requests a [`Mount`] takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Claim {
    /// Not the gateway's: the host answers it.
    Host,
    /// The gateway's; its route is the path after `prefix` (empty: a root-level route).
    Own { prefix: Option<Arc<str>> },
}

impl Mount {
    /// The binary's mount: every path of the listener is the gateway's, at the root.
    pub(crate) fn root() -> Mount {
        Mount {
            prefix: Arc::from(""),
            shared: false,
            root_routes: true,
            openapi: openapi::document(),
        }
    }

    /// A mount beside a host's routes: the gateway takes the requests under `prefix` (`""`: the
    /// paths it routes at the root), and `/healthz` and `/v1/rerank` at the root when
    /// `root_routes` is set. A prefix must start with `/`, have no trailing `/`, and hold no
    /// `?`, `#`, `%` or whitespace.
    pub(crate) fn shared(prefix: &str, root_routes: bool) -> Result<Mount, String> {
        if !prefix.is_empty()
            && (!prefix.starts_with('/')
                || prefix.ends_with('/')
                || prefix.contains("//")
                || prefix
                    .chars()
                    .any(|c| matches!(c, '?' | '#' | '%') || c.is_whitespace() || c.is_control()))
        {
            return Err(format!(
                "mount prefix `{prefix}`: must be like `/ai` (a leading `/`, no trailing `/`, no \
                 `?`, `#`, `%`, `//` or whitespace)"
            ));
        }
        Ok(Mount {
            openapi: openapi::mounted(prefix),
            prefix: Arc::from(prefix),
            shared: true,
            root_routes: prefix.is_empty() || root_routes,
        })
    }

    /// The prefix (`""` at the root).
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The OpenAPI document as this mount serves it.
    pub(crate) fn openapi(&self) -> Bytes {
        self.openapi.clone()
    }

    /// Whether the request for `method` and `path` is the gateway's, and under which prefix.
    pub(crate) fn claim(&self, method: &http::Method, path: &str) -> Claim {
        if !self.shared {
            return Claim::Own { prefix: None };
        }
        if !self.prefix.is_empty() {
            if let Some(rest) = path.strip_prefix(&*self.prefix) {
                if rest.is_empty() || rest.starts_with('/') {
                    return Claim::Own {
                        prefix: Some(self.prefix.clone()),
                    };
                }
            }
            if self.root_routes && ROOT_ROUTES.contains(&path) {
                return Claim::Own { prefix: None };
            }
            return Claim::Host;
        }
        // At the root of a shared server the gateway takes the paths it routes (a wrong method
        // included: its 405 names the methods it serves), and leaves the rest to the host.
        match route::route(method, path) {
            Err(crate::common::error::GatewayError::NotFound) => Claim::Host,
            _ => Claim::Own { prefix: None },
        }
    }
}

/// `path` with the mount's prefix taken off (the path the router sees).
pub(crate) fn routed<'a>(path: &'a str, prefix: Option<&str>) -> &'a str {
    match prefix {
        Some(p) => path.get(p.len()..).unwrap_or(path),
        None => path,
    }
}

/// `headers` with each `Link` header's path references (`</api/...>`) under `prefix`.
pub(crate) fn link_headers(
    mut headers: Vec<(&'static str, String)>,
    prefix: Option<&str>,
) -> Vec<(&'static str, String)> {
    let Some(prefix) = prefix else {
        return headers;
    };
    for (name, value) in &mut headers {
        if name.eq_ignore_ascii_case("link") {
            *value = value.replace("</", &format!("<{prefix}/"));
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn own(prefix: Option<&str>) -> Claim {
        Claim::Own {
            prefix: prefix.map(Arc::from),
        }
    }

    #[test]
    fn the_binary_takes_every_path() {
        let m = Mount::root();
        for p in ["/nope", "/api/v1/rerank", "/"] {
            assert_eq!(m.claim(&Method::GET, p), own(None), "{p}");
        }
        assert_eq!(m.openapi(), openapi::document());
    }

    #[test]
    fn a_prefix_takes_its_subtree_and_optionally_the_root_routes() {
        let m = Mount::shared("/ai", false).unwrap();
        for p in ["/ai", "/ai/", "/ai/api/v1/rerank", "/ai/nope"] {
            assert_eq!(m.claim(&Method::POST, p), own(Some("/ai")), "{p}");
        }
        for p in ["/aim", "/healthz", "/v1/rerank", "/api/v1/rerank", "/"] {
            assert_eq!(m.claim(&Method::POST, p), Claim::Host, "{p}");
        }
        let m = Mount::shared("/ai", true).unwrap();
        assert_eq!(m.claim(&Method::GET, "/healthz"), own(None));
        assert_eq!(m.claim(&Method::POST, "/v1/rerank"), own(None));
        assert_eq!(m.claim(&Method::GET, "/other"), Claim::Host);
    }

    #[test]
    fn at_a_shared_root_only_routed_paths_are_taken() {
        let m = Mount::shared("", false).unwrap();
        assert_eq!(m.claim(&Method::POST, "/api/v1/rerank"), own(None));
        // A wrong method is still the gateway's path: its 405.
        assert_eq!(m.claim(&Method::GET, "/api/v1/rerank"), own(None));
        assert_eq!(m.claim(&Method::GET, "/healthz"), own(None));
        assert_eq!(m.claim(&Method::GET, "/index.html"), Claim::Host);
    }

    #[test]
    fn bad_prefixes_are_refused() {
        for p in ["ai", "/ai/", "/a b", "/a?b", "/a%2f", "//ai"] {
            assert!(Mount::shared(p, false).is_err(), "{p}");
        }
        assert!(Mount::shared("/ai/v2", false).is_ok());
    }

    #[test]
    fn routes_and_links_carry_the_prefix() {
        assert_eq!(routed("/ai/api/v1/rerank", Some("/ai")), "/api/v1/rerank");
        assert_eq!(routed("/api/v1/rerank", None), "/api/v1/rerank");
        let h = vec![
            ("deprecation", "@1".to_string()),
            (
                "link",
                "</api/v1/models/b>; rel=\"successor-version\"".to_string(),
            ),
        ];
        let out = link_headers(h.clone(), Some("/ai"));
        assert_eq!(out[0], h[0]);
        assert_eq!(out[1].1, "</ai/api/v1/models/b>; rel=\"successor-version\"");
        assert_eq!(link_headers(h.clone(), None), h);
    }
}
