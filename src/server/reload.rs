//! Reloading the configuration while serving: [`Reloader`] re-reads where the configuration came
//! from (the `-c` file, or the embedded default with the environment read again) and puts it in
//! force with [`GatewayState::reload`]; [`SighupService`] does so on every `SIGHUP`.
//!
//! Pingora's server takes SIGTERM, SIGINT and SIGQUIT (`UnixShutdownSignalWatch` in
//! pingora-core's `src/server/mod.rs`, 0.9) and leaves SIGHUP alone, so this service is its only
//! listener. Until the service has started, SIGHUP has
//! its default action (the process ends): it logs `listening for SIGHUP` at info once it listens.

use std::sync::Arc;

use async_trait::async_trait;
use pingora::server::configuration::ServerConf;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::caps::lifecycle::Clock;
use crate::config::{self, Settings};
use crate::gateway::GatewayState;
use crate::providers::external::ProviderKinds;

/// Where the configuration is read from, again on each reload.
#[derive(Debug, Clone)]
pub enum ConfigSource {
    /// A YAML file (`-c`); `${VAR}` read from the environment.
    File(String),
    /// The configuration compiled into the binary, `${VAR}` read from the environment.
    Embedded,
    /// A YAML file of a gateway hosted in another Pingora server: as [`ConfigSource::File`],
    /// but `switchyard.listeners` may be absent (the host owns the sockets).
    HostedFile(String),
}

impl ConfigSource {
    /// Read and validate the configuration; every problem, with its YAML path, on failure.
    pub fn load(&self) -> Result<Settings, Vec<String>> {
        self.load_at(&Clock::System)
    }

    /// [`ConfigSource::load`], models' lifecycles judged by `clock` (the running gateway's).
    pub fn load_at(&self, clock: &Clock) -> Result<Settings, Vec<String>> {
        self.load_at_with(clock, &ProviderKinds::new())
    }

    /// [`ConfigSource::load_at`], knowing the provider kinds a host registered (a reload passes
    /// those the running configuration was loaded with).
    pub fn load_at_with(
        &self,
        clock: &Clock,
        kinds: &ProviderKinds,
    ) -> Result<Settings, Vec<String>> {
        let loader = config::Loader::new().clock(clock).kinds(kinds);
        match self {
            ConfigSource::File(path) => loader.file(path),
            ConfigSource::HostedFile(path) => loader.hosted().file(path),
            ConfigSource::Embedded => {
                loader.text(config::DEFAULT_CONFIG, &|name| std::env::var(name).ok())
            }
        }
    }

    /// How logs name the source.
    pub fn name(&self) -> &str {
        match self {
            ConfigSource::File(path) | ConfigSource::HostedFile(path) => path,
            ConfigSource::Embedded => "embedded conf/switchyard.yaml",
        }
    }
}

/// Reloads one gateway's configuration from its source (hosts use `embed::Builder::reload_from`;
/// this is for the crate's own binary and tests).
#[doc(hidden)]
pub struct Reloader {
    /// The gateway whose settings a reload swaps.
    pub state: Arc<GatewayState>,
    /// Where the configuration is read from on each reload.
    pub source: ConfigSource,
    /// Pingora's settings as the source gave them at start (they never reload).
    pub server: ServerConf,
}

/// What a successful reload did not apply.
#[derive(Debug, Default)]
pub struct Reloaded {
    /// YAML paths of changed settings that only a restart (or `-u` upgrade) applies.
    pub needs_restart: Vec<String>,
}

impl Reloader {
    /// Read the source and put it in force. An invalid configuration leaves the running one in
    /// force; each problem is logged (error) with a summary line, and returned.
    pub fn reload(&self) -> Result<Reloaded, Vec<String>> {
        let source = self.source.name();
        let running = self.state.settings();
        let clock = running.catalog.clock().clone();
        let settings = match self.source.load_at_with(&clock, &running.kinds) {
            Ok(s) => s,
            Err(problems) => {
                for p in &problems {
                    log::error!("reload: {source}: {p}");
                }
                log::error!(
                    "reload: {source}: {} problem(s); the running configuration stays in force",
                    problems.len()
                );
                self.state.reload_failed();
                return Err(problems);
            }
        };
        for w in &settings.gateway.warnings {
            log::warn!("reload: {source}: {w}");
        }
        let mut needs_restart = self.state.reload(settings.gateway);
        if settings.server != self.server {
            needs_restart.push("Pingora's top-level settings (threads, pid_file, ...)".into());
        }
        for field in &needs_restart {
            log::warn!("reload: {source}: {field} changed; it takes effect only after a restart");
        }
        log::info!("reload: {source}: configuration reloaded");
        Ok(Reloaded { needs_restart })
    }
}

/// The background service that reloads on `SIGHUP`.
pub(crate) struct SighupService(pub(crate) Reloader);

#[async_trait]
impl BackgroundService for SighupService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                log::error!("reload: cannot listen for SIGHUP ({e}); reload is off");
                return;
            }
        };
        log::info!(
            "reload: listening for SIGHUP (reloads {})",
            self.0.source.name()
        );
        loop {
            tokio::select! {
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        return;
                    }
                }
                got = hangups.recv() => {
                    if got.is_none() {
                        return;
                    }
                    // Loading blocks (files, CA stores) for milliseconds, on this service's own
                    // runtime, not the entry points'. Pingora may run it on a current-thread
                    // runtime, where `block_in_place` would panic.
                    let _ = self.0.reload();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_configuration_reloads_from_the_binary() {
        let settings = ConfigSource::Embedded
            .load()
            .expect("the embedded config loads");
        assert!(!settings.gateway.listeners.is_empty());
        assert_eq!(
            ConfigSource::Embedded.name(),
            "embedded conf/switchyard.yaml"
        );
    }

    #[test]
    fn a_missing_file_is_one_problem_naming_it() {
        let problems = ConfigSource::File("/nonexistent/switchyard.yaml".into())
            .load()
            .err()
            .expect("a missing file fails");
        assert_eq!(problems.len(), 1);
        assert!(problems[0].starts_with("/nonexistent/switchyard.yaml"));
    }

    #[test]
    fn a_hosted_file_reloads_without_listeners() {
        let path = std::env::temp_dir().join(format!(
            "switchyard-hosted-reload-{}.yaml",
            std::process::id()
        ));
        let yaml = "switchyard:\n  providers: {builtin: {kind: local}}\n  models:\n    bm25: {family: local-rerank, targets: [{provider: builtin, model: bm25}]}\n";
        std::fs::write(&path, yaml).unwrap();
        let path = path.to_string_lossy().into_owned();
        let hosted = ConfigSource::HostedFile(path.clone()).load();
        let own = ConfigSource::File(path.clone()).load();
        let _ = std::fs::remove_file(&path);
        assert!(hosted.expect("a host's file").gateway.listeners.is_empty());
        assert!(own.is_err(), "the binary still needs listeners");
        assert_eq!(ConfigSource::HostedFile(path.clone()).name(), path);
    }
}
