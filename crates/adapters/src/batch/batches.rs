//! A queue's writer's end: [`Batches`] hands out what was queued, as a
//! [`Batch`] to claim, run and answer.

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::request::Request;

/// The writer's end of a queue.
#[derive(Debug)]
pub struct Batches<W, R> {
    receiver: mpsc::Receiver<Request<W, R>>,
    capacity: usize,
}

impl<W, R> Batches<W, R> {
    /// The writer's end of the channel `receiver` takes from, which holds
    /// at most `capacity` requests.
    pub(super) fn new(receiver: mpsc::Receiver<Request<W, R>>, capacity: usize) -> Self {
        Self { receiver, capacity }
    }

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
    /// replies given are dropped unanswered: their callers get
    /// [`Stopped`](super::errors::Stopped).
    pub fn answer(self, replies: impl IntoIterator<Item = R>) {
        for (request, reply) in self.requests.into_iter().zip(replies) {
            let _ = request.reply.send(reply);
        }
    }
}
