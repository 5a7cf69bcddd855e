//! One upload request being received: each part accepted or refused by the
//! [`UploadPolicy`] as it arrives, file bytes written through the store as
//! they come, and the files kept all together or not at all (C5).

use std::fmt;
use std::sync::Arc;

use super::outcome::{StoredFile, StoredFiles, TextField, Upload, UploadError};
use super::{PendingUpload, UploadPolicy, UploadStore, UploadStoreError};

/// One upload request, received part by part under an [`UploadPolicy`].
///
/// Each part is announced with [`file`](Self::file) or [`text`](Self::text),
/// which refuse it at once if the policy does not allow it; its bytes then go
/// through the returned writer, which refuses the chunk that would break a
/// bound before keeping any of it. File bytes go straight to the
/// [`UploadStore`], so memory does not grow with file sizes.
/// [`finish`](Self::finish) keeps every file or none.
///
/// After any error, drop the session: that discards every file received so
/// far, which is how a refused request leaves nothing behind (C5).
///
/// ```
/// # use std::sync::{Arc, Mutex};
/// # use async_trait::async_trait;
/// # use items_domain::{PendingUpload, StoredName, UploadStore, UploadStoreError};
/// # /// Keeps committed files in memory.
/// # #[derive(Default)]
/// # struct Memory(Arc<Mutex<Vec<Vec<u8>>>>);
/// # struct Pending(Vec<u8>, Arc<Mutex<Vec<Vec<u8>>>>);
/// # #[async_trait]
/// # impl PendingUpload for Pending {
/// #     async fn write(&mut self, chunk: &[u8]) -> Result<(), UploadStoreError> {
/// #         self.0.extend_from_slice(chunk);
/// #         Ok(())
/// #     }
/// #     async fn commit(self: Box<Self>) -> Result<StoredName, UploadStoreError> {
/// #         let mut files = self.1.lock().unwrap();
/// #         files.push(self.0);
/// #         Ok(StoredName::new(format!("{:032x}", files.len())).unwrap())
/// #     }
/// # }
/// # #[async_trait]
/// # impl UploadStore for Memory {
/// #     async fn begin(&self) -> Result<Box<dyn PendingUpload>, UploadStoreError> {
/// #         Ok(Box::new(Pending(Vec::new(), Arc::clone(&self.0))))
/// #     }
/// #     async fn remove(&self, _: &StoredName) -> Result<(), UploadStoreError> {
/// #         Ok(())
/// #     }
/// # }
/// use items_domain::{UploadError, UploadPolicy, UploadService};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), UploadError> {
/// let service = UploadService::new(Arc::new(Memory::default()));
/// let mut session = service.session(UploadPolicy::avatar(1000));
///
/// session.text("nickname".into())?.write(b"ada")?;
/// let mut avatar = session.file("avatar", "me.png".into(), "image/png".into()).await?;
/// avatar.write(b"\x89PNG...").await?;
/// // A second file in `avatar` is refused before a byte of it is stored.
/// let second = session.file("avatar", "b.png".into(), "image/png".into()).await;
/// assert!(matches!(second, Err(UploadError::TooManyFiles { max: 1, .. })));
///
/// let upload = session.finish().await?;
/// assert_eq!(upload.files.first.original_name, "me.png");
/// assert_eq!(upload.files.first.size, 7);
/// assert_eq!(upload.fields[0].value, "ada");
/// # Ok(())
/// # }
/// ```
pub struct UploadSession {
    store: Arc<dyn UploadStore>,
    policy: UploadPolicy,
    parts: usize,
    text_bytes: usize,
    files: Vec<ReceivedFile>,
    fields: Vec<ReceivedText>,
}

/// A file being received, not yet kept.
struct ReceivedFile {
    original_name: String,
    media_type: String,
    size: u64,
    pending: Box<dyn PendingUpload>,
}

impl ReceivedFile {
    async fn commit(self, field: &'static str) -> Result<StoredFile, UploadStoreError> {
        Ok(StoredFile {
            field,
            original_name: self.original_name,
            media_type: self.media_type,
            name: self.pending.commit().await?,
            size: self.size,
        })
    }
}

/// A text part's raw bytes; decoded once it is complete, since a chunk may
/// end in the middle of a character.
struct ReceivedText {
    name: String,
    bytes: Vec<u8>,
}

impl ReceivedText {
    fn decode(self) -> TextField {
        let value = String::from_utf8(self.bytes)
            .unwrap_or_else(|invalid| String::from_utf8_lossy(invalid.as_bytes()).into_owned());
        TextField {
            name: self.name,
            value,
        }
    }
}

impl fmt::Debug for UploadSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UploadSession")
            .field("policy", &self.policy)
            .field("parts", &self.parts)
            .field("text_bytes", &self.text_bytes)
            .field("files", &self.files.len())
            .finish_non_exhaustive()
    }
}

impl UploadSession {
    pub(super) fn new(store: Arc<dyn UploadStore>, policy: UploadPolicy) -> Self {
        Self {
            store,
            policy,
            parts: 0,
            text_bytes: 0,
            files: Vec::new(),
            fields: Vec::new(),
        }
    }

    /// A file part begins in `field`. Refused before anything is stored when
    /// it is one part too many, in another field than the policy's, or one
    /// file too many; otherwise the store begins a file for its bytes.
    ///
    /// # Errors
    /// [`UploadError::TooManyParts`], [`UploadError::UnexpectedFileField`],
    /// [`UploadError::TooManyFiles`], or [`UploadError::Store`] when the
    /// store cannot begin a file.
    pub async fn file(
        &mut self,
        field: &str,
        original_name: String,
        media_type: String,
    ) -> Result<FileWriter<'_>, UploadError> {
        self.count_part()?;
        let expected = self.policy.file_field();
        if field != expected {
            return Err(UploadError::UnexpectedFileField {
                field: field.to_owned(),
                expected,
            });
        }
        if self.files.len() == self.policy.max_files() {
            return Err(UploadError::TooManyFiles {
                field: expected,
                max: self.policy.max_files(),
            });
        }
        let pending = self.store.begin().await?;
        let index = self.files.len();
        self.files.push(ReceivedFile {
            original_name,
            media_type,
            size: 0,
            pending,
        });
        Ok(FileWriter {
            file: &mut self.files[index],
            max_bytes: self.policy.max_file_bytes(),
        })
    }

    /// A text part named `name` begins.
    ///
    /// # Errors
    /// [`UploadError::TooManyParts`] when it is one part too many.
    pub fn text(&mut self, name: String) -> Result<TextWriter<'_>, UploadError> {
        self.count_part()?;
        let index = self.fields.len();
        self.fields.push(ReceivedText {
            name,
            bytes: Vec::new(),
        });
        Ok(TextWriter {
            value: &mut self.fields[index].bytes,
            spent: &mut self.text_bytes,
        })
    }

    /// Counts one more part, refusing the one past [`UploadPolicy::MAX_PARTS`].
    fn count_part(&mut self) -> Result<(), UploadError> {
        if self.parts == UploadPolicy::MAX_PARTS {
            return Err(UploadError::TooManyParts {
                max: UploadPolicy::MAX_PARTS,
            });
        }
        self.parts += 1;
        Ok(())
    }

    /// The request ended: keeps every file, in order, or none. When a file
    /// cannot be kept, the files kept before it are removed again and the
    /// rest discarded (C5).
    ///
    /// # Errors
    /// [`UploadError::MissingFile`] when no file was sent, or
    /// [`UploadError::Store`] when a file could not be kept.
    pub async fn finish(self) -> Result<Upload, UploadError> {
        let field = self.policy.file_field();
        let mut received = self.files.into_iter();
        let first = received.next().ok_or(UploadError::MissingFile { field })?;
        let mut files = StoredFiles {
            first: first.commit(field).await?,
            more: Vec::with_capacity(received.len()),
        };
        for file in received {
            match file.commit(field).await {
                Ok(stored) => files.more.push(stored),
                Err(error) => {
                    for kept in files.iter() {
                        // Best effort: the commit error is the one to report,
                        // and a file left here is unreachable by any client.
                        let _ = self.store.remove(&kept.name).await;
                    }
                    return Err(error.into());
                }
            }
        }
        Ok(Upload {
            files,
            fields: self.fields.into_iter().map(ReceivedText::decode).collect(),
        })
    }
}

/// Receives the bytes of one file part of an [`UploadSession`].
pub struct FileWriter<'a> {
    file: &'a mut ReceivedFile,
    max_bytes: u64,
}

impl fmt::Debug for FileWriter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileWriter")
            .field("size", &self.file.size)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl FileWriter<'_> {
    /// Appends a chunk to the file, refusing the chunk that would take it
    /// past the largest size before writing any of it.
    ///
    /// # Errors
    /// [`UploadError::FileTooLarge`], or [`UploadError::Store`] when the
    /// chunk cannot be written.
    pub async fn write(&mut self, chunk: &[u8]) -> Result<(), UploadError> {
        let size = self.file.size.saturating_add(chunk.len() as u64);
        if size > self.max_bytes {
            return Err(UploadError::FileTooLarge {
                max_bytes: self.max_bytes,
            });
        }
        self.file.pending.write(chunk).await?;
        self.file.size = size;
        Ok(())
    }
}

/// Receives the bytes of one text part of an [`UploadSession`].
pub struct TextWriter<'a> {
    value: &'a mut Vec<u8>,
    /// The text bytes of the whole request so far, this value's included.
    spent: &'a mut usize,
}

impl fmt::Debug for TextWriter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TextWriter")
            .field("value_bytes", &self.value.len())
            .field("spent", &self.spent)
            .finish()
    }
}

impl TextWriter<'_> {
    /// Appends a chunk to the value, refusing the chunk that would take the
    /// value or the request's text past its bound before keeping any of it.
    ///
    /// # Errors
    /// [`UploadError::TextValueTooLarge`] or [`UploadError::TextTooLarge`].
    pub fn write(&mut self, chunk: &[u8]) -> Result<(), UploadError> {
        if self.value.len() + chunk.len() > UploadPolicy::MAX_TEXT_VALUE_BYTES {
            return Err(UploadError::TextValueTooLarge {
                max_bytes: UploadPolicy::MAX_TEXT_VALUE_BYTES,
            });
        }
        if *self.spent + chunk.len() > UploadPolicy::MAX_TEXT_BYTES {
            return Err(UploadError::TextTooLarge {
                max_bytes: UploadPolicy::MAX_TEXT_BYTES,
            });
        }
        *self.spent += chunk.len();
        self.value.extend_from_slice(chunk);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
