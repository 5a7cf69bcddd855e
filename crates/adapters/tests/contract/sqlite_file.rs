//! The SQLite store on a fresh file in a temporary directory, deleted with
//! it: the fixture of the kit's checks and of the store's own tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use items_adapters::sqlite::{SqliteSettings, SqliteStore};
use items_domain::{ChangeFeed, ItemRepository};
use items_testkit::{ChangeFeedFixture, Fixture, Repositories, RepositoryFixture};

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

impl ChangeFeedFixture for SqliteFile {
    fn items(&self) -> Arc<dyn ItemRepository> {
        Arc::new(self.store.items())
    }

    fn changes(&self) -> Arc<dyn ChangeFeed> {
        self.store.changes()
    }

    /// What the writer's pruning does once the retention passed (its own
    /// test is in `sqlite_changes.rs`): every change gone, the floor at the
    /// last position given.
    async fn expire_changes(&self) {
        let connection = rusqlite::Connection::open(self.path()).expect("the file opens");
        connection
            .busy_timeout(std::time::Duration::from_secs(5))
            .expect("a busy timeout");
        connection
            .execute_batch(
                "begin immediate;
                 delete from changes;
                 update change_log set pruned_through =
                     (select seq from sqlite_sequence where name = 'changes');
                 commit;",
            )
            .expect("the changes are pruned");
    }
}
