//! Image inputs the gateway downloads and the images and tasks it keeps (`images:`): download
//! bounds, hosted files' and tasks' lifetimes and stores, polling and heartbeats, checked.

use std::time::Duration;

use super::file::ImagesFile;
use crate::upstream::guard::DownloadPolicy;

/// Image inputs the gateway downloads and images it hosts (see `config::file::ImagesFile`).
#[derive(Debug, Clone)]
pub struct ImageSettings {
    /// What may be downloaded on a caller's behalf (reference images given as URLs).
    pub download: DownloadPolicy,
    /// How long a hosted image stays available.
    pub file_ttl: Duration,
    /// Most bytes of hosted images kept in memory without Redis (the oldest go first).
    pub file_store_bytes: usize,
    /// Most bytes of tasks (and synchronous answers) kept in memory without Redis.
    pub task_store_bytes: usize,
    /// How long a finished asynchronous task can be read.
    pub task_ttl: Duration,
    /// Without a trailing `/`.
    pub public_base_url: Option<String>,
    /// Natively asynchronous providers: time between polls of one task.
    pub poll_interval: Duration,
    /// Natively asynchronous providers: longest a synchronous request waits.
    pub sync_wait: Duration,
    /// Longest an asynchronous task runs, from its creation.
    pub task_wait: Duration,
    /// Time between a running task's heartbeats.
    pub task_heartbeat: Duration,
    /// Heartbeat silence after which another instance takes a task over.
    pub task_lost_after: Duration,
}

/// `images:`, checked: every bound above 0, heartbeats that allow two to be missed, an
/// http(s) `public_base_url`.
pub(super) fn image_settings(f: &ImagesFile, errors: &mut Vec<String>) -> ImageSettings {
    let at = "switchyard.images";
    for (key, zero) in [
        ("max_download_bytes", f.max_download_bytes == 0),
        ("download_timeout_ms", f.download_timeout_ms == 0),
        ("file_ttl_seconds", f.file_ttl_seconds == 0),
        ("file_store_bytes", f.file_store_bytes == 0),
        ("task_store_bytes", f.task_store_bytes == 0),
        ("task_ttl_seconds", f.task_ttl_seconds == 0),
        ("poll_interval_ms", f.poll_interval_ms == 0),
        ("sync_wait_seconds", f.sync_wait_seconds == 0),
        ("task_wait_seconds", f.task_wait_seconds == 0),
        ("task_heartbeat_ms", f.task_heartbeat_ms == 0),
    ] {
        if zero {
            errors.push(format!("{at}.{key}: must be greater than 0"));
        }
    }
    // Two heartbeats may be missed (a slow store, a busy instance) before a live task is taken
    // over by another instance.
    if f.task_lost_after_ms < 3 * f.task_heartbeat_ms {
        errors.push(format!(
            "{at}.task_lost_after_ms: must be at least three times task_heartbeat_ms ({})",
            3 * f.task_heartbeat_ms
        ));
    }
    let public_base_url = f.public_base_url.as_deref().and_then(|u| {
        let u = u.trim().trim_end_matches('/');
        match u.parse::<http::Uri>() {
            Ok(uri)
                if matches!(uri.scheme_str(), Some("http" | "https"))
                    && uri.host().is_some()
                    && uri.query().is_none() =>
            {
                Some(u.to_string())
            }
            _ => {
                errors.push(format!(
                    "{at}.public_base_url: `{u}` is not an http(s) URL such as https://ai.example.com"
                ));
                None
            }
        }
    });
    ImageSettings {
        download: DownloadPolicy {
            allow_private_urls: f.allow_private_urls,
            max_download_bytes: f.max_download_bytes,
            download_timeout: Duration::from_millis(f.download_timeout_ms),
        },
        file_ttl: Duration::from_secs(f.file_ttl_seconds),
        file_store_bytes: f.file_store_bytes,
        task_store_bytes: f.task_store_bytes,
        task_ttl: Duration::from_secs(f.task_ttl_seconds),
        public_base_url,
        poll_interval: Duration::from_millis(f.poll_interval_ms),
        sync_wait: Duration::from_secs(f.sync_wait_seconds),
        task_wait: Duration::from_secs(f.task_wait_seconds),
        task_heartbeat: Duration::from_millis(f.task_heartbeat_ms),
        task_lost_after: Duration::from_millis(f.task_lost_after_ms),
    }
}
