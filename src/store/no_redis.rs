//! The Redis connection's stand-in when the `redis` cargo feature is off: a type with no values,
//! so `Option<RedisConn>` is always `None` and every branch that would use Redis is statically
//! unreachable. The configuration refuses a store naming Redis in such a build.

use std::time::Duration;

/// No Redis in this build: there is no value of this type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedisConn {}

impl RedisConn {
    /// Unreachable: there is no connection.
    pub fn key_prefix(&self) -> &str {
        match *self {}
    }

    /// Unreachable: there is no connection.
    pub fn timeout(&self) -> Duration {
        match *self {}
    }
}
