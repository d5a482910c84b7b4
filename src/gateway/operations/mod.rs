//! The three operations, each from a read body to a written answer: one [`Call`] in, one
//! [`Outcome`] out (the model, the answer's status and first byte, what it used).
//!
//! [`Call`]: super::outcome::Call
//! [`Outcome`]: super::outcome::Outcome

mod images;
mod rerank;
mod speech;
mod speech_cached;
mod speech_forms;
mod speech_provide;

pub(crate) use images::images;
pub(crate) use rerank::rerank;
pub(crate) use speech::speech;

use crate::catalog::{Catalog, Model};
use crate::common::error::GatewayError;

/// Whether a request that failed with `err` on `model` is to be validated and served again, once,
/// by the model's successor: the attempt loop found every target of `model` retired by its
/// provider (it said the model is gone, without notice), and the catalog now resolves the name
/// asked for to the successor (`Catalog::serving`), as it does on a dated shutdown. Nothing was
/// sent to the caller yet. Never for a request a successor already serves.
pub(super) fn handed_to_successor(catalog: &Catalog, model: &Model, err: &GatewayError) -> bool {
    matches!(err, GatewayError::ModelUnavailable { .. })
        && model.lifecycle.taken_over_from.is_none()
        && catalog
            .serving(&model.name)
            .is_some_and(|m| m.lifecycle.taken_over_from.is_some())
}
