//! The change feed's run (C14): the built binary over each store, eight
//! writers creating, renaming and deleting through every instance (and
//! all renaming one shared item, so transactions contend and commit out
//! of the order they began), subscribers reading through the instances in
//! turn and reconnecting with `Last-Event-ID` every few events, one
//! instance killed with `SIGKILL` mid-run and started again (two
//! instances), and the PostgreSQL primary killed and its synchronous
//! standby promoted mid-run, the service finding it through its
//! multi-host `DATABASE_URL`. Then each subscriber's events are checked
//! against the final state ([`verify`]): none missed, repeated or out of
//! order, nothing that was refused, exactly the store's change table.
//!
//! - memory: one process (a kill would lose the store), no failover;
//! - SQLite: two processes on one file;
//! - PostgreSQL: two instances over the test's own primary and
//!   synchronous standby (`failover/cluster.rs`).
//!
//! `FEED_RUN_EVENTS` sizes a run in acknowledged writes (each one event);
//! the default keeps each under half a minute. The long run, once:
//! `FEED_RUN_EVENTS=1000000 cargo test --release -p items-app --test e2e
//! feed_run -- --nocapture --test-threads 1`, which prints the figures
//! (events, reconnections, delivery p50/p99, kills, failovers, duration);
//! `CRASH_SEED=<seed>` repeats a run's choices, and `FEED_RUN_RATE=<writes
//! a second>` paces the writers (as fast as the service answers by
//! default), to measure the delivery latency under a load the machine
//! keeps up with.

mod harness;
mod promoted;
mod subscribers;
mod verify;
mod writers;

use harness::{Store, run, sized};

/// Writes per run unless `FEED_RUN_EVENTS` says otherwise.
const DEFAULT_EVENTS: usize = 5_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn in_memory_eight_writers_and_reconnecting_subscribers_miss_repeat_and_reorder_nothing_c14()
{
    let figures = run(Store::Memory, sized(DEFAULT_EVENTS)).await;

    figures.assert_clean();
    assert!(figures.reconnects >= 2, "{figures}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn over_sqlite_two_processes_a_kill_and_reconnections_miss_repeat_and_reorder_nothing_c14() {
    let figures = run(Store::sqlite(), sized(DEFAULT_EVENTS)).await;

    figures.assert_clean();
    assert_eq!(figures.kills, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn over_postgres_a_kill_a_failover_and_reconnections_miss_repeat_and_reorder_nothing_c14() {
    let figures = run(Store::postgres().await, sized(DEFAULT_EVENTS)).await;

    figures.assert_clean();
    assert_eq!((figures.kills, figures.failovers), (1, 1));
}
