//! The tests of [`ItemService`](super::ItemService): each use case over a
//! mocked [`ItemRepository`](crate::ports::ItemRepository), its calls and
//! its answers exact.

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

/// Expects one `get` of item `id`, answered with `answer`.
fn expect_get(
    repository: &mut MockItemRepository,
    id: i64,
    answer: Result<Option<Item>, RepositoryError>,
) {
    repository
        .expect_get()
        .with(eq(Id::new(id)))
        .times(1)
        .return_once(move |_| answer);
}

/// Expects one replace of exactly `item`, with `expected` as the
/// compare-and-swap's expected name, answered with `answer`.
fn expect_replace(
    repository: &mut MockItemRepository,
    item: Item,
    expected: Option<&'static str>,
    answer: Result<Replaced, RepositoryError>,
) {
    repository
        .expect_replace()
        .withf(replace_of(item, expected))
        .times(1)
        .return_once(move |_, _| answer);
}

/// Expects one delete of item `id`, answered with `answer`.
fn expect_delete(
    repository: &mut MockItemRepository,
    id: i64,
    answer: Result<bool, RepositoryError>,
) {
    repository
        .expect_delete()
        .with(eq(Id::new(id)))
        .times(1)
        .return_once(move |_| answer);
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
    expect_get(&mut repository, 1, Ok(Some(item(1, "a"))));

    assert_eq!(
        service(repository).get(Id::new(1)).await.unwrap(),
        item(1, "a")
    );
}

#[tokio::test]
async fn get_of_an_unknown_id_is_not_found_spec_7() {
    let mut repository = MockItemRepository::new();
    expect_get(&mut repository, 9, Ok(None));

    let error = service(repository).get(Id::new(9)).await.unwrap_err();
    assert!(matches!(error, GetItemError::NotFound(id) if id == Id::new(9)));
}

#[tokio::test]
async fn get_reports_an_unavailable_store() {
    let mut repository = MockItemRepository::new();
    expect_get(&mut repository, 1, Err(unavailable()));

    let error = service(repository).get(Id::new(1)).await.unwrap_err();
    assert!(matches!(error, GetItemError::Unavailable(ref cause) if is_the_stores_failure(cause)));
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
    expect_replace(&mut repository, item(5, "b"), None, Ok(Replaced::Yes));

    let replaced = service(repository)
        .replace(item(5, "b"), None)
        .await
        .unwrap();
    assert_eq!(replaced, item(5, "b"));
}

#[tokio::test]
async fn replace_of_an_unknown_id_is_not_found_spec_7() {
    let mut repository = MockItemRepository::new();
    expect_replace(&mut repository, item(5, "b"), None, Ok(Replaced::NotFound));

    let error = service(repository)
        .replace(item(5, "b"), None)
        .await
        .unwrap_err();
    assert!(matches!(error, ReplaceItemError::NotFound(id) if id == Id::new(5)));
}

#[tokio::test]
async fn replace_with_a_holding_precondition_swaps_against_the_tested_name_c7() {
    let mut repository = MockItemRepository::new();
    expect_get(&mut repository, 5, Ok(Some(item(5, "old"))));
    expect_replace(
        &mut repository,
        item(5, "new"),
        Some("old"),
        Ok(Replaced::Yes),
    );

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
    expect_get(&mut repository, 5, Ok(Some(item(5, "old"))));
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
    expect_get(&mut repository, 5, Ok(Some(item(5, "old"))));
    expect_replace(
        &mut repository,
        item(5, "new"),
        Some("old"),
        Ok(Replaced::Changed),
    );

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
    expect_get(&mut repository, 5, Ok(None));
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
    expect_replace(&mut repository, item(5, "b"), None, Err(unavailable()));

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
    expect_delete(&mut repository, 1, Ok(true));
    expect_delete(&mut repository, 2, Ok(false));
    let service = service(repository);

    assert!(matches!(service.delete(Id::new(1)).await, Ok(())));
    assert!(matches!(service.delete(Id::new(2)).await, Ok(())));
}

#[tokio::test]
async fn delete_reports_an_unavailable_store() {
    let mut repository = MockItemRepository::new();
    expect_delete(&mut repository, 1, Err(unavailable()));

    let error = service(repository).delete(Id::new(1)).await.unwrap_err();
    assert!(is_the_stores_failure(&error), "{error:?}");
}

fn key(raw: &str) -> IdempotencyKey {
    IdempotencyKey::parse(raw.as_bytes()).expect("valid test key")
}

/// A service whose store expects one keyed create of `raw` under key `k`,
/// at a moment within the last minute (the use case reads the clock), and
/// answers it with `answer`.
fn service_answering_create_keyed(
    raw: &'static str,
    k: &'static str,
    answer: Result<crate::Keyed<Item>, RepositoryError>,
) -> ItemService {
    let mut repository = MockItemRepository::new();
    repository
        .expect_create_keyed()
        .withf(move |name, key, at| {
            let age = std::time::SystemTime::now().duration_since(*at);
            name.as_str() == raw && key.as_str() == k && age.is_ok_and(|age| age.as_secs() < 60)
        })
        .times(1)
        .return_once(move |_, _, _| answer);
    service(repository)
}

/// What `create_once` of "pen" under key "k1" answers when the store
/// answers `stored`.
async fn create_once_a_pen(stored: crate::Keyed<Item>) -> Result<Created<Item>, CreateError> {
    service_answering_create_keyed("pen", "k1", Ok(stored))
        .create_once(name("pen"), &key("k1"))
        .await
}

#[tokio::test]
async fn create_once_answers_a_new_item_as_not_replayed_c7() {
    let created = create_once_a_pen(crate::Keyed::Created(item(7, "pen"))).await;
    let expected = Created {
        value: item(7, "pen"),
        replayed: false,
    };
    assert_eq!(created.unwrap(), expected);
}

#[tokio::test]
async fn create_once_answers_the_first_item_of_a_replay_c7() {
    // The store answers the item as first created (id 3, "pen"), whatever it is now.
    let created = create_once_a_pen(crate::Keyed::Replayed(item(3, "pen"))).await;
    let expected = Created {
        value: item(3, "pen"),
        replayed: true,
    };
    assert_eq!(created.unwrap(), expected);
}

#[tokio::test]
async fn create_once_refuses_a_key_used_with_another_name_c7() {
    let result = create_once_a_pen(crate::Keyed::Mismatch).await;
    assert!(matches!(result, Err(CreateError::KeyReused)), "{result:?}");
}

#[tokio::test]
async fn create_once_refuses_a_key_in_flight_without_asking_the_store_c7() {
    let mut repository = MockItemRepository::new();
    repository.expect_create_keyed().times(0);
    let service = service(repository);
    let _first = service.in_flight.claim(&key("k1")).expect("free");
    let result = service.create_once(name("pen"), &key("k1")).await;
    assert!(
        matches!(result, Err(CreateError::KeyInFlight)),
        "{result:?}"
    );
}

#[tokio::test]
async fn create_once_reports_an_unavailable_store_and_releases_the_key_c7() {
    let service = service_answering_create_keyed("pen", "k1", Err(unavailable()));
    let result = service.create_once(name("pen"), &key("k1")).await;
    assert!(
        matches!(result, Err(CreateError::Unavailable(ref error)) if is_the_stores_failure(error)),
        "{result:?}"
    );
    assert!(service.in_flight.claim(&key("k1")).is_some(), "released");
}
