//! The checks of [`ItemRepository`], each on a fresh, empty repository, a
//! module per part of the port:
//! - [`ids`]: ids from a counter (C2);
//! - [`writes`]: `get`, `replace` and its compare-and-swap (C7), `delete`,
//!   names kept exactly (C3);
//! - [`pages`]: `list`, pages and totals (C10);
//! - [`full_listing`]: `list_all`, its version and snapshot (C7, C10);
//! - [`keys`]: `create_keyed`, idempotency keys (C7).
//!
//! Every check is also here, where `contract_tests!` finds it, and takes the
//! repository as an `Arc<dyn ItemRepository>`.

pub mod full_listing;
pub mod ids;
pub mod keys;
pub mod pages;
pub mod writes;

pub use full_listing::*;
pub use ids::*;
pub use keys::*;
pub use pages::*;
pub use writes::*;

use items_domain::{Item, ItemRepository};

use super::name;
use crate::answer::Answer;

/// The ids of some items, in the order given.
fn ids(items: &[Item]) -> Vec<i64> {
    items.iter().map(|item| item.id.get()).collect()
}

/// Creates an item for each name, in order (ids 1, 2, … on a fresh store).
async fn create_all(items: &dyn ItemRepository, names: &[&str]) {
    for raw in names {
        items
            .create(name(raw))
            .await
            .answer(format_args!("create an item named {raw:?}"));
    }
}
