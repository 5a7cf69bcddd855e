//! What both executors share: the embedded folders read as sqlx reads
//! them, their checksums, the plan's refusals and tolerance, the error's
//! lines.

#![allow(clippy::unwrap_used)]

use std::error::Error;
use std::path::{Path, PathBuf};

use super::embedded::Migration;
#[cfg(feature = "postgres")]
use super::embedded::POSTGRES;
#[cfg(feature = "sqlite")]
use super::embedded::SQLITE;
use super::errors::{MigrateError, one_line};
use super::plan::{Recorded, plan};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn folder(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(name)
}

/// Each embedded list with its folder, as the features compiled them.
fn embedded() -> Vec<(&'static [Migration], PathBuf)> {
    Vec::from([
        #[cfg(feature = "postgres")]
        (POSTGRES, folder("migrations")),
        #[cfg(feature = "sqlite")]
        (SQLITE, folder("migrations_sqlite")),
    ])
}

/// The `.sql` files of `folder` as sqlx 0.8 reads them: version before the
/// first `_`, the rest without `.sql` and `_` read as a space, the text.
fn read_as_sqlx_reads(folder: &Path) -> Vec<(i64, String, String)> {
    let mut files: Vec<(i64, String, String)> = std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "sql"))
        .map(|path| {
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            let (version, rest) = name.split_once('_').unwrap();
            let description = rest.trim_end_matches(".sql").replace('_', " ");
            let sql = std::fs::read_to_string(&path).unwrap();
            (version.parse().unwrap(), description, sql)
        })
        .collect();
    files.sort();
    files
}

#[test]
fn every_file_of_each_folder_is_embedded_in_order_as_sqlx_names_it() {
    for (list, folder) in embedded() {
        let embedded: Vec<(i64, String, String)> = list
            .iter()
            .map(|migration| {
                (
                    migration.version,
                    migration.description.to_owned(),
                    migration.sql.to_owned(),
                )
            })
            .collect();
        assert_eq!(
            embedded,
            read_as_sqlx_reads(&folder),
            "the list must hold every file of {}, in order",
            folder.display()
        );
        assert!(!embedded.is_empty(), "{}", folder.display());
    }
}

#[test]
fn the_checksums_are_those_the_released_files_list() {
    for (list, folder) in embedded() {
        let listed = std::fs::read_to_string(folder.join("CHECKSUMS")).unwrap();
        for migration in list {
            let line = format!("{}  {:04}_", hex(&migration.checksum()), migration.version);
            assert!(
                listed.lines().any(|listed| listed.starts_with(&line)),
                "migration {} of {} is not listed in CHECKSUMS with its SHA-384",
                migration.version,
                folder.display()
            );
        }
    }
}

#[test]
fn no_released_migration_opts_out_of_its_transaction() {
    // Each would run outside a transaction, and could be half applied:
    // a new one that needs it says so in review, and changes this test.
    for (list, folder) in embedded() {
        for migration in list {
            assert!(
                !migration.no_transaction(),
                "migration {} of {}",
                migration.version,
                folder.display()
            );
        }
    }
}

const KNOWN: [Migration; 3] = [
    Migration {
        version: 1,
        description: "one",
        sql: "select 1;",
    },
    Migration {
        version: 2,
        description: "two",
        sql: "select 2;",
    },
    Migration {
        version: 3,
        description: "three",
        sql: "-- no-transaction\nselect 3;",
    },
];

fn applied(migrations: &[Migration]) -> Recorded {
    Recorded {
        dirty: None,
        applied: migrations
            .iter()
            .map(|migration| (migration.version, migration.checksum()))
            .collect(),
    }
}

fn versions(pending: &[&Migration]) -> Vec<i64> {
    pending.iter().map(|migration| migration.version).collect()
}

#[test]
fn the_plan_of_an_empty_database_is_every_migration_in_order() {
    let pending = plan("test", &KNOWN, &Recorded::default()).unwrap();

    assert_eq!(versions(&pending), [1, 2, 3]);
}

#[test]
fn the_plan_of_an_up_to_date_database_is_empty() {
    let pending = plan("test", &KNOWN, &applied(&KNOWN)).unwrap();

    assert!(pending.is_empty(), "{pending:?}");
}

#[test]
fn the_plan_holds_only_the_missing_migrations_even_out_of_order() {
    let pending = plan("test", &KNOWN, &applied(&[KNOWN[1]])).unwrap();

    assert_eq!(versions(&pending), [1, 3]);
}

/// C12: the previous build starts on a schema a newer one migrated.
#[test]
fn an_applied_version_this_build_does_not_know_is_tolerated_c12() {
    let mut recorded = applied(&KNOWN[..2]);
    recorded.applied.insert(9999, vec![0]);

    let pending = plan("test", &KNOWN, &recorded).unwrap();

    assert_eq!(versions(&pending), [3]);
}

#[test]
fn a_known_migration_recorded_with_another_checksum_is_refused_before_anything_is_applied() {
    let mut recorded = applied(&KNOWN[1..2]);
    recorded.applied.insert(2, vec![0]);

    let refused = plan("test", &KNOWN, &recorded).unwrap_err();

    assert!(
        matches!(refused, MigrateError::VersionMismatch(2)),
        "{refused:?}"
    );
}

#[test]
fn a_row_left_half_done_is_refused() {
    let mut recorded = applied(&KNOWN);
    recorded.dirty = Some(2);

    let refused = plan("test", &KNOWN, &recorded).unwrap_err();

    assert!(matches!(refused, MigrateError::Dirty(2)), "{refused:?}");
}

#[test]
fn only_a_file_starting_with_sqlx_s_marker_opts_out_of_the_transaction() {
    assert!(KNOWN[2].no_transaction());
    assert!(!KNOWN[0].no_transaction());
    let later = Migration {
        sql: "select 1;\n-- no-transaction\n",
        ..KNOWN[0]
    };
    assert!(
        !later.no_transaction(),
        "sqlx looks at the first bytes only"
    );
}

#[test]
fn each_message_is_one_line_and_the_cause_is_told_once() {
    let cause = || std::io::Error::other("connection reset");
    crate::report::assert_chains(vec![
        (
            Box::new(MigrateError::execute(2, cause())),
            "while executing migration 2: connection reset",
        ),
        (
            Box::new(MigrateError::table(cause())),
            "the migrations table `_sqlx_migrations` could not be read or written: connection reset",
        ),
        (
            Box::new(MigrateError::Lock(one_line(cause()))),
            "the migration lock (`pg_advisory_lock`) could not be taken or released: connection reset",
        ),
    ]);
    for refusal in [MigrateError::VersionMismatch(1), MigrateError::Dirty(2)] {
        assert_eq!(refusal.to_string().lines().count(), 1, "{refusal}");
    }
    assert_eq!(
        MigrateError::VersionMismatch(1).to_string(),
        "migration 1 was previously applied but has been modified",
        "sqlx's words, which operators may search for"
    );
}

/// A driver's error with a cause of its own, the cause on several lines
/// (as PostgreSQL's `DETAIL` and `HINT`).
#[derive(Debug)]
struct Driver(std::io::Error);

impl std::fmt::Display for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("db error")
    }
}

impl Error for Driver {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.0)
    }
}

#[test]
fn a_driver_s_error_on_several_lines_is_told_on_one() {
    let cause = Driver(std::io::Error::other(
        "ERROR: could not create unique index \"u_x\"\nDETAIL: Key (x)=(1) is duplicated.\n",
    ));

    let error = MigrateError::execute(5, cause);

    assert_eq!(
        crate::report::ErrorChain(&error).to_string(),
        "while executing migration 5: db error: ERROR: could not create unique index \"u_x\"; \
         DETAIL: Key (x)=(1) is duplicated."
    );
}
