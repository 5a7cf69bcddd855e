//! Group commit: many callers' writes, one transaction.
//!
//! Requests are put on a bounded queue, and the one task that owns the
//! store's writer connection takes them off in batches: it waits for the
//! first, then takes *every* request queued while its previous commit ran,
//! applies them all in one transaction and answers each caller through its
//! own reply channel once the commit returned.
//!
//! The same queue serves a store with a pool instead of one writer (the
//! PostgreSQL adapter's coalesced reads and creates, `postgres/coalesce`):
//! callers [`Queue::enqueue_by`] and then [`Answer::wait`], and whichever
//! task gets a connection takes what is queued with [`Batches::try_next`].
//! A caller that must not wait even for room ([`Queue::try_enqueue`], the
//! Redis lanes) is refused at once when the queue is full, and a writer may
//! bound its batches below the queue's capacity ([`Batches::next_at_most`],
//! [`Batches::top_up`]).
//!
//! Invariants:
//! - there is no timer: a lone write commits at once, and under load a
//!   batch is exactly what arrived during one commit, so batching adds no
//!   latency of its own;
//! - a caller may give its request a deadline ([`Queue::submit_by`],
//!   [`Queue::enqueue_by`]); every request's fate is decided once, by
//!   whichever side comes first: the writer *claims* it ([`Batch::claim`]:
//!   it will be applied, and its caller waits for its batch's fate, which
//!   decides for every request in it, even past the deadline), or its
//!   caller *abandons* it — its deadline passed, or it stopped waiting
//!   (dropped its [`Answer`] or its `submit` future, e.g. a client gone) —
//!   and the work is never done: [`Batch::prune`] and [`Batch::claim`]
//!   leave it out;
//! - a caller told [`Unanswered::Late`] knows its work was never done, nor
//!   will be; a request still unclaimed when the writer claims after its
//!   deadline is abandoned then, not applied late;
//! - a request carries the span it was queued from when traces are on
//!   (C11), and [`Batch::trace`] links a batch's span to each and each to
//!   it; with traces off it carries none and the call does nothing;
//! - this module knows nothing of any database: the work `W` and the reply
//!   `R` are the store's own types, and the store decides what a failed
//!   commit means for each request (the SQLite store answers every request
//!   of a failed batch "unavailable", since none of its writes is stored).
//!
//! Why: where every commit costs a disk flush (SQLite with
//! `synchronous=FULL`, PostgreSQL's WAL), a batch pays it once, and a
//! 32-row commit takes about as long as a one-row one, docs/performance.md
//! "The SQLite store, measured".
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

mod request;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use request::{Claim, Request};

pub use request::{Answer, Undated};

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

/// Why [`Queue::try_enqueue`] did not queue its work, with the work back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused<W> {
    /// The queue holds as many requests as it may.
    #[error("the queue is full")]
    Full(W),
    /// See [`Stopped`].
    #[error("the writer has stopped")]
    Stopped(W),
}

impl<W> Refused<W> {
    /// The work that was not queued.
    pub fn into_work(self) -> W {
        match self {
            Self::Full(work) | Self::Stopped(work) => work,
        }
    }
}

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

    /// Queues `work` at once, with no deadline, and returns its answer to
    /// await; a full queue refuses it rather than waiting for room.
    ///
    /// # Errors
    /// The work back: [`Refused::Full`] when the queue holds as many
    /// requests as it may, [`Refused::Stopped`] when the writer's end is
    /// gone or refuses new requests.
    pub fn try_enqueue(&self, work: W) -> Result<Undated<R>, Refused<W>> {
        let (request, answer) = request(work, None);
        match self.sender.try_send(request) {
            Ok(()) => Ok(Undated(answer)),
            Err(mpsc::error::TrySendError::Full(request)) => Err(Refused::Full(request.work)),
            Err(mpsc::error::TrySendError::Closed(request)) => Err(Refused::Stopped(request.work)),
        }
    }

    async fn enqueue(&self, work: W, deadline: Option<Instant>) -> Result<Answer<R>, Unanswered> {
        let (request, answer) = request(work, deadline);
        let sent = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, self.sender.send(request))
                .await
                .map_err(|_| Unanswered::Late)?,
            None => self.sender.send(request).await,
        };
        sent.map_err(|_| Unanswered::Stopped)?;
        Ok(answer)
    }

    /// Whether `other` is a callers' end of the same queue.
    pub fn same_queue(&self, other: &Self) -> bool {
        self.sender.same_channel(&other.sender)
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

/// A request for `work` and its caller's answer, linked.
fn request<W, R>(work: W, deadline: Option<Instant>) -> (Request<W, R>, Answer<R>) {
    let (reply, receiver) = oneshot::channel();
    let claim = Arc::new(Claim::default());
    let answer = Answer {
        receiver,
        deadline,
        claim: Arc::clone(&claim),
    };
    let request = Request {
        work,
        span: crate::traces::current(),
        reply,
        deadline,
        claim,
    };
    (request, answer)
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
        self.next_at_most(self.capacity).await
    }

    /// [`Batches::next`], the batch holding at most `most` requests (at
    /// least one); the others stay queued for the next.
    pub async fn next_at_most(&mut self, most: usize) -> Option<Batch<W, R>> {
        let first = self.receiver.recv().await?;
        Some(self.with_queued(first, most))
    }

    /// Takes every request queued now, without waiting: `None` when there
    /// is none.
    pub fn try_next(&mut self) -> Option<Batch<W, R>> {
        let first = self.receiver.try_recv().ok()?;
        Some(self.with_queued(first, self.capacity))
    }

    /// Takes the requests queued since `batch` was taken in behind its own,
    /// without waiting, until it holds `most` (or the capacity, if less).
    pub fn top_up(&mut self, batch: &mut Batch<W, R>, most: usize) {
        self.take_queued(&mut batch.requests, most);
    }

    /// `first` and every request queued behind it, up to `most`.
    fn with_queued(&mut self, first: Request<W, R>, most: usize) -> Batch<W, R> {
        let mut requests = Vec::with_capacity(self.receiver.len().min(most) + 1);
        requests.push(first);
        self.take_queued(&mut requests, most);
        Batch { requests }
    }

    /// Moves queued requests into `requests` while it holds fewer than
    /// `most` and than the capacity.
    fn take_queued(&mut self, requests: &mut Vec<Request<W, R>>, most: usize) {
        // At most one queue's worth, so a batch stays bounded even while
        // callers keep refilling the queue.
        let most = most.min(self.capacity);
        while requests.len() < most {
            match self.receiver.try_recv() {
                Ok(request) => requests.push(request),
                Err(_) => break,
            }
        }
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
    /// Takes `later`'s requests in after this batch's own.
    pub fn extend(&mut self, later: Self) {
        self.requests.extend(later.requests);
    }

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
            .retain(|request| request.wanted(now) && request.claim.claim());
    }

    /// Links `span`, the span of the work done for the whole batch, to the
    /// span each request was queued from, and each of those to it
    /// (`follows_from`: span links in a trace, C11); each request's span
    /// records the batch's size as `db.batch.size`, the batch's as
    /// `db.operation.batch.size`. Nothing when `span` is disabled (traces
    /// off). Call it once the batch is claimed, so it names only the
    /// requests it serves.
    pub fn trace(&self, span: &tracing::Span) {
        if span.is_disabled() {
            return;
        }
        let size = self.requests.len();
        span.record("db.operation.batch.size", size);
        for request in &self.requests {
            if request.span.is_disabled() {
                continue;
            }
            span.follows_from(&request.span);
            request.span.follows_from(span);
            request.span.record("db.batch.size", size);
        }
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
