//! How the room opens the file: [`read_write`], the connection that writes
//! (the writer's, which also migrates, and a copy's sink), and
//! [`read_only`], the connections that only read (point reads, the reader
//! pool, a copy's source). A backup opens its own: `query_only` refuses
//! `VACUUM INTO`.
//!
//! Invariants: every connection waits up to its busy timeout for a lock
//! another process holds instead of failing at once with `SQLITE_BUSY`;
//! the writing one keeps the file in WAL mode with `synchronous=FULL`
//! (C12) and enforces foreign keys; a reading
//! one is opened read-only and `query_only`, so it can neither write nor
//! create the file. Each is opened `NO_MUTEX`: one thread uses it at a
//! time, and the module that holds it says which.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// A connection that writes to `path` (created when missing; its
/// directory must exist), in WAL mode with `synchronous=FULL`. A file that
/// is no database fails here, at its first statement.
pub(super) fn read_write(path: &Path, busy_timeout: Duration) -> rusqlite::Result<Connection> {
    let connection = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    connection.busy_timeout(busy_timeout)?;
    // The mode SQLite answers is not needed: a file another process holds
    // in WAL stays so, and a new one turns WAL here.
    connection
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))?;
    connection.pragma_update(None, "foreign_keys", "ON")?;
    connection.pragma_update(None, "synchronous", "FULL")?;
    Ok(connection)
}

/// A connection that only reads the existing file at `path`.
pub(super) fn read_only(path: &Path, busy_timeout: Duration) -> rusqlite::Result<Connection> {
    let connection = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    connection.busy_timeout(busy_timeout)?;
    connection.pragma_update(None, "query_only", true)?;
    Ok(connection)
}
