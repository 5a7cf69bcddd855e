//! Coalescing: while every pooled connection is busy, requests of one kind
//! queue, and the next connection to come free runs all of them as one
//! statement.
//!
//! A point read or a create alone is almost nothing but a statement's fixed
//! costs (a round trip, an execution, for writes a commit), so a request
//! that finds a connection free goes at once, alone, with its own
//! statement: no timer, no added wait. Only when the pool is exhausted does
//! a request queue (the neutral group-commit queue of [`crate::batch`]);
//! the first to queue spawns a *drainer*, a task that waits for a
//! connection in the pool's own queue and, once it has one, takes every
//! request queued by then and runs them as one statement
//! ([`Operation::many`]), answering each caller its own result. While a
//! drainer waits, later requests join the queue it will take; once it
//! holds a connection, the next request to queue spawns the next drainer.
//! Point reads take the queue even when a connection is free
//! ([`Operation::ALWAYS_QUEUED`]; [`ItemReads`] says why): the drainer a
//! lone read spawns runs it at once, alone, but only after the other
//! requests its worker already had ready, so reads that arrive together go
//! together.
//!
//! Reads are pipelined ([`Operation::PIPELINED`]): a read batch does not
//! wait for the one in flight before it. Its drainer sends its statement on
//! the connection that batch is on, up to [`PIPELINE_DEPTH`] batches in
//! flight on one connection, so a burst of reads is served without a round
//! trip between batches, on one connection and one backend.
//!
//! A [`Coalescer`] queues one kind of request, an [`Operation`] (the point
//! reads of `reads.rs`, the creates of `creates.rs`); `coalescer.rs` states
//! its invariants, the statement budget (C12) among them. Its drainers are
//! `drainer.rs`, the statements they run `statements.rs`, the caps
//! (statement slots, batch size, pipeline depth) `limits.rs`, and what the
//! coalescers did, counted and published, `stats.rs`.
//!
//! Why: 15–21 reads and 16 creates a statement under load, creates at
//! 2.27–2.30 × `pgbench` with one slot against 1.77 × with three,
//! docs/performance.md "The PostgreSQL store, measured".
//!
//! [`Operation`]: operation::Operation
//! [`Operation::many`]: operation::Operation::many
//! [`Operation::ALWAYS_QUEUED`]: operation::Operation::ALWAYS_QUEUED
//! [`Operation::PIPELINED`]: operation::Operation::PIPELINED
//! [`PIPELINE_DEPTH`]: limits::PIPELINE_DEPTH

mod coalescer;
mod creates;
mod drainer;
mod errors;
mod limits;
mod operation;
mod reads;
mod statements;
mod stats;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_broken;
#[cfg(test)]
mod tests_budget;
#[cfg(test)]
mod tests_pipelined;

pub(super) use coalescer::Coalescer;
pub(super) use creates::{ItemCreates, ProductCreates};
pub(super) use limits::statement_slots;
pub(super) use reads::ItemReads;
pub use stats::{
    CoalescingStats, REQUESTS_PER_STATEMENT, REQUESTS_PER_STATEMENT_BUCKETS, describe_metrics,
};
