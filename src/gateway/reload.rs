//! Live reload of the gateway's settings: [`GatewayState::reload`] swaps the whole
//! [`GatewaySettings`] at once, so a request or task job that took a snapshot before finishes on
//! it, and every one that starts after sees the new one.
//!
//! What a reload applies: API keys and JWT settings, provider accounts (keys, URLs, timeouts, CA
//! files), models and their targets, capability overrides, the number of retries, body limits,
//! image settings read per request (download policy, public URL, polling, task deadlines),
//! the access-log format, the client body deadlines and write timeout, the retry back-off (the
//! upstream's, swapped beside the settings). What needs a restart (or a `-u` upgrade), because
//! it was built into long-lived parts at start: listeners (addresses, caps, TLS file paths —
//! certificates themselves reload by mtime), the metrics address, Redis (`store:`), the limits'
//! mode (`auth.limits_mode` and its settings), the usage
//! ledger (`ledger:`), the client
//! head and idle timeouts, the DNS cache's TTL (the upstream's), and the hosted-file store's
//! size and TTL. A reload that changes any of those applies the rest and [`restart_only`] names
//! each such field, for a warning.
//!
//! Runtime state lives outside the settings and so survives a reload: metrics, the file and task
//! stores, the upstream connection pool, admission counters, task jobs.

use std::sync::Arc;

use super::GatewayState;
use crate::config::GatewaySettings;

impl GatewayState {
    /// Put `new` in force for every request that starts from now on. Returns the fields whose
    /// change does not take effect until a restart (empty when none changed); the caller warns.
    pub fn reload(&self, mut new: GatewaySettings) -> Vec<String> {
        let old = self.live.load();
        // The database keys' snapshot is runtime state: the new settings read the same one.
        if let Some(handle) = &self.db_keys {
            new.auth.attach_db(handle.clone());
        }
        let ignored = restart_only(&old, &new);
        // Health is kept by target name, so targets that stay keep theirs; new ones get cells now.
        self.upstream.health.set_policy(new.ejection);
        super::make_health_cells(&new, &self.upstream);
        self.upstream.retry.store(Arc::new(new.retry));
        super::lifecycle::record_shutdowns(&self.metrics, &new);
        self.live.store(Arc::new(new));
        self.metrics.config_loaded(true, true);
        ignored
    }

    /// Count a reload that failed (the configuration in force stays).
    pub fn reload_failed(&self) {
        self.metrics.config_loaded(false, true);
    }
}

/// The tenants' sync task and the management listener are made once, at start (the admin
/// credentials reload: the listener reads them from the settings in force).
fn tenants_restart_only(
    old: &GatewaySettings,
    new: &GatewaySettings,
    note: &mut impl FnMut(bool, String),
) {
    note(old.tenants != new.tenants, "switchyard.tenants".into());
    let admin = |s: &GatewaySettings| s.admin.as_ref().map(|a| a.address);
    note(admin(old) != admin(new), "switchyard.admin".into());
}

/// The fields that differ between `old` and `new` but only take effect on a restart, by their
/// YAML path.
pub(crate) fn restart_only(old: &GatewaySettings, new: &GatewaySettings) -> Vec<String> {
    let mut changed = Vec::new();
    let mut note = |differs: bool, path: String| {
        if differs {
            changed.push(path);
        }
    };
    if old.listeners.len() != new.listeners.len() {
        note(true, "switchyard.listeners".into());
    } else {
        for (i, (a, b)) in old.listeners.iter().zip(&new.listeners).enumerate() {
            let at = |field: &str| format!("switchyard.listeners[{i}].{field}");
            note(a.name != b.name, at("name"));
            note(a.region != b.region, at("region"));
            note(a.address != b.address, at("address"));
            note(
                a.max_connections != b.max_connections,
                at("max_connections"),
            );
            note(a.max_in_flight != b.max_in_flight, at("max_in_flight"));
            let files = |l: &crate::config::Listener| {
                l.tls
                    .as_ref()
                    .map(|t| (t.cert_file.clone(), t.key_file.clone()))
            };
            note(files(a) != files(b), at("tls"));
        }
    }
    note(old.metrics != new.metrics, "switchyard.metrics".into());
    // The ledger's writer is built once, at start.
    note(old.ledger != new.ledger, "switchyard.ledger".into());
    tenants_restart_only(old, new, &mut note);
    // The response cache's store is made once (each model's `cache:` reloads with the catalog).
    note(old.cache != new.cache, "switchyard.cache".into());
    // So is the trace exporter.
    note(old.tracing != new.tracing, "switchyard.tracing".into());
    let redis = |s: &GatewaySettings| {
        s.redis
            .as_ref()
            .map(|r| (r.key_prefix().to_string(), r.timeout()))
    };
    // The connection's URL is not kept readable (it may hold a password); a Redis that was on
    // stays on, and its prefix and timeout are compared.
    note(redis(old) != redis(new), "switchyard.store".into());
    // The limiter (`limits::Limiter`) is built once, in its mode, with its reconciling task.
    note(
        old.auth.approximate() != new.auth.approximate(),
        "switchyard.auth.limits_mode".into(),
    );
    // The edge (`server/edge.rs`) keeps these from the start; the body's deadlines and the write
    // timeout are read per request.
    let (a, b) = (old.clients, new.clients);
    note(
        a.head_timeout != b.head_timeout,
        "switchyard.clients.head_timeout_ms".into(),
    );
    note(
        a.idle_timeout != b.idle_timeout,
        "switchyard.clients.idle_timeout_ms".into(),
    );
    note(
        old.dns_ttl != new.dns_ttl,
        "switchyard.dns_ttl_seconds".into(),
    );
    note(
        old.images.file_ttl != new.images.file_ttl,
        "switchyard.images.file_ttl_seconds".into(),
    );
    note(
        old.images.file_store_bytes != new.images.file_store_bytes,
        "switchyard.images.file_store_bytes".into(),
    );
    note(
        old.images.task_store_bytes != new.images.task_store_bytes,
        "switchyard.images.task_store_bytes".into(),
    );
    changed
}
