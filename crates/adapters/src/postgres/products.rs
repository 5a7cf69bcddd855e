//! The PostgreSQL product repository: the `products` table, listed in id
//! order, ids from its identity column (C2).

use std::time::SystemTime;

use async_trait::async_trait;
use items_domain::{
    Id, IdempotencyKey, Keyed, Name, Price, Product, ProductRepository, RepositoryError,
};

use super::pool::{Pool, lease};
use crate::stored_rows::{ProductRow, stored_products};

/// Products in the `products` table.
#[derive(Debug, Clone)]
pub struct PostgresProductRepository {
    pool: Pool,
}

impl PostgresProductRepository {
    pub(super) fn new(pool: Pool) -> Self {
        Self { pool }
    }
}

#[async_trait]
impl ProductRepository for PostgresProductRepository {
    async fn list(&self) -> Result<Vec<Product>, RepositoryError> {
        let rows: Vec<ProductRow> = lease(&self.pool)
            .await?
            .run(|connection| {
                sqlx::query_as("select id, name, price from products order by id")
                    .fetch_all(connection)
            })
            .await?;
        stored_products(rows)
    }

    /// In a transaction committed only within the budget, so a create
    /// answered 503 is never stored afterwards (`budget.rs`).
    async fn create(&self, name: Name, price: Price) -> Result<Product, RepositoryError> {
        let mut connection = lease(&self.pool).await?;
        connection.begin("begin").await?;
        let id: i64 = connection
            .run(|connection| {
                sqlx::query_scalar(
                    "insert into products (name, price) values ($1, $2) returning id",
                )
                .bind(name.as_str().as_bytes())
                .bind(price.get())
                .fetch_one(connection)
            })
            .await?;
        connection.commit().await?;
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
