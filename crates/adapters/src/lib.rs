//! Adapters of items-service, each in its own module; none reaches into
//! another.
//!
//! - [`memory`]: driven adapter, in-memory repositories (the default store);
//! - [`postgres`]: driven adapter, PostgreSQL repositories (`DATABASE_URL`);
//! - [`sqlite`]: driven adapter, SQLite repositories in one local file;
//! - [`redis`]: driven adapter, rate-limit budgets shared in Redis (`REDIS_URL`);
//! - [`disk`]: driven adapter, the local-disk upload store;
//! - [`http`]: driving adapter, the actix-web HTTP edge and the admin listener.
//!
//! Beside them: [`report`], the one way errors are written out with their
//! causes, [`batch`], the group-commit queue a store's writer drains, and
//! `stored_rows`, the rows PostgreSQL and SQLite both hold read back into the
//! domain.
//! Test fixtures live in `items-testkit`, never here.

pub mod batch;
pub mod budget;
pub mod disk;
pub mod http;
pub mod memory;
pub mod postgres;
pub mod redis;
pub mod report;
pub mod sqlite;
mod stored_rows;
