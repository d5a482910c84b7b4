//! Google's Gemini image models on Vertex AI: `POST /v1/projects/{project}/locations/{location}/
//! publishers/google/models/{model}:generateContent`, on `{location}-aiplatform.googleapis.com`
//! (or `aiplatform.googleapis.com` for the `global` location), authorised by an OAuth 2.0 access
//! token of a Google service account (`upstream::google_auth`).
//!
//! The body and the answer are the Gemini API's (`contents`/`generationConfig.imageConfig` in,
//! `candidates[].content.parts[].inlineData` and `usageMetadata` out; Google's error envelope):
//! this module reuses the Gemini adapter's functions and adds only the path and the credentials.
//! The one error this kind reads differently is a rejected token (401 `UNAUTHENTICATED`), which
//! the shared Google classification already counts as the operator's credentials.
//!
//! The account's `api_key` is the service account's JSON key itself (typically
//! `"${GOOGLE_SERVICE_ACCOUNT_JSON}"`), or `credentials_file` names the file holding it. The
//! project is `project`, or the key's own `project_id`; the location is `location` (default
//! `global`); `token_url` overrides Google's token endpoint (tests point it at a fake).

use crate::api::adapter::{Adapters, ImageAdapter};
use crate::api::images::ImageRequest;
use crate::catalog::Target;
use crate::common::error::{GatewayError, UpstreamError};
use crate::common::images::ImageAnswer;
use crate::common::native::{NativeRequest, Prepared};
use crate::providers::gemini;
use crate::providers::registry::Kind;
use crate::upstream::google_auth::{ServiceAccount, TokenSource, DEFAULT_TOKEN_URL};
use crate::upstream::provider::{Auth, Provider};

/// The location whose host has no location prefix, and the default one.
const GLOBAL: &str = "global";

/// Settings only Vertex AI takes.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Settings {
    /// The Google Cloud project (default: the key's `project_id`).
    #[serde(default)]
    pub project: Option<String>,
    /// The Vertex AI location (`global`, `us-central1`, …); default `global`.
    #[serde(default)]
    pub location: Option<String>,
    /// A service-account key file to read instead of `api_key`.
    #[serde(default)]
    pub credentials_file: Option<String>,
    /// The OAuth 2.0 token endpoint (default Google's).
    #[serde(default)]
    pub token_url: Option<String>,
}

/// The image adapter: Gemini's body and answer under Vertex's model path.
struct Images {
    /// `/v1/projects/{project}/locations/{location}/publishers/google/models/`.
    models_path: String,
}

impl ImageAdapter for Images {
    fn request(
        &self,
        target: &Target,
        req: &ImageRequest<'_>,
        _n: u64,
    ) -> Result<Prepared, GatewayError> {
        let model = target
            .native_model
            .trim_start_matches("publishers/google/models/");
        let mut path = String::with_capacity(self.models_path.len() + model.len() + 16);
        path.push_str(&self.models_path);
        path.push_str(model);
        path.push_str(":generateContent");
        Ok(Prepared::Http(NativeRequest::post_json(
            path,
            gemini::image_body(req)?,
        )))
    }

    fn validate(&self, target: &Target, req: &ImageRequest<'_>) -> Result<(), GatewayError> {
        gemini::validate(target, req)
    }

    fn response(
        &self,
        provider: &Provider,
        req: &ImageRequest<'_>,
        headers: &http::HeaderMap,
        body: &[u8],
    ) -> Result<ImageAnswer, UpstreamError> {
        gemini::image_response(provider, req, headers, body).map(ImageAnswer::Images)
    }

    fn input_as_bytes(&self) -> bool {
        true
    }
}

/// A setting's value; an empty one (an unset `${VAR:-}`) is no value.
pub(crate) fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// A path segment as the config gives it: letters, digits, `-`, `_` and `.` only (project ids
/// and locations are such), so nothing in it can change the path. `kind` names the account's
/// kind in the message.
pub(crate) fn segment(kind: &str, name: &str, value: &str) -> Result<(), String> {
    if value.is_empty()
        || !value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(format!(
            "{kind} {name} `{value}` is not a Google Cloud {name} name"
        ));
    }
    Ok(())
}

/// A Google Cloud account's credentials and project, read the same way by every Google Cloud
/// kind (`kind` names it in messages): the service-account key from `api_key` or
/// `credentials_file` (not both), its access tokens minted off the request path
/// ([`TokenSource`]), and the project from `project` or the key's `project_id`. No key: the
/// account is disabled ([`Auth::Missing`]), like any keyless account.
pub(crate) fn credentials(
    kind: &str,
    settings: &Settings,
    key: &str,
) -> Result<(Auth, String), String> {
    let file;
    let json = match given(&settings.credentials_file) {
        Some(path) if !key.is_empty() => {
            return Err(format!(
                "{kind} takes its service-account key from api_key or credentials_file ({path}), not both"
            ))
        }
        Some(path) => {
            file = std::fs::read_to_string(path)
                .map_err(|e| format!("reading credentials_file {path}: {e}"))?;
            file.as_str()
        }
        None => key,
    };
    let (auth, project) = if json.trim().is_empty() {
        (
            Auth::Missing,
            given(&settings.project).unwrap_or_default().to_string(),
        )
    } else {
        let service = ServiceAccount::from_json(json)?;
        let project = given(&settings.project)
            .map(str::to_string)
            .or_else(|| service.project_id.clone())
            .ok_or_else(|| {
                format!(
                    "{kind} needs a project: set project, or use a key that names its project_id"
                )
            })?;
        let token_url = given(&settings.token_url).unwrap_or(DEFAULT_TOKEN_URL);
        let source = TokenSource::new(service, token_url)?;
        (Auth::Signed(Box::new(source)), project)
    };
    if !project.is_empty() {
        segment(kind, "project", &project)?;
    }
    Ok((auth, project))
}

/// The Vertex AI kind: a service account's access tokens; Gemini image models.
pub(crate) fn kind(settings: &Settings, key: &str) -> Result<Kind, String> {
    let location = given(&settings.location).unwrap_or(GLOBAL);
    segment("vertex", "location", location)?;
    let (auth, project) = credentials("vertex", settings, key)?;
    let images = Images {
        models_path: format!(
            "/v1/projects/{project}/locations/{location}/publishers/google/models/"
        ),
    };
    Ok(Kind {
        auth,
        errors: gemini::error_response,
        remote: true,
        result_hosts: &[],
        adapters: Adapters {
            images: Some(Box::new(images)),
            ..Adapters::default()
        },
    })
}
