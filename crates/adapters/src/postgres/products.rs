//! The PostgreSQL product repository: the `products` table, listed in id
//! order, ids from its identity column (C2).

use std::time::SystemTime;

use async_trait::async_trait;
use items_domain::{
    Id, IdempotencyKey, Keyed, Name, Price, Product, ProductRepository, RepositoryError,
};

use super::coalesce::{Coalescer, ProductCreates};
use super::decode;
use super::pool::{Pool, lease};
use super::positions::{self, POSITION, Read};
use crate::sql::rows::stored_products;

/// Every product, in id order.
const LIST: &str = "select id, name, price from products order by id";

/// Products in the `products` table.
#[derive(Debug, Clone)]
pub struct PostgresProductRepository {
    pool: Pool,
    creates: Coalescer<ProductCreates>,
    /// Whether a read also asks the server's position before it (a
    /// standby's, C13).
    before: bool,
}

impl PostgresProductRepository {
    pub(super) fn new(pool: Pool, creates: Coalescer<ProductCreates>) -> Self {
        Self {
            pool,
            creates,
            before: false,
        }
    }

    /// The same table read on a standby's pool (C13): the list also asks
    /// the server's position before it.
    pub(super) fn on_standby(pool: Pool) -> Self {
        Self {
            creates: Coalescer::new(pool.clone(), 1),
            pool,
            before: true,
        }
    }

    /// [`ProductRepository::list`], and the server's position around it
    /// (C13), in the same round trip.
    pub(super) async fn list_at(&self) -> Result<Read<Vec<Product>>, RepositoryError> {
        let mut connection = lease(&self.pool).await?;
        let list = connection.prepared(LIST).await?;
        let position = connection.prepared(POSITION).await?;
        let ask_before = self.before;
        let (before, rows, at) = connection
            .run(|client| async move {
                let before = async {
                    if ask_before {
                        client.query_one(&position, &[]).await.map(Some)
                    } else {
                        Ok(None)
                    }
                };
                futures_util::future::try_join3(
                    before,
                    client.query(&list, &[]),
                    client.query_one(&position, &[]),
                )
                .await
            })
            .await?;
        Ok(Read {
            value: stored_products(decode::products(&rows)?)?,
            before: positions::before(before.as_ref())?,
            after: positions::read(&at, 0)?,
        })
    }
}

#[async_trait]
impl ProductRepository for PostgresProductRepository {
    async fn list(&self) -> Result<Vec<Product>, RepositoryError> {
        Ok(self.list_at().await?.value)
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
