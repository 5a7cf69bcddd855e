//! Products in the `products` table: the list read on the reader pool, on
//! a blocking thread (it grows with the table), creates through the writer
//! thread.

use std::time::SystemTime;

use async_trait::async_trait;
use items_domain::{
    IdempotencyKey, Keyed, Name, Price, Product, ProductRepository, RepositoryError,
};

use super::messages::{Write, Written, mismatched};
use super::readers::Readers;
use super::rows;
use super::writer::Writer;

/// Products in the `products` table of one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteProductRepository {
    readers: Readers,
    writer: Writer,
}

impl SqliteProductRepository {
    pub(super) fn new(readers: Readers, writer: Writer) -> Self {
        Self { readers, writer }
    }
}

#[async_trait]
impl ProductRepository for SqliteProductRepository {
    async fn list(&self) -> Result<Vec<Product>, RepositoryError> {
        self.readers
            .read_blocking(|connection| {
                let mut statement = connection
                    .prepare_cached("select id, name, price from products order by id")
                    .map_err(RepositoryError::unavailable)?;
                rows::all(&mut statement, [], rows::product)
            })
            .await
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
