//! The access line: one per request (and one per connection dropped with its request head
//! unfinished), target `access`, as `key=value` text or as one JSON object (`access_log.format`).
//! Both hold nothing secret to begin with: the caller is named by its principal (an API key's
//! configured name, a token's subject), and a hosted file's id — the capability to read it — is
//! left out of its path. The fields that can carry text from outside the configuration — the
//! path (the client's), the principal (a token's subject is the token issuer's), why an answer
//! was abandoned and a cost's note (a provider's words may be in them) — go through the
//! logger's credential filter (`crate::logging::redact`) one by one before the line is made; the
//! rest are the configuration's names, numbers and the gateway's own words (and a request id the
//! gateway made itself, random hex). The line is then written as clean (`logging::log_clean`):
//! formatted once, not scanned again as a whole. The JSON line is written by hand (`json`): it
//! is made on every request, and serde's serializer spent most of its time between the fields.

mod json;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::route::FILES_PREFIX;
use crate::caps::prices::{Amount, Currency};
use crate::config::AccessLogFormat;
use crate::logging::{redact, redact_recurring};

/// What an answer used, as billed or counted (zero when it does not apply).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Usage {
    /// Tokens: rerank's, and a token-billed speech or image answer's (the provider's input and
    /// output tokens together, as its cost counted them).
    pub tokens: u64,
    /// Speech input characters.
    pub characters: u64,
    /// Images delivered.
    pub images: u64,
}

/// One access line's fields; in JSON every one is always present (`null` when unknown), so each
/// line has the same shape. (`Serialize` only in tests: the line is written by `json`, and the
/// tests check it against what serde_json makes of this.)
#[derive(Debug)]
#[cfg_attr(test, derive(Serialize))]
pub(crate) struct Record<'a> {
    /// Written as RFC 3339, UTC, milliseconds — only by the JSON line (the text line's time is
    /// the logger's), so the text line never formats it.
    #[cfg_attr(test, serde(serialize_with = "as_rfc3339"))]
    pub time: SystemTime,
    pub entry_point: &'a str,
    pub method: &'a str,
    /// The request path; a hosted file's is `/api/v1/files/{id}`, its id left out.
    pub path: &'a str,
    pub principal: Option<&'a str>,
    pub operation: Option<&'static str>,
    pub model: Option<&'a str>,
    pub provider: Option<&'a str>,
    pub native_model: Option<&'a str>,
    pub status: u16,
    pub code: Option<&'static str>,
    pub attempts: u32,
    pub duration_ms: f64,
    pub ttfb_ms: Option<f64>,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub usage: Usage,
    /// What the request cost, a decimal string (`"0.0185"`), in `currency`; `null` when not
    /// known (`cost_note` says why) or not asked (a refused request).
    pub cost: Option<Amount>,
    pub currency: Option<Currency>,
    /// `provider` or `gateway` (`crate::cost::Basis`).
    pub cost_basis: Option<&'static str>,
    /// What a partial cost leaves out (then `cost` is a lower bound), or why there is none.
    pub cost_note: Option<&'a str>,
    pub aborted: Option<&'a str>,
    /// What the response cache did (`hit`, `collapsed`, `miss`, `bypass`; `null`: the model is
    /// not cached) and, for an answer served without the provider, what it cost when it was
    /// made: the money not spent upstream.
    pub cache: Option<&'static str>,
    pub cost_saved: Option<Amount>,
    pub cost_saved_currency: Option<Currency>,
    /// The request's id (its answer's `X-Request-Id`).
    pub request_id: &'a str,
    /// Whether the gateway made `request_id` (random hex: no credential scan); a caller's own
    /// is scanned.
    #[cfg_attr(test, serde(skip))]
    pub request_id_made: bool,
    /// The trace it belongs to, 32 hex digits (W3C Trace Context).
    pub trace_id: Option<&'a str>,
}

/// The path as logged: a hosted file's id is a capability, so it is never written.
pub(crate) fn logged_path(path: &str) -> &str {
    if path.starts_with(FILES_PREFIX) {
        "/api/v1/files/{id}"
    } else {
        path
    }
}

/// [`logged_path`] of a request that came under a mount `prefix` (`gateway/mount.rs`): the id
/// of a hosted file under the prefix is not written either.
pub(crate) fn logged_path_under<'a>(
    path: &'a str,
    prefix: Option<&str>,
) -> std::borrow::Cow<'a, str> {
    match prefix {
        Some(p)
            if path
                .get(p.len()..)
                .is_some_and(|r| r.starts_with(FILES_PREFIX)) =>
        {
            format!("{p}/api/v1/files/{{id}}").into()
        }
        _ => logged_path(path).into(),
    }
}

/// Milliseconds, as the log shows them.
pub(crate) fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 10_000.0).round() / 10.0
}

/// Write `record` to the `access` target in `format`.
pub(crate) fn write(format: AccessLogFormat, record: &Record<'_>) {
    // The fields from outside the configuration, cleaned (borrowed as they are when clean).
    // These recur request after request: a clean one is remembered (`redact_recurring`).
    let path = redact_recurring(record.path);
    let principal = record.principal.map(redact_principal);
    let aborted = record.aborted.map(redact_recurring);
    let cost_note = record.cost_note.map(redact_recurring);
    // A caller's own `X-Request-Id` is only checked for shape: it could carry a secret.
    let request_id = if record.request_id_made {
        record.request_id.into()
    } else {
        redact(record.request_id)
    };
    let record = &Record {
        path: &path,
        request_id: &request_id,
        principal: principal.as_deref(),
        aborted: aborted.as_deref(),
        cost_note: cost_note.as_deref(),
        ..*record
    };
    LINE.with(|line| {
        let mut line = line.borrow_mut();
        line.clear();
        let made = match format {
            AccessLogFormat::Json => {
                json::write(&mut line, record);
                Ok(())
            }
            AccessLogFormat::Text => write_text(&mut line, record).map_err(|e| e.to_string()),
        };
        match made.and_then(|()| std::str::from_utf8(&line).map_err(|e| e.to_string())) {
            Ok(text) => crate::logging::log_clean(TARGET, text),
            Err(e) => log::warn!("access line not written: {e}"),
        }
        if line.capacity() > KEEP_LINE {
            *line = Vec::new();
        }
    });
}

/// The text line, written into `out` (the thread's reused line: no string per field).
fn write_text(out: &mut Vec<u8>, record: &Record<'_>) -> std::io::Result<()> {
    use std::io::Write;
    write!(
        out,
        "{} {} {} status={} code={} model={} caller={} ms={:.1}",
        record.entry_point,
        record.method,
        record.path,
        record.status,
        record.code.unwrap_or("-"),
        record.model.unwrap_or("-"),
        record.principal.unwrap_or("-"),
        record.duration_ms,
    )?;
    // The cost: ` cost=0.0185 USD`, ` cost=unknown` when it is not known, nothing when no
    // answer got far enough to ask.
    match (record.cost, record.currency) {
        (Some(amount), Some(currency)) => write!(out, " cost={amount} {currency}")?,
        _ if record.cost_note.is_some() => out.extend_from_slice(b" cost=unknown"),
        _ => {}
    }
    // The cache: ` cache=hit saved=0.0185 USD`, nothing for a model not cached.
    match (record.cache, record.cost_saved, record.cost_saved_currency) {
        (Some(c), Some(amount), Some(currency)) => {
            write!(out, " cache={c} saved={amount} {currency}")?;
        }
        (Some(c), _, _) => write!(out, " cache={c}")?,
        _ => {}
    }
    if let Some(a) = record.aborted {
        write!(out, " aborted=\"{a}\"")?;
    }
    write!(
        out,
        " request_id={} trace_id={}",
        record.request_id,
        record.trace_id.unwrap_or("-")
    )
}

/// A principal (`key:<name>`, `jwt:<subject>`) with its name cleaned; its kind is the gateway's
/// own (cleaned alone, `key:…` would read as a credential-named field).
fn redact_principal(principal: &str) -> std::borrow::Cow<'_, str> {
    match principal.split_once(':') {
        Some((kind, name)) => match redact_recurring(name) {
            std::borrow::Cow::Borrowed(_) => principal.into(),
            std::borrow::Cow::Owned(clean) => format!("{kind}:{clean}").into(),
        },
        None => redact_recurring(principal),
    }
}

/// The log target of access lines.
const TARGET: &str = "access";
/// A JSON line's buffer is kept for the next line up to this size.
const KEEP_LINE: usize = 8 * 1024;

thread_local! {
    /// The line being made, reused line after line.
    static LINE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The time as the JSON line writes it, for the tests' serde_json reference line.
#[cfg(test)]
fn as_rfc3339<S: serde::Serializer>(time: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339_ms(*time))
}

#[cfg(test)]
fn rfc3339_ms(time: SystemTime) -> String {
    let mut out = Vec::new();
    push_rfc3339_ms(&mut out, time);
    String::from_utf8(out).unwrap_or_default()
}

/// `time` as RFC 3339 in UTC with milliseconds (`2026-11-24T06:17:58.123Z`), digit by digit:
/// every JSON line has one, and `write!` through `fmt` cost more than the rest of its numbers.
pub(crate) fn push_rfc3339_ms(out: &mut Vec<u8>, time: SystemTime) {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    crate::civil::push_rfc3339_seconds(out, since.as_secs());
    // `…:58Z` becomes `…:58.123Z`.
    out.pop();
    let ms = since.subsec_millis();
    out.extend_from_slice(&[
        b'.',
        b'0' + (ms / 100) as u8,
        b'0' + (ms / 10 % 10) as u8,
        b'0' + (ms % 10) as u8,
        b'Z',
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        let rfc3339 = rfc3339_ms;
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_155_478_123);
        assert_eq!(rfc3339(t), "2026-11-20T06:17:58.123Z");
        // A leap day.
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(t), "2000-02-29T00:00:00.000Z");
    }

    fn line(record: &Record<'_>) -> String {
        let mut out = Vec::new();
        write_text(&mut out, record).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_text_line_carries_cost_cache_and_abandonment_in_order() {
        let usd = Currency::parse("USD");
        let mut record = Record {
            time: UNIX_EPOCH,
            entry_point: "main",
            method: "POST",
            path: "/api/v1/audio/speech",
            principal: Some("key:tester"),
            operation: Some("speech"),
            model: Some("tts-1"),
            provider: None,
            native_model: None,
            status: 200,
            code: None,
            attempts: 1,
            duration_ms: 3.2,
            ttfb_ms: None,
            bytes_in: 0,
            bytes_out: 0,
            usage: Usage::default(),
            cost: Amount::parse("0.0185"),
            currency: usd,
            cost_basis: None,
            cost_note: None,
            aborted: Some("client went away"),
            cache: Some("hit"),
            cost_saved: Amount::parse("0.0200"),
            cost_saved_currency: usd,
            request_id: "req-1",
            request_id_made: false,
            trace_id: None,
        };
        assert_eq!(
            line(&record),
            "main POST /api/v1/audio/speech status=200 code=- model=tts-1 caller=key:tester ms=3.2 \
             cost=0.0185 USD cache=hit saved=0.02 USD aborted=\"client went away\" request_id=req-1 \
             trace_id=-"
        );
        record.cost = None;
        record.cost_note = Some("no price");
        record.cost_saved = None;
        record.aborted = None;
        record.code = Some("upstream_timeout");
        assert_eq!(
            line(&record),
            "main POST /api/v1/audio/speech status=200 code=upstream_timeout model=tts-1 \
             caller=key:tester ms=3.2 cost=unknown cache=hit request_id=req-1 trace_id=-"
        );
        record.cost_note = None;
        record.cache = None;
        assert!(line(&record).ends_with("ms=3.2 request_id=req-1 trace_id=-"));
    }

    #[test]
    fn a_principal_keeps_its_kind_and_loses_a_credential_in_its_name() {
        assert_eq!(redact_principal("key:caller"), "key:caller");
        assert_eq!(redact_principal("jwt:user-1"), "jwt:user-1");
        assert_eq!(
            redact_principal("jwt:Bearer abcdefghijkl"),
            "jwt:Bearer [redacted]"
        );
    }

    #[test]
    fn a_hosted_files_id_is_not_logged() {
        assert_eq!(logged_path("/api/v1/files/abc123"), "/api/v1/files/{id}");
        assert_eq!(logged_path("/api/v1/rerank"), "/api/v1/rerank");
        assert_eq!(
            logged_path_under("/ai/api/v1/files/abc123", Some("/ai")),
            "/ai/api/v1/files/{id}"
        );
        assert_eq!(
            logged_path_under("/ai/api/v1/rerank", Some("/ai")),
            "/ai/api/v1/rerank"
        );
    }
}
