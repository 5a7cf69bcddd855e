//! The rules of [`copy_store`] (C12), over mocks of both ports.

use mockall::Sequence;
use mockall::predicate::eq;

use super::*;
use crate::values::{Name, Price};

fn item(id: i64) -> Item {
    Item {
        id: Id::new(id),
        name: Name::parse(&format!("item {id}")).unwrap(),
    }
}

fn product(id: i64) -> Product {
    Product {
        id: Id::new(id),
        name: Name::parse("pen").unwrap(),
        price: Price::new(1.5).unwrap(),
    }
}

fn empty_sink() -> MockStoreSink {
    let mut sink = MockStoreSink::new();
    sink.expect_contents().returning(|| Ok(Counts::default()));
    sink
}

/// A source holding `items` and `products` (ids as given) and `counters`.
fn source(items: Vec<i64>, products: Vec<i64>, counters: Counters) -> MockSnapshotSource {
    let mut source = MockSnapshotSource::new();
    source.expect_items_after().returning(move |after, limit| {
        let after = after.map_or(i64::MIN, Id::get);
        Ok(items
            .iter()
            .filter(|&&id| id > after)
            .take(limit)
            .map(|&id| item(id))
            .collect())
    });
    source
        .expect_products_after()
        .returning(move |after, limit| {
            let after = after.map_or(i64::MIN, Id::get);
            Ok(products
                .iter()
                .filter(|&&id| id > after)
                .take(limit)
                .map(|&id| product(id))
                .collect())
        });
    source.expect_counters().returning(move || Ok(counters));
    source
}

async fn copy(
    source: &mut MockSnapshotSource,
    sink: &mut MockStoreSink,
    batch: usize,
) -> Result<Copied, CopyError> {
    copy_store(source, sink, batch, &mut |_| {}).await
}

#[tokio::test]
async fn a_destination_holding_items_is_refused_before_anything_is_read_or_written_c12() {
    let mut source = MockSnapshotSource::new();
    let mut sink = MockStoreSink::new();
    sink.expect_contents().returning(|| {
        Ok(Counts {
            items: 1,
            products: 0,
        })
    });
    sink.expect_write_items().never();
    sink.expect_write_products().never();
    sink.expect_commit().never();
    sink.expect_rollback().times(1).returning(|| Ok(()));

    let error = copy(&mut source, &mut sink, 10).await.unwrap_err();

    assert!(
        matches!(
            error,
            CopyError::NotEmpty(Counts {
                items: 1,
                products: 0
            })
        ),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "the destination is not empty: it holds 1 items and 0 products"
    );
}

#[tokio::test]
async fn a_destination_holding_only_products_is_refused_too_c12() {
    let mut source = MockSnapshotSource::new();
    let mut sink = MockStoreSink::new();
    sink.expect_contents().returning(|| {
        Ok(Counts {
            items: 0,
            products: 3,
        })
    });
    sink.expect_write_items().never();
    sink.expect_commit().never();
    sink.expect_rollback().times(1).returning(|| Ok(()));

    let error = copy(&mut source, &mut sink, 10).await.unwrap_err();

    assert!(matches!(error, CopyError::NotEmpty(_)), "{error:?}");
}

#[tokio::test]
async fn rows_travel_in_id_ordered_batches_and_the_counters_are_the_sources_c12() {
    // Ids 3 and 7 and 8 were deleted at the source: its counters are above
    // the largest ids left, and the counters, not max(id), must travel.
    let counters = Counters {
        items: 8,
        products: 5,
    };
    let mut source = source(vec![1, 2, 4, 5, 6], vec![2], counters);
    let mut sink = empty_sink();
    let mut order = Sequence::new();
    for ids in [vec![1, 2], vec![4, 5], vec![6]] {
        let expected: Vec<Item> = ids.into_iter().map(item).collect();
        sink.expect_write_items()
            .withf(move |items| items == expected.as_slice())
            .times(1)
            .in_sequence(&mut order)
            .returning(|_| Ok(()));
    }
    sink.expect_write_products()
        .withf(|products| products == [product(2)])
        .times(1)
        .in_sequence(&mut order)
        .returning(|_| Ok(()));
    sink.expect_commit()
        .with(eq(counters))
        .times(1)
        .in_sequence(&mut order)
        .returning(|_| Ok(()));
    sink.expect_rollback().never();
    let mut seen = Vec::new();

    let copied = copy_store(&mut source, &mut sink, 2, &mut |counts| seen.push(counts))
        .await
        .unwrap();

    assert_eq!(
        copied,
        Copied {
            counts: Counts {
                items: 5,
                products: 1
            },
            counters,
        }
    );
    let running: Vec<(u64, u64)> = seen.iter().map(|c| (c.items, c.products)).collect();
    assert_eq!(running, [(2, 0), (4, 0), (5, 0), (5, 1)]);
}

#[tokio::test]
async fn a_counter_below_an_id_copied_is_raised_to_it_so_no_id_is_reused_c2_c12() {
    let mut source = source(vec![1, 9], vec![], Counters::default());
    let mut sink = empty_sink();
    sink.expect_write_items().returning(|_| Ok(()));
    sink.expect_commit()
        .with(eq(Counters {
            items: 9,
            products: 0,
        }))
        .times(1)
        .returning(|_| Ok(()));

    let copied = copy(&mut source, &mut sink, 100).await.unwrap();

    assert_eq!(copied.counters.items, 9);
}

#[tokio::test]
async fn an_empty_source_commits_its_counters_alone_c12() {
    let counters = Counters {
        items: 40,
        products: 0,
    };
    let mut source = source(vec![], vec![], counters);
    let mut sink = empty_sink();
    sink.expect_write_items().never();
    sink.expect_write_products().never();
    sink.expect_commit()
        .with(eq(counters))
        .times(1)
        .returning(|_| Ok(()));

    let copied = copy(&mut source, &mut sink, 100).await.unwrap();

    assert_eq!(copied.counts, Counts::default());
}

#[tokio::test]
async fn a_batch_the_destination_refuses_rolls_it_back_and_nothing_is_committed_c12() {
    let mut source = source(vec![1, 2, 3, 4, 5], vec![1], Counters::default());
    let mut sink = empty_sink();
    let mut batches = 0;
    sink.expect_write_items().returning(move |_| {
        batches += 1;
        if batches == 2 {
            Err(RepositoryError::unavailable("rejected"))
        } else {
            Ok(())
        }
    });
    sink.expect_write_products().never();
    sink.expect_commit().never();
    sink.expect_rollback().times(1).returning(|| Ok(()));

    let error = copy(&mut source, &mut sink, 2).await.unwrap_err();

    assert!(matches!(error, CopyError::Destination(_)), "{error:?}");
}

#[tokio::test]
async fn a_source_failing_mid_way_rolls_the_destination_back_c12() {
    let mut source = MockSnapshotSource::new();
    let mut calls = 0;
    source.expect_items_after().returning(move |_, _| {
        calls += 1;
        if calls == 1 {
            Ok(vec![item(1)])
        } else {
            Err(RepositoryError::unavailable("connection lost"))
        }
    });
    let mut sink = empty_sink();
    sink.expect_write_items().times(1).returning(|_| Ok(()));
    sink.expect_commit().never();
    sink.expect_rollback().times(1).returning(|| Ok(()));

    let error = copy(&mut source, &mut sink, 1).await.unwrap_err();

    assert!(matches!(error, CopyError::Source(_)), "{error:?}");
}

#[tokio::test]
async fn a_failed_commit_is_reported_as_the_destinations_failure_c12() {
    let mut source = source(vec![1], vec![], Counters::default());
    let mut sink = empty_sink();
    sink.expect_write_items().returning(|_| Ok(()));
    sink.expect_commit()
        .returning(|_| Err(RepositoryError::unavailable("disk full")));
    sink.expect_rollback().times(1).returning(|| Ok(()));

    let error = copy(&mut source, &mut sink, 10).await.unwrap_err();

    assert!(matches!(error, CopyError::Destination(_)), "{error:?}");
}
