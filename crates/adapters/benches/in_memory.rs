//! The in-memory repository and the item use cases without a network in the
//! way, so a regression in the store shows up on its own: get at up to
//! 1,000,000 items, create, replace (alone and while a listing holds a
//! snapshot), list everything at 1,000 items (as one page and as the
//! streamed full listing), and one keyset page deep into 100,000 items; then
//! get and create through the use cases.

#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use futures_util::StreamExt;
use items_adapters::memory::InMemoryItemRepository;
use items_domain::{Id, Item, ItemQuery, ItemRepository, ItemService, Name, PageLimit};
use tokio::runtime::Runtime;

fn store(runtime: &Runtime, items: i64) -> Arc<InMemoryItemRepository> {
    let repository = Arc::new(InMemoryItemRepository::new());
    runtime.block_on(async {
        for n in 0..items {
            repository
                .create(Name::parse(&format!("item-{n:011}")).unwrap())
                .await
                .unwrap();
        }
    });
    repository
}

fn repository(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for size in [100, 100_000, 1_000_000] {
        let repository = store(&runtime, size);
        let mut id = 0;
        c.bench_function(&format!("repository get, {size} items"), |b| {
            b.iter(|| {
                id = id % size + 1;
                runtime
                    .block_on(repository.get(black_box(Id::new(id))))
                    .unwrap()
            })
        });
    }
    let repository = store(&runtime, 0);
    let name = Name::parse("item-00000000001").unwrap();
    c.bench_function("repository create", |b| {
        b.iter(|| {
            runtime
                .block_on(repository.create(black_box(name.clone())))
                .unwrap()
        })
    });
    let large = store(&runtime, 100_000);
    let mut id = 0;
    c.bench_function("repository replace, 100,000 items", |b| {
        b.iter(|| {
            let item = next_of_100_000(&mut id, &name);
            runtime
                .block_on(large.replace(black_box(&item), None))
                .unwrap()
        })
    });
    // The write that lands while a full listing is being served: the
    // listing is opened untimed, the replace is timed, the listing is
    // dropped untimed.
    c.bench_function("repository replace during a listing, 100,000 items", |b| {
        b.iter_batched(
            || runtime.block_on(large.list_all()).unwrap(),
            |listing| {
                let item = next_of_100_000(&mut id, &name);
                runtime
                    .block_on(large.replace(black_box(&item), None))
                    .unwrap();
                listing
            },
            BatchSize::SmallInput,
        )
    });
    let thousand = store(&runtime, 1000);
    c.bench_function("repository list all, 1,000 items", |b| {
        b.iter(|| {
            runtime
                .block_on(thousand.list(black_box(&ItemQuery::default())))
                .unwrap()
        })
    });
    c.bench_function("repository stream all, 1,000 items", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let listing = thousand.list_all().await.unwrap();
                listing
                    .batches
                    .map(|batch| batch.unwrap().len())
                    .collect::<Vec<_>>()
                    .await
            })
        })
    });
    let deep = store(&runtime, 100_000);
    let page = ItemQuery {
        after: Some(Id::new(90_000)),
        limit: Some(PageLimit::new(100).unwrap()),
        name: None,
    };
    c.bench_function("repository list 100 after id 90,000, 100,000 items", |b| {
        b.iter(|| runtime.block_on(deep.list(black_box(&page))).unwrap())
    });
}

fn use_cases(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let service = ItemService::new(store(&runtime, 100));
    c.bench_function("use case get, 100 items", |b| {
        b.iter(|| {
            runtime
                .block_on(service.get(black_box(Id::new(42))))
                .unwrap()
        })
    });
    c.bench_function("use case create", |b| {
        b.iter_batched(
            || Name::parse("item-00000000001").unwrap(),
            |name| runtime.block_on(service.create(name)).unwrap(),
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, repository, use_cases);
criterion_main!(benches);

/// The item with the id after `id` among 1 to 100,000 (round and round), so
/// every replace hits a stored item.
fn next_of_100_000(id: &mut i64, name: &Name) -> Item {
    *id = *id % 100_000 + 1;
    Item {
        id: Id::new(*id),
        name: name.clone(),
    }
}
