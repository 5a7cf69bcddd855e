//! The use cases of the `products` collection ([`ProductService`]): list and
//! create.

use std::sync::Arc;

use super::keyed::{self, CreateError, Created};
use crate::RepositoryError;
use crate::entities::Product;
use crate::idempotency::{IdempotencyKey, InFlight};
use crate::ports::ProductRepository;
use crate::values::{Name, Price};

/// The use cases of the `products` collection: list and create.
///
/// ```
/// # use std::sync::{Arc, Mutex};
/// # use async_trait::async_trait;
/// use items_domain::{Name, Price, ProductService};
/// # use items_domain::{IdempotencyKey, Keyed, Id, Product, ProductRepository, RepositoryError};
/// #
/// # /// Just enough of a repository for this example.
/// # #[derive(Default)]
/// # struct InMemory(Mutex<Vec<Product>>);
/// #
/// # #[async_trait]
/// # impl ProductRepository for InMemory {
/// #     async fn list(&self) -> Result<Vec<Product>, RepositoryError> {
/// #         Ok(self.0.lock().unwrap().clone())
/// #     }
/// #     async fn create(&self, name: Name, price: Price) -> Result<Product, RepositoryError> {
/// #         let mut products = self.0.lock().unwrap();
/// #         let id = Id::new(products.len() as i64 + 1);
/// #         products.push(Product { id, name, price });
/// #         Ok(products[products.len() - 1].clone())
/// #     }
/// #     async fn create_keyed(&self, _: Name, _: Price, _: &IdempotencyKey, _: std::time::SystemTime) -> Result<Keyed<Product>, RepositoryError> {
/// #         unimplemented!()
/// #     }
/// # }
/// #
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let products = ProductService::new(Arc::new(InMemory::default()));
///
/// let pen = products.create(Name::parse("pen")?, Price::new(1.5)?).await?;
/// assert_eq!(products.list().await?, [pen]);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct ProductService {
    repository: Arc<dyn ProductRepository>,
    /// Keys of the product creates running in this process (C7: 409).
    in_flight: InFlight,
}

impl std::fmt::Debug for ProductService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProductService").finish_non_exhaustive()
    }
}

impl ProductService {
    /// The use cases over `repository`.
    pub fn new(repository: Arc<dyn ProductRepository>) -> Self {
        Self {
            repository,
            in_flight: InFlight::default(),
        }
    }

    /// The same use cases over another view of the same store: one
    /// request's scope, reading at or after its position (C13). The
    /// creates in flight are shared, so a key's second create still waits
    /// for its first (C7).
    #[must_use]
    pub fn scoped(&self, repository: Arc<dyn ProductRepository>) -> Self {
        Self {
            repository,
            in_flight: self.in_flight.clone(),
        }
    }

    /// Every product, in id order.
    pub async fn list(&self) -> Result<Vec<Product>, RepositoryError> {
        self.repository.list().await
    }

    /// Creates a product; its id comes from the repository's counter (C2).
    pub async fn create(&self, name: Name, price: Price) -> Result<Product, RepositoryError> {
        self.repository.create(name, price).await
    }

    /// Creates a product under an idempotency key (C7), as
    /// [`ItemService::create_once`](crate::ItemService::create_once) does:
    /// "the same body" is the same name and price.
    ///
    /// # Errors
    /// [`CreateError::KeyReused`] when the key was used with other values;
    /// [`CreateError::KeyInFlight`] while a create with the key runs in this
    /// process; [`CreateError::Unavailable`] when the store cannot be written.
    pub async fn create_once(
        &self,
        name: Name,
        price: Price,
        key: &IdempotencyKey,
    ) -> Result<Created<Product>, CreateError> {
        keyed::create_once(&self.in_flight, key, |at| {
            self.repository.create_keyed(name, price, key, at)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::MockProductRepository;
    use crate::values::Id;

    fn product(id: i64) -> Product {
        Product {
            id: Id::new(id),
            name: Name::parse("pen").expect("valid"),
            price: Price::new(1.5).expect("valid"),
        }
    }

    #[tokio::test]
    async fn list_returns_the_stored_products() {
        let mut repository = MockProductRepository::new();
        repository
            .expect_list()
            .times(1)
            .return_once(|| Ok(vec![product(1), product(2)]));

        let products = ProductService::new(Arc::new(repository))
            .list()
            .await
            .unwrap();
        assert_eq!(products, vec![product(1), product(2)]);
    }

    #[tokio::test]
    async fn create_passes_name_and_price_and_returns_the_repository_id_c2() {
        let mut repository = MockProductRepository::new();
        repository
            .expect_create()
            .withf(|name, price| name.as_str() == "pen" && price.get() == 1.5)
            .times(1)
            .return_once(|name, price| {
                Ok(Product {
                    id: Id::new(7),
                    name,
                    price,
                })
            });

        let created = ProductService::new(Arc::new(repository))
            .create(Name::parse("pen").unwrap(), Price::new(1.5).unwrap())
            .await
            .unwrap();
        assert_eq!(created, product(7));
    }

    #[tokio::test]
    async fn create_once_passes_name_price_and_key_and_answers_a_replay_c7() {
        let mut repository = MockProductRepository::new();
        repository
            .expect_create_keyed()
            .withf(|name, price, key, _| {
                name.as_str() == "pen" && price.get() == 1.5 && key.as_str() == "k1"
            })
            .times(1)
            .return_once(|_, _, _, _| Ok(crate::Keyed::Replayed(product(7))));

        let created = ProductService::new(Arc::new(repository))
            .create_once(
                Name::parse("pen").unwrap(),
                Price::new(1.5).unwrap(),
                &IdempotencyKey::parse(b"k1").unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(
            created,
            Created {
                value: product(7),
                replayed: true
            }
        );
    }

    #[tokio::test]
    async fn create_once_refuses_other_values_and_a_key_in_flight_c7() {
        let mut repository = MockProductRepository::new();
        repository
            .expect_create_keyed()
            .times(1)
            .return_once(|_, _, _, _| Ok(crate::Keyed::Mismatch));
        let service = ProductService::new(Arc::new(repository));
        let key = IdempotencyKey::parse(b"k1").unwrap();
        let create =
            || service.create_once(Name::parse("ink").unwrap(), Price::new(2.0).unwrap(), &key);
        assert!(matches!(create().await, Err(CreateError::KeyReused)));
        let _first = service.in_flight.claim(&key).expect("free");
        assert!(matches!(create().await, Err(CreateError::KeyInFlight)));
    }

    #[tokio::test]
    async fn create_reports_an_unavailable_store() {
        let mut repository = MockProductRepository::new();
        repository
            .expect_create()
            .withf(|name, price| name.as_str() == "pen" && price.get() == 1.0)
            .times(1)
            .return_once(|_, _| Err(RepositoryError::unavailable("down")));

        let result = ProductService::new(Arc::new(repository))
            .create(Name::parse("pen").unwrap(), Price::new(1.0).unwrap())
            .await;
        assert!(
            matches!(result, Err(RepositoryError::Unavailable(ref cause)) if cause.to_string() == "down"),
            "{result:?}"
        );
    }
}
