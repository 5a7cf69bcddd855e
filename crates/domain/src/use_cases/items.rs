//! The use cases of the `items` collection ([`ItemService`]): list, read,
//! create, replace (with an optional precondition, C7) and delete, with the
//! error enums of the operations that can fail in more than one way.

use std::sync::Arc;

use super::keyed::{self, CreateError, Created};
use crate::RepositoryError;
use crate::entities::{Item, ItemListing, ItemPage, ItemQuery, ListingHead};
use crate::idempotency::{IdempotencyKey, InFlight};
use crate::ports::{ItemRepository, Replaced};
use crate::values::{Id, Name};

/// Why an item could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GetItemError {
    #[error("no item has id {0}")]
    NotFound(Id),
    #[error(transparent)]
    Unavailable(#[from] RepositoryError),
}

/// Why an item could not be replaced. In every case nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum ReplaceItemError {
    #[error("no item has id {0}")]
    NotFound(Id),
    /// The caller's precondition did not hold for the current item, or the item
    /// changed between the check and the write.
    #[error("the item with id {0} does not match the precondition")]
    PreconditionFailed(Id),
    #[error(transparent)]
    Unavailable(#[from] RepositoryError),
}

/// A test of the current item that must hold for a replace to happen. The
/// HTTP adapter uses it for `If-Match`; the domain does not know about ETags.
pub type Precondition<'a> = &'a (dyn Fn(&Item) -> bool + Send + Sync);

/// The use cases of the `items` collection, over any [`ItemRepository`].
///
/// ```
/// # use std::collections::BTreeMap;
/// # use std::sync::{Arc, Mutex};
/// # use async_trait::async_trait;
/// use items_domain::{GetItemError, Item, ItemService, Name, ReplaceItemError};
/// # use items_domain::{IdempotencyKey, Keyed, Id, ItemListing, ItemPage, ItemQuery, ItemRepository, Replaced, RepositoryError};
/// #
/// # /// Just enough of a repository for this example.
/// # #[derive(Default)]
/// # struct InMemory(Mutex<(i64, BTreeMap<Id, Name>)>);
/// #
/// # #[async_trait]
/// # impl ItemRepository for InMemory {
/// #     async fn list(&self, _: &ItemQuery) -> Result<ItemPage, RepositoryError> {
/// #         unimplemented!()
/// #     }
/// #     async fn list_all(&self) -> Result<ItemListing, RepositoryError> {
/// #         unimplemented!()
/// #     }
/// #     async fn get(&self, id: Id) -> Result<Option<Item>, RepositoryError> {
/// #         let names = &self.0.lock().unwrap().1;
/// #         Ok(names.get(&id).map(|name| Item { id, name: name.clone() }))
/// #     }
/// #     async fn create(&self, name: Name) -> Result<Item, RepositoryError> {
/// #         let (last, names) = &mut *self.0.lock().unwrap();
/// #         *last += 1;
/// #         names.insert(Id::new(*last), name.clone());
/// #         Ok(Item { id: Id::new(*last), name })
/// #     }
/// #     async fn create_keyed(&self, _: Name, _: &IdempotencyKey, _: std::time::SystemTime) -> Result<Keyed<Item>, RepositoryError> {
/// #         unimplemented!()
/// #     }
/// #     async fn replace(&self, item: &Item, expected: Option<Name>) -> Result<Replaced, RepositoryError> {
/// #         let names = &mut self.0.lock().unwrap().1;
/// #         Ok(match names.get_mut(&item.id) {
/// #             None => Replaced::NotFound,
/// #             Some(current) if expected.is_some_and(|name| name != *current) => Replaced::Changed,
/// #             Some(current) => {
/// #                 *current = item.name.clone();
/// #                 Replaced::Yes
/// #             }
/// #         })
/// #     }
/// #     async fn delete(&self, id: Id) -> Result<bool, RepositoryError> {
/// #         Ok(self.0.lock().unwrap().1.remove(&id).is_some())
/// #     }
/// # }
/// #
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let items = ItemService::new(Arc::new(InMemory::default()));
///
/// let pen = items.create(Name::parse("pen")?).await?;
/// assert_eq!(items.get(pen.id).await?, pen);
///
/// // Replace only the item the caller has seen (how `If-Match` is served).
/// let seen = pen.clone();
/// let unchanged = move |current: &Item| *current == seen;
/// let quill = Item { id: pen.id, name: Name::parse("quill")? };
/// items.replace(quill.clone(), Some(&unchanged)).await?;
/// // The item has changed since: the same precondition now fails.
/// let again = items.replace(quill, Some(&unchanged)).await;
/// assert!(matches!(again, Err(ReplaceItemError::PreconditionFailed(_))));
///
/// items.delete(pen.id).await?;
/// assert!(matches!(items.get(pen.id).await, Err(GetItemError::NotFound(_))));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct ItemService {
    repository: Arc<dyn ItemRepository>,
    /// Keys of the item creates running in this process (C7: 409).
    in_flight: InFlight,
}

impl std::fmt::Debug for ItemService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ItemService").finish_non_exhaustive()
    }
}

impl ItemService {
    /// The use cases over `repository`.
    pub fn new(repository: Arc<dyn ItemRepository>) -> Self {
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
    pub fn scoped(&self, repository: Arc<dyn ItemRepository>) -> Self {
        Self {
            repository,
            in_flight: self.in_flight.clone(),
        }
    }

    /// The items matching `query`, in id order, with the total count (C10).
    pub async fn list(&self, query: &ItemQuery) -> Result<ItemPage, RepositoryError> {
        self.repository.list(query).await
    }

    /// Every item, streamed in batches, with the collection's version (C10).
    pub async fn list_all(&self) -> Result<ItemListing, RepositoryError> {
        self.repository.list_all().await
    }

    /// The version and total of the full listing, without its rows (C7, C12).
    pub async fn listing_head(&self) -> Result<ListingHead, RepositoryError> {
        self.repository.listing_head().await
    }

    /// The item with this id.
    ///
    /// # Errors
    /// [`GetItemError::NotFound`] when no item has it;
    /// [`GetItemError::Unavailable`] when the store cannot be read.
    pub async fn get(&self, id: Id) -> Result<Item, GetItemError> {
        self.repository
            .get(id)
            .await?
            .ok_or(GetItemError::NotFound(id))
    }

    /// Creates an item; its id comes from the repository's counter (C2).
    pub async fn create(&self, name: Name) -> Result<Item, RepositoryError> {
        self.repository.create(name).await
    }

    /// Creates an item under an idempotency key (C7): a repeat with the same
    /// name within 24 hours answers the first item again and creates
    /// nothing.
    ///
    /// # Errors
    /// [`CreateError::KeyReused`] when the key was used with another name;
    /// [`CreateError::KeyInFlight`] while a create with the key runs in this
    /// process; [`CreateError::Unavailable`] when the store cannot be written.
    pub async fn create_once(
        &self,
        name: Name,
        key: &IdempotencyKey,
    ) -> Result<Created<Item>, CreateError> {
        keyed::create_once(&self.in_flight, key, |at| {
            self.repository.create_keyed(name, key, at)
        })
        .await
    }

    /// Replaces the whole item: the result has the path id and the new name
    /// (spec §4 rule 1).
    ///
    /// With a `precondition`, the current item is read, tested, and then
    /// replaced only if it is still the item that was tested (the repository's
    /// compare-and-swap on the name); a concurrent change makes the replace
    /// fail with [`ReplaceItemError::PreconditionFailed`] rather than overwrite
    /// a version the caller never saw.
    pub async fn replace(
        &self,
        item: Item,
        precondition: Option<Precondition<'_>>,
    ) -> Result<Item, ReplaceItemError> {
        let expected = match precondition {
            None => None,
            Some(holds) => {
                let current = self
                    .repository
                    .get(item.id)
                    .await?
                    .ok_or(ReplaceItemError::NotFound(item.id))?;
                if !holds(&current) {
                    return Err(ReplaceItemError::PreconditionFailed(item.id));
                }
                Some(current.name)
            }
        };
        match self.repository.replace(&item, expected).await? {
            Replaced::Yes => Ok(item),
            Replaced::NotFound => Err(ReplaceItemError::NotFound(item.id)),
            Replaced::Changed => Err(ReplaceItemError::PreconditionFailed(item.id)),
        }
    }

    /// Deletes an item. Deleting an unknown id succeeds (spec §4 rule 2).
    pub async fn delete(&self, id: Id) -> Result<(), RepositoryError> {
        self.repository.delete(id).await.map(drop)
    }
}

#[cfg(test)]
mod tests;
