//! The SQLite store on a fresh file in a temporary directory, deleted with
//! it: the fixture of the kit's checks and of the store's own tests.

use std::path::{Path, PathBuf};

use items_adapters::sqlite::{SqliteSettings, SqliteStore};
use items_testkit::{Fixture, Repositories, RepositoryFixture};

/// A [`SqliteStore`] on `items.db` in a directory of its own.
pub struct SqliteFile {
    pub store: SqliteStore,
    directory: tempfile::TempDir,
}

impl SqliteFile {
    /// A new file with the service's settings.
    pub async fn create() -> Self {
        Self::create_with(SqliteSettings::default()).await
    }

    /// A new file with `settings`.
    pub async fn create_with(settings: SqliteSettings) -> Self {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let store = SqliteStore::open(directory.path().join("items.db"), settings)
            .await
            .expect("a new SQLite file opens");
        Self { store, directory }
    }

    /// The database file.
    pub fn path(&self) -> PathBuf {
        self.directory.path().join("items.db")
    }

    /// The directory the file is in.
    pub fn directory(&self) -> &Path {
        self.directory.path()
    }
}

impl Fixture for SqliteFile {
    async fn teardown(self) {
        self.store.close().await;
    }
}

impl RepositoryFixture for SqliteFile {
    fn repositories(&self) -> Repositories {
        Repositories::new(
            self.store.items(),
            self.store.products(),
            self.store.users(),
        )
    }
}
