//! A provider's base URL, parsed once at start into what a connection needs.

use std::time::Duration;

use pingora::upstreams::peer::PeerOptions;

use super::trust::CaFile;

/// Connection timeouts for one provider. Pingora's defaults are "none", which would let a dead
/// provider hold a request forever, so every provider gets explicit values.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    pub total_connect: Duration,
    pub read: Duration,
    pub write: Duration,
    pub idle: Duration,
}

/// Where a provider is reached: scheme, host, port and the path prefix every native path goes under.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Path prefix without a trailing slash, e.g. `/v1` for `https://api.openai.com/v1`.
    pub base_path: String,
    /// Value of the `Host` header (with the port when it is not the scheme's default).
    pub authority: String,
    /// Connection settings, including the trust roots when the provider names a CA file.
    pub options: PeerOptions,
    /// Pool group of the trust roots (0: the system's); see [`CaFile::pool_group`].
    pub pool_group: u64,
}

impl Endpoint {
    /// Parse `http(s)://host[:port][/path]`.
    pub fn parse(url: &str, timeouts: Timeouts) -> Result<Endpoint, String> {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("`{url}` is not a valid URL: {e}"))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(format!("`{url}` must start with http:// or https://")),
        };
        let host = uri
            .host()
            .ok_or_else(|| format!("`{url}` has no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        // `https://:443` parses with an empty host; Pingora would skip certificate checks for a
        // peer without a name (it sends no SNI then), so it is refused here.
        if host.is_empty() {
            return Err(format!("`{url}` has no host"));
        }
        if uri.query().is_some() {
            return Err(format!("`{url}` must not have a query string"));
        }
        let default_port = if tls { 443 } else { 80 };
        let port = uri.port_u16().unwrap_or(default_port);
        let authority = match uri.port_u16() {
            Some(p) if p != default_port => format!("{}:{p}", uri.host().unwrap_or(&host)),
            _ => uri.host().unwrap_or(&host).to_string(),
        };
        let base_path = uri.path().trim_end_matches('/').to_string();

        let mut options = PeerOptions::new();
        options.connection_timeout = Some(timeouts.connect);
        options.total_connection_timeout = Some(timeouts.total_connect);
        options.read_timeout = Some(timeouts.read);
        options.write_timeout = Some(timeouts.write);
        options.idle_timeout = Some(timeouts.idle);
        Ok(Endpoint {
            tls,
            host,
            port,
            base_path,
            authority,
            options,
            pool_group: 0,
        })
    }

    /// Verify this endpoint's certificates against `ca` instead of the system roots.
    pub fn trusting(mut self, ca: &CaFile) -> Endpoint {
        self.options.ca = Some(ca.certs.clone());
        self.pool_group = ca.pool_group;
        self
    }

    /// Parse a result URL found in a provider's answer (it may carry a signed query string). The
    /// connection settings are `options` (the provider's, trust roots included) in `pool_group`.
    pub fn parse_result_url(
        url: &str,
        options: &PeerOptions,
        pool_group: u64,
    ) -> Result<(Endpoint, String), String> {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("result URL is not valid: {e}"))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err("result URL must be http or https".into()),
        };
        let raw_host = uri.host().ok_or("result URL has no host")?;
        let host = raw_host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err("result URL has no host".into());
        }
        let default_port = if tls { 443 } else { 80 };
        let port = uri.port_u16().unwrap_or(default_port);
        let authority = match uri.port_u16() {
            Some(p) if p != default_port => format!("{raw_host}:{p}"),
            _ => raw_host.to_string(),
        };
        let path = uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into());
        Ok((
            Endpoint {
                tls,
                host: host.to_string(),
                port,
                base_path: String::new(),
                authority,
                options: options.clone(),
                pool_group,
            },
            path,
        ))
    }

    /// The full request path for a native path such as `/audio/speech`.
    pub fn path(&self, native: &str) -> String {
        let mut p = String::with_capacity(self.base_path.len() + native.len());
        p.push_str(&self.base_path);
        p.push_str(native);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> Timeouts {
        let s = Duration::from_secs(1);
        Timeouts {
            connect: s,
            total_connect: s,
            read: s,
            write: s,
            idle: s,
        }
    }

    #[test]
    fn parses_urls() {
        let e = Endpoint::parse("https://api.openai.com/v1/", t()).unwrap();
        assert!(e.tls);
        assert_eq!((e.host.as_str(), e.port), ("api.openai.com", 443));
        assert_eq!(e.base_path, "/v1");
        assert_eq!(e.authority, "api.openai.com");
        assert_eq!(e.path("/audio/speech"), "/v1/audio/speech");

        let e = Endpoint::parse("http://127.0.0.1:9000", t()).unwrap();
        assert!(!e.tls);
        assert_eq!(e.port, 9000);
        assert_eq!(e.authority, "127.0.0.1:9000");
        assert_eq!(e.path("/v2/rerank"), "/v2/rerank");

        assert!(Endpoint::parse("ftp://x", t()).is_err());

        let (e, path) = Endpoint::parse_result_url(
            "https://bucket.oss-cn-beijing.aliyuncs.com/a/b.wav?Expires=1&Signature=x%2F",
            &PeerOptions::new(),
            0,
        )
        .unwrap();
        assert_eq!(e.host, "bucket.oss-cn-beijing.aliyuncs.com");
        assert_eq!(path, "/a/b.wav?Expires=1&Signature=x%2F");
        assert!(Endpoint::parse_result_url("file:///etc/passwd", &PeerOptions::new(), 0).is_err());
        assert!(Endpoint::parse("nonsense", t()).is_err());
        for nameless in ["https://:8443/v1", "https://@:1", "https://[]:1"] {
            assert!(Endpoint::parse(nameless, t()).is_err(), "{nameless}");
            assert!(Endpoint::parse_result_url(nameless, &PeerOptions::new(), 0).is_err());
        }
    }
}
