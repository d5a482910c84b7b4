//! Request validation without a gateway: the checks Switchyard makes of a speech, image or rerank
//! body (fields, types, ranges, the model's capabilities, the provider's own refusals), against a
//! catalog built from a document holding only the `providers:` and `models:` sections, as they
//! are written under `switchyard:` in a full configuration.
//!
//! For a host that validates at its edge and forwards elsewhere, or tests request bodies; the
//! errors are Switchyard's (`GatewayError`: status, `code`, per-field `details`), so
//! `GatewayError::body` is the answer a client would get from Switchyard itself.

use std::sync::Arc;

use serde_yaml::Value;

use crate::api::rerank::RerankRequest;
use crate::api::speech::SpeechRequest;
use crate::api::{images, rerank, speech};
use crate::common::error::GatewayError;
use crate::config::{self, GatewaySettings};

/// Validates request bodies against a catalog.
pub struct Validator {
    settings: Arc<GatewaySettings>,
}

impl Validator {
    /// From a YAML document with `providers:` and `models:` only (no `switchyard:` around them,
    /// no listeners, no auth); `lookup` reads `${VAR}`s. Every problem found, with its path
    /// (written as under `switchyard.`), on failure.
    pub fn from_yaml(
        text: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Validator, Vec<String>> {
        let doc: Value =
            serde_yaml::from_str(text).map_err(|e| vec![format!("not valid YAML: {e}")])?;
        let Value::Mapping(sections) = doc else {
            return Err(vec!["the document must be a YAML mapping".into()]);
        };
        let others: Vec<String> = sections
            .keys()
            .map(|k| k.as_str().unwrap_or("?").to_string())
            .filter(|k| k != "providers" && k != "models")
            .map(|k| format!("{k}: unknown key (only `providers` and `models` are read)"))
            .collect();
        if !others.is_empty() {
            return Err(others);
        }
        let mut top = serde_yaml::Mapping::new();
        top.insert("switchyard".into(), Value::Mapping(sections));
        let text = serde_yaml::to_string(&Value::Mapping(top))
            .map_err(|e| vec![format!("the document: {e}")])?;
        let settings = config::Loader::new().hosted().text(&text, lookup)?;
        Ok(Validator::with_settings(Arc::new(settings.gateway)))
    }

    /// With the catalog of loaded settings (e.g. an embedded gateway's
    /// `state().settings()`).
    pub fn with_settings(settings: Arc<GatewaySettings>) -> Validator {
        Validator { settings }
    }

    /// A `POST /api/v1/audio/speech` body, as Switchyard would read it.
    pub fn speech<'a>(&self, body: &'a [u8]) -> Result<SpeechRequest<'a>, GatewayError> {
        speech::parse(
            body,
            &self.settings.catalog,
            self.settings.retry.max_retries,
        )
    }

    /// Whether Switchyard would accept a `POST /api/v1/images/generations` body, the providers'
    /// own refusals (combinations the capabilities cannot express) included. Only the verdict:
    /// the parsed image request is the built-in image adapters' type, not part of the API.
    pub fn images(&self, body: &[u8]) -> Result<(), GatewayError> {
        let req = images::parse(
            body,
            &self.settings.catalog,
            self.settings.retry.max_retries,
        )?;
        crate::engine::images::validate(&self.settings.adapters, &req)
    }

    /// A `POST /api/v1/rerank` body, as Switchyard would read it.
    pub fn rerank<'a>(&self, body: &'a [u8]) -> Result<RerankRequest<'a>, GatewayError> {
        rerank::parse(
            body,
            &self.settings.catalog,
            self.settings.retry.max_retries,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"
providers:
  openai: {kind: openai, api_key: "${KEY}", base_url: "https://api.openai.com/v1"}
  cohere: {kind: cohere, api_key: "k", base_url: "https://api.cohere.com"}
models:
  tts-1: {family: openai-tts, targets: [{provider: openai, model: tts-1}]}
  rerank-v3.5: {family: cohere-rerank, targets: [{provider: cohere, model: rerank-v3.5}]}
"#;

    fn lookup(name: &str) -> Option<String> {
        (name == "KEY").then(|| "sk-validator-test".to_string())
    }

    #[test]
    fn validates_against_providers_and_models_alone() {
        let v = Validator::from_yaml(DOC, &lookup).unwrap();
        assert!(v.settings.catalog().get("tts-1").is_some());
        let ok = v
            .speech(br#"{"model":"tts-1","input":"hi","voice":"alloy"}"#)
            .unwrap();
        assert_eq!(ok.model.name, "tts-1");
        let err = v
            .speech(br#"{"model":"tts-1","input":"hi","voice":"alloy","speed":9}"#)
            .unwrap_err();
        assert_eq!(err.status(), 400);
        assert!(String::from_utf8_lossy(&err.body()).contains("speed"));
        let err = v
            .rerank(br#"{"model":"tts-1","query":"q","documents":["a"]}"#)
            .unwrap_err();
        assert_eq!(err.status(), 400);
        assert!(v
            .rerank(br#"{"model":"rerank-v3.5","query":"q","documents":["a"]}"#)
            .is_ok());
    }

    #[test]
    fn other_sections_and_bad_models_are_refused_with_their_path() {
        let e = Validator::from_yaml("listeners: []\nmodels: {}\n", &lookup)
            .err()
            .unwrap();
        assert!(e[0].starts_with("listeners: unknown key"), "{e:?}");
        let e = Validator::from_yaml(
            "models:\n  x: {family: no-such-family, targets: [{provider: p, model: m}]}\n",
            &lookup,
        )
        .err()
        .unwrap();
        assert!(e.iter().any(|p| p.contains("models.x")), "{e:?}");
    }
}
