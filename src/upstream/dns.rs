//! Asynchronous name resolution with a small TTL cache.
//!
//! `HttpPeer::new("host:443")` resolves synchronously and panics on failure (docs/architecture.md, "The upstream exchange"), so peers
//! are always built from addresses resolved here, off the runtime's worker threads, and cached so
//! the hot path does not resolve per request.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Cache = HashMap<(String, u16), (Instant, Arc<[SocketAddr]>)>;

/// Resolved addresses of `host:port`, cached for `ttl`.
pub(crate) struct Resolver {
    ttl: Duration,
    cache: Mutex<Cache>,
}

impl Resolver {
    pub(crate) fn new(ttl: Duration) -> Self {
        Resolver {
            ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Addresses for `host:port`; an IP literal needs no lookup.
    pub(crate) async fn resolve(&self, host: &str, port: u16) -> Result<Arc<[SocketAddr]>, String> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(Arc::from([SocketAddr::new(ip, port)]));
        }
        let key = (host.to_string(), port);
        if let Ok(cache) = self.cache.lock() {
            if let Some((at, addrs)) = cache.get(&key) {
                if at.elapsed() < self.ttl {
                    return Ok(addrs.clone());
                }
            }
        }
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .collect();
        if addrs.is_empty() {
            return Err(format!("{host} resolved to no address"));
        }
        let addrs: Arc<[SocketAddr]> = Arc::from(addrs);
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(key, (Instant::now(), addrs.clone()));
        }
        Ok(addrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn literals_and_localhost() {
        let r = Resolver::new(Duration::from_secs(60));
        let a = r.resolve("127.0.0.1", 80).await.unwrap();
        assert_eq!(a[0], "127.0.0.1:80".parse().unwrap());
        let a = r.resolve("::1", 81).await.unwrap();
        assert_eq!(a[0], "[::1]:81".parse().unwrap());
        let a = r.resolve("localhost", 82).await.unwrap();
        assert!(a.iter().all(|s| s.ip().is_loopback()));
        assert!(r.resolve("name.invalid", 80).await.is_err());
    }
}
