//! Provider kinds a host registers from outside the crate: an in-house TTS or rerank server bound
//! to models in the configuration like any built-in provider, without a change to Switchyard.
//!
//! A host fills a [`ProviderKinds`] with a name (`inhouse-rerank`) and a function that builds the
//! kind for each account the configuration declares with that `kind:` — its credentials, its
//! error classification and its adapters, the same [`Kind`] every built-in provider's module
//! returns — and loads the configuration with it (`config::load_str_with`). Everything the
//! accounts of every kind share (`api_key`, `base_url`, `region_base_urls`, timeouts, CA file,
//! `result_hosts`, `max_response_bytes`) is read by the configuration itself; the function is
//! given only the key and the account's own settings ([`KindConfig`]).
//!
//! Built-in kinds cannot be replaced, so a configuration means the same with or without a host's
//! kinds; an unknown `kind:` is refused at load, naming every known one.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_yaml::{Mapping, Value};

use super::registry::{Kind, ProviderConfig};

/// What builds a registered kind for one account (see [`ProviderKinds::register`]).
type Build = dyn Fn(&KindConfig<'_>) -> Result<Kind, String> + Send + Sync;

/// The provider kinds a host adds to the built-in ones, by name. Cheap to clone (the build
/// functions are shared); the loaded settings keep a copy, so a reload knows the same kinds.
#[derive(Clone, Default)]
pub struct ProviderKinds {
    kinds: BTreeMap<String, Arc<Build>>,
}

impl fmt::Debug for ProviderKinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.kinds.keys()).finish()
    }
}

impl ProviderKinds {
    /// No registered kinds: only the built-in ones are known.
    pub fn new() -> ProviderKinds {
        ProviderKinds::default()
    }

    /// Register the kind `name` (what a provider account's `kind:` names): `build` is called once
    /// for each such account at every load (start and reload) and returns the account's
    /// credentials, error classification and adapters. An `Err` from it is a load error, shown
    /// under the account's path (`switchyard.providers.<account>: <message>`).
    ///
    /// Refused, with a message saying why: an empty name, a name with characters other than
    /// ASCII letters, digits, `-`, `_` and `.`, a built-in kind's name, a name already registered.
    pub fn register<F>(&mut self, name: &str, build: F) -> Result<&mut ProviderKinds, String>
    where
        F: Fn(&KindConfig<'_>) -> Result<Kind, String> + Send + Sync + 'static,
    {
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if name.is_empty() || !name.chars().all(valid) {
            return Err(format!(
                "provider kind `{name}`: a name is ASCII letters, digits, `-`, `_` and `.`"
            ));
        }
        if builtin_kinds().contains(&name) {
            return Err(format!(
                "provider kind `{name}` is built in and cannot be replaced"
            ));
        }
        if self.kinds.contains_key(name) {
            return Err(format!("provider kind `{name}` is already registered"));
        }
        self.kinds.insert(name.to_string(), Arc::new(build));
        Ok(self)
    }

    /// The registered kinds' names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.kinds.keys().map(String::as_str)
    }

    /// Whether `name` is registered here.
    pub fn contains(&self, name: &str) -> bool {
        self.kinds.contains_key(name)
    }

    /// Build the registered kind `kind` for the account `account` (`raw`: its mapping as the file
    /// gives it, `kind:` and the shared keys read elsewhere removed); `None` when `kind` is not
    /// registered here.
    pub(crate) fn build(
        &self,
        kind: &str,
        account: &str,
        key: &str,
        raw: &Mapping,
    ) -> Option<Result<Kind, String>> {
        let build = self.kinds.get(kind)?;
        let config = KindConfig {
            kind,
            account,
            key,
            settings: raw,
            settings_read: Cell::new(false),
        };
        let built = build(&config);
        // A key nobody read would otherwise be ignored without a word.
        let unread = match (&built, config.settings_read.get()) {
            (Ok(_), false) => config.no_settings().err(),
            _ => None,
        };
        Some(match unread {
            Some(m) => Err(m),
            None => built,
        })
    }

    /// The message for a `kind:` that is neither built in nor registered here.
    pub(crate) fn unknown(&self, kind: &str) -> String {
        let registered: Vec<&str> = self.names().collect();
        format!(
            "unknown provider kind `{kind}`; built-in kinds: {}; registered kinds: {}",
            builtin_kinds().join(", "),
            if registered.is_empty() {
                "none".to_string()
            } else {
                registered.join(", ")
            }
        )
    }
}

/// What a registered kind's build function is given for one provider account.
pub struct KindConfig<'a> {
    kind: &'a str,
    account: &'a str,
    key: &'a str,
    settings: &'a Mapping,
    settings_read: Cell<bool>,
}

impl KindConfig<'_> {
    /// The kind's name, as registered.
    pub fn kind(&self) -> &str {
        self.kind
    }

    /// The account's name in the configuration (`providers.<name>`).
    pub fn account(&self) -> &str {
        self.account
    }

    /// The account's `api_key`, trimmed; empty when none is configured. A kind that needs one
    /// returns [`Auth::Missing`](crate::upstream::provider::Auth::Missing) then (the account is
    /// disabled and its models answer 503); see [`keyed`](super::registry::keyed).
    pub fn key(&self) -> &str {
        self.key
    }

    /// The account's own settings — its keys besides `kind` and those every account has — read
    /// into `T`. A key `T` does not take is an error naming it, as is a bad value (serde's
    /// message, with the key's path). A kind that takes settings calls this; one that does not
    /// need not call anything: a key given to it is then refused when the build returns.
    pub fn settings<T: DeserializeOwned>(&self) -> Result<T, String> {
        self.settings_read.set(true);
        let mut unknown = Vec::new();
        let value = Value::Mapping(self.settings.clone());
        let parsed: Result<T, _> =
            serde_path_to_error::deserialize(serde_ignored::Deserializer::new(value, &mut |p| {
                unknown.push(p.to_string())
            }));
        match parsed {
            Err(e) => Err(match unknown_field(&e.inner().to_string()) {
                Some(key) => not_a_setting(&key, self.kind),
                // A missing key is reported at the account itself (path `.`).
                None if e.path().iter().next().is_none() => e.inner().to_string(),
                None => format!("{}: {}", e.path(), e.inner()),
            }),
            Ok(_) if !unknown.is_empty() => Err(not_a_setting(&unknown.join(", "), self.kind)),
            Ok(t) => Ok(t),
        }
    }

    /// Refuse any setting of the kind's own: for a kind that takes none (only the shared keys).
    pub fn no_settings(&self) -> Result<(), String> {
        self.settings_read.set(true);
        match self.settings.keys().next() {
            Some(k) => Err(not_a_setting(k.as_str().unwrap_or("?"), self.kind)),
            None => Ok(()),
        }
    }
}

fn not_a_setting(key: &str, kind: &str) -> String {
    format!("{key}: not a setting of provider kind `{kind}`")
}

/// The key of serde's "unknown field `x`, expected …" (a `deny_unknown_fields` settings type).
fn unknown_field(message: &str) -> Option<String> {
    message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next())
        .map(str::to_string)
}

/// The built-in kinds' names, as `kind:` spells them, in the registry's order. Read from
/// `ProviderConfig` itself (the names serde is told to accept), so the list cannot drift from
/// the registry.
pub(crate) fn builtin_kinds() -> &'static [&'static str] {
    /// Keeps the variant names serde reports for an unknown tag; any other error is empty.
    #[derive(Debug)]
    struct Variants(&'static [&'static str]);
    impl fmt::Display for Variants {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("provider kinds")
        }
    }
    impl std::error::Error for Variants {}
    impl serde::de::Error for Variants {
        fn custom<T: fmt::Display>(_: T) -> Self {
            Variants(&[])
        }
        fn unknown_variant(_: &str, expected: &'static [&'static str]) -> Self {
            Variants(expected)
        }
    }
    // A tag no variant has (the empty name) makes serde name every variant it knows.
    let tag = serde::de::value::MapDeserializer::<_, Variants>::new(std::iter::once(("kind", "")));
    match ProviderConfig::deserialize(tag) {
        Err(Variants(names)) => names,
        Ok(_) => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::adapter::Adapters;
    use crate::upstream::provider::Auth;

    fn rerank_kind(_: &KindConfig<'_>) -> Result<Kind, String> {
        Ok(Kind {
            auth: Auth::None,
            errors: |p, status, _| {
                crate::common::error::UpstreamError::from_status(&p.name, status, "x")
            },
            remote: true,
            result_hosts: &[],
            adapters: Adapters::default(),
        })
    }

    #[test]
    fn the_built_in_kinds_are_read_from_the_registry() {
        let names = builtin_kinds();
        for name in [
            "openai",
            "azure-openai",
            "cohere-v1",
            "tei",
            "local",
            "kling",
            "gemini",
            "vertex",
            "vertex-ranking",
            "xai",
            "pinecone",
            "nvidia-nim",
            "vllm",
            "infinity",
            "bedrock",
            "polly",
            "bedrock-image",
            "tencent-hunyuan",
            "tencent-tts",
        ] {
            assert!(names.contains(&name), "{name} missing from {names:?}");
        }
        assert_eq!(names.len(), 43, "{names:?}");
    }

    #[test]
    fn registration_refuses_built_in_duplicate_and_malformed_names() {
        let mut kinds = ProviderKinds::new();
        kinds.register("inhouse-rerank", rerank_kind).unwrap();
        let err = |r: Result<&mut ProviderKinds, String>| r.err().unwrap();
        assert_eq!(
            err(kinds.register("cohere", rerank_kind)),
            "provider kind `cohere` is built in and cannot be replaced"
        );
        assert_eq!(
            err(kinds.register("inhouse-rerank", rerank_kind)),
            "provider kind `inhouse-rerank` is already registered"
        );
        for bad in ["", "in house", "tts/v2"] {
            assert!(err(kinds.register(bad, rerank_kind)).contains("a name is ASCII"));
        }
        assert_eq!(kinds.names().collect::<Vec<_>>(), ["inhouse-rerank"]);
        assert!(kinds
            .unknown("martian")
            .contains("registered kinds: inhouse-rerank"));
        assert!(ProviderKinds::new()
            .unknown("martian")
            .ends_with("registered kinds: none"));
    }

    #[test]
    fn settings_are_read_into_the_kinds_type_and_unread_ones_refused() {
        #[derive(Deserialize)]
        struct Voice {
            style: String,
        }
        let mut kinds = ProviderKinds::new();
        kinds
            .register("plain", rerank_kind)
            .unwrap()
            .register("styled", |c| {
                let v: Voice = c.settings()?;
                assert_eq!(v.style, "calm");
                rerank_kind(c)
            })
            .unwrap();
        let raw: Mapping = serde_yaml::from_str("{style: calm}").unwrap();
        assert!(kinds.build("styled", "a", "", &raw).unwrap().is_ok());
        let e = kinds.build("plain", "a", "", &raw).unwrap().err().unwrap();
        assert_eq!(e, "style: not a setting of provider kind `plain`");
        let extra: Mapping = serde_yaml::from_str("{style: calm, tone: low}").unwrap();
        let e = kinds
            .build("styled", "a", "", &extra)
            .unwrap()
            .err()
            .unwrap();
        assert_eq!(e, "tone: not a setting of provider kind `styled`");
        let bad: Mapping = serde_yaml::from_str("{style: [1]}").unwrap();
        let e = kinds.build("styled", "a", "", &bad).unwrap().err().unwrap();
        assert!(e.starts_with("style: invalid type"), "{e}");
        assert!(kinds.build("nope", "a", "", &raw).is_none());
    }
}
