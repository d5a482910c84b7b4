//! Talking to providers: endpoints, name resolution, the exchange over Pingora's connector, and the
//! retry policy.

pub mod attempts;
pub mod dns;
pub mod endpoint;
pub mod exchange;
pub mod guard;
pub mod retry;
