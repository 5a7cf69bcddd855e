//! One file being received into `.upload-<random>` in the uploads
//! directory, and the rules that keep a failed or abandoned upload from
//! leaving anything behind (C5).
//!
//! Every file-system step that creates or renames runs on a blocking thread
//! that *owns* the [`DiskPendingUpload`]: if the request's future is dropped
//! (a reset connection) while that thread is still working, the thread
//! finishes, nobody takes its result, and dropping the result deletes the
//! file. Creating the file with `tokio::fs` instead, and wrapping it only
//! once the open returned, left a 0-byte temporary file whenever a reset
//! arrived during the open (docs/security.md).
//!
//! The writer holds an exclusive lock on its temporary file from just after
//! creating it until it is renamed or deleted: the start-up sweep of an
//! instance sharing the directory removes only temporary files it can lock,
//! whose writer is gone (C12). A file the sweep removed between its creation
//! and its lock is noticed (the name no longer leads to the file locked)
//! and created again under another name.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use items_domain::{PendingUpload, StoredName, UploadStoreError};
use tokio::io::AsyncWriteExt;

use super::names::{TEMP_PREFIX, random_hex};
use super::usage::Usage;

/// A file being received; deleted on drop unless committed.
#[derive(Debug)]
pub(super) struct DiskPendingUpload {
    file: Option<tokio::fs::File>,
    /// The same open file as `file`, holding its lock until this value is
    /// dropped: after the rename, or after the delete.
    _lock: std::fs::File,
    temporary: PathBuf,
    directory: PathBuf,
    usage: Arc<Usage>,
    /// Bytes counted in `usage` for this file, given back unless committed.
    reserved: u64,
    committed: bool,
}

impl DiskPendingUpload {
    /// Creates the temporary file. Blocking: called on a blocking thread
    /// whose result owns the file from the moment it exists.
    pub(super) fn create(directory: PathBuf, usage: Arc<Usage>) -> io::Result<Self> {
        let (file, temporary) = loop {
            let temporary = directory.join(format!("{TEMP_PREFIX}{}", random_hex()?));
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temporary)?;
            file.lock()?;
            if still_named(&file, &temporary)? {
                break (file, temporary);
            }
            // Swept before it was locked: the name is gone or another's.
        };
        Ok(Self {
            _lock: file.try_clone()?,
            file: Some(tokio::fs::File::from_std(file)),
            temporary,
            directory,
            usage,
            reserved: 0,
            committed: false,
        })
    }
}

/// Whether `path` still names the file `file` has open.
pub(super) fn still_named(file: &std::fs::File, path: &std::path::Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt as _;

    let open = file.metadata()?;
    match std::fs::symlink_metadata(path) {
        Ok(named) => Ok(named.dev() == open.dev() && named.ino() == open.ino()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error),
    }
}

/// An I/O error as the port reports it: a full filesystem or an exceeded
/// quota is [`UploadStoreError::full`] (507), anything else a failure (500).
pub(super) fn failed(error: io::Error) -> UploadStoreError {
    match error.kind() {
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded | io::ErrorKind::FileTooLarge => {
            UploadStoreError::full(error)
        }
        _ => UploadStoreError(Box::new(error)),
    }
}

#[async_trait]
impl PendingUpload for DiskPendingUpload {
    async fn write(&mut self, chunk: &[u8]) -> Result<(), UploadStoreError> {
        let bytes = chunk.len() as u64;
        if !self.usage.reserve(bytes) {
            return Err(UploadStoreError::full(format!(
                "UPLOADS_MAX_BYTES ({}) would be passed",
                self.usage.max()
            )));
        }
        self.reserved += bytes;
        let file = self
            .file
            .as_mut()
            .ok_or_else(|| failed(io::Error::other("the file is closed")))?;
        file.write_all(chunk).await.map_err(failed)
    }

    async fn commit(mut self: Box<Self>) -> Result<StoredName, UploadStoreError> {
        if let Some(mut file) = self.file.take() {
            // Flush tokio's buffer (a full disk shows here at the latest)
            // and close the file before the rename. No fsync: an upload that
            // a crash loses right after its 201 is the same trade every
            // Express/multer service makes, and fsync per file would
            // dominate small uploads.
            file.flush().await.map_err(failed)?;
        }
        let hex = random_hex().map_err(failed)?;
        let name =
            StoredName::new(hex).ok_or_else(|| failed(io::Error::other("bad random name")))?;
        // The rename runs on a thread that owns `self`: abandoned midway,
        // the file ends either renamed and committed, or deleted.
        tokio::task::spawn_blocking(move || {
            std::fs::rename(&self.temporary, self.directory.join(name.as_str())).map_err(failed)?;
            self.committed = true;
            Ok(name)
        })
        .await
        .map_err(|error| UploadStoreError(Box::new(error)))?
    }
}

impl Drop for DiskPendingUpload {
    fn drop(&mut self) {
        if !self.committed {
            // Delete while the lock is held (it goes with `_lock`, after
            // this), so no sweep counts the file as its writer's leftover;
            // errors cannot be reported from Drop, and a later start-up
            // sweep catches whatever is left.
            drop(self.file.take());
            let _ = std::fs::remove_file(&self.temporary);
            self.usage.release(self.reserved);
        }
    }
}
