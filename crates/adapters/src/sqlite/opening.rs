//! Opening the file: the writing connection, refused when the file cannot
//! be written, its schema brought up to date, then the readers; and why
//! the file could not be used ([`OpenError`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::connections;
use super::file::StoreFile;
use super::point_reads::PointReads;
use super::readers::Readers;
use super::settings::SqliteSettings;
use crate::sql::migrations::MigrateError;

/// Why the SQLite file could not be used at start.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Missing directory, no permission, not a database…
    #[error("the SQLite database {} cannot be opened", path.display())]
    Open {
        path: PathBuf,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("the SQLite database could not be migrated")]
    Migrate(#[from] MigrateError),
}

/// The writing connection to `path` (the file created when missing), its
/// schema brought up to date (how many migrations that applied), then the
/// readers; and the file as opened.
pub(super) fn open_file(
    path: &Path,
    settings: &SqliteSettings,
) -> Result<(rusqlite::Connection, usize, Readers, PointReads, StoreFile), OpenError> {
    let cannot_open = |source: rusqlite::Error| OpenError::Open {
        path: path.to_owned(),
        source: source.into(),
    };
    let (writing, migrations_applied) = open_writing(path, settings.busy_timeout)?;
    let file = StoreFile::opened(path).map_err(|source| OpenError::Open {
        path: path.to_owned(),
        source: source.into(),
    })?;
    let readers =
        Readers::open(path, settings.readers, settings.busy_timeout).map_err(cannot_open)?;
    let point_reads = PointReads::open(path, settings.busy_timeout).map_err(cannot_open)?;
    Ok((writing, migrations_applied, readers, point_reads, file))
}

/// The writing connection to `path` (the file created when missing), its
/// schema brought up to date, and how many migrations that applied.
pub(super) fn open_writing(
    path: &Path,
    busy_timeout: Duration,
) -> Result<(rusqlite::Connection, usize), OpenError> {
    let cannot_open = |source: Box<dyn std::error::Error + Send + Sync>| OpenError::Open {
        path: path.to_owned(),
        source,
    };
    let mut connection =
        connections::read_write(path, busy_timeout).map_err(|source| cannot_open(source.into()))?;
    // SQLite opens a file it may not write read-only, without a word: every
    // write would then fail for ever (C12: exit 1 at start instead).
    if connection
        .is_readonly(rusqlite::MAIN_DB)
        .map_err(|source| cannot_open(source.into()))?
    {
        return Err(cannot_open("the file cannot be written (read-only)".into()));
    }
    let applied = crate::sql::migrations::run_sqlite(&mut connection)?;
    Ok((connection, applied))
}
