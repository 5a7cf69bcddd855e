//! The migrations this build carries: every file of each folder
//! (`crates/adapters/migrations` for PostgreSQL,
//! `crates/adapters/migrations_sqlite`), embedded by build.rs, each with
//! what sqlx reads of it.

use sha2::{Digest as _, Sha384};

/// One migration file: `<version>_<description>.sql`, as sqlx names them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Migration {
    pub(crate) version: i64,
    /// The file name's part after the version, without `.sql`, `_` read
    /// as a space: what sqlx records.
    pub(crate) description: &'static str,
    /// The file's text, byte for byte.
    pub(crate) sql: &'static str,
}

impl Migration {
    /// What sqlx records as the migration's checksum: the SHA-384 of its
    /// SQL, byte for byte (`CHECKSUMS` beside the files lists the same).
    pub(crate) fn checksum(&self) -> Vec<u8> {
        Sha384::digest(self.sql.as_bytes()).to_vec()
    }

    /// Whether the migration runs outside a transaction: sqlx's opt-out,
    /// a file whose first bytes are `-- no-transaction` (for statements a
    /// transaction refuses, such as PostgreSQL's `create index
    /// concurrently`).
    pub(crate) fn no_transaction(&self) -> bool {
        self.sql.starts_with("-- no-transaction")
    }
}

// `POSTGRES` and `SQLITE`: every file of each folder, in version order,
// written by build.rs (each behind its store's feature).
include!(concat!(env!("OUT_DIR"), "/migrations.rs"));
