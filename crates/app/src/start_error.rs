//! Why the application could not start, and the exit status each reason
//! implies (C1: 2 for a setting that cannot be used, 1 for anything else).
//! Its own module so that everything that opens part of the application
//! (`startup`, `store`, `migrate`) reports through it without depending on
//! one another.

use std::net::SocketAddr;

use items_adapters::postgres::ConnectError;
use items_adapters::sqlite;

/// Why the application could not start, with the exit status it implies.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A setting that parsed but cannot be used (exit 2, C1).
    #[error("{0}")]
    Setting(String),
    /// The database stayed unreachable, or could not be migrated (exit 1).
    #[error(transparent)]
    Database(#[from] ConnectError),
    /// The SQLite file could not be opened or migrated (exit 1); a path
    /// whose directory is missing is a [`StartError::Setting`] instead.
    #[error(transparent)]
    Sqlite(#[from] sqlite::OpenError),
    /// The address could not be bound, e.g. the port is in use (exit 1, C1).
    #[error("cannot listen on {address}")]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// Why the system refused it.
        source: std::io::Error,
    },
    /// The metrics recorder could not be installed (exit 1).
    #[error("cannot set up metrics")]
    Metrics(#[from] metrics_exporter_prometheus::BuildError),
}

impl StartError {
    /// The process's exit status for this error: 2 for a setting, else 1 (C1).
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Setting(_) => 2,
            Self::Bind { .. } | Self::Database(_) | Self::Sqlite(_) | Self::Metrics(_) => 1,
        }
    }
}
