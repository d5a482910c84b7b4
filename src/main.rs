//! The `switchyard` binary: Pingora's standard options (`-c`, `-t`, `-d`, `-u`), the gateway's
//! configuration, and the server; or, as `switchyard check-providers [-c FILE] [--json]`, the live
//! check of the configured providers (`check/`); or, as `switchyard spend [...]`, spend
//! and usage per caller and model read back from the usage ledger (`ledger/cli.rs`); or, as
//! `switchyard keys [...]`, the management API's keys from the command line (`tenants/cli.rs`).

use pingora::server::configuration::Opt;

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// `switchyard spend`, in a build with the usage ledger.
#[cfg(feature = "ledger")]
fn spend(args: &[String]) -> i32 {
    switchyard::internals::ledger::cli::main(args)
}

/// `switchyard spend` in a build without the usage ledger: refused, naming the feature.
#[cfg(not(feature = "ledger"))]
fn spend(_args: &[String]) -> i32 {
    eprintln!(
        "spend: {}; build with `--features ledger`",
        switchyard::internals::config::ledger::NO_LEDGER
    );
    2
}

/// `switchyard keys`, in a build with the usage ledger (keys as data live beside it).
#[cfg(feature = "ledger")]
fn keys(args: &[String]) -> i32 {
    switchyard::internals::ledger::keys_cli::main(args)
}

/// `switchyard keys` in a build without the usage ledger: refused, naming the feature.
#[cfg(not(feature = "ledger"))]
fn keys(_args: &[String]) -> i32 {
    eprintln!(
        "keys: keys as data live beside the ledger, and {}; build with `--features ledger`",
        switchyard::internals::config::ledger::NO_LEDGER
    );
    2
}

fn main() {
    // RUST_LOG as env_logger reads it (default `info`), credentials blanked at every level.
    if let Err(e) = switchyard::logging::init() {
        eprintln!("could not install the logger: {e}");
    }
    // A subcommand of its own: Pingora's options take no positional argument, so nothing that
    // parsed before is read differently.
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("check-providers") {
        let code = switchyard::internals::check::main(&args[2..]);
        switchyard::logging::flush();
        std::process::exit(code);
    }
    if args.get(1).map(String::as_str) == Some("spend") {
        let code = spend(&args[2..]);
        switchyard::logging::flush();
        std::process::exit(code);
    }
    if args.get(1).map(String::as_str) == Some("keys") {
        let code = keys(&args[2..]);
        switchyard::logging::flush();
        std::process::exit(code);
    }
    let opt = Opt::parse_args();
    let loaded = match &opt.conf {
        Some(path) => switchyard::config::load_file(path),
        None => switchyard::config::load_str(switchyard::config::DEFAULT_CONFIG, &|name| {
            std::env::var(name).ok()
        }),
    };
    let reload = match &opt.conf {
        Some(path) => switchyard::internals::reload::ConfigSource::File(path.clone()),
        None => switchyard::internals::reload::ConfigSource::Embedded,
    };
    let source = reload.name().to_string();
    let settings = match loaded {
        Ok(s) => s,
        Err(problems) => {
            eprintln!("{source}: {} problem(s):", problems.len());
            for p in &problems {
                eprintln!("  {p}");
            }
            switchyard::logging::flush();
            std::process::exit(1);
        }
    };
    // Models near or past their shutdown: what the operator should act on soon.
    for w in settings.gateway.warnings() {
        if opt.test {
            eprintln!("{source}: warning: {w}");
        } else {
            log::warn!("{source}: {w}");
        }
    }
    if opt.test {
        // Models whose cost cannot be known: stated, never counted as 0.
        for line in settings.gateway.unpriced() {
            eprintln!("{source}: unpriced: {line}");
        }
        println!("{source}: configuration is valid");
        switchyard::logging::flush();
        return;
    }
    // Pingora would re-read `-c` as its own file format; the gateway already parsed it.
    let mut opt = opt;
    opt.conf = None;
    // SIGHUP reloads from the same source (server::reload).
    switchyard::internals::server::build_with_reload(Some(opt), settings, Some(reload))
        .run(pingora::server::RunArgs::default());
    // The last access lines may still be in the logger's batch (`logging`): out before exiting.
    switchyard::logging::flush();
    std::process::exit(0)
}
