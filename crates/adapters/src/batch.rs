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
//! A caller may give its request a deadline ([`Queue::submit_by`]): past it,
//! a request the writer has not yet *claimed* is abandoned — the caller is
//! answered [`Unanswered::Late`] at once and the writer skips the work —
//! while a request already claimed (its batch is being applied) waits for
//! its batch's fate, which decides for every request in it. So a caller
//! told "late" knows its work was never done, nor will be.
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

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// One caller's work, where its answer goes, and, for a request with a
/// deadline, who decided its fate first (see [`Claim`]).
#[derive(Debug)]
struct Request<W, R> {
    work: W,
    reply: oneshot::Sender<R>,
    claim: Option<Arc<Claim>>,
}

/// The fate of a request with a deadline, decided once: the writer claims
/// it (it will be applied) or its caller abandons it (it never will be),
/// whichever comes first.
#[derive(Debug, Default)]
struct Claim(AtomicU8);

const WAITING: u8 = 0;
const CLAIMED: u8 = 1;
const ABANDONED: u8 = 2;

impl Claim {
    /// Moves from waiting to `to`; false when the other side was first.
    fn decide(&self, to: u8) -> bool {
        self.0
            .compare_exchange(WAITING, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    fn is_abandoned(&self) -> bool {
        self.0.load(Ordering::Acquire) == ABANDONED
    }
}

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

/// Why [`Queue::submit_by`] has no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unanswered {
    /// See [`Stopped`].
    #[error("the writer has stopped")]
    Stopped,
    /// The deadline passed before the writer took the work up: it was not
    /// done and never will be.
    #[error("the deadline passed before the work was taken up")]
    Late,
}

impl<W, R> Queue<W, R> {
    /// Queues `work` and waits for its answer, which the writer sends once
    /// the batch holding it has been applied.
    ///
    /// # Errors
    /// [`Stopped`] when the writer stopped before answering (the work was
    /// then either never taken or its batch was dropped unanswered).
    pub async fn submit(&self, work: W) -> Result<R, Stopped> {
        let (reply, answer) = oneshot::channel();
        let request = Request {
            work,
            reply,
            claim: None,
        };
        self.sender.send(request).await.map_err(|_| Stopped)?;
        answer.await.map_err(|_| Stopped)
    }

    /// [`Queue::submit`], unless `deadline` passes before the writer claims
    /// the work ([`Batch::claim`]): then the work is left undone and the
    /// answer is [`Unanswered::Late`], also while waiting for room in the
    /// queue. Work claimed in time is answered as its batch ends, even
    /// after the deadline.
    ///
    /// # Errors
    /// [`Unanswered::Late`] as above; [`Unanswered::Stopped`] as
    /// [`Stopped`].
    pub async fn submit_by(&self, work: W, deadline: Instant) -> Result<R, Unanswered> {
        let (reply, mut answer) = oneshot::channel();
        let claim = Arc::new(Claim::default());
        let request = Request {
            work,
            reply,
            claim: Some(Arc::clone(&claim)),
        };
        match tokio::time::timeout_at(deadline, self.sender.send(request)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(Unanswered::Stopped),
            Err(_) => return Err(Unanswered::Late),
        }
        if let Ok(answered) = tokio::time::timeout_at(deadline, &mut answer).await {
            return answered.map_err(|_| Unanswered::Stopped);
        }
        if claim.decide(ABANDONED) {
            return Err(Unanswered::Late);
        }
        // Claimed first: the batch is being applied, and its fate is ours.
        answer.await.map_err(|_| Unanswered::Stopped)
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
        Some(Batch { requests })
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
    /// How many requests the batch holds (never zero).
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// False as handed out (a batch starts with the request it was waited
    /// for); true when [`Batch::prune`] or [`Batch::claim`] left nothing.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// The work of each request, in the order it was queued.
    pub fn work(&self) -> impl Iterator<Item = &W> {
        self.requests.iter().map(|request| &request.work)
    }

    /// Leaves out the requests their callers abandoned (deadline passed),
    /// so no time is spent on work nobody waits for.
    pub fn prune(&mut self) {
        self.requests
            .retain(|request| !request.claim.as_deref().is_some_and(Claim::is_abandoned));
    }

    /// Claims every request still wanted: from now on its caller waits for
    /// this batch's answer, whatever its deadline. The requests abandoned
    /// first are left out, never to be applied. Call it once the work is
    /// sure to start (a writer: once it holds the lock), so that nothing
    /// claimed waits behind a lock past its deadline.
    pub fn claim(&mut self) {
        self.requests.retain(|request| {
            request
                .claim
                .as_deref()
                .is_none_or(|claim| claim.decide(CLAIMED))
        });
    }

    /// Answers each request with what `reply` makes of its work. A caller
    /// that stopped waiting is skipped: its work was done all the same.
    pub fn answer_each(self, mut reply: impl FnMut(W) -> R) {
        for request in self.requests {
            let _ = request.reply.send(reply(request.work));
        }
    }

    /// Answers the requests, in order, with `replies` (one per request, as
    /// the results of applying [`Batch::work`]). Requests beyond the
    /// replies given are dropped unanswered: their callers get [`Stopped`].
    pub fn answer(self, replies: impl IntoIterator<Item = R>) {
        for (request, reply) in self.requests.into_iter().zip(replies) {
            let _ = request.reply.send(reply);
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
    async fn a_request_past_its_deadline_before_it_is_claimed_is_never_applied_c12() {
        let (queue, mut batches) = queue::<u32, u32>(4);
        let deadline = Instant::now() + std::time::Duration::from_millis(50);
        let late = queue.submit_by(1, deadline).await;
        assert_eq!(late, Err(Unanswered::Late));

        // The writer takes it up only now: it is left out of the batch.
        let mut batch = batches.next().await.unwrap();
        batch.prune();
        assert!(batch.is_empty());
        batch.claim();
        assert_eq!(batch.work().count(), 0);
    }

    #[tokio::test]
    async fn a_claimed_request_waits_for_its_batch_past_its_deadline_c12() {
        let (queue, mut batches) = queue::<u32, u32>(4);
        let deadline = Instant::now() + std::time::Duration::from_millis(50);
        let caller = tokio::spawn(async move { queue.submit_by(7, deadline).await });
        let mut batch = batches.next().await.unwrap();
        batch.claim();
        assert_eq!(batch.len(), 1);

        tokio::time::sleep_until(deadline + std::time::Duration::from_millis(50)).await;
        batch.answer_each(|n| n + 1);
        assert_eq!(caller.await.unwrap(), Ok(8), "the batch's fate, not Late");
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
