//! Talking to providers: the provider account (credentials, endpoints, error classification),
//! name resolution, the exchange over Pingora's connector, the download guard, targets'
//! health (ejection of failing targets), the retry policy, and the trust roots for providers' certificates.

pub mod dns;
pub mod endpoint;
pub mod exchange;
pub mod gather;
pub mod guard;
pub mod health;
pub mod provider;
pub mod retry;
pub mod trust;
