//! Which endpoint a request line names.

use crate::api::error::GatewayError;
use crate::catalog::Operation;

/// A routed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Health,
    Operation(Operation),
}

/// Route by path, then check the method: unknown paths are 404, wrong methods 405.
pub fn route(method: &http::Method, path: &str) -> Result<Route, GatewayError> {
    let (route, allowed) = match path {
        "/healthz" => (Route::Health, "GET, HEAD"),
        "/api/v1/audio/speech" => (Route::Operation(Operation::Speech), "POST"),
        "/api/v1/images/generations" => (Route::Operation(Operation::Images), "POST"),
        "/api/v1/rerank" => (Route::Operation(Operation::Rerank), "POST"),
        _ => return Err(GatewayError::NotFound),
    };
    let ok = match route {
        Route::Health => method == http::Method::GET || method == http::Method::HEAD,
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
