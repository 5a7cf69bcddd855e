//! One request's repositories (C13): each read returns the position of
//! the server once it read (sent in the read's own round trip,
//! `positions.rs`), which must meet the request's token, else the request
//! is unmet (a 409 at the edge) and nothing read is answered; each write
//! reports the latest position a commit was seen at, at or after its own.
//! The report keeps the latest of them: the answer's token.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use items_domain::{
    ConsistentReads, Id, IdempotencyKey, Item, ItemListing, ItemPage, ItemQuery, ItemRepository,
    Keyed, ListingHead, Name, Position, Price, Product, ProductRepository, ReadReport, ReadScope,
    Replaced, RepositoryError,
};

use super::positions::{self, Latest};
use super::{PostgresItemRepository, PostgresProductRepository, PostgresStore};

/// What one request asked and what its answers were served at.
#[derive(Debug)]
struct Scope {
    /// The request's token.
    at: Option<Position>,
    report: Arc<ReadReport>,
    /// The store's latest commit position.
    latest: Arc<Latest>,
}

/// A read served at a position that does not meet the request's token.
#[derive(Debug, thiserror::Error)]
#[error("the state read ({now}) does not meet the request's consistency token ({at})")]
struct Unmet {
    at: Position,
    now: Position,
}

impl Scope {
    /// Records a read made at `now`; when `now` does not meet the
    /// request's token, marks the report unmet and fails: what was read is
    /// not answered.
    fn read<T>(&self, (read, now): (T, Position)) -> Result<T, RepositoryError> {
        if let Some(at) = self.at
            && !positions::meets(now, at)
        {
            self.report.unmet();
            return Err(RepositoryError::unavailable(Unmet { at, now }));
        }
        self.report.served(now);
        Ok(read)
    }

    /// Records a write that returned `result`: its token is the latest
    /// commit position, which its own commit's is at or before.
    fn wrote<T>(&self, result: Result<T, RepositoryError>) -> Result<T, RepositoryError> {
        if result.is_ok()
            && let Some(latest) = self.latest.get()
        {
            self.report.served(latest);
        }
        result
    }
}

/// The item repository of one request.
#[derive(Debug)]
struct ScopedItems {
    items: PostgresItemRepository,
    scope: Arc<Scope>,
}

#[async_trait]
impl ItemRepository for ScopedItems {
    async fn list(&self, query: &ItemQuery) -> Result<ItemPage, RepositoryError> {
        self.scope.read(self.items.list_at(query).await?)
    }

    async fn list_all(&self) -> Result<ItemListing, RepositoryError> {
        self.scope.read(self.items.list_all_at().await?)
    }

    async fn listing_head(&self) -> Result<ListingHead, RepositoryError> {
        self.scope.read(self.items.listing_head_at().await?)
    }

    async fn get(&self, id: Id) -> Result<Option<Item>, RepositoryError> {
        self.scope.read(self.items.get_at(id).await?)
    }

    async fn create(&self, name: Name) -> Result<Item, RepositoryError> {
        self.scope.wrote(self.items.create(name).await)
    }

    async fn create_keyed(
        &self,
        name: Name,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Item>, RepositoryError> {
        self.scope
            .wrote(self.items.create_keyed(name, key, at).await)
    }

    async fn replace(
        &self,
        item: &Item,
        expected: Option<Name>,
    ) -> Result<Replaced, RepositoryError> {
        self.scope.wrote(self.items.replace(item, expected).await)
    }

    async fn delete(&self, id: Id) -> Result<bool, RepositoryError> {
        self.scope.wrote(self.items.delete(id).await)
    }
}

/// The product repository of one request.
#[derive(Debug)]
struct ScopedProducts {
    products: PostgresProductRepository,
    scope: Arc<Scope>,
}

#[async_trait]
impl ProductRepository for ScopedProducts {
    async fn list(&self) -> Result<Vec<Product>, RepositoryError> {
        self.scope.read(self.products.list_at().await?)
    }

    async fn create(&self, name: Name, price: Price) -> Result<Product, RepositoryError> {
        self.scope.wrote(self.products.create(name, price).await)
    }

    async fn create_keyed(
        &self,
        name: Name,
        price: Price,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Product>, RepositoryError> {
        self.scope
            .wrote(self.products.create_keyed(name, price, key, at).await)
    }
}

/// Every request of a PostgreSQL-backed instance is scoped: its answer
/// carries the position it reflects (C13), with or without a token.
impl ConsistentReads for PostgresStore {
    fn scope(&self, at: Option<Position>) -> ReadScope {
        let report = Arc::new(ReadReport::default());
        let scope = Arc::new(Scope {
            at,
            report: Arc::clone(&report),
            latest: Arc::clone(&self.pool.manager().latest),
        });
        let repositories = crate::sql::traced::repositories(
            "postgresql",
            ScopedItems {
                items: self.items(),
                scope: Arc::clone(&scope),
            },
            ScopedProducts {
                products: self.products(),
                scope,
            },
            self.users(),
        );
        ReadScope {
            repositories,
            report,
        }
    }
}
