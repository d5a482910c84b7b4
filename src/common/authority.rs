//! Whether a client-sent `Host` (or HTTP/2 `:authority`) is a plain `host[:port]` authority, fit to
//! be written into a link the gateway hands out.
//!
//! The gateway builds links to hosted images from the request's own host when no
//! `images.public_base_url` is configured. Anything the client sent goes into those links only
//! when it is exactly a DNS name or an IP literal (`[v6]` bracketed) with an optional port
//! 1–65535: no userinfo, path, query, quote, bracket, space or any other character, so a hostile
//! value can never reshape the link or the document it is shown in.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Longest host name (RFC 1035's 253 characters of a name written with dots).
const MAX_HOST: usize = 253;
/// Longest label of a DNS name.
const MAX_LABEL: usize = 63;

/// Whether `value` is `host[:port]` as described in the module docs.
pub(crate) fn is_host_port(value: &str) -> bool {
    let (host, port) = match value.strip_prefix('[') {
        Some(rest) => {
            let Some((v6, after)) = rest.split_once(']') else {
                return false;
            };
            if v6.parse::<Ipv6Addr>().is_err() {
                return false;
            }
            match after {
                "" => return true,
                _ => match after.strip_prefix(':') {
                    Some(port) => return is_port(port),
                    None => return false,
                },
            }
        }
        None => match value.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (value, None),
        },
    };
    port.is_none_or(is_port) && (host.parse::<Ipv4Addr>().is_ok() || is_dns_name(host))
}

/// A port: 1–65535, digits only.
fn is_port(port: &str) -> bool {
    !port.is_empty()
        && port.len() <= 5
        && port.bytes().all(|b| b.is_ascii_digit())
        && port.parse::<u32>().is_ok_and(|p| (1..=65_535).contains(&p))
}

/// A DNS name: dot-separated labels of letters, digits, `-` (not first or last) and `_` (found in
/// internal service names), at most one trailing dot.
fn is_dns_name(host: &str) -> bool {
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.is_empty() || name.len() > MAX_HOST {
        return false;
    }
    name.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= MAX_LABEL
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_authorities_pass() {
        for ok in [
            "gw.example",
            "gw.example:8443",
            "GW.Example.COM.",
            "localhost",
            "localhost:1",
            "my_service:8080",
            "127.0.0.1",
            "10.0.0.1:65535",
            "[::1]",
            "[2001:db8::1]:443",
            "xn--bcher-kva.example",
        ] {
            assert!(is_host_port(ok), "{ok}");
        }
    }

    #[test]
    fn anything_else_is_refused() {
        let long_label = format!("{}.example", "a".repeat(64));
        let long_name = vec!["abcdefghi"; 30].join(".");
        for bad in [
            "",
            " ",
            "gw.example ",
            "evil.example\"><img src=x onerror=alert(1)>",
            "evil.example'",
            "<gw>",
            "user@gw.example",
            "user:pass@gw.example",
            "gw.example/path",
            "gw.example?q",
            "gw.example#f",
            "gw.example:",
            "gw.example:0",
            "gw.example:65536",
            "gw.example:+80",
            "gw.example:80:80",
            "gw.example:http",
            "-gw.example",
            "gw-.example",
            "gw..example",
            ".",
            "::1",
            "[::1",
            "[::1]x",
            "[::1]:",
            "[gw.example]",
            "gw%2eexample",
            "gw.example\\x",
            "gw.exämple",
            &long_label,
            &long_name,
        ] {
            assert!(!is_host_port(bad), "{bad:?}");
        }
    }
}
