//! Shared state between requests and instances: hosted image files and asynchronous tasks, in
//! memory for one instance or in Redis for several, and the Redis connection they share.

pub mod answers;
pub mod files;
pub mod redis_conn;
pub mod redis_files;
pub mod tasks;
