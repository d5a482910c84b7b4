//! Reference-image input: URLs, `data:` URLs and bare base64. A decoded image must survive its
//! own round trip (as a data URL and as base64) unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard::internals::common::image_input::{sniff, ImageInput};

fuzz_target!(|data: &[u8]| {
    let _ = sniff(data);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(input) = ImageInput::parse(text) else {
        return;
    };
    let _ = input.is_url();
    let again = ImageInput::parse(&input.url_or_data_url()).expect("own data URL parses");
    if let Some((bytes, mime)) = input.bytes() {
        assert!(!bytes.is_empty());
        let (bytes2, mime2) = again.bytes().expect("still data");
        assert_eq!((bytes, mime), (bytes2, mime2));
        // Bare base64 carries no type: it parses again only when the bytes themselves say what
        // they are (a data URL's label is trusted for bytes no magic number recognises).
        let b64 = input.base64().expect("data has base64");
        if sniff(bytes).is_some() {
            let from_b64 = ImageInput::parse(&b64).expect("own base64 parses");
            assert_eq!(from_b64.bytes().map(|(b, _)| b), Some(bytes));
        }
    }
});
