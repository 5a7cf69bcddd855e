use std::collections::BTreeMap;
use std::ops::Bound;

use async_trait::async_trait;
use items_domain::{
    Id, Item, ItemPage, ItemQuery, ItemRepository, Name, Replaced, RepositoryError,
};
use parking_lot::RwLock;

use super::IdCounter;

/// Items in memory. Names are `Arc<str>` inside [`Name`], so the map holds one
/// allocation per item and copying a page out of it only bumps reference
/// counts.
#[derive(Debug, Default)]
pub struct InMemoryItemRepository {
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    items: BTreeMap<Id, Name>,
    /// Never goes back: see [`IdCounter`] (C2).
    last_id: IdCounter,
}

impl InMemoryItemRepository {
    pub fn new() -> Self {
        Self::default()
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
        let start = query.after.map_or(Bound::Unbounded, Bound::Excluded);
        let matches_name = |name: &Name| query.name.as_ref().is_none_or(|wanted| wanted == name);
        let mut matching = state
            .items
            .range((start, Bound::Unbounded))
            .filter(|(_, name)| matches_name(name))
            .map(|(&id, name)| Item {
                id,
                name: name.clone(),
            });
        let items: Vec<Item> = match query.limit {
            Some(limit) => matching.by_ref().take(limit.get()).collect(),
            None => matching.by_ref().collect(),
        };
        let has_more = matching.next().is_some();
        let total = match &query.name {
            None => state.items.len(),
            Some(_) => state
                .items
                .values()
                .filter(|name| matches_name(name))
                .count(),
        };
        Ok(ItemPage {
            items,
            total: total as u64,
            has_more,
        })
    }

    async fn get(&self, id: Id) -> Result<Option<Item>, RepositoryError> {
        Ok(self.state.read().items.get(&id).map(|name| Item {
            id,
            name: name.clone(),
        }))
    }

    async fn create(&self, name: Name) -> Result<Item, RepositoryError> {
        let mut state = self.state.write();
        let id = state.last_id.next()?;
        state.items.insert(id, name.clone());
        Ok(Item { id, name })
    }

    async fn replace(
        &self,
        item: &Item,
        expected: Option<Name>,
    ) -> Result<Replaced, RepositoryError> {
        let mut state = self.state.write();
        let Some(current) = state.items.get_mut(&item.id) else {
            return Ok(Replaced::NotFound);
        };
        if expected.is_some_and(|expected| expected != *current) {
            return Ok(Replaced::Changed);
        }
        *current = item.name.clone();
        Ok(Replaced::Yes)
    }

    async fn delete(&self, id: Id) -> Result<bool, RepositoryError> {
        Ok(self.state.write().items.remove(&id).is_some())
    }
}
