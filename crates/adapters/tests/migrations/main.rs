//! The schema's migrations as an operator meets them: the rule that every
//! migration keeps the previous release working (`migrations/README.md`),
//! released migration files never edited, and the views for reading names
//! by hand in psql. `unwrap` is fine here: a panic is a failed test.

#![allow(clippy::unwrap_used)]

#[path = "../support/scratch_store.rs"]
mod scratch_store;

mod expand_contract;
mod readable_names;
mod released;
mod sql_statements;

use std::path::PathBuf;

/// Every folder of migrations of this crate: `migrations/` (PostgreSQL)
/// and any other `migrations*` folder beside it (another store's).
fn migration_folders() -> Vec<PathBuf> {
    let crate_root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut folders: Vec<PathBuf> = std::fs::read_dir(&crate_root)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.is_dir()
                && path
                    .file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with("migrations"))
        })
        .collect();
    folders.sort();
    assert!(
        folders.iter().any(|folder| folder.ends_with("migrations")),
        "no migrations/ folder in {}",
        crate_root.display()
    );
    folders
}

/// The migration files of `folder` (`<version>_<description>.sql`, as sqlx
/// reads them), sorted by name.
fn migration_files(folder: &std::path::Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension().is_some_and(|extension| extension == "sql")
                && path
                    .file_name()
                    .and_then(|name| name.to_str())
                    .and_then(|name| name.split_once('_'))
                    .is_some_and(|(version, _)| version.parse::<i64>().is_ok())
        })
        .collect();
    files.sort();
    files
}
