//! The PostgreSQL product repository: the `products` table, listed in id
//! order, ids from its identity column (C2).

use std::time::SystemTime;

use async_trait::async_trait;
use items_domain::{
    Id, IdempotencyKey, Keyed, Name, Position, Price, Product, ProductRepository, RepositoryError,
};

use super::coalesce::{Coalescer, ProductCreates};
use super::decode;
use super::pool::{Pool, lease};
use super::positions::{self, POSITION};
use crate::sql::rows::stored_products;

/// Every product, in id order.
const LIST: &str = "select id, name, price from products order by id";

/// Products in the `products` table.
#[derive(Debug, Clone)]
pub struct PostgresProductRepository {
    pool: Pool,
    creates: Coalescer<ProductCreates>,
}

impl PostgresProductRepository {
    pub(super) fn new(pool: Pool, creates: Coalescer<ProductCreates>) -> Self {
        Self { pool, creates }
    }

    /// [`ProductRepository::list`], and the server's position once it read
    /// them (C13), in the same round trip.
    pub(super) async fn list_at(&self) -> Result<(Vec<Product>, Position), RepositoryError> {
        let mut connection = lease(&self.pool).await?;
        let list = connection.prepared(LIST).await?;
        let position = connection.prepared(POSITION).await?;
        let (rows, at) = connection
            .run(|client| async move {
                futures_util::future::try_join(
                    client.query(&list, &[]),
                    client.query_one(&position, &[]),
                )
                .await
            })
            .await?;
        Ok((
            stored_products(decode::products(&rows)?)?,
            positions::read(&at, 0)?,
        ))
    }
}

#[async_trait]
impl ProductRepository for PostgresProductRepository {
    async fn list(&self) -> Result<Vec<Product>, RepositoryError> {
        Ok(self.list_at().await?.0)
    }

    /// Group-committed (`coalesce::creates`): alone or in a batch, in a
    /// transaction committed only within the budget, so a create answered
    /// 503 is never stored afterwards (`budget.rs`). A keyed create never
    /// joins a batch: it takes `keys.rs`'s path (`create_keyed`).
    async fn create(&self, name: Name, price: Price) -> Result<Product, RepositoryError> {
        let id = self.creates.call((name.clone(), price)).await?;
        Ok(Product {
            id: Id::new(id),
            name,
            price,
        })
    }

    /// The key and the product in one transaction, committed only within the
    /// budget like every write (`keys.rs`, `budget.rs`).
    async fn create_keyed(
        &self,
        name: Name,
        price: Price,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Product>, RepositoryError> {
        super::keys::create_product(&self.pool, name, price, key, at).await
    }
}
