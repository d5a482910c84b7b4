//! The `image` and `mask` fields of an image request: a URL, or image bytes as raw base64 or a
//! `data:` URL.
//!
//! Bytes are decoded once at validation, so a malformed value is the caller's 400 before anything
//! is sent, and each adapter takes whichever form its provider wants (a URL or data URL in JSON,
//! raw base64, or a multipart file part) without decoding again. A URL stays a URL until an adapter
//! needs the bytes; then the gateway downloads it through the address guard
//! (the download guard in `upstream`).

use std::borrow::Cow;

use base64::Engine;
use bytes::Bytes;

/// A reference image or mask as the caller gave it, decoded.
#[derive(Debug, Clone)]
pub enum ImageInput {
    /// An `http(s)` URL, not yet fetched.
    Url(String),
    /// Decoded image bytes and their MIME type (from the data URL, else sniffed).
    Data {
        /// The MIME type.
        mime: &'static str,
        /// The bytes.
        bytes: Bytes,
    },
}

/// Image types the gateway recognises by their first bytes.
const KNOWN: &[(&str, &str)] = &[
    ("image/png", "png"),
    ("image/jpeg", "jpg"),
    ("image/webp", "webp"),
    ("image/gif", "gif"),
];

/// The MIME type of image bytes from their signature, if it is one the gateway knows.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else {
        None
    }
}

/// File name extension for a MIME type the gateway knows (`bin` otherwise).
pub fn extension(mime: &str) -> &'static str {
    KNOWN
        .iter()
        .find(|(m, _)| *m == mime)
        .map(|(_, e)| *e)
        .unwrap_or("bin")
}

impl ImageInput {
    /// Parse a field's value; the error is the `details` message for that field.
    pub fn parse(value: &str) -> Result<ImageInput, String> {
        let v = value.trim();
        if v.starts_with("https://") || v.starts_with("http://") {
            return match v.parse::<http::Uri>() {
                Ok(uri) if uri.host().is_some_and(|h| !h.is_empty()) => {
                    Ok(ImageInput::Url(v.to_string()))
                }
                _ => Err("is not a valid URL".into()),
            };
        }
        let (declared, b64) = match v.strip_prefix("data:") {
            Some(rest) => {
                let Some((meta, data)) = rest.split_once(',') else {
                    return Err("is a data URL without a `,` before its data".into());
                };
                let Some(mime) = meta.strip_suffix(";base64") else {
                    return Err(
                        "is a data URL that is not base64 (`data:<type>;base64,...`)".into(),
                    );
                };
                (Some(mime.to_ascii_lowercase()), data)
            }
            None => (None, v),
        };
        let bytes = decode_base64(b64).ok_or_else(|| {
            "must be an http(s) URL, a data: URL or base64 image data".to_string()
        })?;
        if bytes.is_empty() {
            return Err("holds no image data".into());
        }
        let sniffed = sniff(&bytes);
        let mime = match (declared.as_deref(), sniffed) {
            (_, Some(s)) => s,
            (Some(d), None) => KNOWN
                .iter()
                .find(|(m, _)| *m == d)
                .map(|(m, _)| *m)
                .ok_or_else(|| format!("has type {d}; accepted: PNG, JPEG, WebP, GIF"))?,
            (None, None) => {
                return Err("is not a PNG, JPEG, WebP or GIF image".into());
            }
        };
        Ok(ImageInput::Data {
            mime,
            bytes: Bytes::from(bytes),
        })
    }

    /// The URL, or a `data:` URL carrying the bytes (for providers that take either in JSON).
    pub fn url_or_data_url(&self) -> Cow<'_, str> {
        match self {
            ImageInput::Url(u) => Cow::Borrowed(u),
            ImageInput::Data { mime, bytes } => Cow::Owned(format!(
                "data:{mime};base64,{}",
                base64::engine::general_purpose::STANDARD.encode(bytes)
            )),
        }
    }

    /// Plain base64 of the bytes (`None` for a URL).
    pub fn base64(&self) -> Option<String> {
        match self {
            ImageInput::Url(_) => None,
            ImageInput::Data { bytes, .. } => {
                Some(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
        }
    }

    /// The bytes and MIME type (`None` for a URL not yet fetched).
    pub fn bytes(&self) -> Option<(&Bytes, &'static str)> {
        match self {
            ImageInput::Url(_) => None,
            ImageInput::Data { mime, bytes } => Some((bytes, mime)),
        }
    }

    /// Whether it is a URL not yet fetched.
    pub fn is_url(&self) -> bool {
        matches!(self, ImageInput::Url(_))
    }

    /// Its width × height in pixels, read from the image's header (`None` for a URL not yet
    /// fetched, or a header too damaged to say): what a provider pricing input images per
    /// megapixel bills.
    pub fn pixels(&self) -> Option<u64> {
        let (bytes, _) = self.bytes()?;
        let size = imagesize::blob_size(bytes).ok()?;
        Some((size.width as u64).saturating_mul(size.height as u64))
    }
}

/// Standard or URL-safe base64, padded or not, ignoring line breaks some encoders insert.
fn decode_base64(s: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let cleaned: Cow<'_, str> = if s.contains(['\n', '\r']) {
        Cow::Owned(s.chars().filter(|c| *c != '\n' && *c != '\r').collect())
    } else {
        Cow::Borrowed(s)
    };
    [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|e| e.decode(cleaned.as_bytes()).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn accepts_urls_data_urls_and_raw_base64() {
        assert!(matches!(
            ImageInput::parse("https://img.example/a.png").unwrap(),
            ImageInput::Url(u) if u == "https://img.example/a.png"
        ));
        let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
        for v in [b64.clone(), format!("data:image/png;base64,{b64}")] {
            let input = ImageInput::parse(&v).unwrap();
            let (bytes, mime) = input.bytes().unwrap();
            assert_eq!((bytes.as_ref(), mime), (PNG, "image/png"));
            assert_eq!(input.base64().unwrap(), b64);
            assert_eq!(
                input.url_or_data_url(),
                format!("data:image/png;base64,{b64}")
            );
        }
    }

    #[test]
    fn pixels_come_from_the_header_and_are_unknown_for_a_url() {
        // A PNG's signature and IHDR chunk: 1536 × 1024.
        let mut png = PNG.to_vec();
        png.extend_from_slice(&1536u32.to_be_bytes());
        png.extend_from_slice(&1024u32.to_be_bytes());
        png.extend_from_slice(&[8, 6, 0, 0, 0]);
        let b64 = base64::engine::general_purpose::STANDARD.encode(&png);
        assert_eq!(ImageInput::parse(&b64).unwrap().pixels(), Some(1536 * 1024));
        // A header cut short says nothing, rather than a wrong size.
        let cut = base64::engine::general_purpose::STANDARD.encode(PNG);
        assert_eq!(ImageInput::parse(&cut).unwrap().pixels(), None);
        assert_eq!(
            ImageInput::parse("https://img.example/a.png")
                .unwrap()
                .pixels(),
            None
        );
    }

    #[test]
    fn sniffed_type_beats_a_wrong_label() {
        let jpeg = base64::engine::general_purpose::STANDARD.encode([0xFF, 0xD8, 0xFF, 0xE0]);
        let input = ImageInput::parse(&format!("data:image/png;base64,{jpeg}")).unwrap();
        assert_eq!(input.bytes().unwrap().1, "image/jpeg");
    }

    #[test]
    fn refuses_what_is_not_an_image() {
        for bad in [
            "ftp://x/a.png",
            "not base64 at all!",
            "data:image/png,notbase64",
            "data:image/png;base64",
            "https://",
            "",
        ] {
            assert!(ImageInput::parse(bad).is_err(), "{bad} accepted");
        }
        let text = base64::engine::general_purpose::STANDARD.encode(b"hello world");
        assert!(ImageInput::parse(&text).unwrap_err().contains("not a PNG"));
        let svg = format!(
            "data:image/svg+xml;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(b"<svg/>")
        );
        assert!(ImageInput::parse(&svg)
            .unwrap_err()
            .contains("image/svg+xml"));
    }

    #[test]
    fn sniffs_common_formats() {
        assert_eq!(sniff(PNG), Some("image/png"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff(b"GIF89a.."), Some("image/gif"));
        assert_eq!(sniff(b"<html>"), None);
        assert_eq!(extension("image/jpeg"), "jpg");
    }
}
