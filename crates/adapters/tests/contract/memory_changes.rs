//! The in-memory store's change feed under the kit's checks (C14), with a
//! ring small enough that a check can push its changes out of it.

use std::sync::Arc;

use items_adapters::memory::{InMemoryChangeFeed, InMemoryItemRepository};
use items_domain::{ChangeFeed, Id, ItemRepository, Name};
use items_testkit::{ChangeFeedFixture, Fixture};

/// The changes the fixture's store keeps: more than any check writes
/// before it reads, so only [`ChangeFeedFixture::expire_changes`] pushes a
/// change out.
const RETAINED: usize = 4096;

pub struct MemoryChanges {
    items: Arc<InMemoryItemRepository>,
    changes: InMemoryChangeFeed,
}

impl MemoryChanges {
    pub fn new() -> Self {
        let items = InMemoryItemRepository::with_retained_changes(RETAINED);
        let changes = items.changes();
        Self {
            items: Arc::new(items),
            changes,
        }
    }
}

impl Fixture for MemoryChanges {}

impl ChangeFeedFixture for MemoryChanges {
    fn items(&self) -> Arc<dyn ItemRepository> {
        Arc::clone(&self.items) as Arc<dyn ItemRepository>
    }

    fn changes(&self) -> Arc<dyn ChangeFeed> {
        Arc::new(self.changes.clone())
    }

    /// The store keeps the last [`RETAINED`] changes: as many more push
    /// every earlier one out (each a create and a delete, so the items
    /// stay as they were).
    async fn expire_changes(&self) {
        let name = Name::parse("filler").expect("a valid name");
        for _ in 0..RETAINED / 2 {
            let filler = self.items.create(name.clone()).await.expect("create");
            let deleted: Id = filler.id;
            self.items.delete(deleted).await.expect("delete");
        }
    }
}
