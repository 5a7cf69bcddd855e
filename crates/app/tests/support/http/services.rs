//! The use cases a test server drives, built once per store.

use std::path::Path;
use std::sync::Arc;

use items_adapters::disk::DiskUploadStore;
use items_adapters::http::Services;
use items_adapters::memory::{self, InMemoryRateLimitStore};
use items_adapters::postgres::PostgresStore;
use items_adapters::sqlite::SqliteStore;
use items_domain::RateLimiter;
use tempfile::TempDir;

use items_domain::Repositories;

/// [`Services`] over chosen repositories, uploads in a temporary directory
/// of their own (deleted with this value, or with the [`TestApp`](super::TestApp)
/// it is given to) and rate-limit budgets kept in this process.
#[derive(Debug)]
pub struct TestServices {
    pub services: Services,
    pub(super) uploads: TempDir,
}

impl TestServices {
    /// Over fresh in-memory repositories, the service's default store.
    pub fn in_memory() -> Self {
        Self::over(memory::repositories())
    }

    /// Over the repositories of a PostgreSQL store.
    /// Each request scoped to its `Consistency-Token`, as the service
    /// runs it (C13).
    pub fn postgres(store: &PostgresStore) -> Self {
        let mut services = Self::over(store.repositories());
        services.services = services.services.with_reads(Arc::new(store.clone()));
        services
    }

    /// Over the repositories of a SQLite store.
    pub fn sqlite(store: &SqliteStore) -> Self {
        Self::over(store.repositories())
    }

    /// Over any repositories: another adapter's, or mocks that fail.
    ///
    /// # Panics
    /// When no temporary uploads directory can be made.
    pub fn over(repositories: Repositories) -> Self {
        let uploads = tempfile::tempdir().expect("a temporary directory");
        let store = DiskUploadStore::open(uploads.path()).expect("the uploads directory opens");
        Self {
            services: Services::new(
                repositories,
                Arc::new(store),
                RateLimiter::local(Arc::new(InMemoryRateLimitStore::default())),
            ),
            uploads,
        }
    }

    /// The same services with rate-limit budgets kept elsewhere (Redis).
    #[must_use]
    pub fn with_rate_limits(mut self, rate_limits: RateLimiter) -> Self {
        self.services.rate_limits = rate_limits;
        self
    }

    /// The same services with uploads bounded to `max_bytes` together
    /// (`UPLOADS_MAX_BYTES`, C5): the store is opened again over the same
    /// directory, so it counts the files already there, as at a restart.
    ///
    /// # Panics
    /// When the directory cannot be opened again.
    #[must_use]
    pub fn with_uploads_max_bytes(mut self, max_bytes: u64) -> Self {
        let store = DiskUploadStore::open_bounded(self.uploads.path(), max_bytes)
            .expect("the uploads directory opens");
        self.services.uploads = items_domain::UploadService::new(Arc::new(store));
        self
    }

    /// The same services with another upload store (one that fails, say);
    /// the temporary directory stays, empty.
    #[must_use]
    pub fn with_upload_store(mut self, store: Arc<dyn items_domain::UploadStore>) -> Self {
        self.services.uploads = items_domain::UploadService::new(store);
        self
    }

    /// The directory uploads are stored in.
    pub fn uploads(&self) -> &Path {
        self.uploads.path()
    }
}
