//! The kit's checks against the `BTreeMap` adapter, each on a fresh store:
//! every repository check on the three maps, and the item checks alone, as
//! a store that has only items runs them.

use std::sync::Arc;

use items_btreemap_adapter::{MapItems, btreemap_repositories};

// Every check of the three repository ports.
items_testkit::contract_tests!(repositories btreemap = btreemap_repositories());

// Only the item checks, on nothing but an `ItemRepository`.
items_testkit::contract_tests!(items btreemap_items_only = Arc::new(MapItems::default()));
