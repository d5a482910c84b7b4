//! The `switchyard` binary's set-up in a few lines: a configuration file with its own
//! `listeners:`, Pingora's server, the gateway's state, and its services (one per entry point,
//! each inside the client deadlines and connection cap, with TLS where configured; the metrics
//! listener; asynchronous image tasks).
//!
//! ```text
//! cargo run --example gateway -- conf/switchyard.yaml
//! curl localhost:8080/healthz
//! ```
//!
//! `switchyard::server::build(None, settings)` is the same in one call; `src/main.rs` adds
//! `SIGHUP` reloading and Pingora's command-line options.

use pingora::server::Server;

fn main() {
    // Credentials never reach a log record, Pingora's own included.
    switchyard::logging::init().ok();
    let path = std::env::args().nth(1);
    let path = path.as_deref().unwrap_or("conf/switchyard.yaml");
    let settings = switchyard::config::load_file(path).unwrap_or_else(|problems| {
        eprintln!("{path}: {}", problems.join("\n  "));
        std::process::exit(1)
    });
    let mut server = Server::new_with_opt_and_conf(None, settings.server);
    server.bootstrap();
    let state = switchyard::GatewayState::new(settings.gateway);
    switchyard::server::add_services(&mut server, &state);
    server.run_forever();
}
