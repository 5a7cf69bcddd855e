//! One queued request and its caller's side: the work, the reply channel,
//! the deadline, the caller's span, and the [`Claim`] that decides once whether the writer
//! runs it or its caller abandoned it; and the [`Answer`] the caller waits
//! on, or [`Undated`] for a request with no deadline (dropping either
//! abandons the request).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::errors::{Stopped, Unanswered};

/// One caller's work, where its answer goes, its deadline if it has one,
/// and who decided its fate first (see [`Claim`]).
#[derive(Debug)]
pub(super) struct Request<W, R> {
    pub(super) work: W,
    /// The span the caller queued it from, when traces are on
    /// (`crate::traces::current`); linked to its batch's span.
    pub(super) span: tracing::Span,
    pub(super) reply: oneshot::Sender<R>,
    pub(super) deadline: Option<Instant>,
    pub(super) claim: Arc<Claim>,
}

impl<W, R> Request<W, R> {
    /// Whether the request is still wanted at `now`: not abandoned by its
    /// caller, and not past its deadline (abandoned now if it is, so its
    /// caller is told it is late, never that it was applied).
    pub(super) fn wanted(&self, now: Instant) -> bool {
        if self.claim.is_abandoned() {
            return false;
        }
        if self.deadline.is_some_and(|deadline| deadline <= now) {
            return !self.claim.abandon();
        }
        true
    }
}

/// A request for `work` and its caller's answer, linked.
pub(super) fn request<W, R>(work: W, deadline: Option<Instant>) -> (Request<W, R>, Answer<R>) {
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

/// The fate of a request, decided once: the writer claims it (it will be
/// applied) or it is abandoned (it never will be), whichever comes first.
#[derive(Debug, Default)]
pub(super) struct Claim(AtomicU8);

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

    /// Claims the request for the writer unless it was abandoned first:
    /// true when the writer won.
    pub(super) fn claim(&self) -> bool {
        self.decide(CLAIMED)
    }

    /// Abandons the request unless it was claimed first: true when it is
    /// abandoned (now or before).
    pub(super) fn abandon(&self) -> bool {
        self.decide(ABANDONED) || self.is_abandoned()
    }

    pub(super) fn is_abandoned(&self) -> bool {
        self.0.load(Ordering::Acquire) == ABANDONED
    }
}

/// The answer to one queued request
/// ([`Queue::enqueue_by`](super::queue::Queue::enqueue_by)). Dropping it
/// before the writer claimed the request abandons the request: its work is
/// never done.
#[derive(Debug)]
pub struct Answer<R> {
    pub(super) receiver: oneshot::Receiver<R>,
    pub(super) deadline: Option<Instant>,
    pub(super) claim: Arc<Claim>,
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

/// The answer to a request queued with no deadline
/// ([`Queue::try_enqueue`](super::queue::Queue::try_enqueue)), to be
/// awaited: the reply, or [`Stopped`] when it was dropped unanswered. A
/// future of its own that holds only the answer, no timer, so a caller that
/// awaits it stays small. Dropping it before the writer claimed the request
/// abandons the request.
#[derive(Debug)]
pub struct Undated<R>(pub(super) Answer<R>);

impl<R> Future for Undated<R> {
    type Output = Result<R, Stopped>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.get_mut().0.receiver)
            .poll(cx)
            .map_err(|_| Stopped)
    }
}

impl<R> Drop for Answer<R> {
    /// A caller that stops waiting before its request was claimed abandons
    /// it, so its work is not done after it left.
    fn drop(&mut self) {
        self.claim.abandon();
    }
}
