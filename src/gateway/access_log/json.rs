//! The JSON access line, written by hand into the thread's line buffer: the same bytes as
//! `serde_json::to_writer(&Record)` (the tests compare them), without a serializer call per key
//! and value. Every line has every field, in the order of [`Record`]'s declaration.

use std::io::Write;

use serde_json::ser::{CompactFormatter, Formatter};

use super::{push_rfc3339_ms, Record};

/// `record` as one JSON object appended to `out`.
pub(super) fn write(out: &mut Vec<u8>, r: &Record<'_>) {
    out.extend_from_slice(b"{\"time\":\"");
    push_rfc3339_ms(out, r.time);
    out.extend_from_slice(b"\",\"entry_point\":");
    string(out, r.entry_point);
    out.extend_from_slice(b",\"method\":");
    string(out, r.method);
    out.extend_from_slice(b",\"path\":");
    string(out, r.path);
    out.extend_from_slice(b",\"principal\":");
    maybe_string(out, r.principal);
    out.extend_from_slice(b",\"operation\":");
    maybe_string(out, r.operation);
    out.extend_from_slice(b",\"model\":");
    maybe_string(out, r.model);
    out.extend_from_slice(b",\"provider\":");
    maybe_string(out, r.provider);
    out.extend_from_slice(b",\"native_model\":");
    maybe_string(out, r.native_model);
    out.extend_from_slice(b",\"status\":");
    number(out, u64::from(r.status));
    out.extend_from_slice(b",\"code\":");
    maybe_string(out, r.code);
    out.extend_from_slice(b",\"attempts\":");
    number(out, u64::from(r.attempts));
    out.extend_from_slice(b",\"duration_ms\":");
    float(out, r.duration_ms);
    out.extend_from_slice(b",\"ttfb_ms\":");
    match r.ttfb_ms {
        Some(ms) => float(out, ms),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"bytes_in\":");
    number(out, r.bytes_in);
    out.extend_from_slice(b",\"bytes_out\":");
    number(out, r.bytes_out);
    out.extend_from_slice(b",\"usage\":{\"tokens\":");
    number(out, r.usage.tokens);
    out.extend_from_slice(b",\"characters\":");
    number(out, r.usage.characters);
    out.extend_from_slice(b",\"images\":");
    number(out, r.usage.images);
    out.extend_from_slice(b"},\"cost\":");
    maybe_display(out, r.cost);
    out.extend_from_slice(b",\"currency\":");
    maybe_string(out, r.currency.as_ref().map(|c| c.as_str()));
    out.extend_from_slice(b",\"cost_basis\":");
    maybe_string(out, r.cost_basis);
    out.extend_from_slice(b",\"cost_note\":");
    maybe_string(out, r.cost_note);
    out.extend_from_slice(b",\"aborted\":");
    maybe_string(out, r.aborted);
    out.extend_from_slice(b",\"cache\":");
    maybe_string(out, r.cache);
    out.extend_from_slice(b",\"cost_saved\":");
    maybe_display(out, r.cost_saved);
    out.extend_from_slice(b",\"cost_saved_currency\":");
    maybe_string(out, r.cost_saved_currency.as_ref().map(|c| c.as_str()));
    out.extend_from_slice(b",\"request_id\":");
    string(out, r.request_id);
    out.extend_from_slice(b",\"trace_id\":");
    maybe_string(out, r.trace_id);
    out.push(b'}');
}

/// A JSON string. Most of the line's strings need no escape (names, paths, ids): those are
/// copied between quotes; any other goes through serde_json's escaper, as before.
fn string(out: &mut Vec<u8>, s: &str) {
    // The bytes serde_json escapes: control characters, `"` and `\`.
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Writing into a `Vec` cannot fail, nor can serializing a `str`.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

fn maybe_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => string(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// An amount as its decimal string (digits and a point: nothing to escape), as its
/// `Serialize` writes it.
fn maybe_display(out: &mut Vec<u8>, v: Option<impl std::fmt::Display>) {
    match v {
        Some(v) => {
            out.push(b'"');
            let _ = write!(out, "{v}");
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    }
}

fn number(out: &mut Vec<u8>, n: u64) {
    let _ = CompactFormatter.write_u64(out, n);
}

/// As serde_json writes an `f64`: its shortest round-trip form, `null` when not finite.
fn float(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        let _ = CompactFormatter.write_f64(out, v);
    } else {
        out.extend_from_slice(b"null");
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use rand::{Rng, SeedableRng};

    use super::super::{Record, Usage};
    use crate::money::{Amount, Currency};

    const TEXTS: &[&str] = &[
        "",
        "main",
        "/api/v1/audio/speech",
        "key:tester",
        "jwt:a \"quoted\" subject",
        "back\\slash",
        "tab\there",
        "line\nbreak",
        "\u{1}\u{1f}\u{7f}",
        "naïve 日本語 😀",
        "\u{2028}",
        "the target that answered has no price",
    ];

    fn pick<'a>(rng: &mut impl Rng, texts: &[&'a str]) -> &'a str {
        texts[rng.gen_range(0..texts.len())]
    }

    fn maybe<'a>(rng: &mut impl Rng) -> Option<&'a str> {
        rng.gen_bool(0.6).then(|| pick(rng, TEXTS))
    }

    #[test]
    fn the_hand_written_line_is_what_serde_json_writes() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(46);
        let floats = [
            0.0,
            0.1,
            1.7,
            6.5,
            1234.5,
            1e-7,
            1e21,
            f64::MAX,
            f64::NAN,
            f64::INFINITY,
        ];
        let amounts = ["0", "0.0185", "12.5", "0.000000001", "1000000"];
        for _ in 0..2_000 {
            let currency = Currency::parse(["USD", "CNY", "EUR"][rng.gen_range(0..3)]);
            let record = Record {
                time: UNIX_EPOCH + Duration::from_millis(rng.gen_range(0..4_102_444_800_000)),
                entry_point: pick(&mut rng, TEXTS),
                method: pick(&mut rng, &["POST", "GET", "-"]),
                path: pick(&mut rng, TEXTS),
                principal: maybe(&mut rng),
                operation: rng.gen_bool(0.5).then_some("rerank"),
                model: maybe(&mut rng),
                provider: maybe(&mut rng),
                native_model: maybe(&mut rng),
                status: rng.gen(),
                code: rng.gen_bool(0.3).then_some("upstream_timeout"),
                attempts: rng.gen(),
                duration_ms: floats[rng.gen_range(0..floats.len())],
                ttfb_ms: rng
                    .gen_bool(0.5)
                    .then(|| floats[rng.gen_range(0..floats.len())]),
                bytes_in: rng.gen(),
                bytes_out: rng.gen(),
                usage: Usage {
                    tokens: rng.gen(),
                    characters: rng.gen_range(0..100),
                    images: u64::MAX,
                },
                cost: rng
                    .gen_bool(0.5)
                    .then(|| Amount::parse(amounts[rng.gen_range(0..amounts.len())]))
                    .flatten(),
                currency: rng.gen_bool(0.5).then_some(currency).flatten(),
                cost_basis: rng.gen_bool(0.5).then_some("provider"),
                cost_note: maybe(&mut rng),
                aborted: maybe(&mut rng),
                cache: rng.gen_bool(0.5).then_some("hit"),
                cost_saved: rng.gen_bool(0.3).then(|| Amount::parse("0.02")).flatten(),
                cost_saved_currency: currency,
                request_id: pick(&mut rng, TEXTS),
                request_id_made: false,
                trace_id: maybe(&mut rng),
            };
            let mut mine = Vec::new();
            super::write(&mut mine, &record);
            let theirs = serde_json::to_vec(&record).unwrap();
            assert_eq!(
                String::from_utf8(mine).unwrap(),
                String::from_utf8(theirs).unwrap(),
                "{record:?}"
            );
        }
    }
}
