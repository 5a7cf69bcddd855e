//! Uploaded files: the store port and the rule that a request's files are
//! kept all together or not at all (C5).

use std::fmt;

use async_trait::async_trait;

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

/// The use case of the upload routes.
#[derive(Clone)]
pub struct UploadService {
    store: std::sync::Arc<dyn UploadStore>,
}

impl fmt::Debug for UploadService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UploadService").finish_non_exhaustive()
    }
}

impl UploadService {
    pub fn new(store: std::sync::Arc<dyn UploadStore>) -> Self {
        Self { store }
    }

    pub async fn begin(&self) -> Result<Box<dyn PendingUpload>, UploadStoreError> {
        self.store.begin().await
    }

    /// Commits every file of one request, in order, or none of them: when a
    /// commit fails, the files committed before it are removed again and the
    /// rest are dropped (which discards them) (C5).
    pub async fn commit_all(
        &self,
        pending: Vec<Box<dyn PendingUpload>>,
    ) -> Result<Vec<StoredName>, UploadStoreError> {
        let mut committed = Vec::with_capacity(pending.len());
        for upload in pending {
            match upload.commit().await {
                Ok(name) => committed.push(name),
                Err(error) => {
                    for name in &committed {
                        // Best effort: the commit error is the one to report.
                        let _ = self.store.remove(name).await;
                    }
                    return Err(error);
                }
            }
        }
        Ok(committed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use mockall::predicate::eq;

    use super::*;

    /// A hand-written pending upload: commits to `name`, or fails.
    struct Fake(Option<&'static str>);

    #[async_trait]
    impl PendingUpload for Fake {
        async fn write(&mut self, _: &[u8]) -> Result<(), UploadStoreError> {
            Ok(())
        }

        async fn commit(self: Box<Self>) -> Result<StoredName, UploadStoreError> {
            self.0
                .and_then(|name| StoredName::new(name.to_owned()))
                .ok_or_else(|| UploadStoreError("disk full".into()))
        }
    }

    const A: &str = "0123456789abcdef0123456789abcdef";
    const B: &str = "fedcba9876543210fedcba9876543210";

    #[test]
    fn stored_names_are_32_lowercase_hex_characters_c4() {
        assert!(StoredName::new(A.to_owned()).is_some());
        assert!(StoredName::new(A.to_uppercase()).is_none());
        assert!(StoredName::new("../../etc/passwd".to_owned()).is_none());
        assert!(StoredName::new(A[..31].to_owned()).is_none());
    }

    #[tokio::test]
    async fn commit_all_keeps_every_file_when_every_commit_succeeds_c5() {
        let mut store = MockUploadStore::new();
        store.expect_remove().never();
        let service = UploadService::new(Arc::new(store));

        let names = service
            .commit_all(vec![Box::new(Fake(Some(A))), Box::new(Fake(Some(B)))])
            .await
            .unwrap();

        assert_eq!(
            names.iter().map(StoredName::as_str).collect::<Vec<_>>(),
            [A, B]
        );
    }

    #[tokio::test]
    async fn commit_all_removes_the_committed_files_when_a_later_commit_fails_c5() {
        let mut store = MockUploadStore::new();
        store
            .expect_remove()
            .with(eq(StoredName::new(A.to_owned()).unwrap()))
            .times(1)
            .returning(|_| Ok(()));
        let service = UploadService::new(Arc::new(store));

        let result = service
            .commit_all(vec![
                Box::new(Fake(Some(A))),
                Box::new(Fake(None)),
                Box::new(Fake(Some(B))),
            ])
            .await;

        assert!(result.is_err());
    }
}
