//! The web console's static files, served by the management listener under `/console` (issue
//! 47, item 4). The console helper fills this file in (branch `console`); until then no asset
//! exists and `/console` answers 404.

/// The asset at `path` (what follows `/console`: `""` or `"/"` is `index.html`): its content type
/// and bytes, or `None`.
pub(crate) fn asset(path: &str) -> Option<(&'static str, &'static [u8])> {
    let _ = path;
    None
}
