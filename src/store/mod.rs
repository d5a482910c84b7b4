//! Shared state between requests and instances: hosted image files and asynchronous tasks, in
//! memory for one instance or in Redis for several, and the Redis connection they share. Redis
//! needs the `redis` cargo feature (on by default); without it `redis_conn` is an empty stand-in.

pub(crate) mod answers;
pub mod files;
#[cfg(feature = "redis")]
mod kept_behind;
#[cfg(feature = "redis")]
pub mod redis_conn;
#[cfg(not(feature = "redis"))]
#[path = "no_redis.rs"]
pub mod redis_conn;
#[cfg(feature = "redis")]
pub mod redis_files;
pub mod tasks;
