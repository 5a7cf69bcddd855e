//! One in-memory repository operation repeated K times over a store of N
//! items, for `python3 bench/run.py store_ops`, which counts its
//! instructions and cache misses under callgrind: deterministic figures
//! where criterion's times move with whatever else the shared machine runs.
//!
//! `store_ops OP N K`, OP one of `get`, `create`, `replace`,
//! `replace_during_listing`, `delete`, `list_all`, `snapshot`, `page`. Only
//! the function `measured` is meant to be counted
//! (`--toggle-collect=store_ops::measured`); it runs once per operation.

#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use futures_util::StreamExt;
use items_adapters::memory::InMemoryItemRepository;
use items_domain::{Id, Item, ItemQuery, ItemRepository, Name, PageLimit};
use tokio::runtime::Runtime;

/// Spreads the ids an operation touches over the whole store (a prime
/// stride), so lookups are not cache-friendly by accident.
fn scattered(n: i64, size: i64) -> Id {
    Id::new(n * 7919 % size.max(1) + 1)
}

#[inline(never)]
fn measured(runtime: &Runtime, store: &InMemoryItemRepository, op: &str, n: i64, size: i64) {
    let name = Name::parse("item-00000000001").unwrap();
    let renamed = Item {
        id: scattered(n, size),
        name: name.clone(),
    };
    let deep_page = ItemQuery {
        after: Some(Id::new(size - 1000)),
        limit: Some(PageLimit::new(100).unwrap()),
        name: None,
    };
    runtime.block_on(async {
        match op {
            "get" => drop(black_box(store.get(scattered(n, size)).await)),
            "create" => drop(black_box(store.create(name).await)),
            "replace" | "replace_during_listing" => {
                drop(black_box(store.replace(&renamed, None).await))
            }
            "delete" => drop(black_box(store.delete(scattered(n, size)).await)),
            "snapshot" => drop(black_box(store.list_all().await)),
            "list_all" => {
                let listing = store.list_all().await.unwrap();
                black_box(
                    listing
                        .batches
                        .map(|batch| batch.unwrap().len())
                        .collect::<Vec<_>>()
                        .await,
                );
            }
            "page" => drop(black_box(store.list(&deep_page).await)),
            _ => panic!("unknown operation {op}"),
        }
    });
}

fn main() {
    let mut args = std::env::args().skip(1);
    let op = args.next().unwrap();
    let size: i64 = args.next().unwrap().parse().unwrap();
    let count: i64 = args.next().unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let store = InMemoryItemRepository::new();
    runtime.block_on(async {
        for n in 0..size {
            store
                .create(Name::parse(&format!("item-{n:011}")).unwrap())
                .await
                .unwrap();
        }
    });
    for n in 0..count {
        // Opened and dropped outside `measured`: the write is what counts.
        let listing = (op == "replace_during_listing").then(|| runtime.block_on(store.list_all()));
        measured(&runtime, &store, &op, n, size);
        drop(listing);
    }
}
