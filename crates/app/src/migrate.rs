//! `items-service migrate`: brings the schema of the store `DATABASE_URL`
//! names up to date and exits, so an operator migrates once, before a
//! rolling upgrade, instead of at the start of the first new instance
//! (`docs/operations.md`, "Upgrade and roll back").
//!
//! It opens the store exactly as the service does, then closes it: each
//! store applies its own migrations when it is opened (PostgreSQL under
//! the migrations' advisory lock, so a migrate and a starting instance never migrate
//! twice; SQLite as it opens the file). Nothing else is started: no
//! listener, no uploads directory, no Redis.

use std::time::Duration;

use crate::config::StoreConfig;
use crate::start_error::StartError;
use crate::store::Store;

/// How long `migrate` waits for an unreachable PostgreSQL server: shorter than the
/// service's 15 s at start, since it is run by hand or by a deployment step
/// against a database that is already up. A blip is waited out; a wrong
/// host or port is reported within seconds.
pub const MIGRATE_PATIENCE: Duration = Duration::from_secs(3);

/// Applies the migrations the store `config` names still lacks; returns
/// the line to print: how many it applied, or that there was nothing to
/// apply, and which store is up to date (its password hidden):
/// `applied 2 migrations: the schema is up to date: …` or
/// `the schema was already up to date: …`.
///
/// # Errors
/// [`StartError::Setting`] (exit 2) without `DATABASE_URL`, since in memory
/// there is no schema, or with a URL that cannot be used;
/// [`StartError::Database`] (exit 1) when the database stays unreachable,
/// refuses the connection or cannot be migrated.
pub async fn migrate(config: &StoreConfig) -> Result<String, StartError> {
    let Some(url) = config.database() else {
        return Err(StartError::Setting(
            "migrate needs DATABASE_URL (--database-url): in memory there is no schema to migrate"
                .to_owned(),
        ));
    };
    let store = Store::open(config, MIGRATE_PATIENCE).await?;
    store.close().await;
    Ok(outcome(
        store.migrations_applied(),
        &crate::listening::store_description(Some(url)),
    ))
}

/// The line `migrate` prints once `applied` migrations brought `store` up
/// to date.
fn outcome(applied: usize, store: &str) -> String {
    match applied {
        0 => format!("the schema was already up to date: {store}"),
        1 => format!("applied 1 migration: the schema is up to date: {store}"),
        _ => format!("applied {applied} migrations: the schema is up to date: {store}"),
    }
}

#[cfg(test)]
mod tests {
    use super::outcome;

    #[test]
    fn the_line_says_whether_anything_was_applied() {
        assert_eq!(
            outcome(0, "sqlite path=a.db"),
            "the schema was already up to date: sqlite path=a.db"
        );
        assert_eq!(
            outcome(1, "sqlite path=a.db"),
            "applied 1 migration: the schema is up to date: sqlite path=a.db"
        );
        assert_eq!(
            outcome(3, "sqlite path=a.db"),
            "applied 3 migrations: the schema is up to date: sqlite path=a.db"
        );
    }
}
