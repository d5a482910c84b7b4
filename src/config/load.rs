//! Reading a configuration: the YAML text (with `${VAR}` filled in) split into Pingora's server
//! settings and the gateway's section, every unknown key reported with its path, the gateway's
//! section built (`super::build`). [`Loader`] says how; `load_*` are its usual calls.

use pingora::server::configuration::ServerConf;
use serde_yaml::Value;

use super::file::GatewayFile;
use super::{env, Settings};
use crate::caps::lifecycle::Clock;
use crate::providers::external::ProviderKinds;

/// Who owns the sockets the gateway is reached on, which decides whether `switchyard.listeners`
/// may be empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sockets {
    /// The gateway's own listeners (the binary, `server::build`): at least one entry point is
    /// required.
    Own,
    /// A Pingora server the gateway is embedded in owns them (the `embed` module): `listeners`
    /// may be absent or empty.
    Host,
}

/// How a configuration is loaded: the clock that judges models' lifecycles, the provider kinds a
/// host registered besides the built-in ones, and who owns the sockets. `Loader::new()` is what
/// [`load_file`] and [`load_str`] use: the system clock, the built-in kinds, the gateway's own
/// listeners.
#[derive(Clone, Copy)]
pub struct Loader<'a> {
    clock: &'a Clock,
    limits_clock: Option<&'a Clock>,
    kinds: Option<&'a ProviderKinds>,
    sockets: Sockets,
}

impl Default for Loader<'_> {
    fn default() -> Self {
        Loader {
            clock: &Clock::System,
            limits_clock: None,
            kinds: None,
            sockets: Sockets::Own,
        }
    }
}

impl<'a> Loader<'a> {
    /// The system clock, the built-in provider kinds, the gateway's own listeners.
    pub fn new() -> Self {
        Self::default()
    }

    /// Judge models' lifecycles by `clock` now (a model past its shutdown is refused, one near it
    /// warned of) and, in the catalog, on every request.
    #[doc(hidden)]
    pub fn clock(mut self, clock: &'a Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Count the per-caller limits' windows (minutes, days, months) by `clock` rather than the
    /// system's, so that a test can move a day's budget past midnight.
    #[doc(hidden)]
    pub fn limits_clock(mut self, clock: &'a Clock) -> Self {
        self.limits_clock = Some(clock);
        self
    }

    /// Know the provider kinds a host registered: `providers:` accounts may name them as their
    /// `kind:` (see `provider_api`).
    pub fn kinds(mut self, kinds: &'a ProviderKinds) -> Self {
        self.kinds = Some(kinds);
        self
    }

    /// For a gateway embedded in another Pingora server, which owns the sockets:
    /// `switchyard.listeners` may be absent.
    pub fn hosted(mut self) -> Self {
        self.sockets = Sockets::Host;
        self
    }

    /// Who owns the sockets (the default: the gateway's own listeners).
    pub fn sockets(mut self, sockets: Sockets) -> Self {
        self.sockets = sockets;
        self
    }

    /// Load and validate a configuration file, reading `${VAR}` from the process environment.
    pub fn file(self, path: &str) -> Result<Settings, Vec<String>> {
        let text = std::fs::read_to_string(path).map_err(|e| vec![format!("{path}: {e}")])?;
        self.text(&text, &|name| std::env::var(name).ok())
    }

    /// Load and validate configuration text; `lookup` reads variables.
    pub fn text(
        self,
        text: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Settings, Vec<String>> {
        let none = ProviderKinds::new();
        let mut settings = load(
            text,
            lookup,
            self.clock,
            self.kinds.unwrap_or(&none),
            self.sockets,
        )?;
        if let Some(clock) = self.limits_clock {
            settings.gateway.limits_clock = clock.clone();
        }
        Ok(settings)
    }
}

/// Load and validate a configuration file, reading `${VAR}` from the process environment.
pub fn load_file(path: &str) -> Result<Settings, Vec<String>> {
    Loader::new().file(path)
}

/// [`load_file`], knowing the provider kinds a host registered besides the built-in ones.
pub fn load_file_with(path: &str, kinds: &ProviderKinds) -> Result<Settings, Vec<String>> {
    Loader::new().kinds(kinds).file(path)
}

/// [`load_file`] for a gateway embedded in another Pingora server: `switchyard.listeners` may be
/// absent (the host owns the sockets).
pub fn load_hosted_file(path: &str) -> Result<Settings, Vec<String>> {
    Loader::new().hosted().file(path)
}

/// Load and validate configuration text; `lookup` reads variables.
pub fn load_str(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, Vec<String>> {
    Loader::new().text(text, lookup)
}

/// [`load_str`], with models' lifecycles judged by `clock` (the crate's tests, through
/// `internals`; a host sets a clock with [`Loader`]).
pub fn load_str_at(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    clock: &Clock,
) -> Result<Settings, Vec<String>> {
    Loader::new().clock(clock).text(text, lookup)
}

/// [`load_str`], knowing the provider kinds a host registered besides the built-in ones.
pub fn load_str_with(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    kinds: &ProviderKinds,
) -> Result<Settings, Vec<String>> {
    Loader::new().kinds(kinds).text(text, lookup)
}

/// [`load_str`] for a gateway embedded in another Pingora server: `switchyard.listeners` may be
/// absent (the host owns the sockets).
pub fn load_hosted_str(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, Vec<String>> {
    Loader::new().hosted().text(text, lookup)
}

/// The one loader behind every entry point above.
fn load(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    clock: &Clock,
    kinds: &ProviderKinds,
    sockets: Sockets,
) -> Result<Settings, Vec<String>> {
    let mut doc: Value =
        serde_yaml::from_str(text).map_err(|e| vec![format!("not valid YAML: {e}")])?;
    let mut errors = Vec::new();
    env::interpolate(&mut doc, "", lookup, &mut errors);
    let Value::Mapping(mut top) = doc else {
        return Err(vec!["the file must be a YAML mapping".into()]);
    };
    let gateway_value = top.remove("switchyard");

    let server = server_conf(top, &mut errors).unwrap_or_default();
    let Some(gateway_value) = gateway_value else {
        errors.push("switchyard: missing (the gateway's settings)".into());
        return Err(errors);
    };
    let mut unknown = Vec::new();
    let parsed: Result<GatewayFile, _> = serde_path_to_error::deserialize(
        serde_ignored::Deserializer::new(gateway_value, &mut |path| {
            unknown.push(format!("switchyard{}: unknown key", key_path(&path)))
        }),
    );
    errors.extend(unknown);
    let file = match parsed {
        Ok(f) => f,
        Err(e) => {
            errors.push(format!("switchyard.{}: {}", e.path(), e.inner()));
            return Err(errors);
        }
    };
    let gateway = super::build(file, clock, kinds, sockets, &mut errors);
    match gateway {
        Some(g) if errors.is_empty() => Ok(Settings { server, gateway: g }),
        _ => Err(errors),
    }
}

/// A key's path as the other errors write it (`.listeners[1].tls.reload`): serde_ignored's own
/// display writes a sequence index as `.1` and an optional section as `.?`.
fn key_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", key_path(parent)),
        Path::Map { parent, key } => format!("{}.{key}", key_path(parent)),
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => key_path(parent),
    }
}

/// Pingora's own settings: every top-level key other than `switchyard`. Pingora ignores keys it
/// does not know, so they are checked here against the keys `ServerConf` itself serializes.
fn server_conf(top: serde_yaml::Mapping, errors: &mut Vec<String>) -> Option<ServerConf> {
    let known: Vec<String> = match serde_yaml::to_value(ServerConf::default()) {
        Ok(Value::Mapping(m)) => m
            .keys()
            .filter_map(|k| k.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    for key in top.keys() {
        let name = key.as_str().unwrap_or("?");
        if !known.iter().any(|k| k == name) {
            errors.push(format!(
                "{name}: unknown key (not a Pingora server setting)"
            ));
        }
    }
    match serde_path_to_error::deserialize::<_, ServerConf>(Value::Mapping(top)) {
        Ok(conf) => match conf.validate() {
            Ok(c) => Some(c),
            Err(e) => {
                errors.push(format!("server settings: {e}"));
                None
            }
        },
        Err(e) => {
            errors.push(format!("{}: {}", e.path(), e.inner()));
            None
        }
    }
}
