//! Adapters of items-service, each in its own module; none reaches into
//! another.
//!
//! - [`memory`]: driven adapter, in-memory repositories (the default store);
//! - [`postgres`]: driven adapter, PostgreSQL repositories (`DATABASE_URL`);
//! - [`redis`]: driven adapter, rate-limit budgets shared in Redis (`REDIS_URL`);
//! - [`disk`]: driven adapter, the local-disk upload store;
//! - [`http`]: driving adapter, the actix-web HTTP edge and the admin listener.
//!
//! Beside them: [`report`], the one way errors are written out with their
//! causes. Test fixtures live in `items-testkit`, never here.

pub mod disk;
pub mod http;
pub mod memory;
pub mod postgres;
pub mod redis;
pub mod report;
