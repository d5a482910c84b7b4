//! TLS on the entry points: HTTP/2 offered by ALPN with HTTP/1.1 alongside, TLS 1.2 and 1.3, and
//! certificates replaced without a restart or a dropped connection.
//!
//! Pingora is given a certificate resolver of ours ([`ListenerCert`]), never file paths (it
//! panics on a bad file). The resolver hands every new handshake the current certificate; a
//! replacement is swapped in atomically, so handshakes under way and connections already open
//! (their TLS session is theirs until they close) are untouched.
//!
//! A replacement is noticed by [`CertReloader`], a background service checking each listener's
//! two files every `tls.reload_interval_ms` (their modification time, size and inode, so a file
//! renamed into place or a symlink switched to a new directory counts). [`ListenerCert::reload`]
//! is the one step it takes, a plain function a signal handler can call too. Files that fail to
//! load keep the certificate in service, with one error naming the file per change.

use std::collections::HashMap;
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use async_trait::async_trait;
use pingora::listeners::tls::TlsSettings;
use pingora::listeners::ListenerConfig;
use pingora::server::ShutdownWatch;
use pingora::services::background::{background_service, BackgroundService, GenBackgroundService};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::config::{tls as cert_files, Listener, ListenerTls};

/// One TLS listener's certificate: the one in service, and where it comes from.
pub(crate) struct ListenerCert {
    listener: String,
    cert_file: String,
    key_file: String,
    reload_interval: Option<Duration>,
    current: ArcSwap<CertifiedKey>,
    /// The files as they were when last looked at (loaded, or refused): a change is a new stamp.
    seen: Mutex<Option<Stamp>>,
}

/// What tells a file apart from its replacement without reading it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

type Stamp = (FileStamp, FileStamp);

/// What [`ListenerCert::reload`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reloaded {
    /// The files have not changed since they were last looked at.
    Unchanged,
    /// New handshakes get the new certificate.
    Replaced,
    /// The files changed but do not make a usable certificate: the one in service stays. The
    /// message names the file (it is logged already).
    Refused(String),
}

impl ListenerCert {
    /// The certificate of `listener`, as the configuration loaded it.
    pub(crate) fn new(listener: &str, tls: &ListenerTls) -> ListenerCert {
        let cert = ListenerCert {
            listener: listener.to_string(),
            cert_file: tls.cert_file.clone(),
            key_file: tls.key_file.clone(),
            reload_interval: tls.reload_interval,
            current: ArcSwap::new(tls.certified.clone()),
            seen: Mutex::new(None),
        };
        // The files were read moments ago, at load: a change from now on is a replacement.
        *cert.seen() = cert.stamp();
        cert
    }

    /// Reload the files if they changed since last looked at (`force`: whether or not); swap the
    /// new certificate in if they make one, else keep the current one and log why.
    pub(crate) fn reload(&self, force: bool) -> Reloaded {
        let stamp = self.stamp();
        {
            let mut seen = self.seen();
            if !force && *seen == stamp {
                return Reloaded::Unchanged;
            }
            // Recorded before reading: a file replaced again meanwhile has a newer stamp, and is
            // read at the next check.
            *seen = stamp;
        }
        match cert_files::load(&self.cert_file, &self.key_file) {
            Ok(certified) => {
                self.current.store(certified);
                log::info!(
                    "listener {}: certificate reloaded from {}",
                    self.listener,
                    self.cert_file
                );
                Reloaded::Replaced
            }
            Err(why) => {
                log::error!(
                    "listener {}: certificate not reloaded, the current one stays: {why}",
                    self.listener
                );
                Reloaded::Refused(why)
            }
        }
    }

    /// The two files' stamps; `None` while either cannot be looked at (it is refused once, and
    /// read again when it is back).
    fn stamp(&self) -> Option<Stamp> {
        Some((file_stamp(&self.cert_file)?, file_stamp(&self.key_file)?))
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Option<Stamp>> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn file_stamp(path: &str) -> Option<FileStamp> {
    // `metadata` follows symlinks: a link switched to a new file is a new inode.
    let meta = std::fs::metadata(path).ok()?;
    Some(FileStamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode: meta.ino(),
    })
}

impl ResolvesServerCert for ListenerCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

impl fmt::Debug for ListenerCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenerCert")
            .field("listener", &self.listener)
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .finish_non_exhaustive()
    }
}

/// The certificates of every TLS entry point, by listener name.
#[derive(Default, Clone)]
pub(crate) struct EdgeTls {
    certs: HashMap<String, Arc<ListenerCert>>,
}

impl EdgeTls {
    /// The certificates of those `listeners` that serve TLS, as loaded with the configuration.
    pub(crate) fn new(listeners: &[Listener]) -> EdgeTls {
        let certs = listeners
            .iter()
            .filter_map(|l| {
                let tls = l.tls.as_ref()?;
                Some((l.name.clone(), Arc::new(ListenerCert::new(&l.name, tls))))
            })
            .collect();
        EdgeTls { certs }
    }

    /// `endpoint` with TLS when `listener` has it. `None` when its TLS cannot be set up: the
    /// entry point must then not listen at all rather than listen without TLS.
    pub(crate) fn endpoint(
        &self,
        listener: &Listener,
        endpoint: ListenerConfig,
    ) -> Option<ListenerConfig> {
        let Some(cert) = self.certs.get(&listener.name) else {
            return Some(endpoint);
        };
        // No paths: the resolver is the only source of certificates (`build` would panic on
        // bad files, and would never re-read them).
        let mut settings = match TlsSettings::intermediate("", "") {
            Ok(s) => s,
            Err(e) => {
                log::error!(
                    "listener {}: TLS not set up ({e}): not listening",
                    listener.name
                );
                return None;
            }
        };
        settings.set_cert_resolver(cert.clone());
        // ALPN: h2 preferred, http/1.1 alongside; a client offering neither gets HTTP/1.1.
        settings.enable_h2();
        Some(endpoint.tls(settings))
    }

    /// Reload every listener's certificate whose files changed (`force`: all of them).
    #[cfg(test)]
    pub(crate) fn reload_all(&self, force: bool) -> Vec<(String, Reloaded)> {
        self.certs
            .iter()
            .map(|(name, cert)| (name.clone(), cert.reload(force)))
            .collect()
    }

    /// The background service checking the files, if any listener asks for checks.
    pub(crate) fn reload_service(&self) -> Option<GenBackgroundService<CertReloader>> {
        let certs: Vec<_> = self
            .certs
            .values()
            .filter(|c| c.reload_interval.is_some())
            .cloned()
            .collect();
        (!certs.is_empty())
            .then(|| background_service("switchyard tls reload", CertReloader { certs }))
    }
}

/// Checks each TLS listener's files every `reload_interval`, until shutdown.
pub(crate) struct CertReloader {
    certs: Vec<Arc<ListenerCert>>,
}

#[async_trait]
impl BackgroundService for CertReloader {
    async fn start(&self, shutdown: ShutdownWatch) {
        let checks = self
            .certs
            .iter()
            .map(|cert| watch(cert.clone(), shutdown.clone()));
        futures_util::future::join_all(checks).await;
    }
}

async fn watch(cert: Arc<ListenerCert>, mut shutdown: ShutdownWatch) {
    let Some(every) = cert.reload_interval else {
        return;
    };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is immediate: the files were read at load, nothing to do yet.
    tick.tick().await;
    loop {
        tokio::select! {
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return;
                }
            }
            _ = tick.tick() => {
                // File system calls block: off the server's async threads.
                let c = cert.clone();
                if let Err(e) = tokio::task::spawn_blocking(move || c.reload(false)).await {
                    log::error!("listener {}: certificate check failed: {e}", cert.listener);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tls::tests::{self_signed, Dir};

    fn listener_cert(dir: &Dir, cert: &str, key: &str) -> ListenerCert {
        let (cert_file, key_file) = (dir.file("c.pem", cert), dir.file("k.pem", key));
        let tls = ListenerTls {
            certified: cert_files::load(&cert_file, &key_file).unwrap(),
            cert_file,
            key_file,
            reload_interval: Some(Duration::from_millis(10)),
        };
        ListenerCert::new("edge", &tls)
    }

    fn served(c: &ListenerCert) -> Vec<u8> {
        c.current.load().cert[0].to_vec()
    }

    /// Replace a file as an operator would: written aside, renamed into place.
    fn replace(dir: &Dir, name: &str, text: &str) {
        let aside = dir.file(&format!("{name}.new"), text);
        std::fs::rename(aside, dir.0.join(name)).unwrap();
    }

    #[test]
    fn unchanged_files_are_not_read_again() {
        let dir = Dir::new();
        let (cert, key) = self_signed("a.example");
        let c = listener_cert(&dir, &cert, &key);
        assert_eq!(c.reload(false), Reloaded::Unchanged);
        // A forced reload (a signal) reads them whatever their stamps say.
        assert_eq!(c.reload(true), Reloaded::Replaced);
    }

    #[test]
    fn a_replacement_is_served_and_a_broken_one_is_refused() {
        let dir = Dir::new();
        let (cert_a, key_a) = self_signed("a.example");
        let c = listener_cert(&dir, &cert_a, &key_a);
        let a = served(&c);

        let (cert_b, key_b) = self_signed("b.example");
        replace(&dir, "k.pem", &key_b);
        // Half replaced (the new key, the old certificate): refused, A stays.
        assert!(matches!(c.reload(false), Reloaded::Refused(m) if m.contains("does not belong")));
        assert_eq!(served(&c), a);
        // The same half-replaced files are not retried (nor logged) at every check.
        assert_eq!(c.reload(false), Reloaded::Unchanged);
        replace(&dir, "c.pem", &cert_b);
        assert_eq!(c.reload(false), Reloaded::Replaced);
        let b = served(&c);
        assert_ne!(b, a);

        replace(&dir, "c.pem", "not PEM at all");
        let Reloaded::Refused(why) = c.reload(false) else {
            panic!("a broken certificate file was taken");
        };
        assert!(why.contains("c.pem: no PEM certificate"), "{why}");
        assert_eq!(served(&c), b);
        // A file that disappears: refused once (one error logged), read again when it is back.
        std::fs::remove_file(dir.0.join("c.pem")).unwrap();
        assert!(matches!(c.reload(false), Reloaded::Refused(m) if m.contains("cannot be read")));
        assert_eq!(c.reload(false), Reloaded::Unchanged);
        assert_eq!(served(&c), b);
        replace(&dir, "c.pem", &cert_b);
        assert_eq!(c.reload(false), Reloaded::Replaced);
        assert_eq!(served(&c), b);
    }

    #[test]
    fn every_listener_is_checked_and_reported() {
        let dir = Dir::new();
        let (cert, key) = self_signed("a.example");
        let c = Arc::new(listener_cert(&dir, &cert, &key));
        let edge = EdgeTls {
            certs: HashMap::from([("edge".to_string(), c.clone())]),
        };
        assert!(edge.reload_service().is_some());
        assert_eq!(
            edge.reload_all(false),
            vec![("edge".to_string(), Reloaded::Unchanged)]
        );
    }
}
