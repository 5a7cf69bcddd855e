//! Why a database could not be migrated, each cause told on one line.

use std::error::Error;

/// A driver's error, whichever store's: a [`OneLine`] once in
/// [`MigrateError`].
pub(super) type Cause = Box<dyn Error + Send + Sync>;

/// A driver's error and its causes told on one line. PostgreSQL's own
/// (`DbError`) put `DETAIL` and `HINT` on lines of their own, and a failed
/// migration ends the service's start with one line to the operator (C1):
/// a unique index refused on duplicate rows says which key on that line.
#[derive(Debug)]
struct OneLine(Cause);

impl std::fmt::Display for OneLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut text = self.0.to_string();
        let mut cause = self.0.source();
        while let Some(error) = cause {
            let told = error.to_string();
            // Some drivers repeat their cause in their message.
            if !text.ends_with(&told) {
                text.push_str(": ");
                text.push_str(&told);
            }
            cause = error.source();
        }
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect();
        f.write_str(&lines.join("; "))
    }
}

// Its causes are in its message already.
impl Error for OneLine {}

/// A driver's error as the source of a [`MigrateError`].
pub(super) fn one_line(source: impl Into<Cause>) -> Cause {
    Box::new(OneLine(source.into()))
}

/// Why a database could not be brought up to date. Each message is one
/// line and leaves its cause to [`Error::source`], which is one line too
/// (the driver's error with its own causes, PostgreSQL's `DETAIL` and
/// `HINT` included); the refusals' messages are sqlx's.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The migration's file changed after it was applied to this database.
    #[error("migration {0} was previously applied but has been modified")]
    VersionMismatch(i64),
    /// A migration was left half-done (`success = false`).
    #[error("migration {0} is partially applied; fix and remove row from `_sqlx_migrations` table")]
    Dirty(i64),
    /// The migration's SQL failed; nothing of it was kept (unless it runs
    /// outside a transaction).
    #[error("while executing migration {version}")]
    Execute {
        version: i64,
        #[source]
        source: Cause,
    },
    /// `_sqlx_migrations` could not be read or written (a lock held past
    /// SQLite's busy timeout, a lost connection, a read-only file…).
    #[error("the migrations table `_sqlx_migrations` could not be read or written")]
    Table(#[source] Cause),
    /// PostgreSQL's advisory lock, which keeps two runners from migrating
    /// at once, could not be taken or given back.
    #[error("the migration lock (`pg_advisory_lock`) could not be taken or released")]
    Lock(#[source] Cause),
}

impl MigrateError {
    /// [`MigrateError::Table`] of a driver's error.
    pub(crate) fn table(source: impl Into<Cause>) -> Self {
        Self::Table(one_line(source))
    }

    /// [`MigrateError::Lock`] of a driver's error.
    #[cfg(feature = "postgres")]
    pub(crate) fn lock(source: impl Into<Cause>) -> Self {
        Self::Lock(one_line(source))
    }

    /// [`MigrateError::Execute`] of migration `version`.
    pub(crate) fn execute(version: i64, source: impl Into<Cause>) -> Self {
        Self::Execute {
            version,
            source: one_line(source),
        }
    }
}
