//! What one upload request may carry (C5): which field holds its files, how
//! many and how large, and the bounds on the text that is echoed back.

/// The rules one upload route applies to a request, part by part.
///
/// Two routes exist, each with its constructor: [`UploadPolicy::avatar`]
/// (`POST /profile`) and [`UploadPolicy::photos`] (`POST /photos/upload`).
/// The largest file is a setting (`MAX_FILE_BYTES`, C1); the text and part
/// bounds are fixed by the contract and shared by every route, because text
/// is held in memory to be echoed whatever the route.
///
/// ```
/// use items_domain::{UploadPolicy, defaults};
///
/// let policy = UploadPolicy::photos(defaults::MAX_FILE_BYTES);
/// assert_eq!(policy.file_field(), "photos");
/// assert_eq!(policy.max_files(), 12);
/// assert_eq!(policy.max_file_bytes(), 10 * 1024 * 1024);
/// assert_eq!(UploadPolicy::avatar(1000).max_files(), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadPolicy {
    file_field: &'static str,
    max_files: usize,
    max_file_bytes: u64,
}

impl UploadPolicy {
    /// The most bytes one text value may hold (C5).
    pub const MAX_TEXT_VALUE_BYTES: usize = 64 * 1024;
    /// The most bytes all text values of a request may hold together,
    /// however their names repeat (C5).
    pub const MAX_TEXT_BYTES: usize = 1024 * 1024;
    /// The most parts, files and text alike, in one request (C5): each part
    /// costs a little memory and parsing even when empty.
    pub const MAX_PARTS: usize = 1000;
    /// The most files `POST /photos/upload` takes (C5).
    pub const MAX_PHOTOS: usize = 12;

    /// `POST /profile`: exactly one file, in `avatar`, of at most
    /// `max_file_bytes` (C5).
    pub const fn avatar(max_file_bytes: u64) -> Self {
        Self {
            file_field: "avatar",
            max_files: 1,
            max_file_bytes,
        }
    }

    /// `POST /photos/upload`: 1 to [`Self::MAX_PHOTOS`] files, in `photos`,
    /// each of at most `max_file_bytes` (C5).
    pub const fn photos(max_file_bytes: u64) -> Self {
        Self {
            file_field: "photos",
            max_files: Self::MAX_PHOTOS,
            max_file_bytes,
        }
    }

    /// The only field that may hold a file.
    pub const fn file_field(&self) -> &'static str {
        self.file_field
    }

    /// The most files the field may hold; at least one is required.
    pub const fn max_files(&self) -> usize {
        self.max_files
    }

    /// The largest single file, in bytes.
    pub const fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }
}
