//! An online backup of a SQLite store (C12): a consistent copy of the file
//! into a new one, taken while a service may be writing to it, on a
//! blocking thread.
//!
//! Invariants:
//! - the copy holds exactly the commits made before it began: `VACUUM
//!   INTO` on a read-only connection of the backup's own reads the whole
//!   database in ONE read transaction, a snapshot in WAL mode, while
//!   writers go on committing (they never wait for a reader; only the WAL
//!   checkpoint cannot pass the snapshot until the copy is done);
//! - the destination is either absent or a complete, synced copy, never
//!   half a file, and an existing file is never overwritten: the copy is
//!   written beside it as `DEST.partial`, synced, and only then linked
//!   under the destination's name, which fails if that name exists.
//!
//! Why `VACUUM INTO` (SQLite's backup API starts over whenever another
//! connection writes): 0.30 s for 1,000,000 items under write load,
//! docs/performance.md "SQLite".

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// Why a backup was not written.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The destination exists already; nothing was written.
    #[error("{} exists already; a backup is only written to a new file", path.display())]
    DestinationExists { path: PathBuf },
    /// A file named like the copy in progress exists (left by a backup
    /// that was killed?); it is not removed, nothing was written.
    #[error("{} exists; remove it if it is a left-over partial backup", path.display())]
    PartialExists { path: PathBuf },
    /// The store cannot be opened or read.
    #[error("the SQLite database {} cannot be read", path.display())]
    Source {
        path: PathBuf,
        source: rusqlite::Error,
    },
    /// SQLite cannot take a path that is not UTF-8.
    #[error("the path {} is not UTF-8", path.display())]
    NotUtf8 { path: PathBuf },
    /// Writing, syncing or naming the copy failed; nothing is left at the
    /// destination.
    #[error("the backup could not be written to {}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `VACUUM INTO` failed (a full disk, an unwritable directory…).
    #[error("the backup could not be written to {}", path.display())]
    Copy {
        path: PathBuf,
        source: rusqlite::Error,
    },
    /// The thread that copies stopped before it answered (the runtime is
    /// shutting down); nothing is left at the destination.
    #[error("the backup to {} was stopped", path.display())]
    Stopped {
        path: PathBuf,
        source: tokio::task::JoinError,
    },
}

/// Copies the store in the file `source` to the new file `destination`,
/// consistent as of one moment, while writers may go on (see the module's
/// description). Returns the copy's size in bytes.
///
/// # Errors
/// [`BackupError::DestinationExists`] when `destination` exists (checked
/// first and again, atomically, when the copy is named);
/// [`BackupError::PartialExists`] when `DEST.partial` exists;
/// [`BackupError::Source`] when `source` is no readable SQLite database;
/// the others when the copy cannot be written. No file is left at
/// `destination` on any error.
pub async fn backup(source: &Path, destination: &Path) -> Result<u64, BackupError> {
    let (source, destination) = (source.to_owned(), destination.to_owned());
    let path = destination.clone();
    tokio::task::spawn_blocking(move || backup_now(&source, &destination))
        .await
        .map_err(|stopped| BackupError::Stopped {
            path,
            source: stopped,
        })?
}

/// [`backup`], on the calling thread.
fn backup_now(source: &Path, destination: &Path) -> Result<u64, BackupError> {
    if destination.symlink_metadata().is_ok() {
        return Err(BackupError::DestinationExists {
            path: destination.to_owned(),
        });
    }
    let partial = partial_name(destination);
    if partial.symlink_metadata().is_ok() {
        return Err(BackupError::PartialExists { path: partial });
    }
    let result = copy_into(source, &partial, destination);
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

fn copy_into(source: &Path, partial: &Path, destination: &Path) -> Result<u64, BackupError> {
    let unreadable = |error| BackupError::Source {
        path: source.to_owned(),
        source: error,
    };
    let target = partial.to_str().ok_or_else(|| BackupError::NotUtf8 {
        path: partial.to_owned(),
    })?;
    // Read-only, but not `query_only` (`connections.rs`): that refuses
    // `VACUUM INTO`.
    let connection = Connection::open_with_flags(
        source,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(unreadable)?;
    connection
        .busy_timeout(Duration::from_secs(5))
        .map_err(unreadable)?;
    // A read first, so a file that is no database is reported as such
    // rather than as a failed copy.
    connection
        .query_row("select count(*) from sqlite_schema", [], |_| Ok(()))
        .map_err(unreadable)?;
    let copied = connection.execute("vacuum into ?1", [target]);
    drop(connection);
    copied.map_err(|error| BackupError::Copy {
        path: destination.to_owned(),
        source: error,
    })?;
    let written = |error| BackupError::Write {
        path: destination.to_owned(),
        source: error,
    };
    // The copy's change history ends where it was taken: a new origin, so
    // a cursor from the service that went on writing is unknown to a store
    // restored from it (a reset, C14), never a position it never had.
    renew_origin(partial).map_err(|error| BackupError::Copy {
        path: destination.to_owned(),
        source: error,
    })?;
    // VACUUM INTO does not sync what it wrote; the copy must be on disk
    // before it is named.
    let file = std::fs::File::open(partial).map_err(written)?;
    file.sync_all().map_err(written)?;
    let bytes = file.metadata().map_err(written)?.len();
    name_without_replacing(partial, destination)?;
    sync_directory(destination).map_err(written)?;
    Ok(bytes)
}

/// Gives the copy at `partial` an origin of its own, when its schema has
/// a change log (one migrated by an older release has none).
fn renew_origin(partial: &Path) -> rusqlite::Result<()> {
    let connection = Connection::open_with_flags(
        partial,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let has_log: bool = connection.query_row(
        "select exists (select 1 from sqlite_schema where name = 'change_log')",
        [],
        |row| row.get(0),
    )?;
    if has_log {
        super::changes::new_origin(&connection)?;
    }
    connection.close().map_err(|(_, error)| error)
}

/// Gives the synced copy at `partial` the name `destination`, which must
/// not exist: a hard link fails when it does, where a rename would replace
/// it. On a file system without hard links, a rename after one more check.
fn name_without_replacing(partial: &Path, destination: &Path) -> Result<(), BackupError> {
    let written = |error| BackupError::Write {
        path: destination.to_owned(),
        source: error,
    };
    match std::fs::hard_link(partial, destination) {
        Ok(()) => std::fs::remove_file(partial).map_err(written),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(BackupError::DestinationExists {
                path: destination.to_owned(),
            })
        }
        Err(_) if destination.symlink_metadata().is_ok() => Err(BackupError::DestinationExists {
            path: destination.to_owned(),
        }),
        Err(_) => std::fs::rename(partial, destination).map_err(written),
    }
}

/// `DEST.partial`, beside `destination` so that naming it is a link within
/// one directory.
fn partial_name(destination: &Path) -> PathBuf {
    let mut name = destination.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

/// Syncs the directory holding `path`, so that the new name survives a
/// power loss too.
fn sync_directory(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let directory = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        std::fs::File::open(directory)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}
