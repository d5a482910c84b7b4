//! Downloading a URL the caller gave (`image`, `mask`), with the SSRF guard.
//!
//! A reference image URL is the caller's text, so fetching it must not become a way into the
//! gateway's own network: every address the host resolves to is checked ([`refusal`]) and the
//! connection goes to the checked address itself (no second lookup an attacker's DNS could answer
//! differently). Loopback, private, link-local, shared (CGNAT), unspecified, multicast and other
//! non-global ranges are refused unless the operator sets `images.allow_private_urls`. Redirects are
//! followed (at most [`MAX_REDIRECTS`]), each hop checked the same way; the body is size-capped and
//! the whole download is bounded by the configured timeout. No credentials are ever sent.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use pingora::http::RequestHeader;
use pingora::upstreams::peer::PeerOptions;

use crate::common::image_input::sniff;
use crate::common::image_input::ImageInput;
use crate::upstream::endpoint::Endpoint;
use crate::upstream::exchange::Upstream;

/// What the gateway may download on a caller's behalf (the config's `images` section).
#[derive(Debug, Clone)]
pub struct DownloadPolicy {
    /// Allow addresses outside the global unicast ranges (private, loopback, link-local…).
    pub allow_private_urls: bool,
    pub max_download_bytes: usize,
    pub download_timeout: Duration,
}

/// Redirect hops followed before giving up.
pub(crate) const MAX_REDIRECTS: usize = 3;

/// Why an address may not be fetched on a caller's behalf, or `None` when it is a public address.
pub(crate) fn refusal(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refusal_v4(v4),
        IpAddr::V6(v6) => {
            // An IPv4 address written as IPv6 (`::ffff:a.b.c.d`) is that IPv4 address.
            if let Some(v4) = v6.to_ipv4_mapped() {
                return refusal_v4(v4);
            }
            refusal_v6(v6)
        }
    }
}

fn refusal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_private() {
        Some("a private address")
    } else if ip.is_link_local() {
        Some("a link-local address")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a shared (carrier-grade NAT) address")
    } else if ip.is_unspecified() || a == 0 {
        Some("an unspecified address")
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Some("a multicast, broadcast or reserved address")
    } else if a == 192 && b == 0 && ip.octets()[2] == 0 {
        Some("an IETF protocol-assignment address")
    } else if a == 198 && (b == 18 || b == 19) {
        Some("a benchmarking address")
    } else {
        None
    }
}

fn refusal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_unspecified() {
        Some("an unspecified address")
    } else if (first & 0xfe00) == 0xfc00 {
        Some("a private (unique local) address")
    } else if (first & 0xffc0) == 0xfe80 {
        Some("a link-local address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else if ip.to_ipv4().is_some() && first == 0 {
        // IPv4-compatible (`::a.b.c.d`, deprecated): judge the embedded IPv4 address.
        ip.to_ipv4().and_then(refusal_v4)
    } else if first == 0x64 && ip.segments()[1] == 0xff9b {
        // NAT64 (`64:ff9b::a.b.c.d`) reaches the embedded IPv4 address.
        let [.., c, d] = ip.segments();
        refusal_v4(Ipv4Addr::new(
            (c >> 8) as u8,
            c as u8,
            (d >> 8) as u8,
            d as u8,
        ))
    } else {
        None
    }
}

impl Upstream {
    /// Download the image at the caller's `url` for the field it came in. The error is the
    /// field's 400 `details` message.
    pub async fn fetch_input(
        &self,
        url: &str,
        policy: &DownloadPolicy,
    ) -> Result<ImageInput, String> {
        match tokio::time::timeout(policy.download_timeout, self.fetch_guarded(url, policy)).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "could not be downloaded within {} ms",
                policy.download_timeout.as_millis()
            )),
        }
    }

    async fn fetch_guarded(
        &self,
        url: &str,
        policy: &DownloadPolicy,
    ) -> Result<ImageInput, String> {
        let options = peer_options(policy.download_timeout);
        let mut current = url.to_string();
        for _ in 0..=MAX_REDIRECTS {
            let (ep, path) = Endpoint::parse_result_url(&current, &options, 0)
                .map_err(|m| m.replace("result URL", "URL"))?;
            let addrs = self
                .resolve(&ep.host, ep.port)
                .await
                .map_err(|m| format!("could not be downloaded: {m}"))?;
            if !policy.allow_private_urls {
                for a in addrs.iter() {
                    if let Some(why) = refusal(a.ip()) {
                        return Err(format!(
                            "refused: host {} resolves to {why} ({}); the gateway only downloads from public addresses",
                            ep.host,
                            a.ip()
                        ));
                    }
                }
            }
            let build = || -> pingora::Result<RequestHeader> {
                let mut h = RequestHeader::build(http::Method::GET, path.as_bytes(), Some(3))?;
                h.insert_header(http::header::HOST, ep.authority.as_str())?;
                h.insert_header(http::header::ACCEPT, "image/*")?;
                Ok(h)
            };
            let h = build().map_err(|e| format!("could not be requested: {e}"))?;
            let resp = self
                .exchange_at("image URL", &ep, addrs[0], h, &build, &Bytes::new())
                .await
                .map_err(|e| format!("could not be downloaded: {}", e.message))?;
            let status = resp.status;
            if matches!(status, 301 | 302 | 303 | 307 | 308) {
                let location = resp.header_str("location").map(str::to_string);
                resp.release_unread().await;
                let Some(location) = location else {
                    return Err(format!("answered HTTP {status} without a Location"));
                };
                current = resolve_location(&current, &location)?;
                continue;
            }
            if !(200..300).contains(&status) {
                resp.release_unread().await;
                return Err(format!(
                    "could not be downloaded: the server answered HTTP {status}"
                ));
            }
            if let Some(len) = resp
                .header_str("content-length")
                .and_then(|v| v.trim().parse::<usize>().ok())
            {
                if len > policy.max_download_bytes {
                    resp.release_unread().await;
                    return Err(too_large(policy));
                }
            }
            let declared = resp.header_str("content-type").map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            });
            let bytes = read_capped(resp, policy.max_download_bytes).await?;
            let mime = sniff(&bytes).ok_or_else(|| {
                format!(
                    "is not a PNG, JPEG, WebP or GIF image (the server sent {})",
                    declared.as_deref().unwrap_or("no content type")
                )
            })?;
            return Ok(ImageInput::Data { mime, bytes });
        }
        Err(format!("redirected more than {MAX_REDIRECTS} times"))
    }
}

fn too_large(policy: &DownloadPolicy) -> String {
    format!(
        "is larger than the {} bytes the gateway downloads",
        policy.max_download_bytes
    )
}

async fn read_capped(
    mut resp: crate::upstream::exchange::Response<'_>,
    limit: usize,
) -> Result<Bytes, String> {
    let mut buf = BytesMut::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("could not be downloaded: {}", e.message))?
    {
        if buf.len() + chunk.len() > limit {
            resp.release_unread().await;
            return Err(format!(
                "is larger than the {limit} bytes the gateway downloads"
            ));
        }
        buf.extend_from_slice(&chunk);
    }
    resp.release().await;
    Ok(buf.freeze())
}

/// A redirect target, absolute or relative to the URL that answered with it.
fn resolve_location(base: &str, location: &str) -> Result<String, String> {
    if location.starts_with("http://") || location.starts_with("https://") {
        return Ok(location.to_string());
    }
    let uri: http::Uri = base.parse().map_err(|_| "is not a valid URL".to_string())?;
    let scheme = uri.scheme_str().unwrap_or("https");
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or("");
    if let Some(rest) = location.strip_prefix("//") {
        return Ok(format!("{scheme}://{rest}"));
    }
    if location.starts_with('/') {
        return Ok(format!("{scheme}://{authority}{location}"));
    }
    let dir = uri.path().rsplit_once('/').map(|(d, _)| d).unwrap_or("");
    Ok(format!("{scheme}://{authority}{dir}/{location}"))
}

fn peer_options(timeout: Duration) -> PeerOptions {
    let mut o = PeerOptions::new();
    o.connection_timeout = Some(timeout);
    o.total_connection_timeout = Some(timeout);
    o.read_timeout = Some(timeout);
    o.write_timeout = Some(timeout);
    o.idle_timeout = Some(Duration::from_secs(30));
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn refuses_every_non_public_range() {
        for a in [
            "127.0.0.1",
            "127.255.0.9",
            "10.0.0.1",
            "10.255.255.255",
            "172.16.0.1",
            "172.31.255.254",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "192.0.0.8",
            "198.18.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(refusal(ip(a)).is_some(), "{a} allowed");
        }
        assert_eq!(refusal(ip("169.254.169.254")), Some("a link-local address"));
        assert_eq!(refusal(ip("::ffff:127.0.0.1")), Some("a loopback address"));
    }

    #[test]
    fn allows_public_addresses() {
        for a in [
            "8.8.8.8",
            "1.1.1.1",
            "172.15.255.255",
            "172.32.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "192.169.0.1",
            "169.253.0.1",
            "2606:4700:4700::1111",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert_eq!(refusal(ip(a)), None, "{a} refused");
        }
    }

    #[test]
    fn relative_redirects_resolve_against_the_answering_url() {
        let base = "https://img.example/a/b.png?x=1";
        assert_eq!(
            resolve_location(base, "/c.png").unwrap(),
            "https://img.example/c.png"
        );
        assert_eq!(
            resolve_location(base, "c.png").unwrap(),
            "https://img.example/a/c.png"
        );
        assert_eq!(
            resolve_location(base, "//cdn.example/d.png").unwrap(),
            "https://cdn.example/d.png"
        );
        assert_eq!(
            resolve_location(base, "http://127.0.0.1/").unwrap(),
            "http://127.0.0.1/"
        );
    }
}
