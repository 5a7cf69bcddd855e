//! Turns for the full listing (C12: a client never holds the store): how
//! many listings of one SQL store may read from it at once.
//!
//! Invariants:
//! - at most [`ListingTurns::of`]`(connections)` listings, a quarter of the
//!   store's connections (PostgreSQL's pool, SQLite's readers) and at least
//!   one, hold a connection at once, so listings never take more than a
//!   quarter of them from every other request;
//! - a listing waits for its turn before it asks for a connection, holding
//!   nothing meanwhile, and turns are handed out in the order asked (tokio's
//!   semaphore is fair);
//! - a turn is given back when the listing ends or is dropped, so the wait
//!   is bounded by the progress of the listings ahead, each of whose batches
//!   is bounded by the statement budget: a stalled store frees its turns
//!   within the budget.
//!
//! Why no budget on the wait itself: a listing of ten million items reads
//! for seconds, and a second one asked meanwhile would get 503 however
//! healthy the store. The HTTP adapter reads a listing at the store's pace
//! into its spool (`http/support/spool.rs`), so a turn lasts as long as the store
//! takes, never as long as a client does.

use std::sync::Arc;

use items_domain::RepositoryError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The turns of one store; clones share them.
#[derive(Debug, Clone)]
pub(crate) struct ListingTurns(Arc<Semaphore>);

/// One listing's turn, given back when dropped.
pub(crate) type Turn = OwnedSemaphorePermit;

impl ListingTurns {
    /// Turns for a store of `connections` connections: a quarter of them,
    /// at least one.
    pub(crate) fn of(connections: u32) -> Self {
        Self(Arc::new(Semaphore::new((connections as usize / 4).max(1))))
    }

    /// Waits for a turn.
    ///
    /// # Errors
    /// [`RepositoryError::Unavailable`] once the turns are closed (never, as
    /// the stores use them).
    pub(crate) async fn wait(&self) -> Result<Turn, RepositoryError> {
        Arc::clone(&self.0)
            .acquire_owned()
            .await
            .map_err(RepositoryError::unavailable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarter_of_the_connections_and_at_least_one() {
        for (connections, turns) in [(1, 1), (4, 1), (7, 1), (8, 2), (10, 2), (100, 25)] {
            let listing = ListingTurns::of(connections);
            assert_eq!(listing.0.available_permits(), turns, "{connections}");
        }
    }
}
