//! The coalescer of one kind of request: a request goes alone when it
//! finds a slot and a connection free, else it queues for the next
//! drainer (`drainer.rs`).
//!
//! Invariants:
//! - at most one drainer per kind waits for a connection, and a batch is
//!   exactly what was queued while all connections were busy;
//! - each kind has a few *statement slots* ([`statement_slots`](super::limits::statement_slots)) and runs
//!   a statement only in a free one, so it runs at most that many at once
//!   (a pipelined kind, [`PIPELINE_DEPTH`] batches on each slot's
//!   connection), however many connections are free: where the service
//!   itself is the bottleneck, connections keep coming free, so without
//!   the cap requests would go alone; with it, the requests beyond the
//!   slots queue, batches fill, and each statement's fixed cost is shared
//!   by more requests;
//! - a lone request still goes at once (a point read after one task hop),
//!   so one client's latency stays that of a single statement;
//! - the statement budget (`DATABASE_STATEMENT_TIMEOUT_MS`, C12,
//!   `budget.rs`) holds for coalesced requests as for any other: a request
//!   alone runs on a lease whose deadline is the budget from now; a queued
//!   request's deadline is the budget from when it was asked, so its wait
//!   in the queue and for a connection counts against it;
//! - the drainer, once it holds a connection, *claims* the requests still
//!   wanted ([`Batch::claim`](crate::batch::Batch::claim)): one whose
//!   caller gave up before (its future dropped: a client gone) or whose
//!   deadline passed (its caller answered 503) is left out, never run;
//! - a batch runs under a lease whose deadline is the **earliest deadline
//!   among its claimed requests** (or the lease's own, if earlier), so no
//!   caller waits for its answer past its own budget; the price is that a
//!   batch holding a request close to its deadline may fail for all (each
//!   answered 503) where the others alone had time left;
//! - a create batch is one transaction committed through the lease only
//!   before that deadline (`creates.rs`): a batch past it answers 503 to
//!   each request and writes nothing; a batch that fails answers
//!   [`RepositoryError::Unavailable`] to every request in it, and nothing
//!   of it was written.
//!
//! [`RepositoryError::Unavailable`]: items_domain::RepositoryError::Unavailable

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::errors::unanswered;
use super::limits::{MAX_BATCH, PIPELINE_DEPTH};
use super::operation::{Operation, Reply};
use super::statements::one;
use super::stats::CoalescingStats;
use crate::batch::{self, Batches, Queue};
use crate::postgres::pool::{Lease, Pool, try_lease};

/// The queue of one kind of request, shared by every clone (one per store,
/// so all of a store's repositories feed the same batches).
pub(in crate::postgres) struct Coalescer<O: Operation> {
    pub(super) inner: Arc<Inner<O>>,
}

impl<O: Operation> Clone for Coalescer<O> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<O: Operation> fmt::Debug for Coalescer<O> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Coalescer")
            .field("operation", &O::LABEL)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// What every clone of a coalescer shares; its drainers are `drainer.rs`.
pub(super) struct Inner<O: Operation> {
    pub(super) pool: Pool,
    /// Statements of this kind running now ([`statement_slots`](super::limits::statement_slots); times
    /// [`PIPELINE_DEPTH`] for a pipelined kind).
    pub(super) slots: Arc<Semaphore>,
    /// A pipelined kind's connections, each shared by the batches in flight
    /// on it (each holds a strong reference; the last to end gives the
    /// connection back to the pool).
    pub(super) pipes: parking_lot::Mutex<Vec<Weak<Lease>>>,
    /// The most connections a pipelined kind shares at once.
    pub(super) most_pipes: usize,
    pub(super) queue: Queue<O::Work, Reply<O>>,
    pub(super) batches: Mutex<Batches<O::Work, Reply<O>>>,
    /// A drainer is waiting for a connection: a request that queues now
    /// will be in the batch it takes.
    pub(super) waiting: AtomicBool,
    pub(super) statements: AtomicU64,
    pub(super) requests: AtomicU64,
    pub(super) largest: AtomicU64,
}

impl<O: Operation> Coalescer<O> {
    /// A queue over `pool`, running at most `slots` statements at once.
    pub(in crate::postgres) fn new(pool: Pool, slots: usize) -> Self {
        let (queue, batches) = batch::queue(MAX_BATCH);
        let slots = slots.max(1);
        let depth = if O::PIPELINED { PIPELINE_DEPTH } else { 1 };
        Self {
            inner: Arc::new(Inner {
                pool,
                slots: Arc::new(Semaphore::new(slots * depth)),
                pipes: parking_lot::Mutex::new(Vec::new()),
                most_pipes: slots,
                queue,
                batches: Mutex::new(batches),
                waiting: AtomicBool::new(false),
                statements: AtomicU64::new(0),
                requests: AtomicU64::new(0),
                largest: AtomicU64::new(0),
            }),
        }
    }

    /// Runs `work`: at once and alone when a slot and a connection are
    /// free, else in the batch of the next connection to come free. An
    /// operation that is [always queued](Operation::ALWAYS_QUEUED) takes
    /// the queue either way: a lone request is taken at once by the drainer
    /// it spawns, and goes alone.
    pub(in crate::postgres) async fn call(&self, work: O::Work) -> Reply<O> {
        if !O::ALWAYS_QUEUED
            && let Ok(_slot) = Arc::clone(&self.inner.slots).try_acquire_owned()
            && let Some(mut lease) = try_lease(&self.inner.pool).await?
        {
            self.inner.record(1);
            return one::<O>(&mut lease, &work).await;
        }
        // Queued: the budget runs from when the request was asked, so the
        // wait for a batch counts against it (C12).
        let budget = self.inner.pool.manager().budget;
        let deadline = Instant::now() + budget;
        let unanswered = |why| unanswered(why, budget);
        let answer = self
            .inner
            .queue
            .enqueue_by(work, deadline)
            .await
            .map_err(unanswered)?;
        self.inner.wake();
        answer.wait().await.map_err(unanswered)?
    }

    pub(in crate::postgres) fn stats(&self) -> CoalescingStats {
        CoalescingStats {
            statements: self.inner.statements.load(Ordering::Relaxed),
            requests: self.inner.requests.load(Ordering::Relaxed),
            largest: self.inner.largest.load(Ordering::Relaxed),
        }
    }

    /// Requests queued now, waiting for a connection.
    #[cfg(test)]
    pub(super) fn queued(&self) -> usize {
        self.inner.queue.queued()
    }
}
