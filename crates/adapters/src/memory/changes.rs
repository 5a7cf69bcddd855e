//! The in-memory store's change feed (C14): the last
//! [`RETAINED_CHANGES`] changes in the hub, recorded by the item
//! repository under its write lock, so their order is the order the writes
//! took effect in.
//!
//! A cursor names this store's random origin, so after a restart (a new,
//! empty store) an old cursor is unknown and gets a reset.

use std::sync::Arc;

use async_trait::async_trait;
use items_domain::{ChangeFeed, Cursor, FeedError, RepositoryError, Subscription};

use crate::changes::cursor::{CursorFormat, retained};
use crate::changes::follow::follow;
use crate::changes::hub::Hub;

/// How many changes the in-memory store keeps for subscribers resuming
/// with a cursor (C14): the last 100,000.
pub const RETAINED_CHANGES: usize = 100_000;

/// The changes of one [`InMemoryItemRepository`](super::items::InMemoryItemRepository)
/// (`InMemoryItemRepository::changes`); clones share them.
#[derive(Debug, Clone)]
pub struct InMemoryChangeFeed {
    pub(super) hub: Arc<Hub>,
    pub(super) cursors: CursorFormat,
}

#[async_trait]
impl ChangeFeed for InMemoryChangeFeed {
    /// A cursor is known while every change after it is among the retained
    /// ones.
    async fn subscribe(&self, after: Option<Cursor>) -> Result<Subscription, RepositoryError> {
        let (floor, head) = self.hub.bounds();
        let known = after
            .as_ref()
            .and_then(|cursor| self.cursors.position(cursor))
            .filter(|&position| retained(position, floor, head));
        let from = known.unwrap_or(head);
        let start = self.cursors.cursor(from).map_err(|error| match error {
            FeedError::Unavailable(error) => error,
            FeedError::TooSlow => RepositoryError::unavailable("no cursor"),
        })?;
        Ok(Subscription {
            start,
            reset: after.is_some() && known.is_none(),
            changes: follow(
                Arc::clone(&self.hub),
                None,
                self.cursors.clone(),
                from,
                None,
            ),
        })
    }
}
