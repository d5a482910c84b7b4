//! `switchyard keys …`: a thin command line over the management API (`docs/guide/tenants.md`),
//! for scripts and operators without `curl`. It speaks plain HTTP/1.1 to `--admin` (default
//! `$SWITCHYARD_ADMIN_URL`, else `http://127.0.0.1:8090`) with the administrator's key from
//! `$SWITCHYARD_ADMIN_KEY` — never from a flag, which would leave it in the shell's history and
//! the process list — and prints the API's JSON answer.
//!
//! ```text
//! switchyard keys list [--tenant T]
//! switchyard keys show ID
//! switchyard keys create --tenant T --name N [--models a,b] [--expires-at 2027-01-01T00:00:00Z]
//! switchyard keys rotate ID [--overlap-seconds N]
//! switchyard keys revoke ID
//! ```
//!
//! Exit status: 0 for a 2xx answer, 1 for an error answer or no answer, 2 for a usage error.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::{json, Value};

const USAGE: &str = "usage: switchyard keys list [--tenant T] | show ID | create --tenant T --name N \
                     [--models a,b] [--expires-at RFC3339] | rotate ID [--overlap-seconds N] | revoke ID\n\
                     (the admin key from $SWITCHYARD_ADMIN_KEY; --admin URL or $SWITCHYARD_ADMIN_URL, \
                     default http://127.0.0.1:8090)";

/// How long connecting and each read or write may take.
const TIMEOUT: Duration = Duration::from_secs(15);

/// One request of the command line: method, path, body.
#[derive(Debug, PartialEq)]
struct Call {
    method: &'static str,
    path: String,
    body: Option<Value>,
}

/// `--name value` pairs, and the positional arguments.
type Flags = (Vec<(String, String)>, Vec<String>);

/// The flags after the command, and the positional arguments.
fn flags(args: &[String]) -> Result<Flags, String> {
    let (mut named, mut positional) = (Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(name) = a.strip_prefix("--") {
            let (name, value) = match name.split_once('=') {
                Some((n, v)) => (n.to_string(), v.to_string()),
                None => {
                    let v = it.next().ok_or(format!("--{name} needs a value"))?;
                    (name.to_string(), v.clone())
                }
            };
            named.push((name, value));
        } else {
            positional.push(a.clone());
        }
    }
    Ok((named, positional))
}

/// The request `args` ask for, and the `--admin` URL when given.
fn parse(args: &[String]) -> Result<(Call, Option<String>), String> {
    let (command, rest) = args.split_first().ok_or("name a command")?;
    let (named, positional) = flags(rest)?;
    let get = |n: &str| named.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let allowed: &[&str] = match command.as_str() {
        "list" => &["admin", "tenant"],
        "create" => &["admin", "tenant", "name", "models", "expires-at"],
        "rotate" => &["admin", "overlap-seconds"],
        _ => &["admin"],
    };
    if let Some((k, _)) = named.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
        return Err(format!("`{command}` takes no --{k}"));
    }
    let id = || match positional.as_slice() {
        [id] => Ok(id.clone()),
        _ => Err(format!("`{command}` takes one key id")),
    };
    let call = match command.as_str() {
        "list" => Call {
            method: "GET",
            path: match get("tenant") {
                Some(t) => format!("/admin/v1/keys?tenant={t}"),
                None => "/admin/v1/keys".into(),
            },
            body: None,
        },
        "show" => Call {
            method: "GET",
            path: format!("/admin/v1/keys/{}", id()?),
            body: None,
        },
        "revoke" => Call {
            method: "POST",
            path: format!("/admin/v1/keys/{}/revoke", id()?),
            body: None,
        },
        "rotate" => {
            let mut body = json!({});
            if let Some(n) = get("overlap-seconds") {
                let n: u64 = n
                    .parse()
                    .map_err(|_| "--overlap-seconds: a whole number of seconds")?;
                body["overlap_seconds"] = json!(n);
            }
            Call {
                method: "POST",
                path: format!("/admin/v1/keys/{}/rotate", id()?),
                body: Some(body),
            }
        }
        "create" => {
            let (tenant, name) = (
                get("tenant").ok_or("create needs --tenant")?,
                get("name").ok_or("create needs --name")?,
            );
            let mut body = json!({"tenant": tenant, "name": name});
            if let Some(m) = get("models") {
                body["allowed_models"] = json!(m.split(',').map(str::trim).collect::<Vec<_>>());
            }
            if let Some(t) = get("expires-at") {
                body["expires_at"] = json!(t);
            }
            Call {
                method: "POST",
                path: "/admin/v1/keys".into(),
                body: Some(body),
            }
        }
        other => return Err(format!("unknown command `{other}`")),
    };
    Ok((call, get("admin")))
}

/// `http://host:port` into its host and port.
fn authority(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or("--admin: give an http:// URL (the management listener is plain HTTP)")?;
    let host = rest.trim_end_matches('/');
    if host.is_empty() || host.contains('/') {
        return Err("--admin: give http://host:port, without a path".into());
    }
    Ok(if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:80")
    })
}

/// Send `call` and read the answer: its status and body.
fn send(address: &str, key: &str, call: &Call) -> Result<(u16, String), String> {
    let addr = address
        .to_socket_addrs()
        .map_err(|e| format!("{address}: {e}"))?
        .next()
        .ok_or(format!("{address}: no address"))?;
    let mut stream =
        TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| format!("{address}: {e}"))?;
    let _ = stream.set_read_timeout(Some(TIMEOUT));
    let _ = stream.set_write_timeout(Some(TIMEOUT));
    let body = call.body.as_ref().map(Value::to_string).unwrap_or_default();
    let head = format!(
        "{} {} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        call.method,
        call.path,
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()))
        .map_err(|e| format!("{address}: {e}"))?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .map_err(|e| format!("{address}: {e}"))?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no HTTP answer")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or("no HTTP status")?;
    Ok((status, body.to_string()))
}

/// `switchyard keys …` with `args` after `keys`; the exit status.
pub fn main(args: &[String]) -> i32 {
    let (call, admin) = match parse(args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("keys: {e}\n{USAGE}");
            return 2;
        }
    };
    let Some(key) = std::env::var("SWITCHYARD_ADMIN_KEY")
        .ok()
        .filter(|k| !k.is_empty())
    else {
        eprintln!("keys: set SWITCHYARD_ADMIN_KEY to an administrator's key (admin.keys)");
        return 2;
    };
    let url = admin
        .or_else(|| std::env::var("SWITCHYARD_ADMIN_URL").ok())
        .unwrap_or_else(|| "http://127.0.0.1:8090".into());
    let answered = authority(&url).and_then(|a| send(&a, &key, &call));
    match answered {
        Ok((status, body)) => {
            let shown = serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| serde_json::to_string_pretty(&v).ok())
                .unwrap_or(body);
            if (200..300).contains(&status) {
                println!("{shown}");
                0
            } else {
                eprintln!("keys: HTTP {status}\n{shown}");
                1
            }
        }
        Err(e) => {
            eprintln!("keys: {e}");
            1
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn commands_become_requests() {
        let (c, admin) = parse(&args(&[
            "create",
            "--tenant",
            "a",
            "--name=ci",
            "--models",
            "tts-1, x",
            "--admin",
            "http://h:1",
        ]))
        .unwrap();
        assert_eq!(c.method, "POST");
        assert_eq!(c.path, "/admin/v1/keys");
        assert_eq!(
            c.body.unwrap(),
            json!({"tenant": "a", "name": "ci", "allowed_models": ["tts-1", "x"]})
        );
        assert_eq!(admin.as_deref(), Some("http://h:1"));
        let (c, _) = parse(&args(&["rotate", "id1", "--overlap-seconds", "0"])).unwrap();
        assert_eq!(
            (c.path.as_str(), c.body),
            (
                "/admin/v1/keys/id1/rotate",
                Some(json!({"overlap_seconds": 0}))
            )
        );
        let (c, _) = parse(&args(&["list", "--tenant", "a"])).unwrap();
        assert_eq!(c.path, "/admin/v1/keys?tenant=a");
        for bad in [
            &["nope"][..],
            &["show"],
            &["create", "--tenant", "a"],
            &["revoke", "x", "--name", "y"],
            &["rotate", "x", "--overlap-seconds", "-1"],
            &[],
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad:?}");
        }
        assert_eq!(
            authority("http://127.0.0.1:8090/").unwrap(),
            "127.0.0.1:8090"
        );
        assert!(authority("https://h").is_err());
        assert!(authority("http://h/admin").is_err());
    }
}
