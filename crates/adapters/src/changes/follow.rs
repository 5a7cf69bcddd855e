//! A subscription's stream: the changes after a position, first from the
//! store's own history while the hub no longer holds them (a durable store
//! resuming an old cursor), then from the hub.
//!
//! Invariants:
//! - changes come out in position order, each once: the stream's position
//!   only moves forward, to the last change it gave;
//! - it reads the store's history only below the hub's floor, and only
//!   while the store still retains everything after its position (the
//!   history says where its own floor is, read with the rows): a
//!   subscriber caught up by the pruning ends [`FeedError::TooSlow`] rather
//!   than skip what was pruned;
//! - the hub never waits for a subscriber: one that falls below the hub's
//!   floor once it follows the hub ends [`FeedError::TooSlow`] (it resumes
//!   with its cursor, from the history); the history is read only to catch
//!   up a subscription that starts below the hub.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::Arc;

use async_trait::async_trait;
use items_domain::{Change, ChangeStream, FeedError, RepositoryError};

use super::cursor::CursorFormat;
use super::hub::{Entry, Hub, Read};

/// Changes a subscriber reads at a time, from the hub or the history.
const BATCH: usize = 256;

/// A durable store's changes as it keeps them, for subscribers resuming
/// below what the hub holds.
#[async_trait]
pub(crate) trait History: Send + Sync {
    /// At most `limit` changes with positions in `(after, upto]`, in
    /// position order, and the store's floor as of the same read: every
    /// change above the floor was still retained.
    async fn read(
        &self,
        after: u64,
        upto: u64,
        limit: usize,
    ) -> Result<(Vec<Entry>, u64), RepositoryError>;
}

/// What a subscription's stream holds.
struct Follow {
    hub: Arc<Hub>,
    history: Option<Arc<dyn History>>,
    cursors: CursorFormat,
    /// The position of the last change given (or where the stream began).
    after: u64,
    buffer: VecDeque<Entry>,
    waiter: Waiter,
    /// Reading from the hub (no more from the history).
    following: bool,
    ended: bool,
    /// Kept as long as the stream: a durable store counts its subscribers
    /// by it.
    _held: Option<Box<dyn Send + Sync>>,
}

/// A subscriber's registration with the hub, forgotten when dropped.
struct Waiter {
    hub: Arc<Hub>,
    id: u64,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.hub.forget(self.id);
    }
}

/// The changes after `after`: from `history` while the hub no longer holds
/// them, then from `hub`; `held` lives as long as the stream.
pub(crate) fn follow(
    hub: Arc<Hub>,
    history: Option<Arc<dyn History>>,
    cursors: CursorFormat,
    after: u64,
    held: Option<Box<dyn Send + Sync>>,
) -> ChangeStream {
    let waiter = Waiter {
        id: hub.waiter(),
        hub: Arc::clone(&hub),
    };
    let state = Follow {
        hub,
        history,
        cursors,
        after,
        buffer: VecDeque::new(),
        waiter,
        following: false,
        ended: false,
        _held: held,
    };
    Box::pin(futures_util::stream::unfold(
        state,
        |mut state| async move {
            let next = state.next().await?;
            Some((next, state))
        },
    ))
}

impl Follow {
    async fn next(&mut self) -> Option<Result<Change, FeedError>> {
        loop {
            if let Some(entry) = self.buffer.pop_front() {
                self.after = entry.position;
                let cursor = match self.cursors.cursor(entry.position) {
                    Ok(cursor) => cursor,
                    Err(error) => return Some(self.end(error)),
                };
                return Some(Ok(Change {
                    cursor,
                    change: entry.change,
                    at: entry.at,
                }));
            }
            if self.ended {
                return None;
            }
            let (floor, head) = self.hub.bounds();
            if self.after < floor {
                let history = match &self.history {
                    Some(history) if !self.following => history,
                    _ => return Some(self.end(FeedError::TooSlow)),
                };
                let (entries, retained_from) = match history.read(self.after, head, BATCH).await {
                    Ok(read) => read,
                    Err(error) => return Some(self.end(FeedError::Unavailable(error))),
                };
                if retained_from > self.after {
                    return Some(self.end(FeedError::TooSlow));
                }
                match entries.last() {
                    // Nothing more below the hub's head: go on from there.
                    None => self.after = head,
                    Some(_) => self.buffer.extend(entries),
                }
                continue;
            }
            self.following = true;
            let (hub, after, id) = (&self.hub, self.after, self.waiter.id);
            match poll_fn(|cx| hub.poll_after(after, BATCH, id, cx)).await {
                Read::Changes(entries) => self.buffer.extend(entries),
                Read::Behind => return Some(self.end(FeedError::TooSlow)),
            }
        }
    }

    fn end(&mut self, error: FeedError) -> Result<Change, FeedError> {
        self.ended = true;
        self.buffer.clear();
        Err(error)
    }
}
