use std::collections::BTreeMap;

use async_trait::async_trait;
use items_domain::{Id, Name, Price, Product, ProductRepository, RepositoryError};
use parking_lot::RwLock;

/// Products in memory, with the same never-going-back id counter as items (C2).
#[derive(Debug, Default)]
pub struct InMemoryProductRepository {
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    products: BTreeMap<Id, (Name, Price)>,
    last_id: i64,
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
        let next = state
            .last_id
            .checked_add(1)
            .ok_or_else(|| RepositoryError::unavailable("the product id counter is exhausted"))?;
        state.last_id = next;
        let id = Id::new(next);
        state.products.insert(id, (name.clone(), price));
        Ok(Product { id, name, price })
    }
}
