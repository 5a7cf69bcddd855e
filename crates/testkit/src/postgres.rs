//! Throwaway PostgreSQL databases: each test gets a database of its own, so
//! tests run in parallel without seeing each other's rows.

use std::net::SocketAddr;
use std::str::FromStr;

use tokio_postgres::config::Host;
use tokio_postgres::{Client, Config, NoTls};

/// The variable that names the PostgreSQL server tests may use.
pub const TEST_DATABASE_URL: &str = "TEST_DATABASE_URL";

/// The server the tests use when `TEST_DATABASE_URL` is not set: the local
/// one every machine of this project runs (trust authentication).
pub const DEFAULT_TEST_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The server tests should use: `TEST_DATABASE_URL`, or the local default.
/// There is no "skip": a test that cannot reach its database fails, loudly,
/// instead of returning early and counting as a pass.
pub fn test_database_url() -> String {
    test_database_url_from(std::env::var(TEST_DATABASE_URL).ok())
}

fn test_database_url_from(variable: Option<String>) -> String {
    variable
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| DEFAULT_TEST_DATABASE_URL.to_owned())
}

/// The socket address of the server of [`test_database_url`], for a
/// TCP proxy (`tcp_proxy::TcpProxy`) to forward to (a Unix-socket host is taken
/// as the loopback address, where the same server listens on TCP too).
///
/// # Panics
/// When the URL does not parse or its host does not resolve: a test fixture.
pub async fn test_server_address() -> SocketAddr {
    let config = Config::from_str(&test_database_url())
        .unwrap_or_else(|error| panic!("{TEST_DATABASE_URL}: {error}"));
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    tokio::net::lookup_host((host.as_str(), port))
        .await
        .ok()
        .and_then(|mut addresses| addresses.next())
        .unwrap_or_else(|| panic!("{TEST_DATABASE_URL}: {host} does not resolve"))
}

/// A client of the database at `url`, its connection driven by a task of
/// its own (ended when the client goes).
///
/// # Errors
/// When the URL does not parse or the server cannot be reached.
pub async fn connect(url: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// A database created for one test and dropped by [`ScratchDatabase::drop`].
#[derive(Debug)]
pub struct ScratchDatabase {
    admin_url: String,
    name: String,
}

impl ScratchDatabase {
    /// Creates an empty database with a random name on the server `admin_url`
    /// points at (its own database is only used to run `create database`).
    ///
    /// # Errors
    /// When the server cannot be reached or refuses to create a database.
    pub async fn create(admin_url: &str) -> Result<Self, tokio_postgres::Error> {
        crate::init_test_log();
        let mut random = [0u8; 8];
        // The OS's randomness failing is a broken machine: a fixed name
        // then, which a leftover database makes fail loudly.
        let _ = getrandom::fill(&mut random);
        let name: String = std::iter::once("items_test_".to_owned())
            .chain(random.iter().map(|byte| format!("{byte:02x}")))
            .collect();
        let admin = connect(admin_url).await?;
        admin
            .batch_execute(&format!("create database \"{name}\""))
            .await?;
        Ok(Self {
            admin_url: admin_url.to_owned(),
            name,
        })
    }

    /// The scratch database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A client of the scratch database, for a test's own queries.
    ///
    /// # Errors
    /// When the server cannot be reached.
    pub async fn client(&self) -> Result<Client, tokio_postgres::Error> {
        connect(&self.url()).await
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

    /// [`ScratchDatabase::url`] through `127.0.0.1:port` (a test's proxy in
    /// front of the server) instead of the server's own host and port.
    pub fn url_through(&self, port: u16) -> String {
        let url = self.url();
        let authority_start = url.find("://").map_or(0, |at| at + 3);
        let authority_end = url[authority_start..]
            .find(['/', '?'])
            .map_or(url.len(), |at| authority_start + at);
        let host_start = url[authority_start..authority_end]
            .rfind('@')
            .map_or(authority_start, |at| authority_start + at + 1);
        format!(
            "{}127.0.0.1:{port}{}",
            &url[..host_start],
            &url[authority_end..]
        )
    }

    /// Drops the database, closing whatever connections are still open.
    /// Best effort: a leftover `items_test_*` database is harmless.
    pub async fn drop(self) {
        if let Ok(admin) = connect(&self.admin_url).await {
            let _ = admin
                .batch_execute(&format!(
                    "drop database if exists \"{}\" with (force)",
                    self.name
                ))
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_test_database_url_the_tests_use_the_local_server_and_never_skip() {
        assert_eq!(test_database_url_from(None), DEFAULT_TEST_DATABASE_URL);
        assert_eq!(
            test_database_url_from(Some(String::new())),
            DEFAULT_TEST_DATABASE_URL
        );
        assert_eq!(
            test_database_url_from(Some("postgres://u@h/db".to_owned())),
            "postgres://u@h/db"
        );
    }

    #[test]
    fn the_url_names_the_scratch_database_and_keeps_the_rest() {
        let scratch = |admin_url: &str| ScratchDatabase {
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
        assert_eq!(
            scratch("postgres://u:p@h:5432/db?sslmode=disable").url_through(6000),
            "postgres://u:p@127.0.0.1:6000/items_test_1?sslmode=disable"
        );
    }
}
