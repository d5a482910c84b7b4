//! Rerank compatibility surfaces: Cohere's v1 and v2 and Jina's request and answer shapes, so their
//! clients work with only a base URL change.
//!
//! A surface is a translation at both ends of the one rerank pipeline, never a second pipeline:
//! [`Surface::translate`] turns the caller's body into the gateway's own rerank body (which
//! `api::rerank::parse` then validates as on `/api/v1/rerank`, with the same models, limits,
//! retries and usage), [`Surface::answer`] renders the public result in the surface's shape, and
//! [`Surface::error_body`] renders an error in the surface's error shape, so each SDK raises its own
//! typed exceptions. The routes are in `gateway/route.rs`.

mod cohere;
mod jina;
mod request;
mod shared;

use bytes::Bytes;

use crate::api::rerank::RerankResult;
use crate::common::error::GatewayError;

pub use request::Translated;

/// The dialect a rerank request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Surface {
    /// The gateway's own API (`/api/v1/...`).
    #[default]
    Native,
    /// Cohere's `POST /v1/rerank`.
    CohereV1,
    /// Cohere's `POST /v2/rerank`.
    CohereV2,
    /// Jina's `POST /v1/rerank`.
    Jina,
}

impl Surface {
    /// The caller's body as the gateway's own rerank body (`None` on the native surface, whose
    /// body is already that).
    pub fn translate(self, body: &[u8]) -> Result<Option<Translated<'_>>, GatewayError> {
        let dialect = match self {
            Surface::Native => return Ok(None),
            Surface::CohereV1 | Surface::CohereV2 => &request::COHERE,
            Surface::Jina => &request::JINA,
        };
        request::translate(body, dialect).map(Some)
    }

    /// The public result in this surface's shape; `t` is what [`Self::translate`] made of the
    /// request.
    pub fn answer(self, result: &RerankResult<'_>, t: &Translated<'_>) -> Result<Vec<u8>, String> {
        let out = match self {
            Surface::Native => serde_json::to_vec(result),
            Surface::CohereV1 => serde_json::to_vec(&cohere::answer(result, t, "1")),
            Surface::CohereV2 => serde_json::to_vec(&cohere::answer(result, t, "2")),
            Surface::Jina => serde_json::to_vec(&jina::answer(result, t)),
        };
        out.map_err(|e| format!("serializing result: {e}"))
    }

    /// The body of an error answer (its status is the gateway's, [`GatewayError::status`]) to
    /// the request `request_id` (the answer's `X-Request-Id`; empty: none). Every shape carries
    /// it as `request_id`: Cohere's and Jina's SDKs ignore a field they do not know, as they do
    /// the gateway's `code`.
    pub fn error_body(self, err: &GatewayError, request_id: &str) -> Bytes {
        let body = match self {
            Surface::Native => return err.body_for(request_id),
            Surface::CohereV1 | Surface::CohereV2 => {
                serde_json::to_vec(&cohere::error(err, request_id))
            }
            Surface::Jina => serde_json::to_vec(&jina::error(err, request_id)),
        };
        body.map(Bytes::from)
            .unwrap_or_else(|_| err.body_for(request_id))
    }
}

#[cfg(test)]
mod tests;
