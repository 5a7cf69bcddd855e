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
//! [`Batches::top_up`]). The callers' end is in `queue.rs`, the writer's in
//! `batches.rs`, one request and its caller's answer in `request.rs`.
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

mod batches;
mod errors;
mod queue;
mod request;
#[cfg(test)]
mod tests;

pub use batches::{Batch, Batches};
pub use errors::{Refused, Stopped, Unanswered};
pub use queue::{Queue, queue};
pub use request::{Answer, Undated};
