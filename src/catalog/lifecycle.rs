//! A public model's lifecycle, from its targets' (`caps::lifecycle`): whether it is gone now, who
//! takes over then (its configured `successor`, as a model of its own: [`Model::taking_over`]),
//! and the headers its answers carry (RFC 9745 `Deprecation`, RFC 8594 `Sunset`, RFC 8288 `Link`).

use std::sync::Arc;

use super::{Model, Target};
use crate::caps::lifecycle::{Clock, Date, Lifecycle};

/// What a model knows of its lifecycle; empty (and free) for the many models without one.
#[derive(Debug, Default)]
pub struct ModelLifecycle {
    /// The clock deciding what is gone (the catalog's).
    pub clock: Clock,
    /// Some target has a shutdown date: only then is the clock read per request.
    pub retiring: bool,
    /// The model's own dates, when every target has a lifecycle: deprecated when the last of them
    /// was, shut down when the last of them is.
    pub summary: Option<Lifecycle>,
    /// The public model that serves this one's requests once it is gone (config `successor:`).
    pub successor: Option<String>,
    /// Set on the model a successor serves as (`Catalog::serving`): the public model that was
    /// asked for.
    pub taken_over_from: Option<String>,
    /// The headers every answer of this model carries, rendered once.
    pub headers: Vec<(&'static str, String)>,
}

impl Target {
    /// Whether the provider no longer serves this target at Unix time `now`.
    pub fn gone(&self, now: i64) -> bool {
        self.lifecycle.as_ref().is_some_and(|l| l.gone(now))
    }

    /// Whether the health table holds this target out as retired (its provider said the model is
    /// gone, without notice). Known once the target's cell was fetched (its first attempt, or the
    /// attempt loop looking at it); before that, the loop finds out and hands the request on.
    pub(crate) fn retired(&self) -> bool {
        self.health.get().is_some_and(|c| c.retired())
    }
}

impl Model {
    /// Now, by the model's clock, when a target of it has a shutdown date (else `None`, and the
    /// clock is not read).
    pub fn lifecycle_now(&self) -> Option<i64> {
        self.lifecycle.retiring.then(|| self.lifecycle.clock.now())
    }

    /// Whether every target is gone now, past its shutdown date or retired by its provider
    /// without notice (`Target::retired`): requests go to the successor, or are refused.
    pub fn gone(&self) -> bool {
        let now = self.lifecycle_now();
        !self.targets.is_empty()
            && self
                .targets
                .iter()
                .all(|t| now.is_some_and(|n| t.gone(n)) || t.retired())
    }

    /// Why the model cannot be served when every target is gone: the shutdown and the replacement.
    pub fn gone_reason(&self) -> String {
        let last = self
            .targets
            .iter()
            .filter_map(|t| t.lifecycle.as_ref().map(|l| (t, l)))
            .filter_map(|(t, l)| l.shutdown.map(|s| (t, l, s)))
            .max_by_key(|(_, _, s)| *s);
        match last {
            Some((t, l, shutdown)) => format!(
                "its provider shut down {} on {shutdown}; replacement: {}{}",
                t.native_model,
                l.replacement_text(),
                l.source_url()
                    .map(|s| format!(" (see {s})"))
                    .unwrap_or_default()
            ),
            None => "every target was shut down by its provider".into(),
        }
    }

    /// The model `successor` serving as `from`'s takeover: the successor's capabilities and
    /// targets (same accounts, same health cells), its voice map, its name (answers say which model
    /// served them), and a note of the model asked for.
    pub fn taking_over(from: &str, successor: &Model) -> Model {
        let targets = successor.targets.iter().map(Target::copy).collect();
        let mut m = Model::new(successor.name.clone(), successor.caps, targets)
            .with_voice_map(successor.voice_map.clone());
        m.lifecycle = ModelLifecycle {
            clock: successor.lifecycle.clock.clone(),
            retiring: successor.lifecycle.retiring,
            summary: successor.lifecycle.summary.clone(),
            successor: None,
            taken_over_from: Some(from.to_string()),
            headers: successor.lifecycle.headers.clone(),
        };
        m
    }

    /// Fill in the model's lifecycle from its targets'. `successor_link` is the
    /// `rel="successor-version"` target (the gateway's own `/api/v1/models/{id}` of the successor or
    /// of a model serving the replacement), if any.
    pub fn set_lifecycle(
        &mut self,
        clock: Clock,
        successor: Option<String>,
        successor_link: Option<String>,
    ) {
        let retiring = self
            .targets
            .iter()
            .any(|t| t.lifecycle.as_ref().is_some_and(|l| l.shutdown.is_some()));
        let summary = summary(&self.targets);
        let headers = summary
            .as_ref()
            .map(|s| headers(s, successor_link.as_deref()))
            .unwrap_or_default();
        self.lifecycle = ModelLifecycle {
            clock,
            retiring,
            summary,
            successor,
            taken_over_from: None,
            headers,
        };
    }
}

/// A model's dates when every target has a lifecycle: it is deprecated once all are, and gone
/// once all are; the replacement and source are those of the target that lasts longest.
fn summary(targets: &[Target]) -> Option<Lifecycle> {
    let all: Vec<&Arc<Lifecycle>> = targets
        .iter()
        .map(|t| t.lifecycle.as_ref())
        .collect::<Option<_>>()?;
    let last = all.iter().max_by_key(|l| l.lasts())?;
    let deprecated = all
        .iter()
        .map(|l| l.deprecated)
        .collect::<Option<Vec<Date>>>()
        .and_then(|d| d.into_iter().max());
    Some(Lifecycle {
        deprecated,
        ..Lifecycle::clone(last)
    })
}

/// `Deprecation` (RFC 9745: a structured-field date, `@` and Unix seconds), `Sunset` (RFC 8594: an
/// HTTP-date; only when a shutdown date was announced) and `Link` (RFC 8288): the successor
/// (`rel="successor-version"`) and the provider's notice (`rel="sunset"`, RFC 8594 §3).
fn headers(s: &Lifecycle, successor_link: Option<&str>) -> Vec<(&'static str, String)> {
    let mut out = Vec::with_capacity(3);
    if let Some(d) = s.deprecated {
        out.push(("deprecation", format!("@{}", d.unix())));
    }
    if let Some(d) = s.shutdown {
        out.push(("sunset", d.http_date()));
    }
    let links: Vec<String> = successor_link
        .map(|l| format!("<{}>; rel=\"successor-version\"", header_safe(l)))
        .into_iter()
        .chain(
            s.source_url()
                .map(|u| format!("<{}>; rel=\"sunset\"", header_safe(u))),
        )
        .collect();
    if !links.is_empty() {
        out.push(("link", links.join(", ")));
    }
    out
}

/// `text` with every byte a header value or a URI reference cannot carry as is (controls, space,
/// `<`, `>`, `"`, non-ASCII) percent-encoded: model names and sources come from the configuration.
pub(crate) fn header_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        // `%` stays: a URL's own escapes are kept as they are.
        if b.is_ascii_graphic() && !matches!(b, b'<' | b'>' | b'"') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::lifecycle::builtin;
    use crate::providers::test_support as support;

    #[test]
    fn the_headers_follow_the_rfcs() {
        let l = builtin()
            .unwrap()
            .get("openai", "gpt-image-1.5")
            .unwrap()
            .clone();
        let h = headers(&l, Some("/api/v1/models/gpt-image-2.6-sunburst"));
        assert_eq!(
            h,
            vec![
                ("deprecation", "@1780358400".to_string()),
                ("sunset", "Tue, 01 Dec 2026 00:00:00 GMT".to_string()),
                (
                    "link",
                    "</api/v1/models/gpt-image-2.6-sunburst>; rel=\"successor-version\", \
                     <https://developers.openai.com/api/docs/deprecations>; rel=\"sunset\""
                        .to_string()
                ),
            ]
        );
    }

    #[test]
    fn names_that_a_header_cannot_carry_are_percent_encoded() {
        assert_eq!(header_safe("team/tts-1.5_a"), "team/tts-1.5_a");
        assert_eq!(header_safe("https://x/a%20b"), "https://x/a%20b");
        assert_eq!(header_safe("语音 <x>"), "%E8%AF%AD%E9%9F%B3%20%3Cx%3E");
    }

    #[test]
    fn a_model_is_gone_when_every_target_is() {
        let p = support::provider_at("openai", "k", "http://127.0.0.1:1/v1");
        let life = |date: &str| {
            Some(Arc::new(Lifecycle {
                deprecated: None,
                shutdown: Date::parse(date),
                replacement: vec!["next".into()],
                note: None,
                source: None,
                checked: None,
                still_available: false,
            }))
        };
        let mut a = Target::new(p.clone(), "a", 1);
        a.lifecycle = life("2026-12-01");
        let mut b = Target::new(p.clone(), "b", 1);
        b.lifecycle = life("2026-12-05");
        let caps = crate::caps::family("openai-tts").unwrap();
        let mut m = Model::new("m", caps, vec![a, b]);
        let clock = Clock::manual(Date::parse("2026-12-02").unwrap().unix());
        m.set_lifecycle(clock.clone(), None, None);
        assert!(!m.gone(), "b still serves");
        assert_eq!(m.enabled_targets().count(), 1);
        assert_eq!(
            m.lifecycle
                .summary
                .as_ref()
                .unwrap()
                .shutdown
                .unwrap()
                .to_string(),
            "2026-12-05"
        );
        clock.set(Date::parse("2026-12-05").unwrap().unix());
        assert!(m.gone());
        assert!(m.gone_reason().contains("shut down b on 2026-12-05"));
        // A target of unknown lifecycle: never gone, and the model has no dates of its own.
        let mut m = Model::new("m", caps, vec![Target::new(p, "c", 1)]);
        m.set_lifecycle(clock, None, None);
        assert!(!m.gone() && m.lifecycle.summary.is_none() && m.lifecycle.headers.is_empty());
    }
}
