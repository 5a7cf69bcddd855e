//! A consumer of the in-memory adapters, as a crate outside the service
//! would be: it builds its use cases over `items_adapters::memory` and checks
//! that store with the kit. It exists to keep that consumer light: with
//! `items-adapters` on `memory` alone and `items-testkit` on its defaults,
//! no web framework, database driver or OpenAPI generator is in its tree
//! (`scripts/consumer-tree.sh` checks the tree in CI).

use items_domain::{ItemService, Repositories};

/// The item use cases over a fresh in-memory store, the way a consumer's
/// own tests would set them up.
pub fn items_in_memory() -> ItemService {
    let Repositories { items, .. } = items_adapters::memory::repositories();
    ItemService::new(items)
}
