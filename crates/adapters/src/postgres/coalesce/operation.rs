//! A kind of request that can be coalesced: what it runs alone, what it
//! runs for many, and how (in a transaction, always queued, pipelined).
//! Each kind (`reads.rs`, `creates.rs`) implements [`Operation`]; the
//! coalescer is generic over it.

use std::future::Future;

use items_domain::RepositoryError;
use tokio::time::Instant;

use crate::batch::Batch;
use crate::postgres::pool::Lease;

/// One kind of request that can be coalesced: what it runs alone, and what
/// it runs for many.
pub(in crate::postgres) trait Operation: Send + Sync + 'static {
    /// What one caller asks.
    type Work: Send + Sync + 'static;
    /// What one caller gets.
    type Output: Send + 'static;
    /// The `operation` label of
    /// [`REQUESTS_PER_STATEMENT`](super::stats::REQUESTS_PER_STATEMENT).
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
    /// [`Operation::one`]); under load, see
    /// [`ItemReads`](super::reads::ItemReads) for what it changes.
    const ALWAYS_QUEUED: bool = false;

    /// Whether batches of this kind are pipelined on shared connections
    /// ([`PIPELINE_DEPTH`](super::limits::PIPELINE_DEPTH) in flight on
    /// each): only for statements that read outside a transaction, which
    /// need no connection of their own. Such a kind implements
    /// [`Operation::prepare`] and [`Operation::shared`].
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

pub(super) type Reply<O> = Result<<O as Operation>::Output, RepositoryError>;
/// A batch of requests of kind `O`.
pub(super) type BatchOf<O> = Batch<<O as Operation>::Work, Reply<O>>;
