//! What answers and metrics say of a model's lifecycle (`catalog`'s `ModelLifecycle`): the headers
//! an answer of a deprecated model carries (`Deprecation`, `Sunset`, `Link`), the
//! `Switchyard-Served-Model` header when a successor served a model past its shutdown, and the
//! shutdown-time gauge of every served target.

use crate::catalog::{header_safe, Model};
use crate::config::GatewaySettings;
use crate::metrics::Metrics;

/// The header naming the public model that served a request, when it is not the one asked for
/// (a successor that took over on the asked model's shutdown); percent-encoded where a header
/// value cannot carry the name.
pub(crate) const SERVED_MODEL: &str = "switchyard-served-model";

/// The lifecycle headers of an answer served by `model` (empty for a model with no lifecycle).
pub(crate) fn headers(model: &Model) -> Vec<(&'static str, String)> {
    let l = &model.lifecycle;
    let mut out = l.headers.clone();
    if l.taken_over_from.is_some() {
        out.push((SERVED_MODEL, header_safe(&model.name)));
    }
    out
}

/// Set the shutdown-time gauge from `settings`' catalog: one series per target with a known
/// shutdown date.
pub(crate) fn record_shutdowns(metrics: &Metrics, settings: &GatewaySettings) {
    if !metrics.enabled() {
        return;
    }
    let models = settings.catalog.models();
    let series = models.iter().flat_map(|m| {
        m.targets.iter().filter_map(move |t| {
            let shutdown = t.lifecycle.as_ref()?.shutdown?;
            Some((
                m.name.as_str(),
                t.provider.name.as_str(),
                t.native_model.as_str(),
                shutdown.unix(),
            ))
        })
    });
    metrics.set_model_shutdowns(series);
}
