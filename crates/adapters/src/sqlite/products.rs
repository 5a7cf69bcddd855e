//! Products in the `products` table: reads on the reader pool, creates
//! through the writer thread.

use std::time::SystemTime;

use async_trait::async_trait;
use items_domain::{
    IdempotencyKey, Keyed, Name, Price, Product, ProductRepository, RepositoryError,
};
use sqlx::SqlitePool;

use super::messages::{Write, Written, mismatched};
use super::unavailable;
use super::writer::Writer;
use crate::sql::rows::{ProductRow, stored_products};

/// Products in the `products` table of one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteProductRepository {
    readers: SqlitePool,
    writer: Writer,
}

impl SqliteProductRepository {
    pub(super) fn new(readers: SqlitePool, writer: Writer) -> Self {
        Self { readers, writer }
    }
}

#[async_trait]
impl ProductRepository for SqliteProductRepository {
    async fn list(&self) -> Result<Vec<Product>, RepositoryError> {
        let rows: Vec<ProductRow> =
            sqlx::query_as("select id, name, price from products order by id")
                .fetch_all(&self.readers)
                .await
                .map_err(unavailable)?;
        stored_products(rows)
    }

    async fn create(&self, name: Name, price: Price) -> Result<Product, RepositoryError> {
        match self.writer.write(Write::CreateProduct(name, price)).await? {
            Written::Product(product) => Ok(product),
            other => Err(mismatched(&other)),
        }
    }

    /// In the writer's batch transaction, one write at a time (`keys.rs`).
    async fn create_keyed(
        &self,
        name: Name,
        price: Price,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Product>, RepositoryError> {
        let write = Write::CreateProductKeyed {
            name,
            price,
            key: key.clone(),
            at,
        };
        match self.writer.write(write).await? {
            Written::KeyedProduct(keyed) => Ok(keyed),
            other => Err(mismatched(&other)),
        }
    }
}
