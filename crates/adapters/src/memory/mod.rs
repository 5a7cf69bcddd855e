//! In-memory repositories: the default store, for one process.
//!
//! Each repository keeps its rows in a `BTreeMap` keyed by id behind a
//! `parking_lot::RwLock`: lookups, replaces and deletes by id are O(log n), a
//! page of a listing is a range scan, and ids come out in order for free.
//! `parking_lot` because its locks cannot be poisoned: a panic elsewhere must
//! not turn every later request into an error.

mod items;
mod products;
mod users;

pub use items::InMemoryItemRepository;
pub use products::InMemoryProductRepository;
pub use users::InMemoryUserRepository;
