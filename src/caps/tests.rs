//! Tests of the capability table: the built-in data, the loader's errors and overrides.

use super::*;

#[test]
fn the_builtin_table_loads() {
    let table = builtin().unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(table.names().len(), 36);
}
