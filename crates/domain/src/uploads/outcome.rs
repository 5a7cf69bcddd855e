//! What an upload request ends in: the files and text fields it kept
//! ([`Upload`], [`StoredFiles`], [`StoredFile`], [`TextField`]), or why it
//! was refused or failed ([`UploadError`]).

use super::{StoredName, UploadStoreError};

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
    /// One text value grew past [`UploadPolicy::MAX_TEXT_VALUE_BYTES`](super::UploadPolicy::MAX_TEXT_VALUE_BYTES).
    #[error("A text field must not exceed {max_bytes} bytes.")]
    TextValueTooLarge { max_bytes: usize },
    /// The text values together grew past [`UploadPolicy::MAX_TEXT_BYTES`](super::UploadPolicy::MAX_TEXT_BYTES).
    #[error("The text fields of a form must not exceed {max_bytes} bytes together.")]
    TextTooLarge { max_bytes: usize },
    /// One part more than [`UploadPolicy::MAX_PARTS`](super::UploadPolicy::MAX_PARTS).
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
