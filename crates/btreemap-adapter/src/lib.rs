//! An adapter written as a stranger would write one: the three repository
//! ports of `items_domain` over `BTreeMap`s behind locks, using the domain's
//! public API only. `tests/contract.rs` runs the kit against it with one
//! line per mode, and this crate's only dev-dependency is `items-testkit`.
//! `docs/architecture.md` ("Write your own adapter") walks through it.

mod keys;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::SystemTime;

use async_trait::async_trait;
use futures_util::stream;
use items_domain::{
    Id, IdempotencyKey, Item, ItemBatch, ItemListing, ItemPage, ItemQuery, ItemRepository, Keyed,
    Name, Price, Product, ProductRepository, Replaced, Repositories, RepositoryError, User,
    UserRepository,
};

use crate::keys::Keys;

/// How many items one batch of a full listing holds.
const BATCH: usize = 1000;

/// The items, the counter ids come from (C2), and a version that every
/// write bumps (C7, C10).
#[derive(Debug, Default)]
struct Collection {
    items: BTreeMap<Id, Name>,
    last_id: i64,
    version: u64,
    /// Idempotency keys with the items as first created (C7).
    keys: Keys<Item>,
}

impl Collection {
    fn create(&mut self, name: Name) -> Item {
        let Self {
            items,
            last_id,
            version,
            ..
        } = self;
        insert_item(items, last_id, version, name)
    }

    fn items_after(&self, after: Option<Id>) -> impl Iterator<Item = Item> + '_ {
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        self.items
            .range((start, Bound::Unbounded))
            .map(|(id, name)| Item {
                id: *id,
                name: name.clone(),
            })
    }
}

/// Stores an item named `name` with the next id; the caller holds the lock.
fn insert_item(
    items: &mut BTreeMap<Id, Name>,
    last_id: &mut i64,
    version: &mut u64,
    name: Name,
) -> Item {
    *last_id += 1;
    *version += 1;
    let id = Id::new(*last_id);
    items.insert(id, name.clone());
    Item { id, name }
}

/// Items in a `BTreeMap` keyed by id, so every listing is in id order.
#[derive(Debug, Clone, Default)]
pub struct MapItems(Arc<RwLock<Collection>>);

impl MapItems {
    // A poisoned lock means a writer panicked halfway: report the store as
    // unavailable rather than serve what it left.
    fn read(&self) -> Result<RwLockReadGuard<'_, Collection>, RepositoryError> {
        self.0.read().map_err(|_| poisoned())
    }

    fn write(&self) -> Result<RwLockWriteGuard<'_, Collection>, RepositoryError> {
        self.0.write().map_err(|_| poisoned())
    }
}

fn poisoned() -> RepositoryError {
    RepositoryError::unavailable("the map's lock is poisoned")
}

#[async_trait]
impl ItemRepository for MapItems {
    async fn list(&self, query: &ItemQuery) -> Result<ItemPage, RepositoryError> {
        let collection = self.read()?;
        let matches = |item: &Item| query.name.as_ref().is_none_or(|name| &item.name == name);
        let limit = query.limit.map_or(usize::MAX, |limit| limit.get());
        let mut after = collection.items_after(query.after).filter(matches);
        let items: Vec<Item> = after.by_ref().take(limit).collect();
        let has_more = after.next().is_some();
        let total = collection.items_after(None).filter(matches).count() as u64;
        Ok(ItemPage {
            items,
            total,
            has_more,
        })
    }

    /// A snapshot, the simplest way: every item copied under one read lock
    /// (a name is an `Arc<str>`, so a copy is a pointer), then streamed in
    /// batches. A write after that cannot reach the listing (C7, C10). It
    /// holds one `Item` per item while the listing lasts; a store for large
    /// collections shares structure with its snapshots instead (the
    /// service's in-memory store shares 512-item chunks) or reads them from
    /// a database transaction.
    async fn list_all(&self) -> Result<ItemListing, RepositoryError> {
        let (version, snapshot) = {
            let collection = self.read()?;
            let items: Vec<Item> = collection.items_after(None).collect();
            (collection.version, items)
        };
        let total = snapshot.len() as u64;
        let batches: Vec<ItemBatch> = snapshot
            .chunks(BATCH)
            .map(|batch| Ok(batch.to_vec()))
            .collect();
        Ok(ItemListing {
            version,
            total,
            batches: Box::pin(stream::iter(batches)),
        })
    }

    async fn get(&self, id: Id) -> Result<Option<Item>, RepositoryError> {
        let collection = self.read()?;
        Ok(collection.items.get(&id).map(|name| Item {
            id,
            name: name.clone(),
        }))
    }

    async fn create(&self, name: Name) -> Result<Item, RepositoryError> {
        Ok(self.write()?.create(name))
    }

    async fn create_keyed(
        &self,
        name: Name,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Item>, RepositoryError> {
        let mut collection = self.write()?;
        let Collection {
            items,
            last_id,
            version,
            keys,
        } = &mut *collection;
        let same = |first: &Item| first.name == name;
        keys.create(key, at, same, || {
            Ok(insert_item(items, last_id, version, name.clone()))
        })
    }

    async fn replace(
        &self,
        item: &Item,
        expected: Option<Name>,
    ) -> Result<Replaced, RepositoryError> {
        let mut collection = self.write()?;
        let Some(current) = collection.items.get_mut(&item.id) else {
            return Ok(Replaced::NotFound);
        };
        if expected.is_some_and(|expected| *current != expected) {
            return Ok(Replaced::Changed);
        }
        *current = item.name.clone();
        collection.version += 1;
        Ok(Replaced::Yes)
    }

    async fn delete(&self, id: Id) -> Result<bool, RepositoryError> {
        let mut collection = self.write()?;
        let existed = collection.items.remove(&id).is_some();
        if existed {
            collection.version += 1;
        }
        Ok(existed)
    }
}

/// Products in a `BTreeMap` keyed by id, with their idempotency keys (C7).
#[derive(Debug, Default)]
pub struct MapProducts(RwLock<(BTreeMap<Id, Product>, Keys<Product>)>);

/// Stores a product with the next id.
fn insert(products: &mut BTreeMap<Id, Product>, name: Name, price: Price) -> Product {
    // Products are never deleted, so the highest id is the counter.
    let last = products.keys().next_back().map_or(0, |id| id.get());
    let product = Product {
        id: Id::new(last + 1),
        name,
        price,
    };
    products.insert(product.id, product.clone());
    product
}

#[async_trait]
impl ProductRepository for MapProducts {
    async fn list(&self) -> Result<Vec<Product>, RepositoryError> {
        let products = &self.0.read().map_err(|_| poisoned())?.0;
        Ok(products.values().cloned().collect())
    }

    async fn create(&self, name: Name, price: Price) -> Result<Product, RepositoryError> {
        let mut guard = self.0.write().map_err(|_| poisoned())?;
        Ok(insert(&mut guard.0, name, price))
    }

    async fn create_keyed(
        &self,
        name: Name,
        price: Price,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Product>, RepositoryError> {
        let mut guard = self.0.write().map_err(|_| poisoned())?;
        let (products, keys) = &mut *guard;
        let same = |first: &Product| first.name == name && first.price == price;
        keys.create(key, at, same, || Ok(insert(products, name.clone(), price)))
    }
}

/// The two users every store starts with (C4): the domain's list.
#[derive(Debug)]
pub struct MapUsers(Vec<User>);

impl MapUsers {
    pub fn seeded() -> Self {
        Self(items_domain::seeded_users())
    }
}

#[async_trait]
impl UserRepository for MapUsers {
    async fn list(&self) -> Result<Vec<User>, RepositoryError> {
        Ok(self.0.clone())
    }
}

/// A fresh store: empty maps, the two users.
pub fn btreemap_repositories() -> Repositories {
    Repositories::new(
        MapItems::default(),
        MapProducts::default(),
        MapUsers::seeded(),
    )
}
