//! In-memory repositories: the default store, for one process.
//!
//! Each repository keeps its rows in an ordered map keyed by id behind a
//! `parking_lot::RwLock` (a `BTreeMap`; for items, chunks shared between
//! copies, so a full listing can keep a snapshot): lookups, replaces and
//! deletes by id are O(log n), a page of a listing is a range scan, and ids
//! come out in order for free.
//! `parking_lot` because its locks cannot be poisoned: a panic elsewhere must
//! not turn every later request into an error.

mod item_chunks;
mod items;
mod products;
mod rate_limit;
mod users;

use items_domain::{Id, Repositories, RepositoryError};

pub use items::InMemoryItemRepository;
pub use products::InMemoryProductRepository;
pub use rate_limit::InMemoryRateLimitStore;
pub use users::InMemoryUserRepository;

/// A fresh in-memory store: no items, no products, the two seeded users
/// (C4). Each call is a store of its own.
pub fn repositories() -> Repositories {
    Repositories::new(
        InMemoryItemRepository::new(),
        InMemoryProductRepository::new(),
        InMemoryUserRepository::seeded(),
    )
}

/// The last id handed out by a repository. It only grows, so an id is never
/// reused, not even after the newest row is deleted (C2). Callers advance it
/// under the same write lock as the insert, so concurrent creates can neither
/// share an id nor lose a row.
#[derive(Debug, Default)]
struct IdCounter(i64);

impl IdCounter {
    fn next(&mut self) -> Result<Id, RepositoryError> {
        let next = self
            .0
            .checked_add(1)
            .ok_or_else(|| RepositoryError::unavailable("the id counter is exhausted"))?;
        self.0 = next;
        Ok(Id::new(next))
    }
}
