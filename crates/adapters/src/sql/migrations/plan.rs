//! What to apply: the migrations this build knows against what a database
//! recorded, with sqlx's refusals and its tolerance of newer versions.

use std::collections::BTreeMap;

use super::embedded::Migration;
use super::errors::MigrateError;

/// What a runner found in `_sqlx_migrations` before applying anything.
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    /// The first version recorded with `success = false`, if any.
    pub(crate) dirty: Option<i64>,
    /// The checksum recorded for each applied version.
    pub(crate) applied: BTreeMap<i64, Vec<u8>>,
}

/// The migrations of `known` still to apply, in order, given what is
/// `recorded`; `store` names the database in the warning about versions
/// this build does not know.
///
/// # Errors
/// [`MigrateError::Dirty`] when a row says a migration was left half-done,
/// [`MigrateError::VersionMismatch`] when a known migration was recorded
/// with another checksum: refused before anything is applied, since the
/// schema is then not what this build was written against.
pub(crate) fn plan<'a>(
    store: &'static str,
    known: &'a [Migration],
    recorded: &Recorded,
) -> Result<Vec<&'a Migration>, MigrateError> {
    if let Some(version) = recorded.dirty {
        return Err(MigrateError::Dirty(version));
    }
    for version in recorded.applied.keys() {
        if !known.iter().any(|migration| migration.version == *version) {
            tracing::warn!(
                store,
                version,
                "the database holds a migration this build does not know (a newer build \
                 applied it); going on, as its schema keeps the previous build working (C12)"
            );
        }
    }
    let mut pending = Vec::new();
    for migration in known {
        match recorded.applied.get(&migration.version) {
            Some(checksum) if *checksum == migration.checksum() => {}
            Some(_) => return Err(MigrateError::VersionMismatch(migration.version)),
            None => pending.push(migration),
        }
    }
    Ok(pending)
}
