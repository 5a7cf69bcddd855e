//! The drainers of a coalescer: a task that waits for a slot and a
//! connection, takes every request queued by then, runs them as one
//! statement and answers each caller its own result. A pipelined kind's
//! drainers share connections, up to [`PIPELINE_DEPTH`] batches in flight
//! on each.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};

use items_domain::RepositoryError;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tracing::Instrument;

use super::coalescer::Inner;
use super::errors::fail;
use super::limits::PIPELINE_DEPTH;
use super::operation::{BatchOf, Operation, Reply};
use super::statements::{begin, statement};
use super::stats::REQUESTS_PER_STATEMENT;
use crate::batch::Batch;
use crate::postgres::pool::{ACQUIRE_TIMEOUT, Lease, lease};

impl<O: Operation> Inner<O> {
    /// Makes sure a drainer will take what was just queued: spawns one
    /// unless one is already waiting for a connection. The request was
    /// queued before this check and a drainer stops waiting before it takes
    /// its batch, so either that drainer takes the request or a new one is
    /// spawned.
    pub(super) fn wake(self: &Arc<Self>) {
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

    pub(super) fn record(&self, requests: usize) {
        let requests = requests as u64;
        self.statements.fetch_add(1, Ordering::Relaxed);
        self.requests.fetch_add(requests, Ordering::Relaxed);
        self.largest.fetch_max(requests, Ordering::Relaxed);
        metrics::histogram!(REQUESTS_PER_STATEMENT, "operation" => O::LABEL)
            .record(requests as f64);
    }
}
