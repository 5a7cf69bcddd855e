//! The start-up line: once its listeners are bound, the process says where
//! it listens and over which store, e.g.
//!
//! ```text
//! 2026-01-01T00:00:00.000000Z  INFO items_service: listening address=127.0.0.1:41234 admin_address=127.0.0.1:41235 store=memory
//! ```
//!
//! The addresses are the ones actually bound, so a process started with
//! `PORT=0` (and `ADMIN_PORT=0`) can be found from its log: the tests and
//! scripts that start the binary read them back with
//! [`Listening::from_log_line`] (`scripts/lib/service.sh` reads the same
//! field).

use std::net::SocketAddr;

use crate::config::DatabaseUrl;

/// The message of the start-up line; its fields name the addresses.
const MESSAGE: &str = "listening";

/// Where a built application listens: the addresses actually bound (the
/// ports the system chose, when port 0 was asked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listening {
    /// The public listener: the API of the spec.
    pub address: SocketAddr,
    /// The admin listener (`/livez`, `/readyz`, `/metrics`, C11), when
    /// `ADMIN_PORT` is set.
    pub admin_address: Option<SocketAddr>,
}

impl Listening {
    /// Logs the start-up line at `info`, naming the store: `memory`,
    /// `PostgreSQL` and `database_url` with its password hidden, or
    /// `sqlite path=` and the file.
    pub fn log(&self, database_url: Option<&DatabaseUrl>) {
        // The binary's name as the target, wherever this code lives, so a
        // `RUST_LOG=items_service=info` filter keeps showing the line.
        tracing::info!(
            target: "items_service",
            address = %self.address,
            admin_address = self.admin_address.map(tracing::field::display),
            store = %store_description(database_url),
            "{MESSAGE}"
        );
    }

    /// The addresses a start-up line names, in the text log format (the
    /// default `LOG_FORMAT`); `None` for any other line.
    pub fn from_log_line(line: &str) -> Option<Self> {
        let (_, fields) = line.split_once(&format!("items_service: {MESSAGE} "))?;
        let field = |name: &str| {
            fields
                .split_whitespace()
                .find_map(|field| field.strip_prefix(name)?.strip_prefix('='))
                .and_then(|value| value.parse().ok())
        };
        Some(Self {
            address: field("address")?,
            admin_address: field("admin_address"),
        })
    }
}

/// Where the data lives, for the start-up line: `memory`, `PostgreSQL`
/// and the URL with its password hidden, or `sqlite path=` and the file's
/// absolute path (a relative one resolved against the working directory).
pub(crate) fn store_description(database_url: Option<&DatabaseUrl>) -> String {
    match database_url {
        None => "memory".to_owned(),
        Some(DatabaseUrl::Sqlite(path)) => {
            let path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
            format!("sqlite path={}", path.display())
        }
        Some(DatabaseUrl::Postgres(url)) => format!("PostgreSQL {url}"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// What the text subscriber of [`crate::telemetry`] writes for `log`.
    fn logged(log: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Buffer(Arc<Mutex<Vec<u8>>>);
        impl Write for Buffer {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer({
                let buffer = buffer.clone();
                move || buffer.clone()
            })
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn the_start_up_line_names_the_bound_addresses_and_reads_back_c1_c11() {
        let listening = Listening {
            address: "127.0.0.1:41234".parse().unwrap(),
            admin_address: Some("127.0.0.1:41235".parse().unwrap()),
        };

        let line = logged(|| {
            listening.log(Some(
                &DatabaseUrl::parse("postgres://app:secret@db/items").unwrap(),
            ))
        });

        assert!(
            line.contains(
                "INFO items_service: listening address=127.0.0.1:41234 \
                 admin_address=127.0.0.1:41235 store=PostgreSQL postgres://app:***@db/items"
            ),
            "{line}"
        );
        assert_eq!(Listening::from_log_line(&line), Some(listening));
    }

    #[test]
    fn without_an_admin_listener_the_line_names_the_public_address_only_c11() {
        let listening = Listening {
            address: "0.0.0.0:3000".parse().unwrap(),
            admin_address: None,
        };

        let line = logged(|| listening.log(None));

        assert!(
            line.contains("listening address=0.0.0.0:3000 store=memory"),
            "{line}"
        );
        assert_eq!(Listening::from_log_line(&line), Some(listening));
    }

    #[test]
    fn other_lines_name_no_addresses() {
        assert_eq!(
            Listening::from_log_line("INFO items_service: stopped"),
            None
        );
        assert_eq!(
            Listening::from_log_line("INFO actix_server::builder: starting 2 workers"),
            None
        );
    }

    #[test]
    fn the_start_up_line_names_the_store_and_hides_the_password() {
        let store_description = |url: Option<&str>| {
            store_description(url.map(|url| DatabaseUrl::parse(url).unwrap()).as_ref())
        };
        assert_eq!(store_description(None), "memory");
        assert_eq!(
            store_description(Some(
                "postgres://app:s3cr:et@db.internal:5432/items?sslmode=require"
            )),
            "PostgreSQL postgres://app:***@db.internal:5432/items?sslmode=require"
        );
        assert_eq!(
            store_description(Some("postgres://postgres@127.0.0.1:5432/items")),
            "PostgreSQL postgres://postgres@127.0.0.1:5432/items"
        );
        assert_eq!(
            store_description(Some("sqlite:///srv/items.db")),
            "sqlite path=/srv/items.db"
        );
        let relative = store_description(Some("sqlite://items.db"));
        let expected = std::env::current_dir().unwrap().join("items.db");
        assert_eq!(relative, format!("sqlite path={}", expected.display()));
    }
}
