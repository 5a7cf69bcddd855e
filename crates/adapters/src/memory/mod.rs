//! In-memory repositories and rate-limit budgets: the default store, for one
//! process.
//!
//! [`repositories()`] makes a fresh store: its three repositories and the
//! change feed of its items; [`InMemoryRateLimitStore`] keeps the clients'
//! rate-limit budgets in this process. The repository types are public for
//! a consumer that wants one of them alone.
//!
//! Items are kept in id order in 512-item chunks shared between copies
//! (`item_chunks.rs`), so a full listing streams from a snapshot that costs
//! one reference count per chunk; lookups, replaces and deletes by id are a
//! binary search over the chunks, then within one, and a page is a seek and
//! a scan. Products are a `BTreeMap` keyed by id; the two users are a fixed
//! list. Ids come out in order for free, from a counter that never goes
//! back (`ids.rs`). The item repository records every change in its change
//! feed's hub (C14, `changes.rs`), under its write lock. Items and products
//! sit behind a `parking_lot::RwLock`, the rate-limit budgets
//! (`rate_limit.rs`) behind sharded `parking_lot` mutexes: their locks
//! cannot be poisoned, so a panic elsewhere does not turn every later
//! request into an error.

mod changes;
mod ids;
mod item_chunks;
mod items;
mod keys;
mod products;
mod rate_limit;
mod users;

use items_domain::Repositories;

pub use changes::{InMemoryChangeFeed, RETAINED_CHANGES};
pub use items::InMemoryItemRepository;
pub use products::InMemoryProductRepository;
pub use rate_limit::InMemoryRateLimitStore;
pub use users::InMemoryUserRepository;

/// A fresh in-memory store: no items, no products, the two seeded users
/// (C4), and the change feed of its items (C14). Each call is a store of
/// its own.
pub fn repositories() -> Repositories {
    let items = InMemoryItemRepository::new();
    let changes = items.changes();
    Repositories::new(
        items,
        InMemoryProductRepository::new(),
        InMemoryUserRepository::seeded(),
    )
    .with_changes(changes)
}
