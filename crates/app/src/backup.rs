//! `items-service backup DEST` (C12): a consistent copy of the SQLite store
//! `DATABASE_URL` names into the new file `DEST`, while a service may be
//! running and writing on the store. The copy itself is the adapter's
//! ([`items_adapters::sqlite::backup`]); here the settings are checked and
//! each refusal gets its exit status: 2 for what the command line asked
//! that cannot be done as asked, 1 for a copy that failed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use items_adapters::sqlite::{self, BackupError};

use crate::config::{DatabaseUrl, StoreConfig};

/// A backup written: what, where, how large, how long it took.
#[derive(Debug)]
pub struct BackedUp {
    /// The store's file.
    pub source: PathBuf,
    /// The new file.
    pub destination: PathBuf,
    /// The copy's size.
    pub bytes: u64,
    /// How long the copy took.
    pub took: Duration,
}

/// Why no backup was written; nothing is left at the destination.
#[derive(Debug, thiserror::Error)]
pub enum BackupFailed {
    /// The command cannot be done as asked (exit 2).
    #[error("{0}")]
    Refused(String),
    /// The copy failed (exit 1).
    #[error(transparent)]
    Copy(BackupError),
}

impl BackupFailed {
    /// The process's exit status (C1, C12).
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Refused(_) => 2,
            Self::Copy(_) => 1,
        }
    }
}

/// Copies the store `store` names into the new file `destination`.
///
/// # Errors
/// [`BackupFailed::Refused`] without a SQLite `DATABASE_URL`, when its file
/// does not exist, when `destination` exists or its directory does not;
/// [`BackupFailed::Copy`] when the copy itself fails.
pub async fn run(store: &StoreConfig, destination: &Path) -> Result<BackedUp, BackupFailed> {
    let refuse = |why: String| Err(BackupFailed::Refused(why));
    let source = match store.database() {
        None => {
            return refuse(
                "backup needs DATABASE_URL=sqlite://PATH naming the store to copy".to_owned(),
            );
        }
        Some(DatabaseUrl::Postgres(_)) => {
            return refuse(
                "backup copies a SQLite store; back PostgreSQL up with its own tools (pg_dump)"
                    .to_owned(),
            );
        }
        Some(DatabaseUrl::Sqlite(path)) => path,
    };
    if !source.is_file() {
        return refuse(format!(
            "invalid DATABASE_URL (--database-url): no SQLite database at {}",
            source.display()
        ));
    }
    if destination.symlink_metadata().is_ok() {
        return refuse(format!(
            "{} exists already; a backup is only written to a new file",
            destination.display()
        ));
    }
    let directory = match destination.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    if !directory.is_dir() {
        return refuse(format!(
            "cannot write {}: the directory {} does not exist",
            destination.display(),
            directory.display()
        ));
    }
    let started = Instant::now();
    match sqlite::backup(source, destination).await {
        Ok(bytes) => Ok(BackedUp {
            source: source.clone(),
            destination: destination.to_owned(),
            bytes,
            took: started.elapsed(),
        }),
        Err(error @ BackupError::DestinationExists { .. }) => {
            Err(BackupFailed::Refused(error.to_string()))
        }
        Err(error) => Err(BackupFailed::Copy(error)),
    }
}

impl std::fmt::Display for BackedUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "backed up {} to {} ({} bytes in {:.1} s)",
            self.source.display(),
            self.destination.display(),
            self.bytes,
            self.took.as_secs_f64()
        )
    }
}
