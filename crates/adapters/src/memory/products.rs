//! The in-memory product repository: a `BTreeMap` keyed by id behind one
//! lock, with the same never-going-back id counter as items (C2).

use std::collections::BTreeMap;

use async_trait::async_trait;
use items_domain::{Id, Name, Price, Product, ProductRepository, RepositoryError};
use parking_lot::RwLock;

use super::IdCounter;

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
        let id = state.last_id.next()?;
        state.products.insert(id, (name.clone(), price));
        Ok(Product { id, name, price })
    }
}
