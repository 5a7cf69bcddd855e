//! The change feed's use case ([`ChangeService`], C14): a subscription
//! from the cursor a client sent back, whatever it sent.

use std::sync::Arc;

use crate::RepositoryError;
use crate::changes::{ChangeFeed, Cursor, Subscription};

/// Subscriptions to a store's changes (C14), over any [`ChangeFeed`].
///
/// Invariant: whatever bytes a client sends as its cursor, the answer is a
/// subscription, never an error of the client's: a value that is not a
/// well-formed [`Cursor`] is an unknown cursor, answered as the store
/// answers one it does not know (`reset`, then the present).
#[derive(Clone)]
pub struct ChangeService {
    feed: Arc<dyn ChangeFeed>,
}

impl std::fmt::Debug for ChangeService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeService").finish_non_exhaustive()
    }
}

impl ChangeService {
    /// The use case over `feed`.
    pub fn new(feed: Arc<dyn ChangeFeed>) -> Self {
        Self { feed }
    }

    /// Subscribes just after the cursor `last_event_id` (the raw bytes a
    /// client sent), or from the present without one.
    ///
    /// # Errors
    /// [`RepositoryError::Unavailable`] when the store cannot be read.
    pub async fn subscribe(
        &self,
        last_event_id: Option<&[u8]>,
    ) -> Result<Subscription, RepositoryError> {
        match last_event_id.map(Cursor::parse) {
            None => self.feed.subscribe(None).await,
            Some(Ok(cursor)) => self.feed.subscribe(Some(cursor)).await,
            // Malformed: it names no change of this store, or of any.
            Some(Err(_)) => {
                let mut subscription = self.feed.subscribe(None).await?;
                subscription.reset = true;
                Ok(subscription)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changes::MockChangeFeed;

    fn present() -> Subscription {
        Subscription {
            start: Cursor::parse(b"now").unwrap(),
            reset: false,
            changes: Box::pin(futures_util::stream::empty()),
        }
    }

    #[tokio::test]
    async fn a_well_formed_cursor_is_handed_to_the_store_c14() {
        let mut feed = MockChangeFeed::new();
        feed.expect_subscribe()
            .withf(|after| after.as_ref().map(Cursor::as_str) == Some("m.3"))
            .returning(|_| Ok(present()));
        let service = ChangeService::new(Arc::new(feed));
        let subscription = service.subscribe(Some(b"m.3")).await.unwrap();
        assert!(!subscription.reset);
    }

    #[tokio::test]
    async fn a_malformed_cursor_is_an_unknown_one_reset_at_the_present_c14() {
        let mut feed = MockChangeFeed::new();
        feed.expect_subscribe()
            .withf(Option::is_none)
            .times(2)
            .returning(|_| Ok(present()));
        let service = ChangeService::new(Arc::new(feed));
        let malformed = service.subscribe(Some("é".as_bytes())).await.unwrap();
        assert!(malformed.reset, "a cursor no store writes is unknown");
        let fresh = service.subscribe(None).await.unwrap();
        assert!(!fresh.reset, "no cursor: the present, no reset");
    }
}
