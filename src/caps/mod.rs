//! Model capabilities: what each model family accepts (sizes, qualities, speeds, formats, voices,
//! streaming, input limits…) and which undeclared fields it takes natively. Validation (`api`)
//! reads only these, so a new model family is one entry of data.
//!
//! The built-in table is data, [`families.yaml`](families.yaml), compiled into the binary and
//! loaded once, at first use ([`builtin`]); a unit test loads it, so a mistake in it fails the
//! tests rather than a start-up. A model's config may override any capability
//! ([`Table::with_overrides`]); the result is checked the same way.
//!
//! - [`schema`]: the runtime types (`SpeechCaps`, `ImageCaps`, `RerankCaps`, [`Caps`]), the
//!   limits and size rules they use, and the public value sets capability lists come from;
//! - `patch`: the same capabilities as written, every key optional, and how they merge;
//! - `check`: the checks on a merged entry, and building (and leaking) the runtime values;
//! - `load`: the table's `templates`/`families`, `extends` and `operation`;
//! - [`lifecycle`]: each native model's deprecation and shutdown dates, replacement and source
//!   (`lifecycle.yaml`, built in the same way), and the clock lifecycle decisions read;
//! - `prices`: what each native model costs, in its provider's billing unit and currency, with
//!   source and date (`prices.yaml`, built in the same way), and a configuration's overrides.
//!
//! It sits low in the layers: above `common` (whose `Operation` a family serves) and `tokens`
//! (token limits), below everything that reads capabilities.

mod check;
pub mod lifecycle;
mod load;
mod patch;
pub(crate) mod prices;
pub(crate) mod schema;

use std::sync::OnceLock;

pub(crate) use load::{load, Table};
pub use schema::Caps;
pub(crate) use schema::{parse_size, SizeRule};
pub(crate) use schema::{ImageCaps, Limit, RerankCaps, SpeechCaps, Unit};

/// The built-in capability table, as written.
pub(crate) const FAMILIES_YAML: &str = include_str!("families.yaml");

/// The built-in table, loaded on first use. `Err` lists its problems, which the unit tests make
/// sure never reach a user; the config reports them rather than the process panicking.
pub(crate) fn builtin() -> Result<&'static Table, &'static [String]> {
    static TABLE: OnceLock<Result<Table, Vec<String>>> = OnceLock::new();
    match TABLE.get_or_init(|| load(FAMILIES_YAML)) {
        Ok(table) => Ok(table),
        Err(errors) => Err(errors),
    }
}

/// The built-in family `name` (`None` also when the table failed to load).
pub fn family(name: &str) -> Option<Caps> {
    builtin().ok()?.get(name)
}

#[cfg(test)]
mod tests;
