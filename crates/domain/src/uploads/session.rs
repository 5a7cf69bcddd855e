//! One upload request being received: each part accepted or refused by the
//! [`UploadPolicy`] as it arrives, file bytes written through the store as
//! they come, and the files kept all together or not at all (C5).

use std::fmt;
use std::sync::Arc;

use super::{PendingUpload, StoredName, UploadPolicy, UploadStore, UploadStoreError};

/// Why an upload request was refused or failed. Every refusal happens before
/// the offending bytes are kept, and a refused request keeps nothing (C5).
///
/// The messages of the refusals are written for the client: they name the
/// rule that was broken, with its bound.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// A file arrived in a field that does not take files.
    #[error("A file was sent in field `{field}`; this route takes files only in `{expected}`.")]
    UnexpectedFileField {
        field: String,
        expected: &'static str,
    },
    /// One file more than the field takes.
    #[error("At most {max} file(s) may be sent in `{field}`.")]
    TooManyFiles { field: &'static str, max: usize },
    /// The request ended without a file in the field.
    #[error("A file is required in field `{field}`.")]
    MissingFile { field: &'static str },
    /// A file grew past the largest size allowed.
    #[error("A file must not exceed {max_bytes} bytes.")]
    FileTooLarge { max_bytes: u64 },
    /// One text value grew past [`UploadPolicy::MAX_TEXT_VALUE_BYTES`].
    #[error("A text field must not exceed {max_bytes} bytes.")]
    TextValueTooLarge { max_bytes: usize },
    /// The text values together grew past [`UploadPolicy::MAX_TEXT_BYTES`].
    #[error("The text fields of a form must not exceed {max_bytes} bytes together.")]
    TextTooLarge { max_bytes: usize },
    /// One part more than [`UploadPolicy::MAX_PARTS`].
    #[error("A form must not have more than {max} parts.")]
    TooManyParts { max: usize },
    /// The store could not begin, write or keep a file; the cause is for
    /// logs, not for the client.
    #[error(transparent)]
    Store(#[from] UploadStoreError),
}

/// A file that was kept: where it came from and the name it is kept under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    /// The field it was sent in: always the policy's file field.
    pub field: &'static str,
    /// The file name the client gave; reported, never used as a path (C4).
    pub original_name: String,
    /// The media type the client declared.
    pub media_type: String,
    /// The name the store chose (C4).
    pub name: StoredName,
    pub size: u64,
}

/// The files of an accepted request, in the order they were sent; never
/// empty, since a request without a file is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFiles {
    pub first: StoredFile,
    /// The files after the first; empty when the policy takes one file.
    pub more: Vec<StoredFile>,
}

impl StoredFiles {
    pub fn iter(&self) -> impl Iterator<Item = &StoredFile> {
        std::iter::once(&self.first).chain(&self.more)
    }

    /// Every file's bytes together.
    pub fn total_bytes(&self) -> u64 {
        self.iter().map(|file| file.size).sum()
    }
}

impl IntoIterator for StoredFiles {
    type Item = StoredFile;
    type IntoIter = std::iter::Chain<std::iter::Once<StoredFile>, std::vec::IntoIter<StoredFile>>;

    fn into_iter(self) -> Self::IntoIter {
        std::iter::once(self.first).chain(self.more)
    }
}

/// A text part, to be echoed to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextField {
    pub name: String,
    /// The bytes as sent, with any that are not UTF-8 replaced by U+FFFD:
    /// a text echoed to the client must be text, and one bad byte is no
    /// reason to refuse files that are fine.
    pub value: String,
}

/// What an accepted upload request kept and carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub files: StoredFiles,
    /// The text parts in the order they were sent; a name may repeat.
    pub fields: Vec<TextField>,
}

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
