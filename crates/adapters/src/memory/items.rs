//! The in-memory item repository: items in 512-item chunks
//! (`ItemChunks`, `item_chunks.rs`) behind one lock, with the id counter
//! (C2) and the collection's version (C7); a page is copied out under the
//! read lock, and a full listing streams from a snapshot taken under it
//! (C10). Every write that changes an item is recorded in the change
//! feed's hub (C14) under the same write lock.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use items_domain::{
    Id, IdempotencyKey, Item, ItemBatch, ItemChange, ItemListing, ItemPage, ItemQuery,
    ItemRepository, Keyed, ListingHead, Name, Replaced, RepositoryError,
};
use parking_lot::RwLock;

use super::changes::{InMemoryChangeFeed, RETAINED_CHANGES};
use super::ids::IdCounter;
use super::item_chunks::ItemChunks;
use super::keys::Keys;
use crate::changes::cursor::{CursorFormat, random_origin};
use crate::changes::hub::Hub;

/// Items in memory. Names are `Arc<str>` inside [`Name`], so copying a page
/// out of the chunks only bumps reference counts.
#[derive(Debug)]
pub struct InMemoryItemRepository {
    state: RwLock<State>,
    /// The changes (C14), published while the write lock is held, so their
    /// positions are in the order the writes took effect.
    changes: InMemoryChangeFeed,
}

/// Items a full listing hands to the HTTP adapter at a time: enough that the
/// per-batch costs (a range seek, a `Vec`, a chunk on the socket) vanish,
/// few enough that a listing holds tens of kilobytes.
const BATCH: usize = 1000;

#[derive(Debug, Default)]
struct State {
    /// A clone shares every chunk (one reference count per 512 items); a
    /// write copies the one chunk it changes if a clone still holds it. A
    /// full listing serves such a clone, so it is the collection as it began,
    /// whatever is written while it streams (C7, C10), without copying the
    /// collection. Without a listing in flight nothing is shared and writes
    /// change the chunks in place.
    items: ItemChunks,
    /// Never goes back: see [`IdCounter`] (C2).
    last_id: IdCounter,
    /// Bumped by every write, under the write lock: the listing's version (C7).
    version: u64,
    /// Idempotency keys with the items as first created (C7), under the
    /// same lock as the items: a keyed create is one atomic step.
    keys: Keys<Item>,
}

/// Appends an item named `name` with the next id and records its
/// creation in `hub`; the caller holds the write lock over all three.
fn push(
    items: &mut ItemChunks,
    last_id: &mut IdCounter,
    version: &mut u64,
    hub: &Hub,
    name: Name,
) -> Result<Item, RepositoryError> {
    let id = last_id.next()?;
    let item = Item { id, name };
    items.push(item.clone());
    *version += 1;
    hub.publish_next(ItemChange::Created(item.clone()), SystemTime::now());
    Ok(item)
}

/// Up to [`BATCH`] items of `items` after `after`, in id order.
fn batch_after(items: &ItemChunks, after: Option<Id>) -> Vec<Item> {
    items.after(after).take(BATCH).cloned().collect()
}

/// Where a full listing stands in its snapshot: the next batch starts after
/// `after`; `None` once the last batch went out.
struct Cursor {
    /// The collection when the listing began; writes since then went to
    /// copies of the chunks they touched, not to this.
    snapshot: ItemChunks,
    after: Option<Id>,
}

impl Cursor {
    /// The next batch of the snapshot, or the end. Takes no lock: the
    /// snapshot belongs to this listing alone.
    fn next_batch(mut self) -> Option<(ItemBatch, Option<Self>)> {
        let batch = batch_after(&self.snapshot, self.after);
        let last = batch.last()?.id;
        self.after = Some(last);
        let more = (batch.len() == BATCH).then_some(self);
        Some((Ok(batch), more))
    }
}

impl InMemoryItemRepository {
    /// An empty repository. Its version starts at a random point rather than
    /// at zero: the store begins empty at every start, and a tag a client
    /// kept from an earlier process must not match a different collection
    /// that happens to have seen as many writes (equal tags, equal bytes).
    pub fn new() -> Self {
        Self::with_retained_changes(RETAINED_CHANGES)
    }

    /// An empty repository whose change feed keeps the last `retained`
    /// changes for subscribers resuming with a cursor (C14; [`new`](Self::new)
    /// keeps [`RETAINED_CHANGES`]).
    pub fn with_retained_changes(retained: usize) -> Self {
        let mut seed = [0u8; 8];
        // Without randomness the versions still differ within one process;
        // only the cross-restart guarantee is lost, so zero is acceptable.
        let _ = getrandom::fill(&mut seed);
        let state = State {
            version: u64::from_le_bytes(seed) >> 1,
            ..State::default()
        };
        Self {
            state: RwLock::new(state),
            changes: InMemoryChangeFeed {
                hub: Arc::new(Hub::new(retained, 0)),
                cursors: CursorFormat::new('m', &random_origin()),
            },
        }
    }

    /// The change feed of this repository's items (C14).
    pub fn changes(&self) -> InMemoryChangeFeed {
        self.changes.clone()
    }
}

impl Default for InMemoryItemRepository {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl ItemRepository for InMemoryItemRepository {
    /// Copies the page out under the read lock and serialises nothing there:
    /// the HTTP adapter turns the copy into JSON after the lock is released,
    /// so writers wait for at most one range copy, never for a response to
    /// be written. Without a `name` filter the total is the map's length (O(1));
    /// with one it is a scan of the names, which the in-memory store accepts
    /// (no name index: it would cost an allocation per item for a filter that
    /// the PostgreSQL adapter serves from an index).
    async fn list(&self, query: &ItemQuery) -> Result<ItemPage, RepositoryError> {
        let state = self.state.read();
        let matches_name = |name: &Name| query.name.as_ref().is_none_or(|wanted| wanted == name);
        let mut matching = state
            .items
            .after(query.after)
            .filter(|item| matches_name(&item.name))
            .cloned();
        let items: Vec<Item> = match query.limit {
            Some(limit) => matching.by_ref().take(limit.get()).collect(),
            None => matching.by_ref().collect(),
        };
        let has_more = matching.next().is_some();
        let total = match &query.name {
            None => state.items.len(),
            Some(_) => state
                .items
                .after(None)
                .filter(|item| matches_name(&item.name))
                .count(),
        };
        Ok(ItemPage {
            items,
            total: total as u64,
            has_more,
        })
    }

    /// The snapshot of the collection under one short read lock (a clone of
    /// the chunk array: 2,000 pointers at 1,000,000 items), then batches of `BATCH` items read from it without a lock:
    /// the listing is exactly the items of its version, however long the
    /// client takes to read it.
    async fn list_all(&self) -> Result<ItemListing, RepositoryError> {
        let (snapshot, version) = {
            let state = self.state.read();
            (state.items.clone(), state.version)
        };
        let total = snapshot.len() as u64;
        let cursor = Cursor {
            snapshot,
            after: None,
        };
        let batches =
            futures_util::stream::unfold(
                Some(cursor),
                |cursor| async move { cursor?.next_batch() },
            );
        Ok(ItemListing {
            version,
            total,
            batches: Box::pin(batches),
        })
    }

    /// The version and the item count under one read lock: no snapshot.
    async fn listing_head(&self) -> Result<ListingHead, RepositoryError> {
        let state = self.state.read();
        Ok(ListingHead {
            version: state.version,
            total: state.items.len() as u64,
        })
    }

    async fn get(&self, id: Id) -> Result<Option<Item>, RepositoryError> {
        Ok(self.state.read().items.get(id).map(|name| Item {
            id,
            name: name.clone(),
        }))
    }

    async fn create(&self, name: Name) -> Result<Item, RepositoryError> {
        let mut state = self.state.write();
        let State {
            items,
            last_id,
            version,
            ..
        } = &mut *state;
        push(items, last_id, version, &self.changes.hub, name)
    }

    async fn create_keyed(
        &self,
        name: Name,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Item>, RepositoryError> {
        let mut state = self.state.write();
        let State {
            items,
            last_id,
            version,
            keys,
        } = &mut *state;
        let same = |first: &Item| first.name == name;
        keys.create(key, at, same, || {
            push(items, last_id, version, &self.changes.hub, name.clone())
        })
    }

    async fn replace(
        &self,
        item: &Item,
        expected: Option<Name>,
    ) -> Result<Replaced, RepositoryError> {
        let mut state = self.state.write();
        let Some(current) = state.items.get_mut(item.id) else {
            return Ok(Replaced::NotFound);
        };
        if expected.is_some_and(|expected| expected != *current) {
            return Ok(Replaced::Changed);
        }
        *current = item.name.clone();
        state.version += 1;
        let change = ItemChange::Replaced(item.clone());
        self.changes.hub.publish_next(change, SystemTime::now());
        Ok(Replaced::Yes)
    }

    async fn delete(&self, id: Id) -> Result<bool, RepositoryError> {
        let mut state = self.state.write();
        let existed = state.items.remove(id);
        if existed {
            state.version += 1;
            let change = ItemChange::Deleted(id);
            self.changes.hub.publish_next(change, SystemTime::now());
        }
        Ok(existed)
    }
}
