//! The crash test over SQLite: the service killed on its file, and after
//! each kill, before the restart, `PRAGMA integrity_check` on the file as
//! the kill left it (write-ahead log and all).

use std::path::PathBuf;

use super::ROUNDS;
use super::rounds::{Store, kill_rounds};

/// A store file in a directory of its own, removed with it.
struct Sqlite {
    directory: tempfile::TempDir,
}

impl Sqlite {
    fn path(&self) -> PathBuf {
        self.directory.path().join("items.db")
    }
}

impl Store for Sqlite {
    fn label(&self) -> &'static str {
        "SQLite"
    }

    fn database_url(&self) -> String {
        format!("sqlite://{}", self.path().display())
    }

    /// The file passes SQLite's own check: no torn page, no index out of
    /// step with its table. Opened read-only, so the check changes nothing
    /// the restart will find.
    async fn after_kill(&self) {
        let connection = rusqlite::Connection::open_with_flags(
            self.path(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .expect("the store file opens after a kill");
        let report: Vec<String> = connection
            .prepare("pragma integrity_check")
            .and_then(|mut statement| {
                statement
                    .query_map([], |row| row.get(0))?
                    .collect::<rusqlite::Result<_>>()
            })
            .expect("integrity_check runs");
        drop(connection);
        assert_eq!(
            report,
            ["ok"],
            "PRAGMA integrity_check after a SIGKILL (C12)"
        );
    }
}

#[tokio::test]
async fn sigkill_at_random_moments_loses_no_acknowledged_write_over_sqlite_and_the_file_stays_intact_c12()
 {
    let store = Sqlite {
        directory: tempfile::tempdir().expect("a temporary directory"),
    };

    let report = kill_rounds(&store, ROUNDS).await;

    assert_eq!(report.rounds, ROUNDS);
    assert!(report.tally.acknowledged >= ROUNDS, "{report}");
    assert_eq!(report.lost, 0, "{report}");
}
