//! Telling a provider's real speech answer from something else answering 200 in its place, before
//! any byte of it reaches the client.
//!
//! A proxy's or load balancer's HTML page, a maintenance notice, or a JSON error envelope sent
//! with status 200 would otherwise be copied to the client as `200 audio/mpeg` (or inside its
//! event stream), and the attempt would count as a success, so `retries` would never be used. Two
//! checks run on every 2xx speech answer, both while nothing has been sent yet:
//!
//! - its `Content-Type`, against what the [`Native`] body kind allows (a missing type is left to
//!   the second check: HTTP lets a sender omit it);
//! - its first bytes ([`judge`]): raw audio must not start like a JSON or HTML document, an event
//!   stream must not start like one either, and a body the adapter parses must not be an HTML or
//!   XML page.
//!
//! A failure is [`UpstreamErrorKind::WrongAnswer`]: retried like a 5xx, and answered
//! `502 upstream_bad_response` when retries run out.
//!
//! Raw PCM is arbitrary bytes, so the audio check must not refuse audio that merely happens to
//! start with `{`, `[` or `<`. It refuses only when the whole window it looks at (the first
//! [`WINDOW`] bytes, or the whole body if shorter) is text: valid UTF-8 with no control
//! character other than tab, CR and LF, after an optional BOM and whitespace — and starts with
//! `{`, `[` or `<`, or is [`WINDOW`] bytes of printable ASCII. 16-bit PCM is text for that long
//! only if 32 consecutive samples are all loud, positive, and have low bytes that happen to be
//! printable (about 0.37^32 ≈ 10^-14 for the low bytes alone); encoded formats start with binary
//! magic (`ID3`, an MPEG or ADTS frame sync `0xFF 0xFx`/`0xFF 0xEx`, `OggS`, `RIFF`, `fLaC`) that
//! is not text. So real audio always passes, and a document almost never can.

use http::HeaderMap;

use crate::common::error::{UpstreamError, UpstreamErrorKind};
use crate::upstream::provider::Provider;

/// Bytes of the body looked at before the first one goes out.
pub(crate) const WINDOW: usize = 64;

/// A JSON object's first byte (an escape, so that tools counting braces without reading literals
/// see this file's code balanced).
const OBJECT_OPEN: u8 = b'\x7b';

/// What kind of body a 2xx speech answer must be, checked (its `Content-Type` and first bytes)
/// before any of it reaches the client: an `AudioDecoder`
/// says which from its `native` method. A decoder that parses the provider's JSON or events
/// keeps the default, [`Native::Decoded`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Native {
    /// The audio itself (OpenAI, Azure, ElevenLabs): typed `audio/*`,
    /// `application/octet-stream` (`binary/octet-stream`, as object stores label files) or
    /// `application/ogg`, and not starting like a document.
    Audio,
    /// A result file downloaded from where the answer pointed (DashScope's WAV on object
    /// storage): labelled as whoever stored it, which no provider documents, so any type but a
    /// document's (`text/*`, JSON, XML) passes; its first bytes are judged as [`Native::Audio`]'s.
    File,
    /// An SSE stream copied to the client as it is (OpenAI's and Azure's `stream_format: sse`):
    /// typed `text/event-stream`, and not starting like a document.
    Events,
    /// A body the adapter's decoder parses (JSON, NDJSON, SSE of JSON). The decoder judges it and
    /// knows the provider's in-band errors (which a JSON document may well be); only an HTML or
    /// XML page, by type or by its first bytes, is refused here. These providers document no
    /// type the gateway could insist on, and a stricter check could refuse a legitimate answer.
    Decoded,
}

/// The verdict on a body's first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Not enough bytes yet to tell.
    NeedMore,
    /// The body may be copied on.
    Fine,
    /// The body is not the answer; says what it looks like.
    Not(&'static str),
}

/// Check the answer's `Content-Type` (see [`Native`]).
pub(crate) fn content_type(
    provider: &Provider,
    native: Native,
    headers: Option<&HeaderMap>,
) -> Result<(), UpstreamError> {
    let Some(value) = headers.and_then(|h| h.get(http::header::CONTENT_TYPE)) else {
        return Ok(());
    };
    let essence = value
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if allowed(native, &essence) {
        return Ok(());
    }
    // The type is shown only when it is a plain token pair: nothing the provider sent is echoed
    // raw.
    let shown = if is_token_pair(&essence) {
        format!("type {essence}")
    } else {
        "an unreadable type".to_string()
    };
    Err(not_the_answer(provider, native, &shown))
}

/// The error for a 2xx answer of kind `native` that turned out to be `what` (retried; see the
/// module docs).
pub(crate) fn not_the_answer(provider: &Provider, native: Native, what: &str) -> UpstreamError {
    let asked = match native {
        Native::Audio | Native::File => "audio",
        Native::Events => "an event stream",
        Native::Decoded => "its speech answer",
    };
    UpstreamError::new(
        UpstreamErrorKind::WrongAnswer,
        &provider.name,
        format!("answered with {what} where {asked} was expected"),
    )
}

fn allowed(native: Native, essence: &str) -> bool {
    match native {
        Native::Audio => {
            essence.starts_with("audio/")
                || matches!(
                    essence,
                    "application/octet-stream" | "binary/octet-stream" | "application/ogg"
                )
        }
        Native::File => {
            !(essence.starts_with("text/")
                || essence.ends_with("/json")
                || essence.ends_with("+json")
                || essence.ends_with("/xml")
                || essence.ends_with("+xml"))
        }
        Native::Events => essence == "text/event-stream",
        Native::Decoded => !matches!(
            essence,
            "text/html" | "application/xhtml+xml" | "text/xml" | "application/xml"
        ),
    }
}

fn is_token_pair(s: &str) -> bool {
    s.len() <= 80
        && s.split_once('/').is_some_and(|(a, b)| {
            let token = |t: &str| {
                !t.is_empty()
                    && t.bytes()
                        .all(|c| c.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&c))
            };
            token(a) && token(b)
        })
}

/// Judge the first bytes of a body of kind `native`; `ended` says the body has no more.
pub(crate) fn judge(native: Native, head: &[u8], ended: bool) -> Verdict {
    let window = &head[..head.len().min(WINDOW)];
    let body = trim_start(window);
    let Some(&first) = body.first() else {
        // Only whitespace so far (or nothing): the next bytes decide; an answer that is nothing
        // else is left to the caller's "no audio" and end-of-stream checks.
        return if ended || window.len() >= WINDOW {
            Verdict::Fine
        } else {
            Verdict::NeedMore
        };
    };
    match native {
        Native::Decoded => {
            if first == b'<' {
                Verdict::Not("an HTML or XML page")
            } else {
                Verdict::Fine
            }
        }
        Native::Events => match first {
            OBJECT_OPEN | b'[' => Verdict::Not("a JSON document"),
            b'<' => Verdict::Not("an HTML or XML page"),
            _ => Verdict::Fine,
        },
        Native::Audio | Native::File => {
            let opens_document = matches!(first, OBJECT_OPEN | b'[' | b'<');
            match text_prefix(window) {
                // Binary before the window ends: audio.
                Text::No => Verdict::Fine,
                Text::Yes { printable_ascii } => {
                    let complete = ended || window.len() >= WINDOW;
                    if !complete {
                        // Could still turn out to be audio, or a document.
                        if opens_document || printable_ascii {
                            Verdict::NeedMore
                        } else {
                            Verdict::Fine
                        }
                    } else if opens_document {
                        Verdict::Not(if first == b'<' {
                            "an HTML or XML page"
                        } else {
                            "a JSON document"
                        })
                    } else if printable_ascii && window.len() >= WINDOW {
                        Verdict::Not("a text document")
                    } else {
                        Verdict::Fine
                    }
                }
            }
        }
    }
}

/// `bytes` without a leading UTF-8 byte order mark and ASCII whitespace.
fn trim_start(bytes: &[u8]) -> &[u8] {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    &bytes[start..]
}

enum Text {
    /// Not text: a byte that no text document holds.
    No,
    /// Text so far; whether every byte is printable ASCII or whitespace.
    Yes { printable_ascii: bool },
}

/// Whether `window` is (a prefix of) text: valid UTF-8, a character cut at the end allowed, and
/// no control character other than tab, CR and LF.
fn text_prefix(window: &[u8]) -> Text {
    let text = match std::str::from_utf8(window) {
        Ok(t) => t,
        // A multi-byte character cut by the window's end is still text.
        Err(e) if e.error_len().is_none() => {
            match std::str::from_utf8(&window[..e.valid_up_to()]) {
                Ok(t) => t,
                Err(_) => return Text::No,
            }
        }
        Err(_) => return Text::No,
    };
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    if body
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\t' | '\r' | '\n'))
    {
        return Text::No;
    }
    Text::Yes {
        printable_ascii: body
            .bytes()
            .all(|b| (b.is_ascii() && !b.is_ascii_control()) || b.is_ascii_whitespace()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::test_support;

    fn pcm(n: usize, seed: u32) -> Vec<u8> {
        // A 440 Hz tone at 24 kHz, 16-bit little-endian, with a seed-dependent phase.
        (0..n / 2)
            .flat_map(|i| {
                let t = (i as f64 + seed as f64) / 24_000.0;
                let v = (f64::sin(2.0 * std::f64::consts::PI * 440.0 * t) * 30_000.0) as i16;
                v.to_le_bytes()
            })
            .collect()
    }

    #[test]
    fn real_audio_passes() {
        let mut cases: Vec<Vec<u8>> = vec![
            b"ID3\x04\x00\x00\x00\x00\x00\x23TSSE".to_vec(),
            vec![0xFF, 0xFB, 0x90, 0x64, 0x00, 0x0F, 0xF0],
            vec![0xFF, 0xF1, 0x50, 0x80, 0x02, 0x1F, 0xFC],
            b"OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00OpusHead".to_vec(),
            b"RIFF\x24\x08\x00\x00WAVEfmt \x10\x00\x00\x00".to_vec(),
            b"fLaC\x00\x00\x00\x22\x10\x00\x10\x00".to_vec(),
            // PCM that happens to open with an opening brace, bracket or angle bracket (0x7B, 0x5B,
            // 0x3C), or with spaces.
            [&b"\x7b\x00"[..], &pcm(200, 3)].concat(),
            [&b"[\x22\x01\x80"[..], &pcm(200, 5)].concat(),
            [&b"<!"[..], &pcm(200, 7)].concat(),
            [&b"  \t"[..], &pcm(200, 9)].concat(),
            vec![0u8; 200],
        ];
        for seed in 0..200 {
            cases.push(pcm(400, seed * 37));
        }
        for audio in &cases {
            assert_eq!(
                judge(Native::Audio, audio, false),
                Verdict::Fine,
                "{audio:?}"
            );
            assert_eq!(
                judge(Native::Audio, audio, true),
                Verdict::Fine,
                "{audio:?}"
            );
        }
        // A short body that is all there is.
        assert_eq!(judge(Native::Audio, b"ID3", true), Verdict::Fine);
        assert_eq!(judge(Native::Audio, b"\x01\x02", true), Verdict::Fine);
    }

    #[test]
    fn documents_are_refused_however_they_arrive() {
        let docs: [&[u8]; 7] = [
            br#"{"error":{"message":"The server had an error","type":"server_error"}}"#,
            b"\xEF\xBB\xBF  \r\n[{\"code\": 500, \"message\": \"internal\"}]",
            b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body></body></html>",
            b"\n<html>\n<body>Service Unavailable</body>\n</html>\n",
            b"<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code></Error>",
            "{\"message\": \"服务繁忙，请稍后再试\"}".as_bytes(),
            b"Service Temporarily Unavailable. The server is down for maintenance, please retry.",
        ];
        for doc in docs {
            // Whole, and byte by byte: never `Fine` before the verdict.
            assert!(
                matches!(judge(Native::Audio, doc, true), Verdict::Not(_)),
                "{doc:?}"
            );
            for cut in 1..doc.len().min(WINDOW) {
                let v = judge(Native::Audio, &doc[..cut], false);
                assert_eq!(v, Verdict::NeedMore, "{:?} cut at {cut}", &doc[..cut]);
            }
        }
        assert_eq!(
            judge(Native::Audio, b"{}", true),
            Verdict::Not("a JSON document")
        );
        // Short plain text is not refused (it could be a tiny PCM body).
        assert_eq!(judge(Native::Audio, b"OK", true), Verdict::Fine);
    }

    #[test]
    fn streams_and_decoded_bodies_are_judged_by_their_first_byte() {
        assert_eq!(judge(Native::Events, b"data: {}\n\n", false), Verdict::Fine);
        assert_eq!(judge(Native::Events, b": ping\n\n", false), Verdict::Fine);
        assert_eq!(judge(Native::Events, b"\n\n", false), Verdict::NeedMore);
        assert!(matches!(
            judge(Native::Events, b" \x7b\"error\"", false),
            Verdict::Not(_)
        ));
        assert!(matches!(
            judge(Native::Events, b"<html>", false),
            Verdict::Not(_)
        ));
        assert_eq!(
            judge(Native::Decoded, b"\x7b\"base_resp\":", false),
            Verdict::Fine
        );
        assert_eq!(judge(Native::Decoded, b"data: {}", false), Verdict::Fine);
        assert!(matches!(
            judge(Native::Decoded, b"\r\n<!doctype html>", false),
            Verdict::Not(_)
        ));
    }

    #[test]
    fn content_types_per_body_kind() {
        let p = test_support::provider("p", "k");
        let headers = |ct: &str| {
            let mut h = HeaderMap::new();
            h.insert(http::header::CONTENT_TYPE, ct.parse().unwrap());
            h
        };
        let ok = |n: Native, ct: &str| content_type(&p, n, Some(&headers(ct))).is_ok();
        for ct in [
            "audio/mpeg",
            "Audio/Wav; codecs=1",
            "application/octet-stream",
            "binary/octet-stream",
            "application/ogg",
        ] {
            assert!(ok(Native::Audio, ct), "{ct}");
        }
        for ct in [
            "text/html; charset=utf-8",
            "application/json",
            "text/plain",
            "text/event-stream",
        ] {
            assert!(!ok(Native::Audio, ct), "{ct}");
        }
        assert!(ok(Native::Events, "text/event-stream; charset=utf-8"));
        assert!(!ok(Native::Events, "application/json"));
        assert!(!ok(Native::Events, "text/html"));
        for ct in [
            "application/json",
            "text/event-stream",
            "text/plain",
            "application/x-ndjson",
        ] {
            assert!(ok(Native::Decoded, ct), "{ct}");
        }
        assert!(!ok(Native::Decoded, "text/html"));
        for ct in [
            "audio/x-wav",
            "application/x-wav",
            "binary/octet-stream",
            "application/zip",
        ] {
            assert!(ok(Native::File, ct), "{ct}");
        }
        for ct in [
            "text/html",
            "text/plain",
            "application/json",
            "application/xml",
            "application/problem+json",
        ] {
            assert!(!ok(Native::File, ct), "{ct}");
        }
        // No type: the first bytes decide.
        assert!(content_type(&p, Native::Audio, Some(&HeaderMap::new())).is_ok());
        assert!(content_type(&p, Native::Events, None).is_ok());
        // Refused as retryable, with the type named only when it is a plain token pair.
        let e = content_type(&p, Native::Audio, Some(&headers("text/html"))).unwrap_err();
        assert_eq!(e.kind, UpstreamErrorKind::WrongAnswer);
        assert!(e.retryable());
        assert!(e.message.contains("text/html"), "{}", e.message);
        let e = content_type(&p, Native::Audio, Some(&headers("text/<b>\"x\""))).unwrap_err();
        assert!(!e.message.contains('<'), "{}", e.message);
    }
}
