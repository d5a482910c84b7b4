//! Talking to providers: the provider account (credentials, endpoints, error classification),
//! name resolution, the exchange over Pingora's connector (requests sent whole, answers read ahead), the download guard, targets'
//! health (ejection of failing targets), the retry policy, request signing (AWS SigV4, Tencent Cloud TC3), and the trust roots for providers' certificates.

pub(crate) mod ahead;
pub(crate) mod dns;
pub(crate) mod endpoint;
pub(crate) mod exchange;
pub(crate) mod gather;
pub(crate) mod google_auth;
pub(crate) mod guard;
pub(crate) mod health;
pub(crate) mod provider;
pub(crate) mod retry;
// AWS Signature Version 4 (issue 30).
pub(crate) mod reuse;
pub(crate) mod sigv4;
// WebSockets to providers (OpenAI's Realtime API).
pub(crate) mod socket;
// Tencent Cloud TC3-HMAC-SHA256 signing (issue 30).
pub(crate) mod tc3;
pub(crate) mod trust;
