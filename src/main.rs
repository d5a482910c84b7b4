//! The `switchyard` binary: Pingora's standard options (`-c`, `-t`, `-d`, `-u`), the gateway's
//! configuration, and the server.

use pingora::server::configuration::Opt;

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let opt = Opt::parse_args();
    let loaded = match &opt.conf {
        Some(path) => switchyard::config::load_file(path),
        None => switchyard::config::load_str(switchyard::config::DEFAULT_CONFIG, &|name| {
            std::env::var(name).ok()
        }),
    };
    let source = opt
        .conf
        .clone()
        .unwrap_or_else(|| "embedded conf/switchyard.yaml".into());
    let settings = match loaded {
        Ok(s) => s,
        Err(problems) => {
            eprintln!("{source}: {} problem(s):", problems.len());
            for p in &problems {
                eprintln!("  {p}");
            }
            std::process::exit(1);
        }
    };
    if opt.test {
        println!("{source}: configuration is valid");
        return;
    }
    // Pingora would re-read `-c` as its own file format; the gateway already parsed it.
    let mut opt = opt;
    opt.conf = None;
    switchyard::server::build(Some(opt), settings).run_forever();
}
