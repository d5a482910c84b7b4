//! The gateway's logger: `env_logger` (configured by `RUST_LOG`) behind a filter that takes
//! credentials out of every record, whoever wrote it.
//!
//! The gateway's own log lines never format a key, but Pingora's do: at `trace` it dumps each
//! client request head (the client's `Authorization`, `Service-API-Key`, …) and the wire bytes of
//! each request the gateway sends a provider (its `Authorization: Bearer sk-…`, `xi-api-key`,
//! `x-goog-api-key`, signed headers); at `trace` it also dumps bodies, where a provider may echo
//! a key. Those records are Pingora's text, so the only place to clean them is on their way out:
//! `Redacting` formats each *enabled* record, blanks what `redact` finds, and hands the clean
//! text to the logger it wraps. A disabled record is never formatted (the `log` macros check the
//! level first, and `Redacting::enabled` is the wrapped logger's).
//!
//! What is blanked (as `[redacted]`):
//! - every value registered with `redact_also` (the configured provider keys, client keys,
//!   secrets: `config` registers them when it loads a file), wherever it appears;
//! - the value of a header or parameter whose name says it holds a credential (see
//!   `sensitive_name`), in the shapes Pingora prints: `"name": "value"` (a header map),
//!   `name: value` at the start of a line (a request head, raw or as escaped bytes), and
//!   `name=value` (query strings, signed-header parameters);
//! - the token after an HTTP authentication scheme (`Bearer …`, `Basic …`) anywhere, and
//!   `sk-…`-shaped words (the form most providers' keys take);
//! - a hosted file's id, the only credential its link needs: whatever follows `/files/` in a
//!   path (`/api/v1/files/<id>`: the request line Pingora dumps at `trace`, a link in a body),
//!   and an id-shaped word after `file:` (its key in the shared store). Image task ids are not
//!   blanked: a task is read only with the caller's own credentials.
//!
//! One more thing it does: Pingora's `ERROR` for a client that went away (or stalled) before its
//! request head was complete is logged at `debug` (`info` for a stall) instead: there was no
//! request, and nothing the operator must act on (see `client_gone_level`). A client that goes
//! away later is the gateway's to log, in its access line (`gateway::Gateway::logging`).
//!
//! Lines already known to be clean skip the scan: the access line (`log_clean`) is built from
//! known fields, and the few of them that can carry text from outside (a path, a caller's name, why
//! an answer was abandoned) are cleaned one by one before it is written (`gateway::access_log`).
//!
//! Where stderr is not a terminal, lines are written in batches, not one system call per line
//! (`sink`): call [`flush`] before the process exits (the binary does). There a clean line from
//! [`init`]'s logger also skips `env_logger`'s formatter: its header (`[<time> INFO  access] `,
//! the same bytes) is written by `log_clean` itself, once per line instead of through a writer
//! that looks at every byte. And the few short texts `redact` is asked about on every request (a
//! route's path, a caller's name) are remembered as clean per thread (`Memo`) until the set of
//! secrets changes.
//!
//! Embedders: [`init`] installs this logger as the binary does; [`install`] wraps a logger of
//! their own.

mod sink;

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use log::{Level, LevelFilter, Log, Metadata, Record, SetLoggerError};

/// What a blanked value becomes.
const MARK: &str = "[redacted]";

/// Values too short to be a real credential are not registered: blanking every `k` or `test`
/// in every line would make the log unreadable, and the name-based rules still cover headers.
const MIN_SECRET_LEN: usize = 8;

/// Credentials the configuration holds, blanked wherever they appear.
static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Bumped (after the change) whenever [`SECRETS`] changes: a text remembered as clean under an
/// older generation is scanned again.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// [`init`]'s logger is installed and writes uncoloured lines into the batch: `log_clean` may
/// write a clean line there itself.
static DIRECT: AtomicBool = AtomicBool::new(false);

/// Install the gateway's logger: `env_logger` reading `RUST_LOG` (default `info`), with every
/// record passed through `redact`, written to stderr (in batches when stderr is not a
/// terminal: see [`flush`]). Fails if a logger is already installed.
pub fn init() -> Result<(), SetLoggerError> {
    let mut builder =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"));
    let batched = !std::io::stderr().is_terminal();
    if batched {
        builder.target(env_logger::Target::Pipe(Box::new(sink::Batched)));
    }
    let inner = builder.build();
    let level = inner.filter();
    install(inner, level)?;
    // Colour asked for outright would be env_logger's to write; `auto` into a pipe writes none.
    let plain = std::env::var("RUST_LOG_STYLE").map_or(true, |s| s != "always");
    DIRECT.store(batched && plain, Ordering::Relaxed);
    Ok(())
}

/// Write out the lines [`init`]'s logger holds in its batch. Call it before the process exits
/// (`log::logger().flush()` does the same); warnings and errors never wait in the batch.
pub fn flush() {
    sink::flush();
}

thread_local! {
    /// The record being logged was built clean ([`log_clean`]): no scan.
    static CLEAN: Cell<bool> = const { Cell::new(false) };
}

/// Log `line` at `info` to `target`, as a line known to hold no credential (its parts that came
/// from outside were passed through `redact` by its maker): `Redacting` writes it without
/// scanning it again. Another logger gets it as any record.
pub(crate) fn log_clean(target: &str, line: &str) {
    if DIRECT.load(Ordering::Relaxed) {
        // The filter (`RUST_LOG`) still decides; only the formatting is done here.
        if log::logger().enabled(
            &Metadata::builder()
                .level(Level::Info)
                .target(target)
                .build(),
        ) {
            HEAD.with(|head| {
                let mut head = head.borrow_mut();
                head.refresh(SystemTime::now());
                sink::append_parts(&[
                    &head.bytes,
                    target.as_bytes(),
                    b"] ",
                    line.as_bytes(),
                    b"\n",
                ]);
            });
        }
        return;
    }
    CLEAN.with(|c| c.set(true));
    log::logger().log(
        &Record::builder()
            .args(format_args!("{line}"))
            .level(Level::Info)
            .target(target)
            .build(),
    );
    CLEAN.with(|c| c.set(false));
}

/// Install `inner` behind the redacting filter, with `level` as the global maximum (records
/// above it are never even built).
pub fn install<L: Log + 'static>(inner: L, level: LevelFilter) -> Result<(), SetLoggerError> {
    log::set_boxed_logger(Box::new(Redacting { inner }))?;
    log::set_max_level(level);
    Ok(())
}

/// Blank `secret` in every log record from now on (ignored when shorter than 8 bytes).
pub(crate) fn redact_also(secret: &str) {
    let secret = secret.trim();
    if secret.len() < MIN_SECRET_LEN {
        return;
    }
    let mut all = SECRETS.write().unwrap_or_else(PoisonError::into_inner);
    if !all.iter().any(|s| s == secret) {
        all.push(secret.to_string());
        // Longest first, so a secret containing another is blanked whole.
        all.sort_by_key(|s| std::cmp::Reverse(s.len()));
        // Under the lock, after the change: a memo entry made before it is now stale.
        GENERATION.fetch_add(1, Ordering::Release);
    }
}

/// A clean line's header as `env_logger`'s default format writes it at `info`, up to its
/// target: `[2026-12-04T20:19:01Z INFO  `, remade when the second changes.
struct Head {
    secs: u64,
    bytes: Vec<u8>,
}

impl Head {
    fn refresh(&mut self, now: SystemTime) {
        let secs = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        if secs == self.secs && !self.bytes.is_empty() {
            return;
        }
        self.secs = secs;
        self.bytes.clear();
        self.bytes.push(b'[');
        crate::civil::push_rfc3339_seconds(&mut self.bytes, secs);
        self.bytes.extend_from_slice(b" INFO  ");
    }
}

/// The longest text remembered as clean, and how many are (per thread).
const MEMO_LEN: usize = 64;
const MEMO_SLOTS: usize = 8;

/// Short texts found clean under one generation of [`SECRETS`], each inline (no allocation),
/// the oldest replaced first: an access line asks about the same path, caller and cost note
/// request after request, and each scan costs a search per secret.
struct Memo {
    generation: u64,
    next: usize,
    slots: [(u8, [u8; MEMO_LEN]); MEMO_SLOTS],
}

impl Memo {
    fn knows(&mut self, generation: u64, text: &[u8]) -> bool {
        if self.generation != generation {
            self.generation = generation;
            self.slots = [(0, [0; MEMO_LEN]); MEMO_SLOTS];
            return false;
        }
        self.slots
            .iter()
            .any(|(len, bytes)| usize::from(*len) == text.len() && &bytes[..text.len()] == text)
    }

    fn keep(&mut self, text: &[u8]) {
        let slot = &mut self.slots[self.next];
        slot.0 = text.len() as u8;
        slot.1[..text.len()].copy_from_slice(text);
        self.next = (self.next + 1) % MEMO_SLOTS;
    }
}

thread_local! {
    static MEMO: RefCell<Memo> = const {
        RefCell::new(Memo { generation: 0, next: 0, slots: [(0, [0; MEMO_LEN]); MEMO_SLOTS] })
    };
    static HEAD: RefCell<Head> = const { RefCell::new(Head { secs: 0, bytes: Vec::new() }) };
}

/// [`redact`], for a text that recurs (a path, a caller's name): a short text found clean
/// before, with the same secrets, is not scanned again. An empty text is clean.
pub(crate) fn redact_recurring(text: &str) -> Cow<'_, str> {
    if text.is_empty() || text.len() > MEMO_LEN {
        return redact(text);
    }
    // Read before the scan: a change of secrets during it leaves this entry stale, not wrong.
    let generation = GENERATION.load(Ordering::Acquire);
    if MEMO.with(|m| m.borrow_mut().knows(generation, text.as_bytes())) {
        return Cow::Borrowed(text);
    }
    let clean = redact(text);
    if matches!(clean, Cow::Borrowed(_)) {
        MEMO.with(|m| {
            let mut m = m.borrow_mut();
            if m.generation == generation {
                m.keep(text.as_bytes());
            }
        });
    }
    clean
}

/// A logger that hands `inner` only redacted records.
pub(crate) struct Redacting<L> {
    inner: L,
}

impl<L: Log> Log for Redacting<L> {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.inner.enabled(metadata)
    }

    fn log(&self, record: &Record<'_>) {
        if CLEAN.with(Cell::get) {
            if self.inner.enabled(record.metadata()) {
                self.inner.log(record);
            }
            return;
        }
        let text = |record: &Record<'_>| -> Cow<'_, str> {
            match record.args().as_str() {
                Some(s) => Cow::Borrowed(s),
                None => Cow::Owned(record.args().to_string()),
            }
        };
        let mut metadata = record.metadata().clone();
        let mut formatted = None;
        if record.level() == Level::Error && record.target() == "pingora_proxy" {
            let t = text(record);
            if let Some(level) = client_gone_level(&t) {
                metadata = Metadata::builder()
                    .level(level)
                    .target(record.target())
                    .build();
            }
            formatted = Some(t);
        }
        // Formatting costs; a record the inner logger would drop is dropped unformatted.
        if !self.inner.enabled(&metadata) {
            return;
        }
        let text = formatted.unwrap_or_else(|| text(record));
        let clean = redact(&text);
        let urgent = metadata.level() <= Level::Warn;
        self.inner.log(
            &Record::builder()
                .args(format_args!("{clean}"))
                .metadata(metadata)
                .module_path(record.module_path())
                .file(record.file())
                .line(record.line())
                .build(),
        );
        if urgent {
            // What an operator must see is not held back in a batch.
            sink::flush();
        }
    }

    fn flush(&self) {
        self.inner.flush();
        sink::flush();
    }
}

/// The level for Pingora's `ERROR` about a client that went away before its request head was
/// complete (`debug`: nothing happened), or was too slow sending it (`info`): no request was
/// made, nothing is wrong with the gateway, and a load test's end or a scan would otherwise
/// write one error per connection. `None` for every other record.
fn client_gone_level(text: &str) -> Option<Level> {
    let what = text.strip_prefix("Fail to proxy: Downstream ")?;
    if what.starts_with("ConnectionClosed") || what.starts_with("ReadError") {
        Some(Level::Debug)
    } else if what.starts_with("ReadTimedout") {
        Some(Level::Info)
    } else {
        None
    }
}

/// `text` with every credential found in it blanked (see the module doc).
pub(crate) fn redact(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    {
        let secrets = SECRETS.read().unwrap_or_else(PoisonError::into_inner);
        for secret in secrets.iter() {
            // Most of what the access line cleans (a path, a caller's name) is shorter than a
            // key: no searcher built for those.
            if secret.len() <= out.len() && out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), MARK));
            }
        }
    }
    if let Some(s) = named_values(&out) {
        out = Cow::Owned(s);
    }
    if let Some(s) = scheme_tokens(&out) {
        out = Cow::Owned(s);
    }
    if let Some(s) = file_ids(&out) {
        out = Cow::Owned(s);
    }
    out
}

/// Blank hosted-file ids: the path segment after `/files/` (any length: whatever a client asked
/// for may be a real id), and a 32-character id after `file:` (a store key, `<prefix>file:<id>`);
/// `None` when there are none.
fn file_ids(text: &str) -> Option<String> {
    let b = text.as_bytes();
    // Both markers hold `file`: most of what is cleaned (every access line's path and request
    // id) has none, and is passed without building a searcher per marker.
    if !b.windows(4).any(|w| w == b"file") {
        return None;
    }
    let id_end = |mut i: usize| {
        while i < b.len() && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'-' | b'_' | b'%')) {
            i += 1;
        }
        i
    };
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for (marker, exact) in [("/files/", None), ("file:", Some(32))] {
        let mut from = 0;
        while let Some(found) = text[from..].find(marker) {
            let start = from + found + marker.len();
            let end = id_end(start);
            from = start;
            let fits = end > start && exact.is_none_or(|n| end - start == n);
            if fits && !text[start..].starts_with(MARK) {
                spans.push((start, end));
                from = end;
            }
        }
    }
    splice(text, spans)
}

/// Whether a header or parameter of this name carries a credential (reached by the crate's own
/// tests through `internals`).
#[doc(hidden)]
pub fn sensitive_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n == "sig"
        || [
            "auth", // authorization, proxy-authorization, x-auth-token
            "key",  // x-api-key, xi-api-key, x-goog-api-key, api-key, x-key, service-api-key
            "token",
            "secret",
            "passw",
            "signature",
            "credential",
            "cookie",
        ]
        .iter()
        .any(|part| n.contains(part))
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// Replace the `text[start..end]` pieces with [`MARK`], overlapping ones once; `None` when there
/// are none (the text stays as it is).
fn splice(text: &str, mut spans: Vec<(usize, usize)>) -> Option<String> {
    if spans.is_empty() {
        return None;
    }
    spans.sort_unstable();
    spans.dedup_by(|later, earlier| later.0 < earlier.1);
    let mut s = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in spans {
        s.push_str(&text[at..start]);
        s.push_str(MARK);
        at = end;
    }
    s.push_str(&text[at..]);
    Some(s)
}

/// The end of a quoted value starting after its opening `"` at `i`: the next `"` not escaped
/// by a backslash (Debug output escapes quotes inside a value).
fn quoted_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i,
            _ => i += 1,
        }
    }
    b.len()
}

/// Where a name starting at `start` may begin: the start of the text or after a delimiter.
/// `line_start` asks for the start of a line (raw, or escaped as `\n` in Debug output).
fn boundary_before(b: &[u8], start: usize, line_start: bool) -> bool {
    if start == 0 {
        return true;
    }
    let prev = b[start - 1];
    if line_start {
        return prev == b'\n'
            || prev == b'\r'
            || (start >= 2 && b[start - 2] == b'\\' && (prev == b'n' || prev == b'r'))
            // The first line of a Debug-printed byte string: `b"name: …`.
            || (prev == b'"' && start >= 2 && b[start - 2] == b'b');
    }
    matches!(
        prev,
        b' ' | b'\t'
            | b'\n'
            | b'\r'
            | b'"'
            | b'\''
            | b'\x7b' // an opening brace
            | b'('
            | b'['
            | b','
            | b'?'
            | b'&'
            | b';'
    ) || (start >= 2 && b[start - 2] == b'\\' && matches!(prev, b'n' | b'r' | b't'))
}

/// The span of the name ending at `end` (exclusive), skipping an escape's letter (`\r\nname`).
fn name_before(b: &[u8], end: usize) -> usize {
    let mut start = end;
    while start > 0 && is_name_byte(b[start - 1]) {
        start -= 1;
    }
    // `…\r\nauthorization`: the `n` of the escape is not part of the name.
    if start + 1 < end
        && start >= 1
        && b[start - 1] == b'\\'
        && matches!(b[start], b'n' | b'r' | b't')
    {
        start += 1;
    }
    start
}

/// Blank values of credential-named headers and parameters; `None` when there are none.
fn named_values(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let sep = b[i];
        if sep != b':' && sep != b'=' {
            i += 1;
            continue;
        }
        // `"name": ` (a printed map) or `name:` / `name=`.
        let quoted_name = sep == b':' && i > 0 && b[i - 1] == b'"';
        let name_end = if quoted_name { i - 1 } else { i };
        let start = name_before(b, name_end);
        let name = &text[start..name_end];
        let fits = !name.is_empty()
            && if quoted_name {
                start > 0 && b[start - 1] == b'"'
            } else {
                boundary_before(b, start, sep == b':')
            };
        if !fits || !sensitive_name(name) {
            i += 1;
            continue;
        }
        let mut v = i + 1;
        while v < b.len() && b[v] == b' ' {
            v += 1;
        }
        let (from, to) = if v < b.len() && b[v] == b'"' {
            (v + 1, quoted_end(b, v + 1))
        } else if quoted_name {
            // A printed map's unquoted value (`Sensitive`, a number): nothing secret.
            i += 1;
            continue;
        } else {
            (v, unquoted_end(b, v, sep))
        };
        if to > from {
            spans.push((from, to));
        }
        i = to.max(i + 1);
    }
    splice(text, spans)
}

/// The end of an unquoted value: a header value runs to the end of its line, a parameter to
/// the next delimiter.
fn unquoted_end(b: &[u8], from: usize, sep: u8) -> usize {
    let mut i = from;
    while i < b.len() {
        let c = b[i];
        let stop = if sep == b':' {
            matches!(c, b'\r' | b'\n' | b'"')
                || (c == b'\\' && matches!(b.get(i + 1), Some(b'r' | b'n')))
        } else {
            c.is_ascii_whitespace()
                || matches!(
                    c,
                    b'&' | b'"' | b'\'' | b',' | b';' | b'\\' | b')' | b']' | b'}' | b'>'
                )
        };
        if stop {
            break;
        }
        if c == b'\\' {
            i += 2;
        } else {
            i += 1;
        }
    }
    i.min(b.len())
}

/// Blank the token after `Bearer ` / `Basic ` and `sk-…` words; `None` when there are none.
fn scheme_tokens(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let token_end = |mut i: usize| {
        while i < b.len()
            && !b[i].is_ascii_whitespace()
            && !matches!(
                b[i],
                b'"' | b'\'' | b'\\' | b',' | b';' | b')' | b']' | b'}'
            )
        {
            i += 1;
        }
        i
    };
    let word_start = |i: usize| i == 0 || !b[i - 1].is_ascii_alphanumeric();
    for scheme in ["bearer ", "basic ", "sk-"] {
        let mut from = 0;
        while let Some(at) = find_ignoring_case(b, from, scheme.as_bytes()) {
            from = at + scheme.len();
            if !word_start(at) {
                continue;
            }
            let (start, end) = if scheme == "sk-" {
                (at, token_end(at))
            } else {
                (from, token_end(from))
            };
            // Already blanked, or too short to be a key (`sk-1` in prose).
            if end - start < 8 || text[start..].starts_with(MARK) {
                continue;
            }
            spans.push((start, end));
            from = end;
        }
    }
    splice(text, spans)
}

/// Where `needle` (lowercase ASCII) first appears in `hay` at or after `from`, in any case. The
/// access line cleans several fields per request: no lowercase copy of each.
fn find_ignoring_case(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w[0].to_ascii_lowercase() == first && w.eq_ignore_ascii_case(needle))
        .map(|at| from + at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_printed_header_map_loses_credential_values_only() {
        let line = r#"Request header: Parts { method: POST, uri: /api/v1/rerank, headers: {"host": "gw", "service-api-key": "client-key-123", "authorization": "Bearer eyJhbGciOi.x.y", "x-goog-api-key": Sensitive, "content-type": "application/json"} }"#;
        let out = redact(line);
        assert!(!out.contains("client-key-123"), "{out}");
        assert!(!out.contains("eyJhbGciOi"), "{out}");
        assert!(
            out.contains(r#""content-type": "application/json""#),
            "{out}"
        );
        assert!(out.contains(r#""host": "gw""#), "{out}");
        assert!(out.contains("/api/v1/rerank"), "{out}");
    }

    #[test]
    fn wire_bytes_lose_every_credential_header() {
        let line = r#"Writing request header: b"POST /v1/audio/speech HTTP/1.1\r\nAuthorization: Bearer sk-live-000111\r\nxi-api-key: xi-secret-9\r\nX-Goog-Api-Key: AIzaXYZ\r\nContent-Type: application/json\r\n\r\n""#;
        let out = redact(line);
        for secret in ["sk-live-000111", "xi-secret-9", "AIzaXYZ"] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
        assert!(out.contains(r"Content-Type: application/json\r\n"), "{out}");
        assert!(out.contains("POST /v1/audio/speech HTTP/1.1"), "{out}");
    }

    #[test]
    fn raw_lines_and_parameters_are_cleaned() {
        let out = redact("GET /img.png?Expires=1&OSSAccessKeyId=LTAI5t&Signature=abc%2F HTTP/1.1\nx-api-key: k-123456\n");
        assert!(!out.contains("LTAI5t") && !out.contains("abc%2F") && !out.contains("k-123456"));
        assert!(out.contains("Expires=1"), "{out}");
        let out = redact("Authorization: AWS4-HMAC-SHA256 Credential=AK/20250101, SignedHeaders=host, Signature=deadbeef");
        assert!(
            !out.contains("deadbeef") && !out.contains("AK/2025"),
            "{out}"
        );
    }

    #[test]
    fn scheme_tokens_and_key_shaped_words_anywhere() {
        let out =
            redact("upstream said: invalid token Bearer abcdefghijk, key sk-proj-123456 rejected");
        assert!(
            !out.contains("abcdefghijk") && !out.contains("sk-proj-123456"),
            "{out}"
        );
        assert!(out.contains("rejected"), "{out}");
        // What was blanked before stays as it is.
        let done = "provided: Bearer [redacted]";
        assert_eq!(redact(done), done);
        // Prose survives.
        assert_eq!(redact("a risk-free retry"), "a risk-free retry");
    }

    #[test]
    fn registered_secrets_are_blanked_anywhere() {
        redact_also("reg1stered-secret-value");
        redact_also("short");
        let out = redact("body: {\"echo\":\"xreg1stered-secret-valuex\"} short");
        assert!(!out.contains("reg1stered-secret-value"), "{out}");
        assert!(out.contains("short"), "{out}");
    }

    #[test]
    fn a_text_remembered_as_clean_is_scanned_again_once_the_secrets_change() {
        let path = "/api/v1/rerank/memo-9f3c2a7e1b";
        for _ in 0..3 {
            assert!(matches!(redact_recurring(path), Cow::Borrowed(_)));
        }
        // The text now holds a secret: the memo's entry is stale, and the line is cleaned.
        redact_also("memo-9f3c2a7e1b");
        assert_eq!(redact_recurring(path), "/api/v1/rerank/[redacted]");
        assert_eq!(redact_recurring(path), "/api/v1/rerank/[redacted]");
        // A dirty text is never remembered, a long one never kept: both are always scanned.
        let long = format!("{} Bearer abcdefghijkl", "x".repeat(MEMO_LEN));
        assert!(!redact_recurring(&long).contains("abcdefghijkl"));
        assert_eq!(redact_recurring("Bearer abcdefghijkl"), "Bearer [redacted]");
        assert_eq!(redact_recurring(""), "");
    }

    /// A writer into a buffer the test reads back.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_clean_lines_header_is_the_one_env_logger_writes() {
        // env_logger as `init` builds it, into a pipe (no colour), beside the direct header.
        let captured = Captured::default();
        let logger = env_logger::Builder::new()
            .parse_filters("info")
            .target(env_logger::Target::Pipe(Box::new(captured.clone())))
            .build();
        let line = "{\"time\":\"x\"}";
        // Both made within one second (tried again if a second boundary fell between them).
        for _ in 0..5 {
            captured.0.lock().unwrap().clear();
            let now = SystemTime::now();
            logger.log(
                &Record::builder()
                    .args(format_args!("{line}"))
                    .level(Level::Info)
                    .target("access")
                    .build(),
            );
            let mut head = Head {
                secs: 0,
                bytes: Vec::new(),
            };
            head.refresh(now);
            let mut mine = head.bytes.clone();
            mine.extend_from_slice(b"access] ");
            mine.extend_from_slice(line.as_bytes());
            mine.push(b'\n');
            let theirs = captured.0.lock().unwrap().clone();
            if SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs()
                == head.secs
            {
                assert_eq!(
                    String::from_utf8(mine).unwrap(),
                    String::from_utf8(theirs).unwrap()
                );
                return;
            }
        }
        panic!("five tries each crossed a second");
    }

    #[test]
    fn hosted_file_ids_are_blanked_wherever_they_appear() {
        let id = "AbCdEfGhIjKlMnOpQrStUvWxYz012-_9";
        for line in [
            format!("Request header: Parts {{ method: GET, uri: /api/v1/files/{id}, version: HTTP/1.1 }}"),
            format!(r#"Writing request header: b"HEAD /api/v1/files/{id} HTTP/1.1\r\nHost: gw\r\n""#),
            format!(r#"answer: {{"data":[{{"url":"https://gw.example/api/v1/files/{id}"}}]}}"#),
            format!("redis: GET sy:file:{id}"),
        ] {
            let out = redact(&line);
            assert!(!out.contains(id), "{out}");
            assert!(out.contains("files/[redacted]") || out.contains("file:[redacted]"), "{out}");
        }
        // A shorter id a client made up is blanked in a path too; prose is not.
        let out = redact("GET /api/v1/files/guess?x=1");
        assert_eq!(out, "GET /api/v1/files/[redacted]?x=1");
        assert_eq!(redact("config file: missing"), "config file: missing");
    }

    #[test]
    fn ordinary_lines_are_left_alone() {
        for line in [
            r#"domestic POST /api/v1/audio/speech status=200 code=- model=tts-1 caller=key:tester ms=3.2 aborted="client went away""#,
            "provider openai has no api_key: its models will answer 503",
            "auth.jwt.hs256_secret: shorter than 32 bytes; tokens are easier to forge",
            "task 5: heartbeat not stored: timed out",
            r#"{"token_count": 5}"#,
        ] {
            assert_eq!(redact(line), line);
        }
    }
}
