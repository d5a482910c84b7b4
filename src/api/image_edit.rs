//! `POST /api/v1/images/edits`: OpenAI's image edit request, as its SDKs send `images.edit`
//! (`multipart/form-data`: the image file as `image`, or several as `image[]`, an optional `mask`
//! file, and text fields), read into the JSON body of `/images/generations` with `image` and `mask`
//! as base64 (several images as an array: how many a model takes is its family's `max_images`). That body then goes through the same validation ([`super::images::parse`]), the same
//! asynchronous tasks (which store and re-run the JSON body) and the same engine; a model that
//! takes no reference image is refused there, naming `image`.
//!
//! Form fields are text, so a value becomes a JSON number, boolean, object or array when it reads
//! as one (`n=2`, `async=true`, `extra_body={...}`), except for the fields the API defines as
//! strings, which stay strings whatever they hold. A JSON body (`Content-Type: application/json`)
//! is taken as it is, as on `/images/generations`, but must name an `image`.

#[cfg(feature = "multipart")]
use base64::Engine;
use bytes::Bytes;
use serde_json::{Map, Value};

use crate::common::error::GatewayError;

/// Fields that are strings in the API: sent as given, never read as numbers or booleans.
#[cfg(feature = "multipart")]
const STRING_FIELDS: &[&str] = &[
    "model",
    "prompt",
    "negative_prompt",
    "size",
    "aspect_ratio",
    "quality",
    "style_preset",
    "response_format",
    "output_format",
    "background",
    "user",
];

/// The edit request in `body` (of type `content_type`) as a JSON `/images/generations` body.
pub async fn generation_body(
    content_type: Option<&str>,
    body: Bytes,
) -> Result<Bytes, GatewayError> {
    let ct = content_type.unwrap_or_default();
    let essence = ct.split(';').next().unwrap_or_default().trim();
    if essence.eq_ignore_ascii_case("application/json") {
        return json_edit(body);
    }
    if !essence.eq_ignore_ascii_case("multipart/form-data") {
        return Err(GatewayError::field(
            "Content-Type",
            "must be multipart/form-data (as OpenAI's SDKs send images.edit) or application/json",
        ));
    }
    multipart_body(ct, body).await
}

/// Without the `multipart` feature a form is refused, naming the JSON form that still works.
#[cfg(not(feature = "multipart"))]
async fn multipart_body(_ct: &str, _body: Bytes) -> Result<Bytes, GatewayError> {
    Err(GatewayError::field(
        "Content-Type",
        "multipart/form-data is not supported by this build of Switchyard (built without the \
         `multipart` feature); send application/json with `image` (and `mask`) as base64 or URLs",
    ))
}

/// The form's parts as the generations body's fields.
#[cfg(feature = "multipart")]
async fn multipart_body(ct: &str, body: Bytes) -> Result<Bytes, GatewayError> {
    let boundary = multer::parse_boundary(ct).map_err(|_| {
        GatewayError::field(
            "Content-Type",
            "multipart/form-data needs a boundary parameter",
        )
    })?;
    let stream =
        futures_util::stream::once(async move { Ok::<Bytes, std::convert::Infallible>(body) });
    let mut form = multer::Multipart::new(stream, boundary);
    let mut fields = Map::new();
    // Every image in form order: files as base64, text parts (URLs, base64) as given.
    let mut images: Vec<Value> = Vec::new();
    let mut mask: Option<Value> = None;
    loop {
        let part = form.next_field().await.map_err(malformed)?;
        let Some(part) = part else { break };
        let name = part.name().unwrap_or_default().to_string();
        let is_file = part.file_name().is_some();
        let data = part.bytes().await.map_err(malformed)?;
        let value = match (name.as_str(), is_file) {
            ("", _) => return Err(malformed("a part has no field name")),
            ("image" | "image[]" | "mask", true) => b64(&data),
            (_, true) => {
                return Err(GatewayError::field(
                    name,
                    "is a file; only image and mask take files",
                ))
            }
            (_, false) => match String::from_utf8(data.to_vec()) {
                Ok(text) => typed(&name, text),
                Err(_) => return Err(GatewayError::field(name, "is not UTF-8 text")),
            },
        };
        match name.as_str() {
            "image" | "image[]" => images.push(value),
            "mask" => {
                if mask.replace(value).is_some() {
                    return Err(GatewayError::field("mask", "is given more than once"));
                }
            }
            _ => {
                if fields.insert(name.clone(), value).is_some() {
                    return Err(GatewayError::field(name, "is given more than once"));
                }
            }
        }
    }
    match images.len() {
        0 => {}
        1 => {
            fields.insert("image".into(), images.remove(0));
        }
        _ => {
            fields.insert("image".into(), Value::Array(images));
        }
    }
    if let Some(m) = mask {
        fields.insert("mask".into(), m);
    }
    require_image(&fields)?;
    let out = serde_json::to_vec(&Value::Object(fields))
        .map_err(|e| GatewayError::Internal(format!("serializing an edit request: {e}")))?;
    Ok(Bytes::from(out))
}

/// A JSON edit: the generations body itself, once it is known to name an image.
fn json_edit(body: Bytes) -> Result<Bytes, GatewayError> {
    // Anything else wrong with it (duplicates, types) is reported by the generations parser.
    if let Ok(fields) = serde_json::from_slice::<Map<String, Value>>(&body) {
        require_image(&fields)?;
    }
    Ok(body)
}

fn require_image(fields: &Map<String, Value>) -> Result<(), GatewayError> {
    // `null` and `[]` are no image to the generations parser, which would then run a plain
    // generation: an edit without its image is refused here instead.
    let named = match fields.get("image") {
        None | Some(Value::Null) => false,
        Some(Value::Array(items)) => !items.is_empty(),
        Some(_) => true,
    };
    if named {
        Ok(())
    } else {
        Err(GatewayError::field(
            "image",
            "is required: an edit needs the image to edit (a file part `image`)",
        ))
    }
}

#[cfg(feature = "multipart")]
fn b64(bytes: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// A form field's value as JSON: a string for the API's string fields, else what it reads as.
#[cfg(feature = "multipart")]
fn typed(name: &str, text: String) -> Value {
    if STRING_FIELDS.contains(&name) || ["image", "image[]", "mask"].contains(&name) {
        return Value::String(text);
    }
    match serde_json::from_str::<Value>(text.trim()) {
        Ok(v @ (Value::Number(_) | Value::Bool(_) | Value::Object(_) | Value::Array(_))) => v,
        _ => Value::String(text),
    }
}

#[cfg(feature = "multipart")]
fn malformed(e: impl std::fmt::Display) -> GatewayError {
    GatewayError::field(
        "body",
        format!("is not a well-formed multipart/form-data body: {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "multipart")]
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[cfg(feature = "multipart")]
    fn form(parts: &[(&str, Option<&str>, &[u8])]) -> Bytes {
        let mut out = Vec::new();
        for (name, file, data) in parts {
            out.extend_from_slice(b"--XyZ\r\n");
            match file {
                Some(f) => out.extend_from_slice(
                    format!("Content-Disposition: form-data; name=\"{name}\"; filename=\"{f}\"\r\nContent-Type: image/png\r\n\r\n").as_bytes(),
                ),
                None => out.extend_from_slice(
                    format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
                ),
            }
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"--XyZ--\r\n");
        Bytes::from(out)
    }

    #[cfg(feature = "multipart")]
    async fn convert(body: Bytes) -> Result<Value, String> {
        match generation_body(Some("multipart/form-data; boundary=XyZ"), body).await {
            Ok(b) => Ok(serde_json::from_slice(&b).unwrap()),
            Err(e) => Err(String::from_utf8_lossy(&e.body()).into_owned()),
        }
    }

    #[cfg(feature = "multipart")]
    #[tokio::test]
    async fn a_form_becomes_a_generations_body() {
        let body = form(&[
            ("image", Some("a.png"), PNG),
            ("mask", Some("m.png"), PNG),
            ("prompt", None, b"add a cat"),
            ("model", None, b"gpt-image-2"),
            ("n", None, b"2"),
            ("async", None, b"true"),
            ("user", None, b"42"),
            ("output_format", None, b"jpeg"),
            ("extra_body", None, br#"{"k": 1}"#),
        ]);
        let v = convert(body).await.unwrap();
        let png = base64::engine::general_purpose::STANDARD.encode(PNG);
        assert_eq!(
            v,
            serde_json::json!({"image": png, "mask": png, "prompt": "add a cat",
                "model": "gpt-image-2", "n": 2, "async": true, "user": "42",
                "output_format": "jpeg", "extra_body": {"k": 1}})
        );
    }

    #[cfg(feature = "multipart")]
    #[tokio::test]
    async fn several_images_become_an_array_in_form_order() {
        let two = form(&[
            ("image[]", Some("a.png"), PNG),
            ("image[]", None, b"https://img.example/b.png"),
            ("prompt", None, b"p"),
        ]);
        let v = convert(two).await.unwrap();
        let png = base64::engine::general_purpose::STANDARD.encode(PNG);
        assert_eq!(
            v["image"],
            serde_json::json!([png, "https://img.example/b.png"])
        );
        let twice = form(&[
            ("image", Some("a.png"), PNG),
            ("mask", Some("m.png"), PNG),
            ("mask", Some("m.png"), PNG),
        ]);
        assert!(convert(twice)
            .await
            .unwrap_err()
            .contains(r#""mask":"is given more than once"#));
    }

    #[cfg(feature = "multipart")]
    #[tokio::test]
    async fn refusals_name_the_field() {
        let none = form(&[("prompt", None, b"p")]);
        assert!(convert(none)
            .await
            .unwrap_err()
            .contains(r#""image":"is required"#));
        let twice = form(&[
            ("image", Some("a.png"), PNG),
            ("n", None, b"1"),
            ("n", None, b"2"),
        ]);
        assert!(convert(twice)
            .await
            .unwrap_err()
            .contains("given more than once"));
        let file = form(&[
            ("image", Some("a.png"), PNG),
            ("prompt", Some("p.txt"), b"p"),
        ]);
        assert!(convert(file)
            .await
            .unwrap_err()
            .contains(r#""prompt":"is a file"#));
        let cut =
            Bytes::from_static(b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nxx");
        assert!(convert(cut).await.unwrap_err().contains("well-formed"));
        let e = generation_body(Some("text/plain"), Bytes::new())
            .await
            .unwrap_err();
        assert_eq!(e.status(), 400);
        let e = generation_body(Some("multipart/form-data"), Bytes::new())
            .await
            .unwrap_err();
        assert!(String::from_utf8_lossy(&e.body()).contains("boundary"));
    }

    #[cfg(not(feature = "multipart"))]
    #[tokio::test]
    async fn without_the_feature_a_form_is_refused_naming_the_json_form() {
        let e = generation_body(Some("multipart/form-data; boundary=XyZ"), Bytes::new())
            .await
            .unwrap_err();
        assert_eq!(e.status(), 400);
        let body = String::from_utf8_lossy(&e.body()).into_owned();
        assert!(
            body.contains(r#""Content-Type":"multipart/form-data is not supported"#),
            "{body}"
        );
        assert!(body.contains("application/json"), "{body}");
    }

    #[tokio::test]
    async fn a_json_edit_must_name_an_image() {
        let ok = Bytes::from_static(br#"{"model":"m","prompt":"p","image":"https://x/a.png"}"#);
        let got = generation_body(Some("application/json"), ok.clone())
            .await
            .unwrap();
        assert_eq!(got, ok);
        let e = generation_body(
            Some("application/json"),
            Bytes::from_static(br#"{"prompt":"p"}"#),
        )
        .await
        .unwrap_err();
        assert!(String::from_utf8_lossy(&e.body()).contains("image"));
        for empty in [
            &br#"{"model":"m","prompt":"p","image":null}"#[..],
            br#"{"model":"m","prompt":"p","image":[]}"#,
        ] {
            let e = generation_body(Some("application/json"), Bytes::from_static(empty))
                .await
                .unwrap_err();
            assert!(
                String::from_utf8_lossy(&e.body()).contains(r#""image":"is required"#),
                "{}",
                String::from_utf8_lossy(empty)
            );
        }
    }
}
