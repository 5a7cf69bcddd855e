//! The repository contract: one check per MUST of the ports, a module per
//! port, and the fixtures the checks run on.
//!
//! - [`items`]: the checks of [`ItemRepository`], each on a fresh, empty
//!   `Arc<dyn ItemRepository>`;
//! - [`products`]: the checks of [`ProductRepository`];
//! - [`stores`]: the checks that need a whole store's repositories
//!   (idempotency keys of items and products kept apart, C7);
//! - [`users`]: the check of [`UserRepository`] (the users seeded as C4
//!   says, [`items_domain::seeded_users`]).
//!
//! Each check panics, as a failed test does, when the adapter breaks the
//! rule named in its name; the message names the rule, what the check did,
//! what it expected and what came back. Run them all with
//! [`contract_tests!`](crate::contract_tests): `repositories` runs the
//! three modules on a [`RepositoryFixture`], `items` runs only [`items`] on
//! an [`ItemRepositoryFixture`].
//!
//! [`ProductRepository`]: items_domain::ProductRepository
//! [`UserRepository`]: items_domain::UserRepository

pub mod items;
pub mod products;
pub mod stores;
pub mod users;

use std::sync::Arc;

/// One adapter's repositories, as the checks use them (the domain's bundle).
pub use items_domain::Repositories;
use items_domain::{ItemRepository, Name};

use crate::Fixture;

/// Repositories that need nothing undone after a test (in memory).
impl Fixture for Repositories {}

/// A store under test that can hand out [`Repositories`]: what
/// `contract_tests!(repositories …)` builds once per check. Implement it
/// (and [`Fixture::teardown`]) for a store that needs setting up, such as
/// a database created for the test.
pub trait RepositoryFixture: Fixture {
    /// The store's repositories; every call shares the same data.
    fn repositories(&self) -> Repositories;
}

impl RepositoryFixture for Repositories {
    fn repositories(&self) -> Repositories {
        self.clone()
    }
}

/// A store under test that has only items: what
/// `contract_tests!(items …)` builds once per check. An `Arc` of an
/// [`ItemRepository`] is one (`Arc::new(MyItems::default())`), and so are
/// [`Repositories`] (their items); implement it (and
/// [`Fixture::teardown`]) for a store that needs setting up.
pub trait ItemRepositoryFixture: Fixture {
    /// The store's items, empty when the check starts; every call shares
    /// the same data.
    fn items(&self) -> Arc<dyn ItemRepository>;
}

/// An item repository in memory needs nothing undone after a test.
impl<T: ItemRepository + ?Sized> Fixture for Arc<T> {}

impl<T: ItemRepository + 'static> ItemRepositoryFixture for Arc<T> {
    fn items(&self) -> Arc<dyn ItemRepository> {
        Arc::clone(self) as Arc<dyn ItemRepository>
    }
}

impl ItemRepositoryFixture for Arc<dyn ItemRepository> {
    fn items(&self) -> Arc<dyn ItemRepository> {
        Arc::clone(self)
    }
}

impl ItemRepositoryFixture for Repositories {
    fn items(&self) -> Arc<dyn ItemRepository> {
        Arc::clone(&self.items)
    }
}

/// A name the checks write; every one they use is valid.
#[track_caller]
fn name(raw: &str) -> Name {
    Name::parse(raw).unwrap_or_else(|error| panic!("the kit's name {raw:?} is invalid: {error}"))
}
