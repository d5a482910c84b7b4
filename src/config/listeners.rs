//! The entry points (`listeners:`): each one's address, bounds and TLS certificate, read and
//! checked at load; and the metrics listener's address, which no entry point may share.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::file::{ListenerFile, ListenerTlsFile, MetricsFile};
use super::load::Sockets;
use super::tls;

/// One entry point.
#[derive(Debug, Clone)]
pub(crate) struct Listener {
    /// The entry point's name, unique among the listeners.
    pub(crate) name: String,
    /// Which of the providers' `region_base_urls` this entry point's requests use.
    pub(crate) region: String,
    /// The socket address it listens on.
    pub(crate) address: SocketAddr,
    /// Open client connections it serves; past it, `503 overloaded`.
    pub(crate) max_connections: usize,
    /// Requests it handles at once; past it, `503 overloaded`.
    pub(crate) max_in_flight: usize,
    /// TLS on this entry point (`None`: plain TCP).
    pub(crate) tls: Option<ListenerTls>,
}

/// A listener's certificate files and the certificate read from them at load.
#[derive(Clone)]
pub(crate) struct ListenerTls {
    /// Path of the PEM certificate chain.
    pub(crate) cert_file: String,
    /// Path of the PEM private key.
    pub(crate) key_file: String,
    /// How often the files are checked for a replacement (`None`: never).
    pub(crate) reload_interval: Option<Duration>,
    /// The chain and key the files held when the configuration was loaded, checked.
    pub(crate) certified: Arc<rustls::sign::CertifiedKey>,
}

impl std::fmt::Debug for ListenerTls {
    // The paths only: never anything of the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerTls")
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .field("reload_interval", &self.reload_interval)
            .finish_non_exhaustive()
    }
}

/// The entry points `declared`, checked: at least one unless a host owns the sockets, unique
/// names, bounds above 0, `IP:port` addresses, readable certificate files.
pub(super) fn listeners(
    declared: &[ListenerFile],
    sockets: Sockets,
    errors: &mut Vec<String>,
) -> Vec<Listener> {
    let mut listeners = Vec::new();
    if declared.is_empty() && sockets == Sockets::Own {
        errors.push("switchyard.listeners: at least one entry point is required".into());
    }
    for (i, l) in declared.iter().enumerate() {
        for (key, v) in [
            ("max_connections", l.max_connections),
            ("max_in_flight", l.max_in_flight),
        ] {
            if v == 0 {
                errors.push(format!(
                    "switchyard.listeners[{i}].{key}: must be greater than 0"
                ));
            }
        }
        if listeners.iter().any(|x: &Listener| x.name == l.name) {
            errors.push(format!(
                "switchyard.listeners[{i}].name: `{}` is used twice",
                l.name
            ));
        }
        let tls = l.tls.as_ref().and_then(|t| listener_tls(i, t, errors));
        match l.address.parse::<SocketAddr>() {
            Ok(address) => listeners.push(Listener {
                name: l.name.clone(),
                region: l.region.clone(),
                address,
                max_connections: l.max_connections,
                max_in_flight: l.max_in_flight,
                tls,
            }),
            Err(_) => errors.push(format!(
                "switchyard.listeners[{i}].address: `{}` is not an IP:port address",
                l.address
            )),
        }
    }
    listeners
}

/// A listener's `tls:`: its files are read and checked now, so a bad one stops the start (and
/// `switchyard -t`) with the file named, instead of a panic in Pingora's listener.
fn listener_tls(i: usize, t: &ListenerTlsFile, errors: &mut Vec<String>) -> Option<ListenerTls> {
    let at = format!("switchyard.listeners[{i}].tls");
    let mut ok = true;
    for (key, path) in [("cert_file", &t.cert_file), ("key_file", &t.key_file)] {
        if path.trim().is_empty() {
            errors.push(format!("{at}.{key}: required (a PEM file)"));
            ok = false;
        }
    }
    if !ok {
        return None;
    }
    match tls::load(&t.cert_file, &t.key_file) {
        Ok(certified) => Some(ListenerTls {
            cert_file: t.cert_file.clone(),
            key_file: t.key_file.clone(),
            reload_interval: (t.reload_interval_ms > 0)
                .then(|| Duration::from_millis(t.reload_interval_ms)),
            certified,
        }),
        Err(m) => {
            errors.push(format!("{at}: {m}"));
            None
        }
    }
}

/// The metrics listener's address: an `IP:port` that no entry point uses (metrics are never
/// served to the public).
pub(super) fn metrics_address(
    f: Option<&MetricsFile>,
    listeners: &[Listener],
    errors: &mut Vec<String>,
) -> Option<SocketAddr> {
    let f = f?;
    if !cfg!(feature = "metrics") {
        errors.push(format!(
            "switchyard.metrics: {}; remove the section, or build with `--features metrics`",
            crate::metrics::NO_METRICS
        ));
        return None;
    }
    let Ok(address) = f.address.parse::<SocketAddr>() else {
        errors.push(format!(
            "switchyard.metrics.address: `{}` is not an IP:port address",
            f.address
        ));
        return None;
    };
    if let Some(l) = listeners.iter().find(|l| l.address == address) {
        errors.push(format!(
            "switchyard.metrics.address: {address} is entry point {}'s address; metrics need a \
             listener of their own",
            l.name
        ));
        return None;
    }
    Some(address)
}
