//! Uploaded files (C4, C5): the store port, the policy each upload route
//! applies (`policy`), the session that receives one request's parts under
//! it and keeps its files all together or not at all (`session`), and what
//! a request ends in (`outcome`).

mod outcome;
mod policy;
mod session;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

pub use outcome::{StoredFile, StoredFiles, TextField, Upload, UploadError};
pub use policy::UploadPolicy;
pub use session::{FileWriter, TextWriter, UploadSession};

/// A file's stored name: 32 lowercase hex characters chosen by the store,
/// never derived from anything the client sent (C4).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoredName(String);

impl StoredName {
    /// Wraps a name the store generated; `None` unless it is 32 lowercase hex
    /// characters, so a stored name can never hold a path separator.
    pub fn new(name: String) -> Option<Self> {
        let valid = name.len() == 32
            && name
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        valid.then_some(Self(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StoredName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The store could not read or write.
#[derive(Debug, thiserror::Error)]
#[error("the upload store failed")]
pub struct UploadStoreError(#[source] pub Box<dyn std::error::Error + Send + Sync>);

impl UploadStoreError {
    /// The store is full: its bound is reached or its filesystem has no
    /// room left (C5: the client gets 507, not 500).
    pub fn full(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(Box::new(StorageFull(cause.into())))
    }

    /// Whether this error is [`UploadStoreError::full`].
    pub fn is_full(&self) -> bool {
        self.0.is::<StorageFull>()
    }
}

/// The cause of an [`UploadStoreError::full`].
#[derive(Debug, thiserror::Error)]
#[error("the upload store is full")]
pub struct StorageFull(#[source] pub Box<dyn std::error::Error + Send + Sync>);

/// A file being received. Its bytes are invisible under any final name until
/// [`PendingUpload::commit`]; dropping it uncommitted MUST remove every byte
/// written, which is how a failed request leaves nothing behind.
#[async_trait]
pub trait PendingUpload: Send {
    /// Appends a chunk.
    ///
    /// # Errors
    /// MUST return [`UploadStoreError`] when the chunk cannot be written.
    async fn write(&mut self, chunk: &[u8]) -> Result<(), UploadStoreError>;

    /// Gives the file its final, random name and returns it.
    ///
    /// # Errors
    /// MUST return [`UploadStoreError`] when the file cannot be kept; nothing
    /// MUST remain of it then.
    async fn commit(self: Box<Self>) -> Result<StoredName, UploadStoreError>;
}

/// Where uploaded files are kept.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait UploadStore: Send + Sync {
    /// Starts receiving a new file.
    ///
    /// # Errors
    /// MUST return [`UploadStoreError`] when no file can be started.
    async fn begin(&self) -> Result<Box<dyn PendingUpload>, UploadStoreError>;

    /// Removes a committed file (used to undo a partly committed request).
    /// Removing a name that is not there is not an error.
    ///
    /// # Errors
    /// MUST return [`UploadStoreError`] when the file exists but cannot be removed.
    async fn remove(&self, name: &StoredName) -> Result<(), UploadStoreError>;
}

/// The use case of the upload routes: one [`UploadSession`] per request.
#[derive(Clone)]
pub struct UploadService {
    store: Arc<dyn UploadStore>,
}

impl fmt::Debug for UploadService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UploadService").finish_non_exhaustive()
    }
}

impl UploadService {
    pub fn new(store: Arc<dyn UploadStore>) -> Self {
        Self { store }
    }

    /// Starts receiving one request under `policy`.
    pub fn session(&self, policy: UploadPolicy) -> UploadSession {
        UploadSession::new(Arc::clone(&self.store), policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_names_are_32_lowercase_hex_characters_c4() {
        let name = "0123456789abcdef0123456789abcdef";
        assert!(StoredName::new(name.to_owned()).is_some());
        assert!(StoredName::new(name.to_uppercase()).is_none());
        assert!(StoredName::new("../../etc/passwd".to_owned()).is_none());
        assert!(StoredName::new(name[..31].to_owned()).is_none());
    }

    #[test]
    fn a_full_store_is_told_apart_from_other_failures_c5() {
        assert!(UploadStoreError::full("no room").is_full());
        let other: Box<dyn std::error::Error + Send + Sync> = "broken".into();
        assert!(!UploadStoreError(other).is_full());
    }
}
