//! Crash tests (C12): the built binary on a durable store, eight
//! concurrent writers, `SIGKILL` at random moments, restart, and a check
//! that every acknowledged write is there, nothing appears that no writer
//! sent, and the next id is above every id seen (C2) — Jepsen's set check
//! in miniature. Over PostgreSQL also: the service's database connections
//! terminated mid-load give 503s, lose nothing acknowledged, and heal
//! without a restart. After each restart every create whose outcome was
//! unknown is retried with its `Idempotency-Key`, and each key must end up
//! as exactly one item (C7).
//!
//! Run them alone with `cargo test -p items-app --test e2e crash -- --nocapture`
//! to see the figures; `CRASH_SEED=<seed>` repeats a run's choices.

pub mod check;
pub mod history;
pub mod load;
mod model;
mod postgres;
mod retry;
pub mod rng;
pub mod rounds;
mod self_check;
mod sqlite;

/// Kill rounds per store: each is about a second of load, a kill, a
/// restart and a full read-back.
const ROUNDS: usize = 20;
