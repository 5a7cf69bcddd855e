//! The local-disk upload store: files in `UPLOADS_DIR` (C5).
//!
//! A file is received into a temporary file *inside* the uploads directory,
//! named `.upload-<random>`, and renamed to its final 32-hex-character name
//! on commit. Same directory, so the commit is one atomic `rename` on the
//! same filesystem: a reader never sees half a file under a final name.
//! A pending file that is dropped uncommitted — a failed request, a client
//! that went away, an I/O error — is deleted in `Drop` (`pending.rs`). A crash
//! skips `Drop`, so [`DiskUploadStore::open`] sweeps leftover temporary files
//! at start. The bytes stored are counted against `UPLOADS_MAX_BYTES`
//! ([`usage`]).

mod pending;
pub mod usage;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use items_domain::{PendingUpload, StoredName, UploadStore, UploadStoreError};

use pending::{DiskPendingUpload, failed};
use usage::Usage;

/// Temporary files start with this; no stored name can (those are hex).
const TEMP_PREFIX: &str = ".upload-";

/// Stores uploads as files in one directory.
#[derive(Debug, Clone)]
pub struct DiskUploadStore {
    directory: PathBuf,
    usage: Arc<Usage>,
}

impl DiskUploadStore {
    /// [`DiskUploadStore::open_bounded`] with no bound but the disk's.
    ///
    /// # Errors
    /// Any I/O error opening it: the directory is unusable.
    pub fn open(directory: impl Into<PathBuf>) -> io::Result<Self> {
        Self::open_bounded(directory, 0)
    }

    /// Creates the directory if missing, proves it is writable by creating
    /// and removing a temporary file, removes temporary files left by a
    /// previous run that crashed, and counts the bytes of the files it
    /// holds: from then on the store keeps that count itself, and refuses
    /// the chunk that would take it past `max_bytes` (0: no bound).
    ///
    /// # Errors
    /// Any I/O error doing so: the directory is unusable.
    pub fn open_bounded(directory: impl Into<PathBuf>, max_bytes: u64) -> io::Result<Self> {
        let directory = directory.into();
        std::fs::create_dir_all(&directory)?;
        let probe = directory.join(format!("{TEMP_PREFIX}{}", random_hex()?));
        std::fs::File::create(&probe)?;
        std::fs::remove_file(&probe)?;
        let stored = sweep_and_count(&directory)?;
        Ok(Self {
            directory,
            usage: Arc::new(Usage::new(stored, max_bytes)),
        })
    }

    /// Sets the gauges of [`usage`] to the bytes counted now and the bound;
    /// called when `/metrics` is scraped (C11).
    pub fn record_metrics(&self) {
        metrics::gauge!(usage::STORED_BYTES).set(self.usage.stored() as f64);
        metrics::gauge!(usage::MAX_BYTES).set(self.usage.max() as f64);
    }

    /// The bytes counted now: files kept plus bytes being received.
    pub fn stored_bytes(&self) -> u64 {
        self.usage.stored()
    }
}

/// Removes leftover temporary files (those no live writer holds locked)
/// and adds up the sizes of the others.
fn sweep_and_count(directory: &Path) -> io::Result<u64> {
    let mut stored: u64 = 0;
    for entry in std::fs::read_dir(directory)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
            sweep(&entry.path())?;
            continue;
        }
        let metadata = entry.metadata()?;
        if metadata.is_file() {
            stored = stored.saturating_add(metadata.len());
        }
    }
    Ok(stored)
}

/// Removes the temporary file at `path` if its writer is gone: no process
/// holds its lock. One being received by a live writer (of this process or
/// another sharing the directory) is left alone, as is one already gone.
fn sweep(path: &Path) -> io::Result<()> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    match file.try_lock() {
        Ok(()) => match std::fs::remove_file(path) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        },
        Err(std::fs::TryLockError::WouldBlock) => Ok(()),
        Err(std::fs::TryLockError::Error(error)) => Err(error),
    }
}

/// 128 bits from the operating system's generator, as 32 lowercase hex digits.
fn random_hex() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(io::Error::other)?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

#[async_trait]
impl UploadStore for DiskUploadStore {
    async fn begin(&self) -> Result<Box<dyn PendingUpload>, UploadStoreError> {
        // Created on a blocking thread that owns the result: see `pending`.
        let directory = self.directory.clone();
        let usage = Arc::clone(&self.usage);
        let pending =
            tokio::task::spawn_blocking(move || DiskPendingUpload::create(directory, usage))
                .await
                .map_err(|error| UploadStoreError(Box::new(error)))?
                .map_err(failed)?;
        Ok(Box::new(pending))
    }

    async fn remove(&self, name: &StoredName) -> Result<(), UploadStoreError> {
        let path = self.directory.join(name.as_str());
        let size = match tokio::fs::metadata(&path).await {
            Ok(metadata) => metadata.len(),
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(failed(error)),
        };
        match tokio::fs::remove_file(&path).await {
            Ok(()) => {
                self.usage.release(size);
                Ok(())
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(failed(error)),
        }
    }
}

/// What only a disk store does; the upload-store contract every store
/// obeys runs from `tests/contract` (the kit's `upload_store` checks).
#[cfg(test)]
mod tests {
    use items_testkit::files::listing;

    use super::*;

    #[test]
    fn opening_creates_the_directory_and_sweeps_stale_temporary_files_c5() {
        let parent = tempfile::tempdir().unwrap();
        let directory = parent.path().join("nested/uploads");
        std::fs::create_dir_all(&directory).unwrap();
        std::fs::write(directory.join(".upload-0123"), b"left by a crash").unwrap();
        std::fs::write(directory.join("0123456789abcdef0123456789abcdef"), b"kept").unwrap();

        DiskUploadStore::open(&directory).unwrap();

        assert_eq!(listing(&directory), ["0123456789abcdef0123456789abcdef"]);
        assert!(DiskUploadStore::open(parent.path().join("fresh")).is_ok());
    }

    #[test]
    fn opening_counts_the_bytes_already_stored_but_not_stale_temporary_files_c5() {
        let directory = tempfile::tempdir().unwrap();
        std::fs::write(directory.path().join(".upload-0123"), [0u8; 500]).unwrap();
        std::fs::write(directory.path().join("a"), [0u8; 1_000]).unwrap();
        std::fs::write(directory.path().join("b"), [0u8; 234]).unwrap();
        std::fs::create_dir(directory.path().join("not-a-file")).unwrap();

        let store = DiskUploadStore::open_bounded(directory.path(), 2_000).unwrap();

        assert_eq!(store.stored_bytes(), 1_234);
    }

    #[tokio::test]
    async fn a_write_past_the_bound_is_full_and_dropping_gives_its_bytes_back_c5() {
        let directory = tempfile::tempdir().unwrap();
        let store = DiskUploadStore::open_bounded(directory.path(), 100).unwrap();
        let mut upload = store.begin().await.unwrap();
        upload.write(&[1; 60]).await.unwrap();

        let refused = upload.write(&[1; 41]).await.unwrap_err();

        assert!(refused.is_full());
        assert_eq!(store.stored_bytes(), 60);
        drop(upload);
        assert_eq!(store.stored_bytes(), 0);
        assert!(listing(directory.path()).is_empty());
    }

    #[tokio::test]
    async fn a_store_opening_on_a_shared_directory_leaves_a_live_writers_file_alone_c12() {
        let directory = tempfile::tempdir().unwrap();
        let receiving = DiskUploadStore::open(directory.path()).unwrap();
        let mut upload = receiving.begin().await.unwrap();
        upload.write(b"the first half").await.unwrap();
        std::fs::write(directory.path().join(".upload-0123"), b"left by a crash").unwrap();

        // Another instance starts on the same directory: its sweep.
        DiskUploadStore::open(directory.path()).unwrap();

        let temporary: Vec<String> = listing(directory.path());
        assert_eq!(
            temporary.len(),
            1,
            "only the crash's leftover went: {temporary:?}"
        );
        assert_ne!(temporary[0], ".upload-0123");
        upload.write(b", the second").await.unwrap();
        let name = upload.commit().await.unwrap();
        assert_eq!(
            std::fs::read(directory.path().join(name.as_str())).unwrap(),
            b"the first half, the second"
        );
    }

    #[tokio::test]
    async fn a_file_swept_before_its_writer_locked_it_is_made_again() {
        let directory = tempfile::tempdir().unwrap();
        let file = directory.path().join(".upload-taken");
        std::fs::write(&file, b"").unwrap();
        let open = std::fs::File::open(&file).unwrap();
        std::fs::remove_file(&file).unwrap();

        assert!(!pending::still_named(&open, &file).unwrap());
        std::fs::write(&file, b"another").unwrap();
        assert!(!pending::still_named(&open, &file).unwrap());
        let reopened = std::fs::File::open(&file).unwrap();
        assert!(pending::still_named(&reopened, &file).unwrap());
    }

    #[tokio::test]
    async fn committed_bytes_stay_counted_until_removed_c5() {
        let directory = tempfile::tempdir().unwrap();
        let store = DiskUploadStore::open_bounded(directory.path(), 100).unwrap();
        let mut upload = store.begin().await.unwrap();
        upload.write(&[1; 70]).await.unwrap();
        let name = upload.commit().await.unwrap();
        assert_eq!(store.stored_bytes(), 70);

        store.remove(&name).await.unwrap();
        store.remove(&name).await.unwrap();

        assert_eq!(store.stored_bytes(), 0);
    }

    #[test]
    fn a_full_disk_or_quota_is_full_other_errors_are_not_c5() {
        // Linux: ENOSPC 28, EDQUOT 122, EFBIG 27, EACCES 13.
        for full in [28, 122, 27] {
            assert!(pending::failed(io::Error::from_raw_os_error(full)).is_full());
        }
        assert!(!pending::failed(io::Error::from_raw_os_error(13)).is_full());
    }

    #[test]
    fn a_directory_that_is_a_file_cannot_be_opened() {
        let file = tempfile::NamedTempFile::new().unwrap();
        assert!(DiskUploadStore::open(file.path()).is_err());
    }
}
