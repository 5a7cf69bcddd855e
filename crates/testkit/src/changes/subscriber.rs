//! How the change-feed checks read a subscription: the next change within
//! a deadline, or proof that none comes.

use std::time::Duration;

use futures_util::StreamExt;
use items_domain::{Change, ChangeFeed, Cursor, Id, Item, ItemChange, Name, Subscription};

use crate::answer::Answer;

/// How long a check waits for a change it expects: well past the 1 s the
/// contract allows, so a slow machine does not fail a check; the 1 s itself
/// is checked apart.
pub(super) const PATIENCE: Duration = Duration::from_secs(10);

/// How long a check watches for a change that must not come: past the 1 s
/// within which any change must have arrived.
pub(super) const QUIET: Duration = Duration::from_millis(1500);

/// A subscription under test.
pub(super) struct Subscriber {
    pub(super) subscription: Subscription,
    /// What the check was doing, for the messages.
    pub(super) label: String,
}

impl Subscriber {
    /// Subscribes after `after` (from the present for `None`).
    pub(super) async fn after(
        feed: &dyn ChangeFeed,
        after: Option<&Cursor>,
        label: impl Into<String>,
    ) -> Self {
        let label = label.into();
        let subscription = feed
            .subscribe(after.cloned())
            .await
            .answer(format_args!("subscribe ({label})"));
        Self {
            subscription,
            label,
        }
    }

    /// The next change, which must come within [`PATIENCE`].
    #[track_caller]
    pub(super) fn next(&mut self) -> impl Future<Output = Change> + '_ {
        let caller = std::panic::Location::caller();
        async move {
            match tokio::time::timeout(PATIENCE, self.subscription.changes.next()).await {
                Ok(Some(Ok(change))) => change,
                Ok(Some(Err(error))) => panic!(
                    "C14: {} ({caller}): the stream ended with {error:?} where a change was due",
                    self.label
                ),
                Ok(None) => panic!(
                    "C14: {} ({caller}): the stream ended where a change was due",
                    self.label
                ),
                Err(_) => panic!(
                    "C14: {} ({caller}): no change within {PATIENCE:?} where one was due",
                    self.label
                ),
            }
        }
    }

    /// The next `count` changes.
    pub(super) async fn take(&mut self, count: usize) -> Vec<Change> {
        let mut changes = Vec::with_capacity(count);
        for _ in 0..count {
            changes.push(self.next().await);
        }
        changes
    }

    /// Panics when a change arrives within [`QUIET`].
    pub(super) async fn assert_quiet(&mut self, why: &str) {
        if let Ok(Some(next)) = tokio::time::timeout(QUIET, self.subscription.changes.next()).await
        {
            panic!("C14: {}: {why}, yet the stream gave {next:?}", self.label);
        }
    }
}

/// A created item, as a change names it.
pub(super) fn created(id: i64, name: &str) -> ItemChange {
    ItemChange::Created(item(id, name))
}

/// A replaced item, as a change names it.
pub(super) fn replaced(id: i64, name: &str) -> ItemChange {
    ItemChange::Replaced(item(id, name))
}

/// A deleted item, as a change names it.
pub(super) fn deleted(id: i64) -> ItemChange {
    ItemChange::Deleted(Id::new(id))
}

pub(super) fn item(id: i64, name: &str) -> Item {
    Item {
        id: Id::new(id),
        name: Name::parse(name).answer(format_args!("the kit's name {name:?}")),
    }
}

/// What the changes say, without their cursors: what checks compare.
pub(super) fn what(changes: &[Change]) -> Vec<ItemChange> {
    changes.iter().map(|change| change.change.clone()).collect()
}
