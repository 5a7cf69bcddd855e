//! The in-memory product repository: a `BTreeMap` keyed by id behind one
//! lock, with the same never-going-back id counter as items (C2).

use std::collections::BTreeMap;
use std::time::SystemTime;

use async_trait::async_trait;
use items_domain::{
    Id, IdempotencyKey, Keyed, Name, Price, Product, ProductRepository, RepositoryError,
};
use parking_lot::RwLock;

use super::ids::IdCounter;
use super::keys::Keys;

/// Products in memory, with the same never-going-back id counter as items (C2).
#[derive(Debug, Default)]
pub struct InMemoryProductRepository {
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    products: BTreeMap<Id, (Name, Price)>,
    /// Never goes back: see [`IdCounter`] (C2).
    last_id: IdCounter,
    /// Idempotency keys with the products as first created (C7), under the
    /// same lock as the products; apart from the items' keys.
    keys: Keys<Product>,
}

impl InMemoryProductRepository {
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl ProductRepository for InMemoryProductRepository {
    async fn list(&self) -> Result<Vec<Product>, RepositoryError> {
        let state = self.state.read();
        let products = state.products.iter().map(|(&id, (name, price))| Product {
            id,
            name: name.clone(),
            price: *price,
        });
        Ok(products.collect())
    }

    async fn create(&self, name: Name, price: Price) -> Result<Product, RepositoryError> {
        let mut state = self.state.write();
        let State {
            products, last_id, ..
        } = &mut *state;
        insert(products, last_id, name, price)
    }

    async fn create_keyed(
        &self,
        name: Name,
        price: Price,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Product>, RepositoryError> {
        let mut state = self.state.write();
        let State {
            products,
            last_id,
            keys,
        } = &mut *state;
        let same = |first: &Product| first.name == name && first.price == price;
        keys.create(key, at, same, || {
            insert(products, last_id, name.clone(), price)
        })
    }
}

/// Stores a product with the next id; the caller holds the write lock.
fn insert(
    products: &mut BTreeMap<Id, (Name, Price)>,
    last_id: &mut IdCounter,
    name: Name,
    price: Price,
) -> Result<Product, RepositoryError> {
    let id = last_id.next()?;
    products.insert(id, (name.clone(), price));
    Ok(Product { id, name, price })
}
