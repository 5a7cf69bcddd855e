//! [`DiskUploadStore`]: uploads as files in one directory, each received
//! into a temporary file and renamed when committed.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use items_domain::{PendingUpload, StoredName, UploadStore, UploadStoreError};

use super::names::{TEMP_PREFIX, random_hex};
use super::pending::{DiskPendingUpload, failed};
use super::sweep::sweep_and_count;
use super::usage::{self, Usage};

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
