//! Adapters of items-service, each in its own module; none reaches into
//! another.
//!
//! - [`memory`]: driven adapter, in-memory repositories (the default store);
//! - [`http`]: driving adapter, the actix-web HTTP edge.

pub mod http;
pub mod memory;
