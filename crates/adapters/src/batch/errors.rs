//! Why a queued request has no answer, or was not queued.

/// The writer is gone (stopped, or its task ended) and the work may not
/// have been done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the writer has stopped")]
pub struct Stopped;

/// Why [`Queue::try_enqueue`](super::queue::Queue::try_enqueue) did not
/// queue its work, with the work back.
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
