//! The local-disk upload store: files in `UPLOADS_DIR` (C5).
//!
//! A file is received into a temporary file *inside* the uploads directory,
//! named `.upload-<random>`, and renamed to its final 32-hex-character name
//! on commit. Same directory, so the commit is one atomic `rename` on the
//! same filesystem: a reader never sees half a file under a final name.
//! A pending file that is dropped uncommitted — a failed request, a client
//! that went away, an I/O error — is deleted in `Drop`. A crash skips `Drop`,
//! so [`DiskUploadStore::open`] sweeps leftover temporary files at start.

use std::io;
use std::path::PathBuf;

use async_trait::async_trait;
use items_domain::{PendingUpload, StoredName, UploadStore, UploadStoreError};
use tokio::io::AsyncWriteExt;

/// Temporary files start with this; no stored name can (those are hex).
const TEMP_PREFIX: &str = ".upload-";

/// Stores uploads as files in one directory.
#[derive(Debug, Clone)]
pub struct DiskUploadStore {
    directory: PathBuf,
}

impl DiskUploadStore {
    /// Creates the directory if missing, proves it is writable by creating
    /// and removing a temporary file, and removes temporary files left by a
    /// previous run that crashed.
    ///
    /// # Errors
    /// Any I/O error doing so: the directory is unusable.
    pub fn open(directory: impl Into<PathBuf>) -> io::Result<Self> {
        let directory = directory.into();
        std::fs::create_dir_all(&directory)?;
        let probe = directory.join(format!("{TEMP_PREFIX}{}", random_hex()?));
        std::fs::File::create(&probe)?;
        std::fs::remove_file(&probe)?;
        for entry in std::fs::read_dir(&directory)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
                std::fs::remove_file(entry.path())?;
            }
        }
        Ok(Self { directory })
    }
}

/// 128 bits from the operating system's generator, as 32 lowercase hex digits.
fn random_hex() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(io::Error::other)?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

fn failed(error: io::Error) -> UploadStoreError {
    UploadStoreError(Box::new(error))
}

#[async_trait]
impl UploadStore for DiskUploadStore {
    async fn begin(&self) -> Result<Box<dyn PendingUpload>, UploadStoreError> {
        let temporary = self
            .directory
            .join(format!("{TEMP_PREFIX}{}", random_hex().map_err(failed)?));
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)
            .await
            .map_err(failed)?;
        Ok(Box::new(DiskPendingUpload {
            file: Some(file),
            temporary,
            directory: self.directory.clone(),
            committed: false,
        }))
    }

    async fn remove(&self, name: &StoredName) -> Result<(), UploadStoreError> {
        match tokio::fs::remove_file(self.directory.join(name.as_str())).await {
            Err(error) if error.kind() != io::ErrorKind::NotFound => Err(failed(error)),
            _ => Ok(()),
        }
    }
}

/// A file being received into `.upload-<random>`.
#[derive(Debug)]
struct DiskPendingUpload {
    file: Option<tokio::fs::File>,
    temporary: PathBuf,
    directory: PathBuf,
    committed: bool,
}

#[async_trait]
impl PendingUpload for DiskPendingUpload {
    async fn write(&mut self, chunk: &[u8]) -> Result<(), UploadStoreError> {
        let file = self
            .file
            .as_mut()
            .ok_or_else(|| failed(io::Error::other("the file is closed")))?;
        file.write_all(chunk).await.map_err(failed)
    }

    async fn commit(mut self: Box<Self>) -> Result<StoredName, UploadStoreError> {
        if let Some(mut file) = self.file.take() {
            // Flush tokio's buffer and close the file before the rename. No
            // fsync: an upload that a crash loses right after its 201 is the
            // same trade every Express/multer service makes, and fsync per
            // file would dominate small uploads.
            file.flush().await.map_err(failed)?;
        }
        let hex = random_hex().map_err(failed)?;
        let name =
            StoredName::new(hex).ok_or_else(|| failed(io::Error::other("bad random name")))?;
        tokio::fs::rename(&self.temporary, self.directory.join(name.as_str()))
            .await
            .map_err(failed)?;
        self.committed = true;
        Ok(name)
    }
}

impl Drop for DiskPendingUpload {
    fn drop(&mut self) {
        if !self.committed {
            // Close first, then delete; errors cannot be reported from Drop,
            // and the start-up sweep catches whatever is left.
            drop(self.file.take());
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}

/// What only a disk store does; the upload-store contract every store
/// obeys runs from `tests/contract` (the kit's `upload_store` checks).
#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn listing(directory: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(directory)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

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
    fn a_directory_that_is_a_file_cannot_be_opened() {
        let file = tempfile::NamedTempFile::new().unwrap();
        assert!(DiskUploadStore::open(file.path()).is_err());
    }
}
