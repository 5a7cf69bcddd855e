//! The repositories of a SQL store with a span around each operation
//! (C11): a client span per call (`SELECT items`, `INSERT products`, …)
//! naming the store as `db.system.name`, the child of the request's span.
//!
//! Invariants: [`repositories`] wraps a store's repositories only while a
//! trace layer is installed ([`crate::traces::enabled`] when the store
//! hands them out); otherwise it hands them back as they are, and a store
//! operation pays nothing for traces. Each wrapper only forwards, inside
//! its span: results and errors are the wrapped repository's.
//!
//! Why a wrapper: one place for the spans of both SQL stores, and the
//! repositories' own code keeps to SQL.

use std::time::SystemTime;

use async_trait::async_trait;
use items_domain::{
    Id, IdempotencyKey, Item, ItemListing, ItemPage, ItemQuery, ItemRepository, Keyed, ListingHead,
    Name, Price, Product, ProductRepository, Replaced, Repositories, RepositoryError, User,
    UserRepository,
};
use tracing::Instrument;

use crate::traces::store_operation;

/// The store's repositories, each call in a span naming `system` (the
/// conventions' `db.system.name`: `postgresql`, `sqlite`) when traces are
/// on; as they are when off.
pub(crate) fn repositories(
    system: &'static str,
    items: impl ItemRepository + 'static,
    products: impl ProductRepository + 'static,
    users: impl UserRepository + 'static,
) -> Repositories {
    if crate::traces::enabled() {
        Repositories::new(
            Traced::new(system, items),
            Traced::new(system, products),
            Traced::new(system, users),
        )
    } else {
        Repositories::new(items, products, users)
    }
}

/// A repository whose every call runs in its own span.
#[derive(Debug, Clone)]
struct Traced<R> {
    system: &'static str,
    inner: R,
}

impl<R> Traced<R> {
    fn new(system: &'static str, inner: R) -> Self {
        Self { system, inner }
    }
}

#[async_trait]
impl<R: ItemRepository> ItemRepository for Traced<R> {
    async fn list(&self, query: &ItemQuery) -> Result<ItemPage, RepositoryError> {
        let span = store_operation(self.system, "SELECT", "items");
        self.inner.list(query).instrument(span).await
    }

    async fn list_all(&self) -> Result<ItemListing, RepositoryError> {
        let span = store_operation(self.system, "SELECT", "items");
        self.inner.list_all().instrument(span).await
    }

    async fn listing_head(&self) -> Result<ListingHead, RepositoryError> {
        let span = store_operation(self.system, "SELECT", "item_tally");
        self.inner.listing_head().instrument(span).await
    }

    async fn get(&self, id: Id) -> Result<Option<Item>, RepositoryError> {
        let span = store_operation(self.system, "SELECT", "items");
        self.inner.get(id).instrument(span).await
    }

    async fn create(&self, name: Name) -> Result<Item, RepositoryError> {
        let span = store_operation(self.system, "INSERT", "items");
        self.inner.create(name).instrument(span).await
    }

    async fn create_keyed(
        &self,
        name: Name,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Item>, RepositoryError> {
        let span = store_operation(self.system, "INSERT", "items");
        self.inner
            .create_keyed(name, key, at)
            .instrument(span)
            .await
    }

    async fn replace(
        &self,
        item: &Item,
        expected: Option<Name>,
    ) -> Result<Replaced, RepositoryError> {
        let span = store_operation(self.system, "UPDATE", "items");
        self.inner.replace(item, expected).instrument(span).await
    }

    async fn delete(&self, id: Id) -> Result<bool, RepositoryError> {
        let span = store_operation(self.system, "DELETE", "items");
        self.inner.delete(id).instrument(span).await
    }
}

#[async_trait]
impl<R: ProductRepository> ProductRepository for Traced<R> {
    async fn list(&self) -> Result<Vec<Product>, RepositoryError> {
        let span = store_operation(self.system, "SELECT", "products");
        self.inner.list().instrument(span).await
    }

    async fn create(&self, name: Name, price: Price) -> Result<Product, RepositoryError> {
        let span = store_operation(self.system, "INSERT", "products");
        self.inner.create(name, price).instrument(span).await
    }

    async fn create_keyed(
        &self,
        name: Name,
        price: Price,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Product>, RepositoryError> {
        let span = store_operation(self.system, "INSERT", "products");
        self.inner
            .create_keyed(name, price, key, at)
            .instrument(span)
            .await
    }
}

#[async_trait]
impl<R: UserRepository> UserRepository for Traced<R> {
    async fn list(&self) -> Result<Vec<User>, RepositoryError> {
        let span = store_operation(self.system, "SELECT", "users");
        self.inner.list().instrument(span).await
    }
}
