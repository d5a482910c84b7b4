//! Who may use the management API: an administrator's key (`admin.keys`) or JWT carrying the
//! `switchyard:admin` scope (`admin.jwt`), as `Authorization: Bearer …` — never a caller's key or
//! token (the admin authenticator knows none of them) — and failed logins counted per client IP:
//! past `admin.failed_logins_per_minute` in the current UTC minute, every request from that IP
//! is answered `429 too_many_failed_logins` until the minute is over, a right credential
//! included (so guessing cannot go on behind one).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use http::HeaderMap;

use super::admin_error::ApiError;
use crate::auth::{AuthError, Authenticator};

/// The most client IPs remembered at once; past it, entries of past minutes are forgotten.
const MAX_REMEMBERED: usize = 10_000;

/// An authenticated administrator.
#[derive(Debug, Clone)]
pub(crate) struct Admin {
    /// The key's name, or the token's `sub`.
    pub(crate) name: String,
    /// `key` or `jwt`.
    pub(crate) via: &'static str,
}

/// Failed logins per client IP in the current minute.
#[derive(Default)]
pub(crate) struct FailedLogins {
    by_ip: Mutex<HashMap<IpAddr, (u64, u64)>>,
}

fn minute() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 60)
}

impl FailedLogins {
    /// The failures counted for `ip` this minute.
    fn count(&self, ip: IpAddr) -> u64 {
        let now = minute();
        let map = self.by_ip.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&ip)
            .filter(|(m, _)| *m == now)
            .map_or(0, |(_, n)| *n)
    }

    /// One more failure for `ip`.
    fn fail(&self, ip: IpAddr) {
        let now = minute();
        let mut map = self.by_ip.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_REMEMBERED {
            map.retain(|_, (m, _)| *m == now);
        }
        let entry = map.entry(ip).or_insert((now, 0));
        if entry.0 != now {
            *entry = (now, 0);
        }
        entry.1 += 1;
    }
}

/// The administrator presenting `headers`' credential from `ip`, or why not.
pub(crate) fn authenticate(
    auth: &Authenticator,
    logins: &FailedLogins,
    limit: u64,
    headers: &HeaderMap,
    ip: Option<IpAddr>,
) -> Result<Admin, ApiError> {
    if let Some(ip) = ip {
        if logins.count(ip) >= limit {
            return Err(ApiError::new(
                429,
                "too_many_failed_logins",
                "too many failed logins from this address; wait for the next minute",
            ));
        }
    }
    match auth.authenticate(headers) {
        Ok(p) => {
            let (via, name) = match p.id.split_once(':') {
                Some(("jwt", sub)) => ("jwt", sub),
                Some((_, name)) => ("key", name),
                None => ("key", p.id.as_str()),
            };
            Ok(Admin {
                name: name.to_string(),
                via,
            })
        }
        Err(e) => {
            // A request without credentials is not a guess; a wrong one is.
            if e != AuthError::Missing {
                if let Some(ip) = ip {
                    logins.fail(ip);
                }
            }
            Err(ApiError::new(
                401,
                "unauthorized",
                format!("{e} (the management API takes an administrator's key or token)"),
            ))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_counted_per_ip_within_the_minute() {
        let logins = FailedLogins::default();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        logins.fail(a);
        logins.fail(a);
        assert_eq!(logins.count(a), 2);
        assert_eq!(logins.count(b), 0);
    }
}
