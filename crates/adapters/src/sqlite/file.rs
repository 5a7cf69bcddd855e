//! The store's file on disk, as the service opened it: that it can be
//! written at all, that the path still names it, and the size of its
//! write-ahead log, which the writer keeps bounded.
//!
//! Invariants:
//! - at open, a file or a directory that cannot be written is an error
//!   (C12: exit 1 at start), never a store whose every write fails;
//! - [`StoreFile::check`] fails once the path no longer names the file the
//!   service has open (deleted, or replaced by another), and
//!   [`StoreFile::still_linked`] (one `fstat`, asked before every write
//!   batch) once the file has no name left, which deleting it and renaming
//!   another over it both do: the writer then refuses every write (503)
//!   rather than acknowledge writes into a file nobody will open again, and
//!   readiness says so, naming the path;
//! - the `-wal` file stays bounded: the writer truncates it once it passes
//!   [`WalLimit`] and no reader pins it, and `journal_size_limit` makes any
//!   other reset give its space back too. A reader holding a snapshot (the
//!   full listing of a large store) keeps what was written meanwhile until
//!   it ends; the next truncation after it brings the file back.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::Connection;

/// The size of the write-ahead log (a gauge, set at scrape time).
pub const WAL_BYTES: &str = "sqlite_wal_bytes";

/// Past this many bytes, the writer truncates the `-wal` file as soon as no
/// reader pins it. 64 MiB: a few seconds of writes at full speed, so
/// checkpoints stay rare, and a bound an operator can plan disk for.
pub const DEFAULT_WAL_LIMIT: u64 = 64 * 1024 * 1024;

/// How often the writer tries again to truncate a log over its limit while
/// a reader pins it: each try copies what it can and waits for nothing.
const RETRY_TRUNCATE: Duration = Duration::from_millis(100);

/// The file the store opened: its path and its identity then, and handles
/// on it and on its `-wal` file, which the writer asks about with `fstat`
/// (no walk of the path before every batch).
#[derive(Debug)]
pub(super) struct StoreFile {
    path: PathBuf,
    wal: PathBuf,
    device: u64,
    inode: u64,
    handle: std::fs::File,
    /// The `-wal` file while the writer has the store open (SQLite keeps
    /// it, truncating it at most); `None` if it did not exist at open.
    wal_handle: Option<std::fs::File>,
}

/// The path no longer names the store's file.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the SQLite file {} was {what} under the running service", path.display())]
pub(super) struct FileGone {
    path: PathBuf,
    what: &'static str,
}

impl StoreFile {
    /// The file at `path`, opened (and so existing) now; its directory must
    /// be writable, since SQLite creates and removes the `-wal` and `-shm`
    /// files beside it.
    pub(super) fn opened(path: &Path) -> std::io::Result<Self> {
        let handle = std::fs::File::open(path)?;
        let metadata = handle.metadata()?;
        let directory = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        writable_directory(directory)?;
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let wal = PathBuf::from(wal);
        Ok(Self {
            path: path.to_owned(),
            wal_handle: std::fs::File::open(&wal).ok(),
            wal,
            device: metadata.dev(),
            inode: metadata.ino(),
            handle,
        })
    }

    /// Whether the file opened still has a name: deleted, or replaced by a
    /// file renamed over its path, it has none.
    pub(super) fn still_linked(&self) -> Result<(), FileGone> {
        match self.handle.metadata() {
            Ok(metadata) if metadata.nlink() > 0 => Ok(()),
            _ => Err(FileGone {
                path: self.path.clone(),
                what: "deleted or replaced",
            }),
        }
    }

    /// Whether the path still names the file opened.
    pub(super) fn check(&self) -> Result<(), FileGone> {
        let gone = |what| FileGone {
            path: self.path.clone(),
            what,
        };
        match std::fs::metadata(&self.path) {
            Ok(now) if now.dev() == self.device && now.ino() == self.inode => Ok(()),
            Ok(_) => Err(gone("replaced")),
            Err(_) => Err(gone("deleted")),
        }
    }

    /// The `-wal` file's size now (0 when there is none).
    pub(super) fn wal_bytes(&self) -> u64 {
        match &self.wal_handle {
            Some(handle) => handle.metadata(),
            None => std::fs::metadata(&self.wal),
        }
        .map_or(0, |metadata| metadata.len())
    }
}

/// Proves `directory` writable by creating and removing a file in it.
fn writable_directory(directory: &Path) -> std::io::Result<()> {
    let probe = directory.join(format!(".items-service-probe-{}", std::process::id()));
    std::fs::File::create(&probe)?;
    std::fs::remove_file(&probe)
}

/// The writer's bound on the `-wal` file.
#[derive(Debug)]
pub(super) struct WalLimit {
    bytes: u64,
    /// When a truncation last failed because a reader pinned the log.
    pinned_at: Option<Instant>,
}

impl WalLimit {
    /// A bound of `bytes`, set on the writer's `connection`: past it the
    /// writer truncates the log ([`WalLimit::upkeep`]), and on every other
    /// reset `journal_size_limit` gives back all but a quarter of it, so a
    /// log that grew while a reader pinned it ends well under the bound.
    pub(super) fn set(connection: &Connection, bytes: u64) -> rusqlite::Result<Self> {
        let limit = i64::try_from(bytes / 4).unwrap_or(i64::MAX);
        connection.pragma_update_and_check(None, "journal_size_limit", limit, |row| {
            row.get::<_, i64>(0)
        })?;
        Ok(Self {
            bytes,
            pinned_at: None,
        })
    }

    /// After a commit: when the log is over the bound, truncates it unless
    /// a reader pins it (then tries again after [`RETRY_TRUNCATE`]). Never
    /// waits for a reader: the busy timeout is lifted for the try.
    pub(super) fn upkeep(&mut self, connection: &Connection, file: &StoreFile, busy: Duration) {
        if file.wal_bytes() <= self.bytes {
            return;
        }
        if self
            .pinned_at
            .is_some_and(|pinned| pinned.elapsed() < RETRY_TRUNCATE)
        {
            return;
        }
        let truncated = connection
            .busy_timeout(Duration::ZERO)
            .and_then(|()| {
                connection.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                    row.get::<_, i64>(0)
                })
            })
            .map(|blocked| blocked == 0);
        let _ = connection.busy_timeout(busy);
        match truncated {
            Ok(true) => self.pinned_at = None,
            Ok(false) => self.pinned_at = Some(Instant::now()),
            Err(error) => {
                self.pinned_at = Some(Instant::now());
                tracing::warn!(%error, "the SQLite write-ahead log could not be truncated");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deleted_or_replaced_file_is_told_apart_from_the_one_opened_c12() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("items.db");
        std::fs::write(&path, b"one").unwrap();
        let file = StoreFile::opened(&path).unwrap();
        // Held open, as the store's connections hold it: its inode cannot
        // be handed to a new file while it lives.
        let _open = std::fs::File::open(&path).unwrap();
        assert!(file.check().is_ok());

        std::fs::remove_file(&path).unwrap();
        assert!(file.still_linked().is_err(), "no name left");
        let deleted = file.check().unwrap_err().to_string();
        assert!(
            deleted.contains("deleted") && deleted.contains("items.db"),
            "{deleted}"
        );

        std::fs::write(&path, b"another").unwrap();
        let replaced = file.check().unwrap_err().to_string();
        assert!(replaced.contains("replaced"), "{replaced}");
    }

    #[test]
    fn the_wal_is_measured_beside_the_file() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("items.db");
        std::fs::write(&path, b"").unwrap();
        let file = StoreFile::opened(&path).unwrap();
        assert_eq!(file.wal_bytes(), 0);
        std::fs::write(directory.path().join("items.db-wal"), [0u8; 4096]).unwrap();
        assert_eq!(file.wal_bytes(), 4096);
    }
}
