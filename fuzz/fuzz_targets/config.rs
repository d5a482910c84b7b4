//! The config loader on arbitrary text: it must answer a list of errors or settings, never panic.
//! The input is used as given (with `${VAR}` variables set as in `fuzz_support::lookup`).
#![no_main]

use fuzz_support::lookup;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(errors) = switchyard::config::load_str(text, &lookup) {
        assert!(!errors.is_empty(), "refused with no error");
    }
});
