//! Rerank, in the gateway's own shape or a compatibility surface's (translated into the
//! gateway's first, so validation, dispatch and usage are the one rerank pipeline's).

use bytes::Bytes;

use super::super::outcome::{Call, Outcome};
use super::super::{lifecycle, mount};
use crate::api::rerank;
use crate::common::error::GatewayError;
use crate::engine::attempts;

/// `POST /api/v1/rerank` (and the compatibility surfaces' rerank paths).
pub(crate) async fn rerank(call: &mut Call<'_>, body: &[u8]) -> Outcome {
    let mut out = Outcome::new();
    match answer(call, body, &mut out).await {
        Ok(json) => {
            let headers = out
                .model
                .as_deref()
                .map(|m| mount::link_headers(lifecycle::headers(m), call.prefix))
                .unwrap_or_default();
            call.json(out, json, &headers).await
        }
        Err(e) => {
            out.result = Err(e.into());
            out
        }
    }
}

/// The answer's JSON in the request's surface; the model and the tokens used are noted in `out`.
async fn answer(call: &Call<'_>, body: &[u8], out: &mut Outcome) -> Result<Bytes, GatewayError> {
    let (s, surface) = (call.settings, call.surface);
    let translated = surface.translate(body)?;
    let own = translated.as_ref().map_or(body, |t| t.body.as_slice());
    let req = rerank::parse(own, &s.catalog, s.retry.max_retries)?;
    out.model = Some(req.model.clone());
    let ((headers, native), target) = attempts::run(
        &call.state.upstream,
        &req.model,
        call.region,
        req.retries,
        |t| s.adapters.rerank(&t.provider)?.request(t, &req),
    )
    .await?;
    let result = s
        .adapters
        .rerank(&target.provider)?
        .response(&target.provider, &req, &headers, &native)
        .map_err(GatewayError::Upstream)?;
    let json = match &translated {
        Some(t) => surface.answer(&result, t),
        None => serde_json::to_vec(&result).map_err(|e| format!("serializing result: {e}")),
    }
    .map_err(GatewayError::Internal)?;
    out.usage.tokens = result.usage.total_tokens;
    Ok(json.into())
}
