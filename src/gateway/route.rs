//! Which endpoint a request line names.

use crate::common::error::GatewayError;
use crate::common::Operation;

/// A routed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Health,
    /// `GET /api/v1/openapi.json`: the API's OpenAPI document (`gateway/openapi.rs`).
    OpenApi,
    Operation(Operation),
    /// `GET /api/v1/files/{id}`: an image the gateway hosts (the id is read from the path).
    File,
    /// `GET /api/v1/images/{task_id}`: an asynchronous image task.
    Task,
}

/// Path prefix of image tasks.
pub const TASKS_PREFIX: &str = "/api/v1/images/";

/// Path prefix of hosted files.
pub const FILES_PREFIX: &str = "/api/v1/files/";

/// Route by path, then check the method: unknown paths are 404, wrong methods 405.
pub fn route(method: &http::Method, path: &str) -> Result<Route, GatewayError> {
    let (route, allowed) = match path {
        "/healthz" => (Route::Health, "GET, HEAD"),
        "/api/v1/openapi.json" => (Route::OpenApi, "GET"),
        "/api/v1/audio/speech" => (Route::Operation(Operation::Speech), "POST"),
        "/api/v1/images/generations" => (Route::Operation(Operation::Images), "POST"),
        "/api/v1/rerank" => (Route::Operation(Operation::Rerank), "POST"),
        p if p.len() > FILES_PREFIX.len()
            && p.starts_with(FILES_PREFIX)
            && !p[FILES_PREFIX.len()..].contains('/') =>
        {
            (Route::File, "GET, HEAD")
        }
        p if p.len() > TASKS_PREFIX.len()
            && p.starts_with(TASKS_PREFIX)
            && !p[TASKS_PREFIX.len()..].contains('/') =>
        {
            (Route::Task, "GET")
        }
        _ => return Err(GatewayError::NotFound),
    };
    let ok = match route {
        Route::Health | Route::File => method == http::Method::GET || method == http::Method::HEAD,
        Route::Task | Route::OpenApi => method == http::Method::GET,
        Route::Operation(_) => method == http::Method::POST,
    };
    if ok {
        Ok(route)
    } else {
        Err(GatewayError::MethodNotAllowed { allowed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        use http::Method;
        assert_eq!(
            route(&Method::POST, "/api/v1/rerank").unwrap(),
            Route::Operation(Operation::Rerank)
        );
        assert_eq!(route(&Method::GET, "/healthz").unwrap(), Route::Health);
        assert_eq!(
            route(&Method::GET, "/api/v1/files/abc").unwrap(),
            Route::File
        );
        assert_eq!(
            route(&Method::POST, "/api/v1/files/abc")
                .unwrap_err()
                .status(),
            405
        );
        assert_eq!(
            route(&Method::GET, "/api/v1/images/0b5e3c1a").unwrap(),
            Route::Task
        );
        assert_eq!(
            route(&Method::GET, "/api/v1/images/generations")
                .unwrap_err()
                .status(),
            405
        );
        for p in [
            "/api/v1/files/",
            "/api/v1/files/a/b",
            "/api/v1/images/",
            "/api/v1/images/a/b",
        ] {
            assert_eq!(route(&Method::GET, p).unwrap_err().status(), 404, "{p}");
        }
        assert_eq!(
            route(&Method::GET, "/api/v1/rerank").unwrap_err().status(),
            405
        );
        assert_eq!(
            route(&Method::POST, "/api/v1/nope").unwrap_err().status(),
            404
        );
        assert_eq!(
            route(&Method::POST, "/api/v1/rerank/")
                .unwrap_err()
                .status(),
            404
        );
    }
}
