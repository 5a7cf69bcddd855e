//! Group commit: many callers' writes, one transaction.
//!
//! A store whose every commit costs a disk flush (SQLite with
//! `synchronous=FULL`, PostgreSQL's WAL) pays that flush once per
//! transaction, not once per row. So instead of one transaction per request,
//! requests are put on a bounded queue, and the one task that owns the
//! store's writer connection takes them off in batches: it waits for the
//! first, then takes *every* request queued while its previous commit ran,
//! applies them all in one transaction and answers each caller through its
//! own reply channel once the commit returned. There is no timer: a lone
//! write commits at once, and under load a batch is exactly what arrived
//! during one commit, so batching adds no latency of its own.
//!
//! The same queue serves a store with a pool instead of one writer (the
//! PostgreSQL adapter's coalesced reads and creates, `postgres/coalesce`):
//! callers [`Queue::enqueue`] and then wait on their [`Answer`], and whichever
//! task gets a connection takes what is queued with [`Batches::try_next`],
//! dropping first the requests whose callers gave up
//! ([`Batch::drop_abandoned`]).
//!
//! This module knows nothing of any database: the work `W` and the reply `R`
//! are the store's own types. The store decides what a failed commit means
//! for each request (the SQLite store answers every request of a failed
//! batch "unavailable", since none of its writes is stored).
//!
//! ```
//! use items_adapters::batch;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let (queue, mut batches) = batch::queue::<u32, u32>(64);
//! // The writer task: one "transaction" per batch, then one reply per request.
//! tokio::spawn(async move {
//!     while let Some(batch) = batches.next().await {
//!         let sum: u32 = batch.work().sum();
//!         batch.answer_each(|n| n * 100 + sum);
//!     }
//! });
//! assert_eq!(queue.submit(7).await, Ok(707));
//! # }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::{mpsc, oneshot};

/// One caller's work and where its answer goes.
type Request<W, R> = (W, oneshot::Sender<R>);

/// Makes a queue holding at most `capacity` requests (at least one): the
/// callers' end, and the writer's end that takes them in batches. A caller
/// finding the queue full waits for room, which is the back pressure a
/// store slower than its callers needs.
pub fn queue<W, R>(capacity: usize) -> (Queue<W, R>, Batches<W, R>) {
    let capacity = capacity.max(1);
    let (sender, receiver) = mpsc::channel(capacity);
    (Queue { sender }, Batches { receiver, capacity })
}

/// The callers' end of a queue; cheap to clone.
#[derive(Debug)]
pub struct Queue<W, R> {
    sender: mpsc::Sender<Request<W, R>>,
}

impl<W, R> Clone for Queue<W, R> {
    fn clone(&self) -> Self {
        Self {
            sender: self.sender.clone(),
        }
    }
}

/// The writer is gone (stopped, or its task ended) and the work may not
/// have been done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the writer has stopped")]
pub struct Stopped;

impl<W, R> Queue<W, R> {
    /// Queues `work` and waits for its answer, which the writer sends once
    /// the batch holding it has been applied.
    ///
    /// # Errors
    /// [`Stopped`] when the writer stopped before answering (the work was
    /// then either never taken or its batch was dropped unanswered).
    pub async fn submit(&self, work: W) -> Result<R, Stopped> {
        self.enqueue(work).await?.await
    }

    /// Queues `work` (waiting for room) and returns the answer to wait for,
    /// so the caller can make sure someone will take it before it waits.
    /// Dropping the [`Answer`] before the batch holding the work was taken
    /// marks the work abandoned (see [`Batch::drop_abandoned`]).
    ///
    /// # Errors
    /// [`Stopped`] when the writer's end is gone or refuses new requests.
    pub async fn enqueue(&self, work: W) -> Result<Answer<R>, Stopped> {
        let (reply, answer) = oneshot::channel();
        self.sender.send((work, reply)).await.map_err(|_| Stopped)?;
        Ok(Answer(answer))
    }

    /// Whether the writer's end is gone or refuses new requests.
    pub fn is_stopped(&self) -> bool {
        self.sender.is_closed()
    }

    /// How many requests wait for the writer now.
    pub fn queued(&self) -> usize {
        self.sender.max_capacity() - self.sender.capacity()
    }
}

/// The answer to one queued request: resolves once its batch was answered,
/// or to [`Stopped`] if the request was dropped unanswered.
#[derive(Debug)]
pub struct Answer<R>(oneshot::Receiver<R>);

impl<R> Future for Answer<R> {
    type Output = Result<R, Stopped>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(context)
            .map(|answer| answer.map_err(|_| Stopped))
    }
}

/// The writer's end of a queue.
#[derive(Debug)]
pub struct Batches<W, R> {
    receiver: mpsc::Receiver<Request<W, R>>,
    capacity: usize,
}

impl<W, R> Batches<W, R> {
    /// Waits for a request, then takes with it every request already
    /// queued; `None` once the queue is closed and empty.
    pub async fn next(&mut self) -> Option<Batch<W, R>> {
        let first = self.receiver.recv().await?;
        Some(self.with_queued(first))
    }

    /// Takes every request queued now, without waiting: `None` when there
    /// is none.
    pub fn try_next(&mut self) -> Option<Batch<W, R>> {
        let first = self.receiver.try_recv().ok()?;
        Some(self.with_queued(first))
    }

    /// How many requests are queued now.
    pub fn queued(&self) -> usize {
        self.receiver.len()
    }

    /// `first` and every request queued behind it, up to the capacity.
    fn with_queued(&mut self, first: Request<W, R>) -> Batch<W, R> {
        let mut requests = Vec::with_capacity(self.receiver.len() + 1);
        requests.push(first);
        // At most one queue's worth, so a batch stays bounded even while
        // callers keep refilling the queue.
        while requests.len() < self.capacity {
            match self.receiver.try_recv() {
                Ok(request) => requests.push(request),
                Err(_) => break,
            }
        }
        Batch { requests }
    }

    /// Refuses new requests; those already queued are still handed out by
    /// [`Batches::next`], so a writer that drains before stopping answers
    /// every request it accepted.
    pub fn close(&mut self) {
        self.receiver.close();
    }
}

/// Requests taken together; each is answered exactly once, by
/// [`Batch::answer_each`] or [`Batch::answer`].
#[derive(Debug)]
pub struct Batch<W, R> {
    requests: Vec<Request<W, R>>,
}

impl<W, R> Batch<W, R> {
    /// How many requests the batch holds (never zero, unless
    /// [`Batch::drop_abandoned`] dropped them all).
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// False unless [`Batch::drop_abandoned`] dropped every request: a
    /// batch starts with the request it was taken for.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// Drops the requests whose callers stopped waiting (their [`Answer`]
    /// or `submit` future was dropped, e.g. by a timeout), so their work is
    /// not done after they left; returns how many. A caller that leaves
    /// after this still has its work done, as a caller that leaves during
    /// a single statement does.
    pub fn drop_abandoned(&mut self) -> usize {
        let before = self.requests.len();
        self.requests.retain(|(_, reply)| !reply.is_closed());
        before - self.requests.len()
    }

    /// The work of each request, in the order it was queued.
    pub fn work(&self) -> impl Iterator<Item = &W> {
        self.requests.iter().map(|(work, _)| work)
    }

    /// Answers each request with what `reply` makes of its work. A caller
    /// that stopped waiting is skipped: its work was done all the same.
    pub fn answer_each(self, mut reply: impl FnMut(W) -> R) {
        for (work, sender) in self.requests {
            let _ = sender.send(reply(work));
        }
    }

    /// Answers the requests, in order, with `replies` (one per request, as
    /// the results of applying [`Batch::work`]). Requests beyond the
    /// replies given are dropped unanswered: their callers get [`Stopped`].
    pub fn answer(self, replies: impl IntoIterator<Item = R>) {
        for ((_, sender), reply) in self.requests.into_iter().zip(replies) {
            let _ = sender.send(reply);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_batch_holds_every_request_queued_before_it_was_taken() {
        let (queue, mut batches) = queue::<u32, u32>(8);
        let callers: Vec<_> = (0..5)
            .map(|n| {
                let queue = queue.clone();
                tokio::spawn(async move { queue.submit(n).await })
            })
            .collect();
        while queue.queued() < 5 {
            tokio::task::yield_now().await;
        }

        let batch = batches.next().await.unwrap();
        assert_eq!(batch.len(), 5);
        let replies: Vec<u32> = batch.work().map(|n| n + 10).collect();
        batch.answer(replies);
        for (n, caller) in callers.into_iter().enumerate() {
            assert_eq!(
                caller.await.unwrap(),
                Ok(n as u32 + 10),
                "each gets its own"
            );
        }
        assert_eq!(queue.queued(), 0);
    }

    #[tokio::test]
    async fn a_batch_never_exceeds_the_queue_capacity() {
        let (queue, mut batches) = queue::<u32, ()>(3);
        let callers: Vec<_> = (0..6)
            .map(|n| {
                let queue = queue.clone();
                tokio::spawn(async move { queue.submit(n).await })
            })
            .collect();
        while queue.queued() < 3 {
            tokio::task::yield_now().await;
        }

        let mut sizes = Vec::new();
        while sizes.iter().sum::<usize>() < 6 {
            let batch = batches.next().await.unwrap();
            sizes.push(batch.len());
            batch.answer_each(drop);
        }
        assert!(sizes.iter().all(|&size| size <= 3), "{sizes:?}");
        for caller in callers {
            assert_eq!(caller.await.unwrap(), Ok(()));
        }
    }

    #[tokio::test]
    async fn a_request_whose_caller_left_is_dropped_before_its_work_is_done() {
        let (queue, mut batches) = queue::<u32, u32>(4);
        let kept = queue.enqueue(1).await.unwrap();
        let left = queue.enqueue(2).await.unwrap();
        drop(left);
        assert!(batches.try_next().is_some_and(|mut batch| {
            let dropped = batch.drop_abandoned();
            let work: Vec<u32> = batch.work().copied().collect();
            batch.answer_each(|n| n * 10);
            dropped == 1 && work == [1]
        }));
        assert_eq!(kept.await, Ok(10));
        assert!(batches.try_next().is_none(), "nothing is left queued");
    }

    #[tokio::test]
    async fn a_request_left_unanswered_or_refused_gets_stopped() {
        let (queue, mut batches) = queue::<u32, u32>(4);
        let caller = tokio::spawn({
            let queue = queue.clone();
            async move { queue.submit(1).await }
        });
        let batch = batches.next().await.unwrap();
        batch.answer(std::iter::empty());
        assert_eq!(caller.await.unwrap(), Err(Stopped));

        batches.close();
        assert_eq!(queue.submit(2).await, Err(Stopped));
        assert!(batches.next().await.is_none());
    }
}
