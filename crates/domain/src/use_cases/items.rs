//! The use cases of the `items` collection ([`ItemService`]): list, read,
//! create, replace (with an optional precondition, C7) and delete, with the
//! error enums of the operations that can fail in more than one way.

use std::sync::Arc;

use crate::RepositoryError;
use crate::entities::{Item, ItemListing, ItemPage, ItemQuery};
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
/// # use items_domain::{Id, ItemListing, ItemPage, ItemQuery, ItemRepository, Replaced, RepositoryError};
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
}

impl std::fmt::Debug for ItemService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ItemService").finish_non_exhaustive()
    }
}

impl ItemService {
    /// The use cases over `repository`.
    pub fn new(repository: Arc<dyn ItemRepository>) -> Self {
        Self { repository }
    }

    /// The items matching `query`, in id order, with the total count (C10).
    pub async fn list(&self, query: &ItemQuery) -> Result<ItemPage, RepositoryError> {
        self.repository.list(query).await
    }

    /// Every item, streamed in batches, with the collection's version (C10).
    pub async fn list_all(&self) -> Result<ItemListing, RepositoryError> {
        self.repository.list_all().await
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
mod tests {
    use mockall::predicate::eq;

    use super::*;
    use crate::ports::MockItemRepository;

    fn name(raw: &str) -> Name {
        Name::parse(raw).expect("valid test name")
    }

    fn item(id: i64, raw: &str) -> Item {
        Item {
            id: Id::new(id),
            name: name(raw),
        }
    }

    fn service(repository: MockItemRepository) -> ItemService {
        ItemService::new(Arc::new(repository))
    }

    fn unavailable() -> RepositoryError {
        RepositoryError::unavailable("connection refused")
    }

    /// The store's own failure, passed on unchanged: the variant and the
    /// cause [`unavailable`] gave.
    fn is_the_stores_failure(error: &RepositoryError) -> bool {
        matches!(error, RepositoryError::Unavailable(cause) if cause.to_string() == "connection refused")
    }

    /// Matches a replace of exactly `expected_item` with exactly
    /// `expected_name` as the compare-and-swap's expected name.
    fn replace_of(
        expected_item: Item,
        expected_name: Option<&'static str>,
    ) -> impl Fn(&Item, &Option<Name>) -> bool {
        move |item, expected| {
            *item == expected_item && expected.as_ref().map(Name::as_str) == expected_name
        }
    }

    #[tokio::test]
    async fn list_all_returns_the_repository_listing_and_its_batches_c10() {
        let mut repository = MockItemRepository::new();
        repository.expect_list_all().times(1).return_once(|| {
            Ok(ItemListing {
                version: 7,
                total: 2,
                batches: Box::pin(futures_util::stream::iter([
                    Ok(vec![item(1, "a")]),
                    Ok(vec![item(2, "b")]),
                ])),
            })
        });

        let listing = service(repository).list_all().await.unwrap();
        assert_eq!((listing.version, listing.total), (7, 2));
        let batches: Vec<_> = futures_util::StreamExt::collect::<Vec<_>>(listing.batches).await;
        let items: Vec<Item> = batches.into_iter().flat_map(Result::unwrap).collect();
        assert_eq!(items, [item(1, "a"), item(2, "b")]);
    }

    #[tokio::test]
    async fn list_passes_the_query_through_and_returns_the_page_c10() {
        let query = ItemQuery {
            after: Some(Id::new(3)),
            ..ItemQuery::default()
        };
        let page = ItemPage {
            items: vec![item(4, "four")],
            total: 4,
            has_more: false,
        };
        let mut repository = MockItemRepository::new();
        let returned = page.clone();
        repository
            .expect_list()
            .with(eq(query.clone()))
            .times(1)
            .return_once(move |_| Ok(returned));

        assert_eq!(service(repository).list(&query).await.unwrap(), page);
    }

    #[tokio::test]
    async fn get_returns_the_stored_item() {
        let mut repository = MockItemRepository::new();
        repository
            .expect_get()
            .with(eq(Id::new(1)))
            .times(1)
            .return_once(|_| Ok(Some(item(1, "a"))));

        assert_eq!(
            service(repository).get(Id::new(1)).await.unwrap(),
            item(1, "a")
        );
    }

    #[tokio::test]
    async fn get_of_an_unknown_id_is_not_found_spec_7() {
        let mut repository = MockItemRepository::new();
        repository
            .expect_get()
            .with(eq(Id::new(9)))
            .times(1)
            .return_once(|_| Ok(None));

        let error = service(repository).get(Id::new(9)).await.unwrap_err();
        assert!(matches!(error, GetItemError::NotFound(id) if id == Id::new(9)));
    }

    #[tokio::test]
    async fn get_reports_an_unavailable_store() {
        let mut repository = MockItemRepository::new();
        repository
            .expect_get()
            .with(eq(Id::new(1)))
            .times(1)
            .return_once(|_| Err(unavailable()));

        let error = service(repository).get(Id::new(1)).await.unwrap_err();
        assert!(
            matches!(error, GetItemError::Unavailable(ref cause) if is_the_stores_failure(cause))
        );
    }

    #[tokio::test]
    async fn create_returns_the_item_with_the_repository_id_c2() {
        let mut repository = MockItemRepository::new();
        repository
            .expect_create()
            .with(eq(name("new")))
            .times(1)
            .return_once(|name| {
                Ok(Item {
                    id: Id::new(42),
                    name,
                })
            });

        assert_eq!(
            service(repository).create(name("new")).await.unwrap(),
            item(42, "new")
        );
    }

    #[tokio::test]
    async fn replace_without_precondition_writes_unconditionally_spec_4_rule_1() {
        let mut repository = MockItemRepository::new();
        repository.expect_get().never();
        repository
            .expect_replace()
            .withf(replace_of(item(5, "b"), None))
            .times(1)
            .return_once(|_, _| Ok(Replaced::Yes));

        let replaced = service(repository)
            .replace(item(5, "b"), None)
            .await
            .unwrap();
        assert_eq!(replaced, item(5, "b"));
    }

    #[tokio::test]
    async fn replace_of_an_unknown_id_is_not_found_spec_7() {
        let mut repository = MockItemRepository::new();
        repository
            .expect_replace()
            .withf(replace_of(item(5, "b"), None))
            .times(1)
            .return_once(|_, _| Ok(Replaced::NotFound));

        let error = service(repository)
            .replace(item(5, "b"), None)
            .await
            .unwrap_err();
        assert!(matches!(error, ReplaceItemError::NotFound(id) if id == Id::new(5)));
    }

    #[tokio::test]
    async fn replace_with_a_holding_precondition_swaps_against_the_tested_name_c7() {
        let mut repository = MockItemRepository::new();
        repository
            .expect_get()
            .with(eq(Id::new(5)))
            .times(1)
            .return_once(|_| Ok(Some(item(5, "old"))));
        repository
            .expect_replace()
            .withf(replace_of(item(5, "new"), Some("old")))
            .times(1)
            .return_once(|_, _| Ok(Replaced::Yes));

        let holds = |current: &Item| current.name.as_str() == "old";
        let replaced = service(repository)
            .replace(item(5, "new"), Some(&holds))
            .await
            .unwrap();
        assert_eq!(replaced, item(5, "new"));
    }

    #[tokio::test]
    async fn replace_with_a_failing_precondition_writes_nothing_c7() {
        let mut repository = MockItemRepository::new();
        repository
            .expect_get()
            .with(eq(Id::new(5)))
            .times(1)
            .return_once(|_| Ok(Some(item(5, "old"))));
        repository.expect_replace().never();

        let fails = |_: &Item| false;
        let error = service(repository)
            .replace(item(5, "new"), Some(&fails))
            .await
            .unwrap_err();
        assert!(matches!(error, ReplaceItemError::PreconditionFailed(id) if id == Id::new(5)));
    }

    #[tokio::test]
    async fn replace_loses_a_race_with_a_concurrent_change_as_precondition_failed_c7() {
        let mut repository = MockItemRepository::new();
        repository
            .expect_get()
            .with(eq(Id::new(5)))
            .times(1)
            .return_once(|_| Ok(Some(item(5, "old"))));
        repository
            .expect_replace()
            .withf(replace_of(item(5, "new"), Some("old")))
            .times(1)
            .return_once(|_, _| Ok(Replaced::Changed));

        let holds = |_: &Item| true;
        let error = service(repository)
            .replace(item(5, "new"), Some(&holds))
            .await
            .unwrap_err();
        assert!(matches!(error, ReplaceItemError::PreconditionFailed(id) if id == Id::new(5)));
    }

    #[tokio::test]
    async fn replace_with_a_precondition_on_an_unknown_id_is_not_found() {
        let mut repository = MockItemRepository::new();
        repository
            .expect_get()
            .with(eq(Id::new(5)))
            .times(1)
            .return_once(|_| Ok(None));
        repository.expect_replace().never();

        let holds = |_: &Item| true;
        let error = service(repository)
            .replace(item(5, "new"), Some(&holds))
            .await
            .unwrap_err();
        assert!(matches!(error, ReplaceItemError::NotFound(id) if id == Id::new(5)));
    }

    #[tokio::test]
    async fn replace_reports_an_unavailable_store() {
        let mut repository = MockItemRepository::new();
        repository
            .expect_replace()
            .withf(replace_of(item(5, "b"), None))
            .times(1)
            .return_once(|_, _| Err(unavailable()));

        let error = service(repository)
            .replace(item(5, "b"), None)
            .await
            .unwrap_err();
        assert!(
            matches!(error, ReplaceItemError::Unavailable(ref cause) if is_the_stores_failure(cause))
        );
    }

    #[tokio::test]
    async fn delete_succeeds_whether_or_not_the_item_existed_spec_4_rule_2() {
        let mut repository = MockItemRepository::new();
        repository
            .expect_delete()
            .with(eq(Id::new(1)))
            .times(1)
            .return_once(|_| Ok(true));
        repository
            .expect_delete()
            .with(eq(Id::new(2)))
            .times(1)
            .return_once(|_| Ok(false));
        let service = service(repository);

        assert!(matches!(service.delete(Id::new(1)).await, Ok(())));
        assert!(matches!(service.delete(Id::new(2)).await, Ok(())));
    }

    #[tokio::test]
    async fn delete_reports_an_unavailable_store() {
        let mut repository = MockItemRepository::new();
        repository
            .expect_delete()
            .with(eq(Id::new(1)))
            .times(1)
            .return_once(|_| Err(unavailable()));

        let error = service(repository).delete(Id::new(1)).await.unwrap_err();
        assert!(is_the_stores_failure(&error), "{error:?}");
    }
}
