//! The port contracts of the kit (`items_testkit`), run against this
//! crate's adapters exactly as an outside adapter runs them: one line each.
//! PostgreSQL runs on the server of `TEST_DATABASE_URL` (the local one by
//! default), each test on a scratch database of its own, also through a
//! URL listing two hosts whose first refuses; SQLite on a fresh
//! file per test (`sqlite_store` holds the store's own promises besides).

#[path = "../support/scratch_store.rs"]
mod scratch_store;

use crate::scratch_store::ScratchStore;
use items_adapters::memory::{
    InMemoryItemRepository, InMemoryProductRepository, InMemoryUserRepository,
};
use items_testkit::Repositories;

mod key_purge;
mod memory_changes;
mod postgres_feed;
mod postgres_listings;
mod sqlite_backup;
mod sqlite_feed;
mod sqlite_file;
mod sqlite_point_reads;
mod sqlite_readers;
mod sqlite_store;
mod sqlite_wal;
mod transfer;
mod upload_directory;

use memory_changes::MemoryChanges;
use sqlite_file::SqliteFile;
use upload_directory::UploadDirectory;

fn in_memory() -> Repositories {
    Repositories::new(
        InMemoryItemRepository::new(),
        InMemoryProductRepository::new(),
        InMemoryUserRepository::seeded(),
    )
}

items_testkit::contract_tests!(repositories in_memory = in_memory());
items_testkit::contract_tests!(changes in_memory_changes = MemoryChanges::new());
items_testkit::contract_tests!(repositories postgres = ScratchStore::create().await);
items_testkit::contract_tests!(changes postgres_changes = ScratchStore::create().await);
items_testkit::contract_tests!(
    repositories postgres_second_of_two_hosts = ScratchStore::behind_a_refusing_host().await
);
items_testkit::contract_tests!(repositories sqlite = SqliteFile::create().await);
items_testkit::contract_tests!(changes sqlite_changes = SqliteFile::create().await);
items_testkit::contract_tests!(
    consistent_reads in_memory_reads = items_domain::Unpositioned(in_memory())
);
items_testkit::contract_tests!(consistent_reads postgres_reads = ScratchStore::create().await);
items_testkit::contract_tests!(upload_store disk = UploadDirectory::open());
