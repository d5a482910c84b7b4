//! The endpoints that are not operations and have no module of their own: the health check,
//! the OpenAPI document, a hosted file and an asynchronous image task.

use bytes::Bytes;

use super::outcome::{Call, Failure, Outcome};
use super::route::{FILES_PREFIX, TASKS_PREFIX};
use super::{image_tasks, respond};
use crate::common::error::GatewayError;
use crate::store::files::valid_id;

/// `GET /healthz`: the gateway is alive (answered even at capacity).
pub(crate) async fn health(call: &mut Call<'_>) -> Outcome {
    let body = Bytes::from_static(b"{\"status\":\"ok\"}");
    call.json(Outcome::new(), body, &[]).await
}

/// `GET /api/v1/openapi.json`: the API's document, its server under the mount's prefix.
pub(crate) async fn openapi(call: &mut Call<'_>) -> Outcome {
    let body = call.mount.openapi();
    call.json(Outcome::new(), body, &[]).await
}

/// `GET /api/v1/images/{task_id}`: the caller's own task.
pub(crate) async fn task(call: &mut Call<'_>) -> Outcome {
    let id = call
        .routed()
        .strip_prefix(TASKS_PREFIX)
        .unwrap_or_default()
        .to_string();
    let found = image_tasks::get(call.state, call.owner(), &id).await;
    let body = found.and_then(|result| {
        serde_json::to_vec(&result)
            .map_err(|e| GatewayError::Internal(format!("serializing task: {e}")))
    });
    match body {
        Ok(body) => call.json(Outcome::new(), body.into(), &[]).await,
        Err(e) => Outcome::failed(e),
    }
}

/// Serve a hosted image. No credentials: the unguessable, expiring link is the capability
/// (like a provider's signed URL), so it works in a browser or another service.
pub(crate) async fn file(call: &mut Call<'_>) -> Outcome {
    let head_only = call.session.req_header().method == http::Method::HEAD;
    let id = call.routed().strip_prefix(FILES_PREFIX).unwrap_or_default();
    let found = if valid_id(id) {
        call.state
            .files
            .store
            .get(id)
            .await
            .map_err(GatewayError::from)
    } else {
        Ok(None)
    };
    let (file, left) = match found {
        Ok(Some(found)) => found,
        Ok(None) => return Outcome::failed(GatewayError::FileNotFound),
        Err(e) => return Outcome::failed(e),
    };
    let mut out = Outcome::new();
    out.status = 200;
    out.result = respond::file(
        call.session,
        &file.content_type,
        file.bytes,
        left.as_secs(),
        head_only,
    )
    .await
    .map_err(|e| Failure::written("writing file", e));
    out
}
