//! The disk upload store in a temporary directory, looked at through the
//! file system.

use std::collections::BTreeMap;

use items_adapters::disk::DiskUploadStore;
use items_domain::UploadStore;
use items_testkit::{Fixture, UploadStoreFixture};

/// A [`DiskUploadStore`] over a directory deleted with it.
pub struct UploadDirectory {
    store: DiskUploadStore,
    directory: tempfile::TempDir,
}

impl UploadDirectory {
    pub fn open() -> Self {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let store = DiskUploadStore::open(directory.path()).expect("the directory opens");
        Self { store, directory }
    }
}

impl Fixture for UploadDirectory {}

impl UploadStoreFixture for UploadDirectory {
    fn store(&self) -> &dyn UploadStore {
        &self.store
    }

    /// Every file in the directory, temporary ones included.
    async fn contents(&self) -> BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(self.directory.path())
            .expect("the directory is readable")
            .map(|entry| {
                let entry = entry.expect("an entry");
                let bytes = std::fs::read(entry.path()).expect("a readable file");
                (entry.file_name().to_string_lossy().into_owned(), bytes)
            })
            .collect()
    }
}
