//! The credentials a configuration file holds, registered with the logger's filter as the file is
//! read, before anything else can print them.

use super::file::GatewayFile;

/// Register every credential the file holds with the logger's filter, so none is ever printed
/// in full, whatever text carries it (a provider echoing its key, a URL in an error).
pub(super) fn keep_secrets_out_of_logs(file: &GatewayFile) {
    for p in file.providers.values() {
        crate::logging::redact_also(&p.api_key);
        // Kind-specific credentials (Kling's `secret_key`, …).
        for (k, v) in &p.kind {
            if let (Some(k), Some(v)) = (k.as_str(), v.as_str()) {
                if crate::logging::sensitive_name(k) {
                    crate::logging::redact_also(v);
                }
            }
        }
    }
    for k in &file.auth.api_keys {
        crate::logging::redact_also(k.key.as_deref().unwrap_or_default());
    }
    if let Some(jwt) = &file.auth.jwt {
        crate::logging::redact_also(jwt.hs256_secret.as_deref().unwrap_or_default());
    }
    if let Some(admin) = &file.admin {
        for k in &admin.keys {
            crate::logging::redact_also(k.key.as_deref().unwrap_or_default());
        }
        if let Some(jwt) = &admin.jwt {
            crate::logging::redact_also(jwt.hs256_secret.as_deref().unwrap_or_default());
        }
    }
    // `redis://user:password@host`: the password, of every Redis URL; the data nodes' password
    // under Sentinel.
    let store = &file.store;
    let sentinel = store.redis_sentinel.as_ref();
    let urls = store
        .redis_url
        .iter()
        .chain(store.redis_cluster.iter().flatten())
        .chain(sentinel.map(|s| s.urls.iter()).into_iter().flatten());
    for url in urls {
        let userinfo = url
            .split_once("://")
            .and_then(|(_, rest)| rest.split_once('@'))
            .map(|(userinfo, _)| userinfo);
        if let Some((_, password)) = userinfo.and_then(|u| u.split_once(':')) {
            crate::logging::redact_also(password);
        }
    }
    if let Some(password) = sentinel.and_then(|s| s.password.as_deref()) {
        crate::logging::redact_also(password);
    }
}
