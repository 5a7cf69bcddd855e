//! Throwaway databases for tests and tooling: each test gets a database of
//! its own, so tests run in parallel without seeing each other's rows.

use std::io::Write;
use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, Executor};

/// The variable that names the PostgreSQL server tests may use.
pub const TEST_DATABASE_URL: &str = "TEST_DATABASE_URL";

/// The server tests should use, from `TEST_DATABASE_URL`. Without it the
/// caller skips its PostgreSQL tests — except in CI (`CI` set), where a
/// missing database must fail the run rather than pass it silently.
///
/// # Panics
/// When `CI` is set and `TEST_DATABASE_URL` is not.
pub fn test_database_url() -> Option<String> {
    match std::env::var(TEST_DATABASE_URL) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "{TEST_DATABASE_URL} must be set in CI: the PostgreSQL tests may not be skipped"
            );
            // Straight to stderr, once: the test harness captures `eprintln!`
            // of passing tests, and a skip nobody sees is a silent pass.
            static NOTICE: std::sync::Once = std::sync::Once::new();
            NOTICE.call_once(|| {
                let _ = writeln!(
                    std::io::stderr(),
                    "skipped: the PostgreSQL tests need {TEST_DATABASE_URL} (e.g. postgres://postgres@127.0.0.1:5432/postgres)"
                );
            });
            None
        }
    }
}

/// A database created for one test and dropped by [`ScratchDatabase::drop`].
#[derive(Debug)]
pub struct ScratchDatabase {
    admin: PgConnectOptions,
    admin_url: String,
    name: String,
}

impl ScratchDatabase {
    /// Creates an empty database with a random name on the server `admin_url`
    /// points at (its own database is only used to run `create database`).
    ///
    /// # Errors
    /// When the server cannot be reached or refuses to create a database.
    pub async fn create(admin_url: &str) -> Result<Self, sqlx::Error> {
        let admin = PgConnectOptions::from_str(admin_url)?.disable_statement_logging();
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|error| sqlx::Error::Protocol(error.to_string()))?;
        let name: String = std::iter::once("items_test_".to_owned())
            .chain(random.iter().map(|byte| format!("{byte:02x}")))
            .collect();
        let mut connection = sqlx::PgConnection::connect_with(&admin).await?;
        connection
            .execute(format!("create database \"{name}\"").as_str())
            .await?;
        connection.close().await?;
        Ok(Self {
            admin,
            admin_url: admin_url.to_owned(),
            name,
        })
    }

    /// Options for connecting to the scratch database.
    pub fn options(&self) -> PgConnectOptions {
        self.admin.clone().database(&self.name)
    }

    /// A `postgres://` URL of the scratch database (for a child process).
    pub fn url(&self) -> String {
        let (base, query) = self
            .admin_url
            .split_once('?')
            .unwrap_or((&self.admin_url, ""));
        let authority_end = base.find("://").map_or(0, |at| at + 3);
        let base = match base[authority_end..].find('/') {
            Some(slash) => &base[..authority_end + slash],
            None => base,
        };
        let query = if query.is_empty() {
            String::new()
        } else {
            format!("?{query}")
        };
        format!("{base}/{}{query}", self.name)
    }

    /// Drops the database, closing whatever connections are still open.
    /// Best effort: a leftover `items_test_*` database is harmless.
    pub async fn drop(self) {
        if let Ok(mut connection) = sqlx::PgConnection::connect_with(&self.admin).await {
            let _ = connection
                .execute(format!("drop database if exists \"{}\" with (force)", self.name).as_str())
                .await;
            let _ = connection.close().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_names_the_scratch_database_and_keeps_the_rest() {
        let scratch = |admin_url: &str| ScratchDatabase {
            admin: PgConnectOptions::new(),
            admin_url: admin_url.to_owned(),
            name: "items_test_1".to_owned(),
        };
        assert_eq!(
            scratch("postgres://postgres@127.0.0.1:5432/postgres").url(),
            "postgres://postgres@127.0.0.1:5432/items_test_1"
        );
        assert_eq!(
            scratch("postgres://u:p@h/db?sslmode=disable").url(),
            "postgres://u:p@h/items_test_1?sslmode=disable"
        );
        assert_eq!(
            scratch("postgresql://h:5432").url(),
            "postgresql://h:5432/items_test_1"
        );
    }
}
