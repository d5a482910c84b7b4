//! `switchyard spend`: spend and usage per caller and model over a period, read from the usage
//! ledger without writing SQL (`spend.rs` asks). The database is the configuration's
//! `ledger.database_url` (the file loaded exactly as the gateway loads it, `${ENV}` and all), or
//! `--database-url`. Nothing secret is printed: the ledger holds no credential, and errors go
//! through the logger's credential filter.

use std::time::Duration;

use super::db::connect;
use super::spend::{self, By, Query};
use crate::config::ledger::is_identifier;

/// The answer was printed.
pub(crate) const EXIT_OK: i32 = 0;
/// The database could not be reached or asked.
pub(crate) const EXIT_FAILED: i32 = 1;
/// Bad arguments, or a configuration that does not load (its problems are printed).
pub(crate) const EXIT_USAGE: i32 = 2;

/// Longest the command waits for the database, connecting and asking.
const TIMEOUT: Duration = Duration::from_secs(30);

const USAGE: &str = "usage: switchyard spend [-c FILE] [--database-url URL] [--schema NAME]\n\
\x20      [--from TIME] [--to TIME] [--caller CALLER] [--model MODEL]\n\
\x20      [--by caller|model|provider|day|month[,...]] [--json]\n\
\n\
Prints requests, errors, usage (tokens, characters, images) and cost per group over the period\n\
[--from, --to), read from the usage ledger. TIME is a UTC date or time as PostgreSQL reads it\n\
(2026-11-01, 2026-11-01T12:00:00Z); by default from the start of this month to now. --by groups\n\
by a comma-separated list (default caller,model); CALLER is key:<name> or jwt:<subject>.\n\
The database is the configuration's ledger.database_url (-c FILE, or the built-in default\n\
configuration), or --database-url.\n\
\n\
Exit status: 0 printed, 1 the database failed, 2 bad arguments or configuration.\n";

/// The parsed command line.
struct Args {
    conf: Option<String>,
    database_url: Option<String>,
    schema: Option<String>,
    json: bool,
    query: Query,
}

/// The command: `args` are those after `spend`. Returns the exit status.
pub fn main(args: &[String]) -> i32 {
    let args = match parse(args) {
        Ok(Some(a)) => a,
        Ok(None) => {
            print!("{USAGE}");
            return EXIT_OK;
        }
        Err(problem) => {
            eprint!("spend: {problem}\n\n{USAGE}");
            return EXIT_USAGE;
        }
    };
    let (url, schema) = match database(&args) {
        Ok(d) => d,
        Err(problem) => {
            eprintln!("spend: {}", crate::logging::redact(&problem));
            return EXIT_USAGE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("spend: cannot start the async runtime: {e}");
            return EXIT_FAILED;
        }
    };
    let asked = runtime.block_on(async {
        let client = connect(&url, TIMEOUT).await?;
        tokio::time::timeout(TIMEOUT, spend::run(&client, &schema, &args.query))
            .await
            .map_err(|_| format!("no answer within {} s", TIMEOUT.as_secs()))?
    });
    match asked {
        Ok(report) => {
            let out = if args.json {
                report.json()
            } else {
                report.text()
            };
            // Not put through the logger's filter: the report is the ledger's data (caller names
            // like `key:alice`, which the filter would take for a credential), never a secret.
            print!("{out}");
            EXIT_OK
        }
        Err(e) => {
            eprintln!("spend: {}", crate::logging::redact(&e));
            EXIT_FAILED
        }
    }
}

/// `Ok(None)`: help was asked for.
fn parse(args: &[String]) -> Result<Option<Args>, String> {
    let mut a = Args {
        conf: None,
        database_url: None,
        schema: None,
        json: false,
        query: Query {
            from: None,
            to: None,
            caller: None,
            model: None,
            by: vec![By::Caller, By::Model],
        },
    };
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| rest.next().cloned())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match name {
            "-h" | "--help" => return Ok(None),
            "--json" => a.json = true,
            "-c" | "--conf" => a.conf = Some(value()?),
            "--database-url" => a.database_url = Some(value()?),
            "--schema" => a.schema = Some(value()?),
            "--from" => a.query.from = Some(value()?),
            "--to" => a.query.to = Some(value()?),
            "--caller" => a.query.caller = Some(value()?),
            "--model" => a.query.model = Some(value()?),
            "--by" => {
                let v = value()?;
                let mut by = Vec::new();
                for part in v.split(',') {
                    let b = By::parse(part.trim()).ok_or_else(|| {
                        format!("--by: `{part}` is not one of caller, model, provider, day, month")
                    })?;
                    if by.contains(&b) {
                        return Err(format!("--by: `{part}` is named twice"));
                    }
                    by.push(b);
                }
                a.query.by = by;
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if let Some(s) = &a.schema {
        if !is_identifier(s) {
            return Err(format!(
                "--schema: `{s}` is not a plain PostgreSQL name (lowercase letters, digits, `_`)"
            ));
        }
    }
    Ok(Some(a))
}

/// The connection string and schema: the flags', else the configuration's `ledger:` section.
fn database(args: &Args) -> Result<(String, String), String> {
    if let Some(url) = &args.database_url {
        crate::config::ledger::keep_password_out_of_logs(url);
        let schema = args.schema.clone().unwrap_or_else(|| "public".into());
        return Ok((url.clone(), schema));
    }
    let (source, loaded) = match &args.conf {
        Some(path) => (path.clone(), crate::config::load_file(path)),
        None => (
            "built-in default configuration".to_string(),
            crate::config::load_str(crate::config::DEFAULT_CONFIG, &|name| {
                std::env::var(name).ok()
            }),
        ),
    };
    let settings = loaded.map_err(|problems| {
        let mut text = format!("{source}: {} problem(s):", problems.len());
        for p in &problems {
            text.push_str("\n  ");
            text.push_str(p);
        }
        text
    })?;
    let ledger = settings.gateway.ledger.ok_or_else(|| {
        format!("{source} has no ledger (switchyard.ledger.database_url); or give --database-url")
    })?;
    let schema = args.schema.clone().unwrap_or(ledger.schema);
    Ok((ledger.database_url, schema))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Option<Args>, String> {
        parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn flags_are_read_in_both_forms() {
        let a = args(&[
            "--from",
            "2026-11-01",
            "--to=2026-12-01",
            "--by",
            "day,caller",
            "--caller",
            "key:alice",
            "--json",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(a.query.from.as_deref(), Some("2026-11-01"));
        assert_eq!(a.query.to.as_deref(), Some("2026-12-01"));
        assert_eq!(a.query.by, [By::Day, By::Caller]);
        assert_eq!(a.query.caller.as_deref(), Some("key:alice"));
        assert!(a.json);
    }

    #[test]
    fn bad_flags_are_named() {
        for (list, needle) in [
            (&["--by", "week"][..], "`week` is not one of"),
            (&["--by", "model,model"][..], "named twice"),
            (&["--schema", "Robert'); DROP"][..], "--schema"),
            (&["--from"][..], "--from needs a value"),
            (&["--frm", "x"][..], "unknown argument `--frm`"),
        ] {
            let e = args(list).err().unwrap();
            assert!(e.contains(needle), "{list:?}: {e}");
        }
    }
}
