//! The PostgreSQL product repository: the `products` table, listed in id
//! order, ids from its identity column (C2).

use async_trait::async_trait;
use items_domain::{Id, Name, Price, Product, ProductRepository, RepositoryError};

use super::coalesce::{Coalescer, ProductCreates};
use super::pool::{Pool, lease};
use crate::stored_rows::{ProductRow, stored_products};

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

    async fn create(&self, name: Name, price: Price) -> Result<Product, RepositoryError> {
        // Group-committed (`coalesce::creates`).
        let id = self.creates.call((name.clone(), price)).await?;
        Ok(Product {
            id: Id::new(id),
            name,
            price,
        })
    }
}
