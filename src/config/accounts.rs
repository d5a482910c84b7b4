//! The provider accounts (`providers:`): each account's kind (built in or registered by the host),
//! key, endpoints and trusted CA, as the upstream layer's [`Provider`]s, with their adapters
//! registered.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_yaml::Value;

use super::file::ProviderFile;
use crate::api::adapter::Registry;
use crate::providers::external::{builtin_kinds, ProviderKinds};
use crate::providers::registry;
use crate::upstream::endpoint::{Endpoint, Timeouts};
use crate::upstream::provider::{Account, Provider};
use crate::upstream::trust::CaFile;

/// The accounts `declared`, by name, and their adapters (indexed by the account's id). An account
/// with an error is left out (the error keeps the gateway from starting).
pub(super) fn providers(
    declared: &BTreeMap<String, ProviderFile>,
    kinds: &ProviderKinds,
    errors: &mut Vec<String>,
) -> (HashMap<String, Arc<Provider>>, Registry) {
    let mut providers: HashMap<String, Arc<Provider>> = HashMap::new();
    let mut adapters = Registry::default();
    for (name, p) in declared {
        let at = format!("switchyard.providers.{name}");
        let key = p.api_key.trim();
        let (kind, discovery) = match provider_kind(&p.kind, name, key, kinds) {
            Ok(built) => built,
            Err(m) => {
                errors.push(format!("{at}{m}"));
                continue;
            }
        };
        let Some((default_ep, regional)) = endpoints(p, kind.remote, &at, errors) else {
            continue;
        };
        let account = Account {
            name: name.clone(),
            // `provider_config` read it, so it is there and a string.
            kind: p
                .kind
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            key: key.to_string(),
            default_endpoint: default_ep,
            region_endpoints: regional,
            max_response_bytes: p.max_response_bytes,
            result_hosts: p
                .result_hosts
                .clone()
                .unwrap_or_else(|| kind.result_hosts.iter().map(|h| h.to_string()).collect()),
        };
        let id = adapters.push(kind.adapters);
        adapters.discover(id, discovery);
        let mut provider = Provider::new(account, id, kind.auth, kind.errors);
        provider.send_trace_context = p.trace_context;
        if !provider.enabled() {
            log::warn!("provider {name} has no api_key: its models will answer 503");
        }
        providers.insert(name.clone(), Arc::new(provider));
    }
    (providers, adapters)
}

/// An account's endpoints: its `base_url` (a remote kind needs one, an in-process kind takes
/// none) and its `region_base_urls`, each trusting the account's `tls.ca_file` when it names one.
/// `None` when the CA file or the `base_url` is wrong (reported); a wrong regional URL is
/// reported and left out.
fn endpoints(
    p: &ProviderFile,
    remote: bool,
    at: &str,
    errors: &mut Vec<String>,
) -> Option<(Option<Endpoint>, HashMap<String, Endpoint>)> {
    let t = &p.timeouts;
    let timeouts = Timeouts {
        connect: Duration::from_millis(t.connect_ms),
        total_connect: Duration::from_millis(t.total_connect_ms),
        read: Duration::from_millis(t.read_ms),
        write: Duration::from_millis(t.write_ms),
        idle: Duration::from_millis(t.idle_ms),
    };
    let ca = ca_file(p, remote, at, errors)?;
    let trusting = |e: Endpoint| match &ca {
        Some(ca) => e.trusting(ca),
        None => e,
    };
    let default_ep = match (&p.base_url, remote) {
        (Some(url), true) => match Endpoint::parse(url, timeouts) {
            Ok(e) => Some(trusting(e)),
            Err(m) => {
                errors.push(format!("{at}.base_url: {m}"));
                return None;
            }
        },
        (None, true) => {
            errors.push(format!("{at}.base_url: required for this kind"));
            return None;
        }
        (Some(_), false) => {
            errors.push(format!(
                "{at}.base_url: this kind runs in-process and takes none"
            ));
            return None;
        }
        (None, false) => None,
    };
    let mut regional = HashMap::new();
    for (region, url) in &p.region_base_urls {
        match Endpoint::parse(url, timeouts) {
            Ok(e) => {
                regional.insert(region.clone(), trusting(e));
            }
            Err(m) => errors.push(format!("{at}.region_base_urls.{region}: {m}")),
        }
    }
    Some((default_ep, regional))
}

/// The account's `tls.ca_file`, read: `Some(None)` when it names none, `None` when it cannot be
/// read or the kind connects to nothing (reported).
fn ca_file(
    p: &ProviderFile,
    remote: bool,
    at: &str,
    errors: &mut Vec<String>,
) -> Option<Option<CaFile>> {
    match (&p.tls.ca_file, remote) {
        (Some(path), true) => match CaFile::load(path) {
            Ok(ca) => Some(Some(ca)),
            Err(m) => {
                errors.push(format!("{at}.tls.ca_file: {m}"));
                None
            }
        },
        (Some(_), false) => {
            errors.push(format!(
                "{at}.tls.ca_file: this kind runs in-process and connects to nothing"
            ));
            None
        }
        (None, _) => Some(None),
    }
}

/// An account's kind, built in or registered by the host, with its list endpoints (a registered
/// kind has none); an error starts with the key at fault (`.kind: …`, `.api_key: …`) or, from a
/// registered kind's own build, with `: `.
fn provider_kind(
    raw: &serde_yaml::Mapping,
    account: &str,
    key: &str,
    kinds: &ProviderKinds,
) -> Result<(registry::Kind, crate::api::discovery::Discovery), String> {
    let name = raw.get("kind").and_then(Value::as_str).unwrap_or_default();
    let mut own = raw.clone();
    own.remove("kind");
    if let Some(built) = kinds.build(name, account, key, &own) {
        return built
            .map(|k| (k, Default::default()))
            .map_err(|m| format!(": {m}"));
    }
    if raw.contains_key("kind") && !builtin_kinds().contains(&name) {
        return Err(format!(".kind: {}", kinds.unknown(name)));
    }
    let config = provider_config(raw).map_err(|(field, m)| format!(".{field}: {m}"))?;
    let kind = registry::build(&config, key).map_err(|m| format!(".api_key: {m}"))?;
    Ok((kind, registry::discovery(&config)))
}

/// A provider's typed config from its `kind` and the keys only that kind takes; an error names
/// the key at fault.
fn provider_config(
    raw: &serde_yaml::Mapping,
) -> Result<registry::ProviderConfig, (String, String)> {
    serde_yaml::from_value(Value::Mapping(raw.clone())).map_err(|e| {
        let m = e.to_string();
        // serde names an unknown key as "unknown field `x`, expected …".
        let key = m
            .strip_prefix("unknown field `")
            .and_then(|rest| rest.split('`').next())
            .map(str::to_string);
        match key {
            Some(key) => (key, "not a setting of this provider kind".to_string()),
            None => ("kind".to_string(), m),
        }
    })
}
