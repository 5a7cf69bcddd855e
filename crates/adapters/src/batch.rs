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
//! callers [`Queue::enqueue_by`] and then [`Answer::wait`], and whichever
//! task gets a connection takes what is queued with [`Batches::try_next`].
//!
//! A caller may give its request a deadline ([`Queue::submit_by`],
//! [`Queue::enqueue_by`]). Every request's fate is decided once, by
//! whichever side comes first: the writer *claims* it ([`Batch::claim`]:
//! it will be applied, and its caller waits for its batch's fate, which
//! decides for every request in it, even past the deadline), or its caller
//! *abandons* it — its deadline passed, or it stopped waiting (dropped its
//! [`Answer`] or its `submit` future, e.g. a client gone) — and the work is
//! never done: [`Batch::prune`] and [`Batch::claim`] leave it out. A caller
//! told [`Unanswered::Late`] knows its work was never done, nor will be. A
//! request still unclaimed when the writer claims after its deadline is
//! abandoned then, not applied late.
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

/// One caller's work, where its answer goes, its deadline if it has one,
/// and who decided its fate first (see [`Claim`]).
#[derive(Debug)]
struct Request<W, R> {
    work: W,
    reply: oneshot::Sender<R>,
    deadline: Option<Instant>,
    claim: Arc<Claim>,
}

impl<W, R> Request<W, R> {
    /// Whether the request is still wanted at `now`: not abandoned by its
    /// caller, and not past its deadline (abandoned now if it is, so its
    /// caller is told it is late, never that it was applied).
    fn wanted(&self, now: Instant) -> bool {
        if self.claim.is_abandoned() {
            return false;
        }
        if self.deadline.is_some_and(|deadline| deadline <= now) {
            return !self.claim.abandon();
        }
        true
    }
}

/// The fate of a request, decided once: the writer claims it (it will be
/// applied) or it is abandoned (it never will be), whichever comes first.
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

    /// Abandons the request unless it was claimed first: true when it is
    /// abandoned (now or before).
    fn abandon(&self) -> bool {
        self.decide(ABANDONED) || self.is_abandoned()
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

/// Why a request with a deadline has no answer.
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
    /// the batch holding it has been applied. Dropping the future before
    /// the writer claimed the work abandons it.
    ///
    /// # Errors
    /// [`Stopped`] when the writer stopped before answering (the work was
    /// then either never taken or its batch was dropped unanswered).
    pub async fn submit(&self, work: W) -> Result<R, Stopped> {
        let answer = self.enqueue(work, None).await.map_err(|_| Stopped)?;
        answer.wait().await.map_err(|_| Stopped)
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
        self.enqueue_by(work, deadline).await?.wait().await
    }

    /// The first half of [`Queue::submit_by`]: queues `work` (waiting for
    /// room until `deadline`) and returns the answer to wait for, so the
    /// caller can make sure someone will take the work before it waits.
    ///
    /// # Errors
    /// [`Unanswered::Late`] when no room came before `deadline`;
    /// [`Unanswered::Stopped`] when the writer's end is gone or refuses
    /// new requests.
    pub async fn enqueue_by(&self, work: W, deadline: Instant) -> Result<Answer<R>, Unanswered> {
        self.enqueue(work, Some(deadline)).await
    }

    async fn enqueue(&self, work: W, deadline: Option<Instant>) -> Result<Answer<R>, Unanswered> {
        let (reply, receiver) = oneshot::channel();
        let claim = Arc::new(Claim::default());
        let request = Request {
            work,
            reply,
            deadline,
            claim: Arc::clone(&claim),
        };
        let sent = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, self.sender.send(request))
                .await
                .map_err(|_| Unanswered::Late)?,
            None => self.sender.send(request).await,
        };
        sent.map_err(|_| Unanswered::Stopped)?;
        Ok(Answer {
            receiver,
            deadline,
            claim,
        })
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

/// The answer to one queued request ([`Queue::enqueue_by`]). Dropping it
/// before the writer claimed the request abandons the request: its work is
/// never done.
#[derive(Debug)]
pub struct Answer<R> {
    receiver: oneshot::Receiver<R>,
    deadline: Option<Instant>,
    claim: Arc<Claim>,
}

impl<R> Answer<R> {
    /// Waits for the answer: the batch's, once the request was claimed;
    /// else [`Unanswered::Late`] at the deadline.
    ///
    /// # Errors
    /// [`Unanswered::Late`] when the deadline passed before the writer
    /// claimed the request (its work was not done, nor will be);
    /// [`Unanswered::Stopped`] when it was dropped unanswered.
    pub async fn wait(mut self) -> Result<R, Unanswered> {
        let answered = match self.deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline, &mut self.receiver).await {
                Ok(answered) => answered,
                Err(_) if self.claim.abandon() => return Err(Unanswered::Late),
                // Claimed first: the batch is being applied, and its fate is ours.
                Err(_) => (&mut self.receiver).await,
            },
            None => (&mut self.receiver).await,
        };
        answered.map_err(|_| {
            // The writer found it past its deadline and left it out.
            if self.claim.is_abandoned() {
                Unanswered::Late
            } else {
                Unanswered::Stopped
            }
        })
    }
}

impl<R> Drop for Answer<R> {
    /// A caller that stops waiting before its request was claimed abandons
    /// it, so its work is not done after it left.
    fn drop(&mut self) {
        self.claim.abandon();
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
    /// How many requests the batch holds.
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// False as handed out (a batch starts with the request it was taken
    /// for); true when [`Batch::prune`] or [`Batch::claim`] left nothing.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// The work of each request, in the order it was queued.
    pub fn work(&self) -> impl Iterator<Item = &W> {
        self.requests.iter().map(|request| &request.work)
    }

    /// The earliest deadline of the requests in the batch, if any has one:
    /// after [`Batch::claim`], the moment by which the batch must have
    /// ended for none of its callers to wait past its own deadline.
    pub fn deadline(&self) -> Option<Instant> {
        self.requests
            .iter()
            .filter_map(|request| request.deadline)
            .min()
    }

    /// Leaves out the requests abandoned (their callers stopped waiting, or
    /// their deadline passed), so no time is spent on work nobody waits
    /// for.
    pub fn prune(&mut self) {
        let now = Instant::now();
        self.requests.retain(|request| request.wanted(now));
    }

    /// Claims every request still wanted: from now on its caller waits for
    /// this batch's answer, whatever its deadline. The requests abandoned
    /// first, or past their deadline now, are left out, never to be
    /// applied. Call it once the work is sure to start (a writer: once it
    /// holds the lock; a pool: once it holds a connection), so that nothing
    /// claimed waits behind a lock past its deadline.
    pub fn claim(&mut self) {
        let now = Instant::now();
        self.requests
            .retain(|request| request.wanted(now) && request.claim.decide(CLAIMED));
    }

    /// Answers each request with what `reply` makes of its work. A caller
    /// that stopped waiting is skipped: its work was done all the same.
    pub fn answer_each(self, mut reply: impl FnMut(W) -> R) {
        for request in self.requests {
            let _ = request.reply.send(reply(request.work));
        }
    }

    /// Answers the requests in order with `replies` (typically built from
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

    #[tokio::test]
    async fn a_request_whose_caller_left_is_never_applied() {
        let (queue, mut batches) = queue::<u32, u32>(4);
        let far = Instant::now() + std::time::Duration::from_secs(60);
        let kept = queue.enqueue_by(1, far).await.unwrap();
        let left = queue.enqueue_by(2, far).await.unwrap();
        drop(left);
        let mut batch = batches.try_next().expect("both queued");
        assert_eq!(batch.len(), 2);
        batch.prune();
        batch.claim();
        assert_eq!(batch.work().copied().collect::<Vec<_>>(), [1]);
        batch.answer_each(|n| n * 10);
        assert_eq!(kept.wait().await, Ok(10));
        assert!(batches.try_next().is_none(), "nothing is left queued");
    }

    #[tokio::test]
    async fn a_request_past_its_deadline_when_claimed_is_left_out_and_its_caller_told_late_c12() {
        let (queue, mut batches) = queue::<u32, u32>(4);
        let now = Instant::now();
        let short = now + std::time::Duration::from_millis(20);
        let long = now + std::time::Duration::from_secs(60);
        let late = queue.enqueue_by(1, short).await.unwrap();
        let kept = queue.enqueue_by(2, long).await.unwrap();
        let mut batch = batches.try_next().expect("both queued");
        assert_eq!(batch.deadline(), Some(short), "the earliest");

        // The caller has not looked yet: the writer finds it late itself.
        tokio::time::sleep_until(short).await;
        batch.claim();
        assert_eq!(batch.work().copied().collect::<Vec<_>>(), [2]);
        assert_eq!(batch.deadline(), Some(long));
        batch.answer_each(|n| n + 1);
        assert_eq!(late.wait().await, Err(Unanswered::Late));
        assert_eq!(kept.wait().await, Ok(3));
    }
}
