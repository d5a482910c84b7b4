//! Which endpoint a request line names.

use crate::api::compat::Surface;
use crate::common::error::GatewayError;
use crate::common::Operation;

/// A routed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Health,
    /// `GET /api/v1/openapi.json`: the API's OpenAPI document (`gateway/openapi.rs`).
    OpenApi,
    Operation(Operation),
    /// `GET /api/v1/files/{id}`: an image the gateway hosts (the id is read from the path).
    File,
    /// `GET /api/v1/images/{task_id}`: an asynchronous image task.
    Task,
    /// `POST /api/v1/images/edits`: OpenAI's image edit form, run as an image generation.
    ImageEdit,
    /// Rerank in another API's shape (`api::compat`), for clients that speak it.
    Compat(Surface),
    /// `GET /api/v1/models`: the models and their capabilities (`gateway/models.rs`).
    Models,
    /// `GET /api/v1/models/{id}`: one of them (the id is read from the path).
    Model,
    /// `GET /api/v1/audio/voices?model=…`: a speech model's voices (`gateway/voices.rs`).
    Voices,
    /// `GET /api/v1/usage?from=…&to=…`: the caller's own usage, budgets and limits
    /// (`gateway/usage.rs`).
    Usage,
}

impl Route {
    /// The operation the route runs (an image edit is an image generation; a compatibility
    /// surface's rerank is a rerank), `None` for the other endpoints.
    pub(crate) fn operation(self) -> Option<Operation> {
        match self {
            Route::Operation(op) => Some(op),
            Route::ImageEdit => Some(Operation::Images),
            Route::Compat(_) => Some(Operation::Rerank),
            _ => None,
        }
    }

    /// Whether the route needs the caller's credentials: all but the health check, the OpenAPI
    /// document and hosted files (whose unguessable, expiring link is the capability).
    pub(crate) fn authenticated(self) -> bool {
        !matches!(self, Route::Health | Route::OpenApi | Route::File)
    }
}

/// Path prefix of image tasks.
pub(crate) const TASKS_PREFIX: &str = "/api/v1/images/";

/// Path prefix of one model. The id is the rest of the path, `/` included: a public model name
/// may hold one (`BAAI/bge-reranker-v2-m3`).
pub(crate) const MODELS_PREFIX: &str = "/api/v1/models/";

/// Path prefix of hosted files.
pub(crate) const FILES_PREFIX: &str = "/api/v1/files/";

/// Route by path, then check the method: unknown paths are 404, wrong methods 405.
pub(crate) fn route(method: &http::Method, path: &str) -> Result<Route, GatewayError> {
    let (route, allowed) = match path {
        "/healthz" => (Route::Health, "GET, HEAD"),
        "/api/v1/openapi.json" => (Route::OpenApi, "GET"),
        "/api/v1/models" => (Route::Models, "GET"),
        p if p.len() > MODELS_PREFIX.len() && p.starts_with(MODELS_PREFIX) => (Route::Model, "GET"),
        "/api/v1/audio/speech" => (Route::Operation(Operation::Speech), "POST"),
        "/api/v1/audio/voices" => (Route::Voices, "GET"),
        "/api/v1/usage" => (Route::Usage, "GET"),
        "/api/v1/images/generations" => (Route::Operation(Operation::Images), "POST"),
        // Before the task route, which would read `edits` as a task id.
        "/api/v1/images/edits" => (Route::ImageEdit, "POST"),
        "/api/v1/rerank" => (Route::Operation(Operation::Rerank), "POST"),
        // Each surface has its own prefix (Cohere's v1 and Jina's paths are both `/v1/rerank`):
        // the base URL a client is given is `/compat/cohere` or `/compat/jina/v1`.
        "/compat/cohere/v1/rerank" => (Route::Compat(Surface::CohereV1), "POST"),
        "/compat/cohere/v2/rerank" => (Route::Compat(Surface::CohereV2), "POST"),
        "/compat/jina/v1/rerank" => (Route::Compat(Surface::Jina), "POST"),
        // LiteLLM's `jina_ai/` models keep only the scheme and host of `api_base` and post to
        // `/v1/rerank` (litellm/llms/jina_ai/rerank/transformation.py), so Jina's own path is
        // served at the root too.
        "/v1/rerank" => (Route::Compat(Surface::Jina), "POST"),
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
        Route::Task
        | Route::OpenApi
        | Route::Models
        | Route::Model
        | Route::Voices
        | Route::Usage => method == http::Method::GET,
        Route::Operation(_) | Route::ImageEdit | Route::Compat(_) => method == http::Method::POST,
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
    fn routes_operations_and_compat_surfaces() {
        use http::Method;
        assert_eq!(
            route(&Method::POST, "/api/v1/rerank").unwrap(),
            Route::Operation(Operation::Rerank)
        );
        assert_eq!(route(&Method::GET, "/healthz").unwrap(), Route::Health);
        for (path, surface) in [
            ("/compat/cohere/v1/rerank", Surface::CohereV1),
            ("/compat/cohere/v2/rerank", Surface::CohereV2),
            ("/compat/jina/v1/rerank", Surface::Jina),
            ("/v1/rerank", Surface::Jina),
        ] {
            assert_eq!(
                route(&Method::POST, path).unwrap(),
                Route::Compat(surface),
                "{path}"
            );
            assert_eq!(route(&Method::GET, path).unwrap_err().status(), 405);
        }
        assert_eq!(
            route(&Method::POST, "/compat/cohere/v3/rerank")
                .unwrap_err()
                .status(),
            404
        );
    }

    #[test]
    fn routes_files_tasks_and_image_edits() {
        use http::Method;
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
            route(&Method::POST, "/api/v1/images/edits").unwrap(),
            Route::ImageEdit
        );
        assert_eq!(
            route(&Method::GET, "/api/v1/images/edits")
                .unwrap_err()
                .status(),
            405
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
    }

    #[test]
    fn routes_models_and_voices() {
        use http::Method;
        assert_eq!(
            route(&Method::GET, "/api/v1/rerank").unwrap_err().status(),
            405
        );
        assert_eq!(
            route(&Method::GET, "/api/v1/models").unwrap(),
            Route::Models
        );
        assert_eq!(
            route(&Method::GET, "/api/v1/audio/voices").unwrap(),
            Route::Voices
        );
        assert_eq!(
            route(&Method::POST, "/api/v1/audio/voices")
                .unwrap_err()
                .status(),
            405
        );
        for id in ["tts-1", "BAAI/bge-reranker-v2-m3", "a%2Fb"] {
            let path = format!("/api/v1/models/{id}");
            assert_eq!(route(&Method::GET, &path).unwrap(), Route::Model, "{id}");
            assert_eq!(route(&Method::HEAD, &path).unwrap_err().status(), 405);
        }
        assert_eq!(
            route(&Method::GET, "/api/v1/models/").unwrap_err().status(),
            404
        );
        assert_eq!(
            route(&Method::POST, "/api/v1/models").unwrap_err().status(),
            405
        );
        // The caller's usage: read with its credentials, never an operation.
        let usage = route(&Method::GET, "/api/v1/usage").unwrap();
        assert_eq!(usage, Route::Usage);
        assert!(usage.authenticated());
        assert_eq!(usage.operation(), None);
        assert_eq!(
            route(&Method::POST, "/api/v1/usage").unwrap_err().status(),
            405
        );
        assert_eq!(
            route(&Method::GET, "/api/v1/usage/x").unwrap_err().status(),
            404
        );
    }

    #[test]
    fn unknown_paths_are_not_found() {
        use http::Method;
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
