//! The use cases the HTTP adapter drives, put together once over a store's
//! repositories.

use std::sync::Arc;

use items_domain::{
    ChangeService, ConsistentReads, ItemService, ProductService, RateLimiter, Repositories,
    UploadService, UploadStore, UserService,
};

/// The use cases the HTTP adapter drives.
#[derive(Clone)]
pub struct Services {
    pub items: ItemService,
    /// The change feed of the items (C14); `None` for a store without one.
    pub changes: Option<ChangeService>,
    pub products: ProductService,
    pub users: UserService,
    pub uploads: UploadService,
    /// Rate-limit budgets (C9); used when `HttpSettings::rate_limit` sets a maximum.
    pub rate_limits: RateLimiter,
    /// The store's reads at or after a `Consistency-Token`, for a store
    /// that gives positions (C13); `None`: tokens are checked and ignored.
    pub reads: Option<Arc<dyn ConsistentReads>>,
}

impl Services {
    /// The use cases wired over one store's `repositories` (in memory,
    /// PostgreSQL, or any adapter's), an upload store and the rate-limit
    /// budgets: the one place they are put together.
    pub fn new(
        repositories: Repositories,
        uploads: Arc<dyn UploadStore>,
        rate_limits: RateLimiter,
    ) -> Self {
        let Repositories {
            items,
            products,
            users,
            changes,
        } = repositories;
        Self {
            items: ItemService::new(items),
            changes: changes.map(ChangeService::new),
            products: ProductService::new(products),
            users: UserService::new(users),
            uploads: UploadService::new(uploads),
            rate_limits,
            reads: None,
        }
    }

    /// The same use cases, each item and product request scoped by `reads`
    /// to its `Consistency-Token`, and answered with the position it was
    /// served at (C13).
    #[must_use]
    pub fn with_reads(mut self, reads: Arc<dyn ConsistentReads>) -> Self {
        self.reads = Some(reads);
        self
    }
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("reads", &self.reads.is_some())
            .finish_non_exhaustive()
    }
}
