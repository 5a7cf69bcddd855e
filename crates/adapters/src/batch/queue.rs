//! A queue's callers' end: [`queue`] makes the queue, and [`Queue`] is how
//! callers put their work on it, with a deadline or without, waiting for
//! room or not.

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::batches::Batches;
use super::errors::{Refused, Stopped, Unanswered};
use super::request::{Answer, Request, Undated, request};

/// Makes a queue holding at most `capacity` requests (at least one): the
/// callers' end, and the writer's end that takes them in batches. A caller
/// finding the queue full waits for room, which is the back pressure a
/// store slower than its callers needs.
pub fn queue<W, R>(capacity: usize) -> (Queue<W, R>, Batches<W, R>) {
    let capacity = capacity.max(1);
    let (sender, receiver) = mpsc::channel(capacity);
    (Queue { sender }, Batches::new(receiver, capacity))
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
    /// the work ([`Batch::claim`](super::batches::Batch::claim)): then the
    /// work is left undone and the answer is [`Unanswered::Late`], also
    /// while waiting for room in the queue. Work claimed in time is answered
    /// as its batch ends, even after the deadline.
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
