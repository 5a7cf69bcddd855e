//! The PostgreSQL product repository: the `products` table, listed in id
//! order, ids from its identity column (C2).

use async_trait::async_trait;
use items_domain::{Id, Name, Price, Product, ProductRepository, RepositoryError};

use super::pool::{Pool, lease};
use super::stored_name;

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
        let rows: Vec<(i64, Vec<u8>, f64)> = lease(&self.pool)
            .await?
            .run(|connection| {
                sqlx::query_as("select id, name, price from products order by id")
                    .fetch_all(connection)
            })
            .await?;
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
        let id: i64 = lease(&self.pool)
            .await?
            .run(|connection| {
                sqlx::query_scalar(
                    "insert into products (name, price) values ($1, $2) returning id",
                )
                .bind(name.as_str().as_bytes())
                .bind(price.get())
                .fetch_one(connection)
            })
            .await?;
        Ok(Product {
            id: Id::new(id),
            name,
            price,
        })
    }
}
