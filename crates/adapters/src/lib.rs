//! Adapters of items-service, one Cargo feature each, each in its own
//! module; none reaches into another.
//!
//! - [`memory`] (always built): in-memory repositories and rate-limit
//!   budgets, the default store;
//! - `http` (feature `http`): the driving adapter, the actix-web HTTP edge
//!   and the admin listener;
//! - `postgres` (feature `postgres`): PostgreSQL repositories (`DATABASE_URL`);
//! - `sqlite` (feature `sqlite`): SQLite repositories in one local file;
//! - `redis` (feature `redis`): rate-limit budgets shared in Redis
//!   (`REDIS_URL`);
//! - `disk` (feature `disk`): the local-disk upload store.
//!
//! Beside them: [`report`], the one way errors are written out with their
//! causes; `changes`, what the stores' change feeds share (C14); `batch`, the group-commit queue the stores' engines drain (built
//! with any adapter that uses it); `sql`, what the two SQL stores share;
//! `traces`, the spans every adapter emits for traces (C11).
//! Test fixtures live in `items-testkit` and the tests, never here.

mod changes;
pub mod memory;
pub mod report;

#[cfg(feature = "batch")]
pub mod batch;
#[cfg(feature = "disk")]
pub mod disk;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "sql")]
pub mod sql;
#[cfg(feature = "sqlite")]
pub mod sqlite;
#[cfg(any(feature = "http", feature = "batch"))]
pub mod traces;
