//! Products in the `products` table: reads on the reader pool, creates
//! through the writer task.

use async_trait::async_trait;
use items_domain::{Id, Name, Price, Product, ProductRepository, RepositoryError};
use sqlx::SqlitePool;

use super::writer::{Write, Written};
use super::{Writer, mismatched, stored_name, unavailable};

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
        let rows: Vec<(i64, Vec<u8>, f64)> =
            sqlx::query_as("select id, name, price from products order by id")
                .fetch_all(&self.readers)
                .await
                .map_err(unavailable)?;
        rows.into_iter()
            .map(|(id, name, price)| {
                let corrupt =
                    |rule| RepositoryError::unavailable(format!("stored product {id}: {rule}"));
                Ok(Product {
                    id: Id::new(id),
                    name: stored_name(id, &name)?,
                    price: Price::new(price).map_err(corrupt)?,
                })
            })
            .collect()
    }

    async fn create(&self, name: Name, price: Price) -> Result<Product, RepositoryError> {
        match self.writer.write(Write::CreateProduct(name, price)).await? {
            Written::Product(product) => Ok(product),
            other => Err(mismatched(&other)),
        }
    }
}
