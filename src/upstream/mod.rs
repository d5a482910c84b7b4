//! Talking to providers: the provider account (credentials, endpoints, error classification),
//! name resolution, the exchange over Pingora's connector, the download guard, targets'
//! health (ejection of failing targets), the retry policy, and the trust roots for providers' certificates.

pub(crate) mod dns;
pub(crate) mod endpoint;
pub(crate) mod exchange;
pub(crate) mod gather;
pub(crate) mod guard;
pub(crate) mod health;
pub(crate) mod provider;
pub(crate) mod retry;
pub(crate) mod reuse;
pub(crate) mod trust;
