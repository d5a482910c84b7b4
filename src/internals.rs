//! Not part of the public API, and not covered by semantic versioning: the crate's internals
//! that its own integration tests, benchmarks, fuzz targets and binary reach. They change
//! without notice; a host uses the documented items at the crate's root instead.
//!
//! The paths mirror the crate's modules (`internals::store::tasks::TaskRecord` is
//! `crate::store::tasks::TaskRecord`), so a test reads like the code it tests.

/// The public contract's request and answer types, and the adapter traits.
pub mod api {
    pub use crate::api::{adapter, compat, discovery, image_edit, images, rerank, speech};
}

/// Authentication.
pub mod auth {
    pub use crate::auth::{sha256_hex, AuthSettings, Authenticator};
}

/// Capability data.
pub mod caps {
    pub use crate::caps::{family, lifecycle, Caps};
}

/// The model catalog.
pub mod catalog {
    pub use crate::catalog::{Catalog, Target};
}

/// `switchyard check-providers`.
pub mod check {
    pub use crate::check::main;
}

/// Shared types.
pub mod common {
    pub use crate::common::{error, image_input, images, native, Operation};
}

/// The speech relay.
pub mod engine {
    /// SSE speech events.
    pub mod speech {
        pub use crate::engine::speech::delta_event;
    }
}

/// The configuration: loading at a given clock, the build without a ledger.
pub mod config {
    pub use crate::config::load::load_str_at;
    /// The usage ledger's settings.
    pub mod ledger {
        pub use crate::config::ledger::{LedgerSettings, NO_LEDGER};
    }
}

/// The gateway's metrics.
pub mod metrics {
    pub use crate::metrics::{encode, Metrics};
}

/// The logger's credential filter.
pub mod logging {
    pub use crate::logging::sensitive_name;
}

/// Hosted files and tasks.
pub mod store {
    #[cfg(feature = "redis")]
    pub use crate::store::redis_files;
    pub use crate::store::{files, redis_conn, tasks};
}

/// Stream framing and speech decoding.
pub mod stream {
    pub use crate::stream::{audio, lines, sse};
    /// PCM into the public speech formats (the `hot_paths` encoding rows).
    pub mod encode {
        pub use crate::stream::encode::{encoder, PcmEncoder};
    }
}

/// Token counting.
pub mod tokens {
    pub use crate::tokens::count;
}

/// Provider accounts.
pub mod upstream {
    /// A provider account.
    pub mod provider {
        pub use crate::upstream::provider::Provider;
        // Named by `Auth::Signed` and `Provider::auth_headers`, hidden: the signing API is the
        // built-in kinds' own.
        pub use crate::upstream::provider::{Ready, Signable, Signer};
    }
}

/// The configuration reloader.
pub mod reload {
    pub use crate::server::reload::{ConfigSource, Reloader};
}

/// The binary's server: its entry points with `SIGHUP` reloading.
pub mod server {
    pub use crate::server::build_with_reload;
}

/// The usage ledger.
#[cfg(feature = "ledger")]
pub mod ledger {
    pub use crate::config::ledger::LedgerSettings;
    pub use crate::ledger::{Ledger, Record, Usage};

    /// `switchyard spend`.
    pub mod cli {
        pub use crate::ledger::cli::main;
    }
    /// `switchyard keys …` (the management API's command line).
    pub mod keys_cli {
        pub use crate::tenants::cli::main;
    }
}
