//! Redis: rate-limit budgets shared by every instance (C9).
//!
//! [`RedisRateLimitStore::open`] makes a store on a `redis://` URL, its
//! keys under a prefix ([`RedisRateLimitStore::DEFAULT_PREFIX`] for the
//! service); it is a [`RateLimitStore`](items_domain::RateLimitStore), to
//! stand in front of the local budgets, which take over whenever it fails,
//! and a [`HealthCheck`](items_domain::HealthCheck) for readiness.
//! [`STORE_ERRORS`] counts its failures.
//!
//! Each counted request is one GCRA step on the client's key in a Lua script
//! (`gcra.lua`), atomic in Redis and timed by the Redis server's clock, so
//! instances whose clocks disagree still share one budget. Each thread that
//! asks has a lane (`lanes.rs`): a queue of [`crate::batch`], a task that
//! sends what queued during its previous call as one script call
//! (`coalesce.rs`) and a connection of the redis crate's (`script.rs`).
//! The lanes of one store share its client, script and view of Redis
//! (`shared.rs`); the store itself asks and settles (`store.rs`).
//!
//! Invariants: no decision waits more than [`RedisRateLimitStore::TIMEOUT`]
//! from the moment it is asked, queueing included (unless its own worker was
//! too busy to send it in time: Redis then still gets a round trip's time,
//! `coalesce.rs`); a failure is the caller's cue to use its local budget and
//! counts once in [`STORE_ERRORS`]; after one, Redis is not asked again for
//! `RETRY_EVERY`, so an outage costs a request nothing; an outage and the
//! return are each logged once (`health.rs`); nothing connects before the
//! first decision, so a Redis down at start is an outage, not a start error.
//!
//! Why: one script call per ~40 decisions (docs/performance.md, "The Redis store, measured").

mod coalesce;
mod health;
mod lanes;
mod script;
mod shared;
mod store;

pub use store::{RedisRateLimitStore, STORE_ERRORS};
