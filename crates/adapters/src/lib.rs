//! Adapters of items-service, each in its own module; none reaches into
//! another.
//!
//! - [`memory`]: driven adapter, in-memory repositories (the default store);
//! - [`postgres`]: driven adapter, PostgreSQL repositories (`DATABASE_URL`);
//! - [`disk`]: driven adapter, the local-disk upload store;
//! - [`http`]: driving adapter, the actix-web HTTP edge.

pub mod disk;
pub mod http;
pub mod memory;
pub mod postgres;
pub mod tcp_proxy;
