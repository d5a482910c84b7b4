//! A `multipart/form-data` body (RFC 7578) for providers that take forms: OpenAI image edits and
//! Stability AI.
//!
//! Parts are written straight into one buffer, so a file part costs one copy of its bytes. The
//! boundary is random per body, and a body that happens to contain it is detected and re-encoded
//! with a fresh one, so no part can ever end early.

use bytes::{BufMut, Bytes, BytesMut};

use crate::common::native::NativeRequest;

/// One form field.
enum Part<'a> {
    Text {
        name: &'a str,
        value: &'a str,
    },
    File {
        name: &'a str,
        filename: &'a str,
        content_type: &'a str,
        data: &'a [u8],
    },
}

/// A form being assembled; [`Form::finish`] encodes it.
#[derive(Default)]
pub(crate) struct Form<'a> {
    parts: Vec<Part<'a>>,
}

impl<'a> Form<'a> {
    pub(crate) fn new() -> Form<'a> {
        Form { parts: Vec::new() }
    }

    /// A text field.
    pub(crate) fn text(&mut self, name: &'a str, value: &'a str) -> &mut Self {
        self.parts.push(Part::Text { name, value });
        self
    }

    /// A file field.
    pub(crate) fn file(
        &mut self,
        name: &'a str,
        filename: &'a str,
        content_type: &'a str,
        data: &'a [u8],
    ) -> &mut Self {
        self.parts.push(Part::File {
            name,
            filename,
            content_type,
            data,
        });
        self
    }

    /// A `multipart/form-data` POST of this form to `path`.
    pub(crate) fn request(&self, path: impl Into<String>) -> NativeRequest {
        let (content_type, body) = self.finish();
        NativeRequest {
            method: http::Method::POST,
            path: path.into(),
            content_type: std::borrow::Cow::Owned(content_type),
            headers: Vec::new(),
            body,
        }
    }

    /// The encoded body and its `Content-Type` (with the boundary).
    pub(crate) fn finish(&self) -> (String, Bytes) {
        loop {
            let boundary = format!("switchyard-{}", uuid::Uuid::new_v4().simple());
            if let Some(body) = self.encode(&boundary) {
                return (format!("multipart/form-data; boundary={boundary}"), body);
            }
        }
    }

    /// `None` when a value contains the boundary (then the caller picks another).
    fn encode(&self, boundary: &str) -> Option<Bytes> {
        let size: usize = self
            .parts
            .iter()
            .map(|p| match p {
                Part::Text { name, value } => name.len() + value.len() + 128,
                Part::File {
                    name,
                    filename,
                    content_type,
                    data,
                } => name.len() + filename.len() + content_type.len() + data.len() + 160,
            })
            .sum();
        let mut out = BytesMut::with_capacity(size + boundary.len() * (self.parts.len() + 1));
        let contains = |data: &[u8]| {
            data.windows(boundary.len())
                .any(|w| w == boundary.as_bytes())
        };
        for part in &self.parts {
            out.put_slice(b"--");
            out.put_slice(boundary.as_bytes());
            out.put_slice(b"\r\n");
            match part {
                Part::Text { name, value } => {
                    if contains(value.as_bytes()) {
                        return None;
                    }
                    out.put_slice(b"Content-Disposition: form-data; name=\"");
                    out.put_slice(quote(name).as_bytes());
                    out.put_slice(b"\"\r\n\r\n");
                    out.put_slice(value.as_bytes());
                }
                Part::File {
                    name,
                    filename,
                    content_type,
                    data,
                } => {
                    if contains(data) {
                        return None;
                    }
                    out.put_slice(b"Content-Disposition: form-data; name=\"");
                    out.put_slice(quote(name).as_bytes());
                    out.put_slice(b"\"; filename=\"");
                    out.put_slice(quote(filename).as_bytes());
                    out.put_slice(b"\"\r\nContent-Type: ");
                    out.put_slice(content_type.as_bytes());
                    out.put_slice(b"\r\n\r\n");
                    out.put_slice(data);
                }
            }
            out.put_slice(b"\r\n");
        }
        out.put_slice(b"--");
        out.put_slice(boundary.as_bytes());
        out.put_slice(b"--\r\n");
        Some(out.freeze())
    }
}

/// Field names and file names go inside quotes: escape what would end or break them.
fn quote(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "%22")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_text_and_file_parts() {
        let mut form = Form::new();
        form.text("prompt", "a \"fox\"\r\nline two").file(
            "image",
            "image.png",
            "image/png",
            b"\x89PNG\0\x01",
        );
        let (ct, body) = form.finish();
        let boundary = ct.strip_prefix("multipart/form-data; boundary=").unwrap();
        let expected = format!(
            "--{b}\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\na \"fox\"\r\nline two\r\n\
             --{b}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"image.png\"\r\n\
             Content-Type: image/png\r\n\r\n",
            b = boundary
        );
        let mut want = expected.into_bytes();
        want.extend_from_slice(b"\x89PNG\0\x01\r\n");
        want.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        assert_eq!(body.as_ref(), want.as_slice());
    }

    #[test]
    fn a_colliding_boundary_is_replaced() {
        let mut form = Form::new();
        form.text("a", "x");
        assert!(form.encode("x").is_none());
        assert!(form.encode("zz").is_some());
    }
}
