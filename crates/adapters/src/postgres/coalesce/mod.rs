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
//! Invariants:
//! - at most one drainer per kind waits for a connection, and a batch is
//!   exactly what was queued while all connections were busy;
//! - each kind has a few *statement slots* ([`statement_slots`]) and runs
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
//!   wanted ([`Batch::claim`]): one whose caller gave up before (its future
//!   dropped: a client gone) or whose deadline passed (its caller answered
//!   503) is left out, never run;
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
//! Why: 15–21 reads and 16 creates a statement under load, creates at
//! 2.27–2.30 × `pgbench` with one slot against 1.77 × with three,
//! docs/performance.md "The PostgreSQL store, measured".

mod creates;
mod errors;
mod reads;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_broken;
#[cfg(test)]
mod tests_budget;
#[cfg(test)]
mod tests_pipelined;

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use items_domain::RepositoryError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tracing::Instrument;

use super::pool::{ACQUIRE_TIMEOUT, Lease, Pool, lease, try_lease};
use crate::batch::{self, Batch, Batches, Queue};

use errors::{fail, unanswered};

pub(super) use creates::{ItemCreates, ProductCreates};
pub(super) use reads::ItemReads;

/// Requests each statement served, per operation (a histogram: one sample
/// per statement, 1 for a request that went alone).
pub const REQUESTS_PER_STATEMENT: &str = "database_requests_per_statement";
/// Buckets for [`REQUESTS_PER_STATEMENT`]: powers of two up to a full batch.
pub const REQUESTS_PER_STATEMENT_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];

/// The most requests one statement serves (and one queue holds): an array
/// parameter of 1,024 ids or names is still one small message.
pub(super) const MAX_BATCH: usize = 1024;

/// The statement slots of one kind, the statements it runs at once at most:
/// one per ten connections of the pool (at least one), so batches fill
/// under load and the rest of the pool stays for the other kinds and for
/// listings and updates.
pub(super) fn statement_slots(pool_size: u32) -> usize {
    (pool_size as usize / 10).max(1)
}

/// Batches of a pipelined kind in flight on one connection at most.
pub(super) const PIPELINE_DEPTH: usize = 2;

/// One kind of request that can be coalesced: what it runs alone, and what
/// it runs for many.
pub(super) trait Operation: Send + Sync + 'static {
    /// What one caller asks.
    type Work: Send + Sync + 'static;
    /// What one caller gets.
    type Output: Send + 'static;
    /// The `operation` label of [`REQUESTS_PER_STATEMENT`].
    const LABEL: &'static str;
    /// The statement's kind and table, as a batch's span names them (C11):
    /// `SELECT`, `items`.
    const STATEMENT: (&'static str, &'static str);
    /// Whether the statement writes: it then runs in a transaction committed
    /// only before the lease's deadline (C12), so a request answered 503 is
    /// never committed afterwards, as an autocommitted statement held up by
    /// a stalled server could be.
    const WRITES: bool = false;

    /// Whether a request that finds a slot free goes through the queue all
    /// the same, run by a drainer rather than by its own task. A lone
    /// request still goes at once and alone (a batch of one runs
    /// [`Operation::one`]); under load, see [`ItemReads`] for what it
    /// changes.
    const ALWAYS_QUEUED: bool = false;

    /// Whether batches of this kind are pipelined on shared connections
    /// ([`PIPELINE_DEPTH`] in flight on each): only for statements that
    /// read outside a transaction, which need no connection of their own.
    /// Such a kind implements [`Operation::prepare`] and
    /// [`Operation::shared`].
    const PIPELINED: bool = false;

    /// Prepares the statements [`Operation::shared`] sends, on a connection
    /// about to be shared.
    fn prepare(_lease: &mut Lease) -> impl Future<Output = Result<(), RepositoryError>> + Send {
        async { Ok(()) }
    }

    /// A batch's statement on a connection shared with other batches, by
    /// `deadline`: one output per work, in order.
    fn shared(
        _lease: &Lease,
        _deadline: Instant,
        _work: &[&Self::Work],
    ) -> impl Future<Output = Result<Vec<Self::Output>, RepositoryError>> + Send {
        async {
            Err(RepositoryError::unavailable(
                "this kind of statement is not pipelined",
            ))
        }
    }

    /// One request, alone on a free connection or alone in its batch.
    fn one(
        lease: &mut Lease,
        work: &Self::Work,
    ) -> impl Future<Output = Result<Self::Output, RepositoryError>> + Send;

    /// Many requests in one statement: one output per work, in order.
    fn many(
        lease: &mut Lease,
        work: &[&Self::Work],
    ) -> impl Future<Output = Result<Vec<Self::Output>, RepositoryError>> + Send;
}

type Reply<O> = Result<<O as Operation>::Output, RepositoryError>;
/// A batch of requests of kind `O`.
type BatchOf<O> = Batch<<O as Operation>::Work, Reply<O>>;

/// Opens the transaction a writing operation runs in ([`Operation::WRITES`]).
async fn begin<O: Operation>(lease: &mut Lease) -> Result<(), RepositoryError> {
    if O::WRITES {
        lease.begin_write().await?;
    }
    Ok(())
}

/// Commits a writing operation's transaction, only before the deadline.
async fn commit<O: Operation>(lease: &mut Lease) -> Result<(), RepositoryError> {
    if O::WRITES {
        lease.commit().await?;
    }
    Ok(())
}

/// One request alone, in a transaction when `O` writes.
async fn one<O: Operation>(lease: &mut Lease, work: &O::Work) -> Reply<O> {
    begin::<O>(lease).await?;
    let output = O::one(lease, work).await?;
    commit::<O>(lease).await?;
    Ok(output)
}

/// A batch's statement, in the transaction its drainer opened when `O`
/// writes. A batch of one runs the statement a request alone runs: it plans
/// as a primary key lookup or a single insert, cheaper than the array form.
async fn statement<O: Operation>(
    lease: &mut Lease,
    work: &[&O::Work],
) -> Result<Vec<O::Output>, RepositoryError> {
    let outputs = match work {
        [alone] => vec![O::one(lease, alone).await?],
        _ => O::many(lease, work).await?,
    };
    commit::<O>(lease).await?;
    Ok(outputs)
}

/// The queue of one kind of request, shared by every clone (one per store,
/// so all of a store's repositories feed the same batches).
pub(super) struct Coalescer<O: Operation> {
    inner: Arc<Inner<O>>,
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

struct Inner<O: Operation> {
    pool: Pool,
    /// Statements of this kind running now ([`statement_slots`]; times
    /// [`PIPELINE_DEPTH`] for a pipelined kind).
    slots: Arc<Semaphore>,
    /// A pipelined kind's connections, each shared by the batches in flight
    /// on it (each holds a strong reference; the last to end gives the
    /// connection back to the pool).
    pipes: parking_lot::Mutex<Vec<Weak<Lease>>>,
    /// The most connections a pipelined kind shares at once.
    most_pipes: usize,
    queue: Queue<O::Work, Reply<O>>,
    batches: Mutex<Batches<O::Work, Reply<O>>>,
    /// A drainer is waiting for a connection: a request that queues now
    /// will be in the batch it takes.
    waiting: AtomicBool,
    statements: AtomicU64,
    requests: AtomicU64,
    largest: AtomicU64,
}

/// What a coalescer did so far (for tests and the benchmark notes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoalescingStats {
    /// Statements run, alone or for a batch.
    pub statements: u64,
    /// Requests those statements served.
    pub requests: u64,
    /// The most requests one statement served.
    pub largest: u64,
}

impl<O: Operation> Coalescer<O> {
    /// A queue over `pool`, running at most `slots` statements at once.
    pub(super) fn new(pool: Pool, slots: usize) -> Self {
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
    pub(super) async fn call(&self, work: O::Work) -> Reply<O> {
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

    pub(super) fn stats(&self) -> CoalescingStats {
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

impl<O: Operation> Inner<O> {
    /// Makes sure a drainer will take what was just queued: spawns one
    /// unless one is already waiting for a connection. The request was
    /// queued before this check and a drainer stops waiting before it takes
    /// its batch, so either that drainer takes the request or a new one is
    /// spawned.
    fn wake(self: &Arc<Self>) {
        if self
            .waiting
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            tokio::spawn(Arc::clone(self).drain());
        }
    }

    /// Waits for a slot and a connection, takes every request queued by
    /// then, runs them as one statement and answers each.
    async fn drain(self: Arc<Self>) {
        if O::PIPELINED {
            return self.drain_pipelined().await;
        }
        let taken = self.slot_and_lease().await;
        let Some((batch, (slot, mut lease))) = self.claim(taken) else {
            // A writing drainer's open transaction is rolled back when the
            // pool lends the connection again.
            return;
        };
        // No caller waits for its answer past its own deadline (C12). The
        // lease was taken before the batch was known (a writing kind's even
        // before its slot came free), so its own deadline says nothing of
        // the batch's: the batch's is its requests'.
        lease.renew();
        if let Some(deadline) = batch.deadline() {
            lease.limit(deadline);
        }
        let span = self.span(&batch);
        let work: Vec<&O::Work> = batch.work().collect();
        let outputs = statement::<O>(&mut lease, &work).instrument(span).await;
        drop(work);
        // The slot goes back before the callers are answered: the next
        // drainer, woken first, runs before the callers' tasks on this
        // worker and sends its statement while they write their responses,
        // rather than after all of them.
        drop(slot);
        self.answer(batch, outputs);
    }

    /// [`Inner::drain`] for a pipelined kind: the batch is sent on a
    /// connection other batches may be in flight on, and must end by its
    /// own deadline (its requests' earliest, at most the budget from now).
    async fn drain_pipelined(self: Arc<Self>) {
        let taken = self.slot_and_pipe().await;
        let Some((batch, (slot, pipe))) = self.claim(taken) else {
            return;
        };
        let budget = Instant::now() + self.pool.manager().budget;
        let deadline = batch
            .deadline()
            .map_or(budget, |deadline| deadline.min(budget));
        let span = self.span(&batch);
        let work: Vec<&O::Work> = batch.work().collect();
        let outputs = O::shared(&pipe, deadline, &work).instrument(span).await;
        drop((work, slot, pipe));
        self.answer(batch, outputs);
    }

    /// Takes the batch queued by now, once the drainer holds what it runs
    /// on (`taken`), and claims it: from here each request left waits for
    /// the batch's fate; those abandoned or late are left out. `None` when
    /// nothing is left to run (a failure to get a connection is answered
    /// to each request here).
    fn claim<T>(self: &Arc<Self>, taken: Result<T, RepositoryError>) -> Option<(BatchOf<O>, T)> {
        self.waiting.store(false, Ordering::SeqCst);
        let batch = self
            .batches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .try_next();
        if self.queue.queued() > 0 {
            // More than one batch was queued: its enqueuers saw this drainer
            // waiting and spawned none.
            self.wake();
        }
        let mut batch = batch?;
        let taken = match taken {
            Ok(taken) => taken,
            Err(error) => {
                fail(batch, error);
                return None;
            }
        };
        batch.claim();
        (!batch.is_empty()).then_some((batch, taken))
    }

    /// Records a batch about to run, and the span it runs in (C11).
    fn span(&self, batch: &Batch<O::Work, Reply<O>>) -> tracing::Span {
        self.record(batch.len());
        let (operation, table) = O::STATEMENT;
        let span = crate::traces::batch_operation("postgresql", Some(operation), Some(table));
        batch.trace(&span);
        span
    }

    /// A slot and a shared connection for a pipelined kind's next batch:
    /// one with fewer than [`PIPELINE_DEPTH`] batches in flight, else a new
    /// one from the pool (its statements prepared before it is shared).
    async fn slot_and_pipe(&self) -> Result<(OwnedSemaphorePermit, Arc<Lease>), RepositoryError> {
        let slot = self.slot().await?;
        if let Some(pipe) = self.open_pipe() {
            return Ok((slot, pipe));
        }
        let mut lease = lease(&self.pool).await?;
        O::prepare(&mut lease).await?;
        let pipe = Arc::new(lease);
        let mut pipes = self.pipes.lock();
        pipes.retain(|pipe| pipe.strong_count() > 0);
        pipes.push(Arc::downgrade(&pipe));
        Ok((slot, pipe))
    }

    /// A shared connection with room for one more batch in flight, if
    /// there is one, or if every connection the kind may share is taken
    /// (the slot semaphore then guarantees room on one of them).
    fn open_pipe(&self) -> Option<Arc<Lease>> {
        let pipes = self.pipes.lock();
        let open: Vec<Arc<Lease>> = pipes
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|pipe| !pipe.is_cut())
            .collect();
        let shared = open.len();
        // Each batch in flight holds a reference; `least` holds one more.
        let least = open.into_iter().min_by_key(Arc::strong_count)?;
        (Arc::strong_count(&least) <= PIPELINE_DEPTH || shared >= self.most_pipes).then_some(least)
    }

    /// A slot and a connection for the next batch. A reading kind waits for
    /// its slot first, so a waiting drainer holds no connection. A writing
    /// kind takes its connection first and opens the batch's transaction
    /// while every slot is still taken: the `begin` round trip then overlaps
    /// the statement and commit holding the slot instead of following
    /// them, which under load is one round trip less per batch (`POST`
    /// 1.90 → 2.32–2.36 × `pgbench`, docs/performance.md "The PostgreSQL
    /// store, measured"). It holds one more connection while
    /// it waits; at most one drainer per kind waits.
    async fn slot_and_lease(&self) -> Result<(OwnedSemaphorePermit, Lease), RepositoryError> {
        if O::WRITES {
            let mut lease = lease(&self.pool).await?;
            begin::<O>(&mut lease).await?;
            Ok((self.slot().await?, lease))
        } else {
            let slot = self.slot().await?;
            Ok((slot, lease(&self.pool).await?))
        }
    }

    /// A slot, waiting at most as long as for a connection.
    async fn slot(&self) -> Result<OwnedSemaphorePermit, RepositoryError> {
        match tokio::time::timeout(ACQUIRE_TIMEOUT, Arc::clone(&self.slots).acquire_owned()).await {
            Ok(Ok(slot)) => Ok(slot),
            Ok(Err(closed)) => Err(RepositoryError::unavailable(closed)),
            Err(_) => Err(RepositoryError::unavailable(
                "no slot for a coalesced statement within the acquire timeout",
            )),
        }
    }

    /// Answers each request of `batch` its own output, or the batch's
    /// failure.
    fn answer(
        &self,
        batch: Batch<O::Work, Reply<O>>,
        outputs: Result<Vec<O::Output>, RepositoryError>,
    ) {
        match outputs {
            Ok(outputs) if outputs.len() == batch.len() => {
                batch.answer(outputs.into_iter().map(Ok))
            }
            Ok(outputs) => fail(
                batch,
                RepositoryError::unavailable(format!(
                    "a batch statement returned {} rows for its requests",
                    outputs.len()
                )),
            ),
            Err(error) => {
                tracing::warn!(
                    error = %error,
                    operation = O::LABEL,
                    requests = batch.len(),
                    "a coalesced statement failed; each of its requests is answered unavailable"
                );
                fail(batch, error);
            }
        }
    }

    fn record(&self, requests: usize) {
        let requests = requests as u64;
        self.statements.fetch_add(1, Ordering::Relaxed);
        self.requests.fetch_add(requests, Ordering::Relaxed);
        self.largest.fetch_max(requests, Ordering::Relaxed);
        metrics::histogram!(REQUESTS_PER_STATEMENT, "operation" => O::LABEL)
            .record(requests as f64);
    }
}

/// Describes the coalescing metrics to the installed recorder.
pub fn describe_metrics() {
    metrics::describe_histogram!(
        REQUESTS_PER_STATEMENT,
        "Requests one PostgreSQL statement served (1: alone; more: a coalesced batch), per operation."
    );
}
