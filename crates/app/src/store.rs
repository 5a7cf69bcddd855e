//! The store `DATABASE_URL` names (C1, C12), opened: in memory, PostgreSQL
//! or a SQLite file, each handing out the three repositories, what the
//! readiness probe pings, its gauges and how it finishes. Adding a store is
//! one more variant here. The durable stores get `DATABASE_POOL_SIZE` and
//! the budget of one operation, `DATABASE_STATEMENT_TIMEOUT_MS`; the
//! in-memory store never waits on anything and ignores it.

use std::sync::Arc;
use std::time::Duration;

use items_adapters::http::admin::Detail;
use items_adapters::memory;
use items_adapters::postgres::{ConnectError, PostgresSettings, PostgresStore, PostgresUrl};
use items_adapters::sqlite::{SqliteSettings, SqliteStore};
use items_domain::{ConsistentReads, HealthCheck, Repositories};

use crate::config::{DatabaseUrl, StoreConfig};
use crate::start_error::StartError;

/// How long to wait for the database at start before giving up: long enough
/// for a database that starts alongside the service, short enough that a
/// wrong URL fails the deployment quickly.
pub(crate) const DATABASE_PATIENCE: Duration = Duration::from_secs(15);

/// The store the configuration names, open: each one hands out the three
/// repositories the use cases run on, so another store is one more variant.
#[derive(Debug, Clone)]
pub(crate) enum Store {
    /// In this process (no `DATABASE_URL`).
    Memory,
    /// PostgreSQL (`DATABASE_URL=postgres://…`).
    Postgres(PostgresStore),
    /// A SQLite file (`DATABASE_URL=sqlite://PATH`, C12).
    Sqlite(SqliteStore),
}

impl Store {
    /// Opens the store `config` names, its schema migrated, waiting up to
    /// `patience` for a PostgreSQL server ([`DATABASE_PATIENCE`] at start).
    pub(crate) async fn open(config: &StoreConfig, patience: Duration) -> Result<Self, StartError> {
        let standbys = config.database_read_url.as_deref();
        if standbys.is_some() && !matches!(config.database(), Some(DatabaseUrl::Postgres(_))) {
            return Err(StartError::Setting(
                "DATABASE_READ_URL (--database-read-url) names PostgreSQL standbys: it needs a \
                 PostgreSQL DATABASE_URL (C13)"
                    .to_owned(),
            ));
        }
        match config.database() {
            None => Ok(Self::Memory),
            Some(DatabaseUrl::Postgres(url)) => {
                let store = connect(url, config.into(), patience).await?;
                Ok(Self::Postgres(match standbys {
                    Some(standbys) => store.with_standbys(standbys, config.standby_settings()),
                    None => store,
                }))
            }
            Some(DatabaseUrl::Sqlite(path)) => {
                open_sqlite(path, config.into()).await.map(Self::Sqlite)
            }
        }
    }

    /// How many migrations opening the store applied (in memory: none,
    /// there is no schema).
    pub(crate) fn migrations_applied(&self) -> usize {
        match self {
            Self::Memory => 0,
            Self::Postgres(store) => store.migrations_applied(),
            Self::Sqlite(store) => store.migrations_applied(),
        }
    }

    /// Its repositories; in memory, a fresh store with the seeded users.
    pub(crate) fn repositories(&self) -> Repositories {
        match self {
            Self::Memory => memory::repositories(),
            Self::Postgres(store) => store.repositories(),
            Self::Sqlite(store) => store.repositories(),
        }
    }

    /// Its reads at or after a `Consistency-Token` (C13), for a store that
    /// gives positions: PostgreSQL. The others check a token and ignore it.
    pub(crate) fn consistent_reads(&self) -> Option<Arc<dyn ConsistentReads>> {
        match self {
            Self::Postgres(store) => Some(Arc::new(store.clone())),
            Self::Memory | Self::Sqlite(_) => None,
        }
    }

    /// What a readiness probe pings, for a store outside the process.
    pub(crate) fn health_check(&self) -> Option<Arc<dyn HealthCheck>> {
        match self {
            Self::Memory => None,
            Self::Postgres(store) => Some(Arc::new(store.clone())),
            Self::Sqlite(store) => Some(Arc::new(store.clone())),
        }
    }

    /// What the readiness report adds to the store's `ok`: with a
    /// PostgreSQL URL listing several hosts, the host writes go to, and the
    /// hosts fenced meanwhile (C12).
    pub(crate) fn readiness_detail(&self) -> Option<(&'static str, Detail)> {
        match self {
            Self::Postgres(store) if store.writing_to().is_some() => {
                let store = store.clone();
                let detail: Detail = Arc::new(move || {
                    let writing = store.writing_to().map(|host| format!("writing to {host}"));
                    match (writing, store.fenced()) {
                        (Some(writing), Some(fenced)) => Some(format!("{writing}; {fenced}")),
                        (writing, fenced) => writing.or(fenced),
                    }
                });
                Some(("database", detail))
            }
            _ => None,
        }
    }

    /// Updates the store's gauges: the connection pool's, the SQLite
    /// writer's queue.
    pub(crate) fn record_metrics(&self) {
        match self {
            Self::Memory => {}
            Self::Postgres(store) => store.record_pool_metrics(),
            Self::Sqlite(store) => store.record_writer_metrics(),
        }
    }

    /// Lets the store finish: a SQLite store commits every write it
    /// accepted and closes the file, a PostgreSQL pool closes its
    /// connections; in memory there is nothing to finish.
    pub(crate) async fn close(&self) {
        match self {
            Self::Memory => {}
            Self::Postgres(store) => store.close().await,
            Self::Sqlite(store) => store.close().await,
        }
    }
}

/// Opens the SQLite file at `path` (from `url`). A directory that does not exist, or a
/// path that is a directory, is a setting unusable as given (exit 2); a
/// file that cannot be opened, is no database or cannot be migrated is a
/// failure of the store (exit 1), as a PostgreSQL server refusing is.
async fn open_sqlite(
    path: &std::path::Path,
    settings: SqliteSettings,
) -> Result<SqliteStore, StartError> {
    let unusable = |why: String| {
        StartError::Setting(format!(
            "invalid DATABASE_URL (--database-url) naming {}: {why}",
            path.display()
        ))
    };
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => std::path::Path::new("."),
    };
    if !directory.is_dir() {
        return Err(unusable(format!(
            "the directory {} does not exist",
            directory.display()
        )));
    }
    if path.is_dir() {
        return Err(unusable("it is a directory, not a file".to_owned()));
    }
    Ok(SqliteStore::open(path, settings).await?)
}

async fn connect(
    url: &PostgresUrl,
    settings: PostgresSettings,
    patience: Duration,
) -> Result<PostgresStore, StartError> {
    PostgresStore::connect(url, settings, patience)
        .await
        .map_err(|error| match error {
            ConnectError::InvalidUrl(cause) => {
                StartError::Setting(format!("invalid DATABASE_URL (--database-url): {cause}"))
            }
            error @ (ConnectError::Unreachable { .. }
            | ConnectError::Refused(_)
            | ConnectError::Migrate(_)) => StartError::Database(error),
        })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::config::Config;

    fn store_config(args: &[&str]) -> StoreConfig {
        Config::try_parse_from(std::iter::once("items-service").chain(args.iter().copied()))
            .expect("the settings parse")
            .store
    }

    #[tokio::test]
    async fn standbys_without_a_postgres_primary_stop_the_start_with_exit_2_c1_c13() {
        for database in [None, Some("sqlite://never-opened.db")] {
            let mut args = vec!["--database-read-url", "postgres://u@standby/db"];
            if let Some(database) = database {
                args.extend(["--database-url", database]);
            }
            let refused = Store::open(&store_config(&args), Duration::ZERO)
                .await
                .err()
                .unwrap_or_else(|| panic!("{database:?}: refused"));
            assert_eq!(refused.exit_code(), 2, "{database:?}");
            assert!(
                refused.to_string().contains("DATABASE_READ_URL"),
                "{database:?}: {refused}"
            );
        }
        assert!(
            !std::path::Path::new("never-opened.db").exists(),
            "refused before any store is opened"
        );
    }
}
