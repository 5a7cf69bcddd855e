//! The first connection, at start: retried while the database is not
//! there yet, and why the database could not be used ([`ConnectError`]).

use std::time::Duration;

use super::hosts::{Hosts, Opened};
use super::link::OpenError;
use super::pool::ACQUIRE_TIMEOUT;
use super::url::UrlError;
use crate::sql::migrations::MigrateError;

/// Why the database could not be used at start.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("the database URL cannot be used")]
    InvalidUrl(#[source] UrlError),
    #[error("the database is unreachable after {:.1} s", waited.as_secs_f64())]
    Unreachable { waited: Duration, source: OpenError },
    /// The server answered and said no: retrying cannot help.
    #[error("the database refused the connection")]
    Refused(#[source] OpenError),
    #[error("the database could not be migrated")]
    Migrate(#[from] MigrateError),
}

/// The first connection to one of `hosts`, retried with exponential
/// backoff (0.1 s doubling, at most 2 s apart) for up to `patience`: a
/// database that starts a moment after the service is normal in a
/// deployment.
///
/// # Errors
/// [`ConnectError::Refused`] when the server said no for good (no such
/// database, a wrong password); [`ConnectError::Unreachable`] when no
/// connection succeeded in time.
pub(super) async fn first_connection(
    hosts: &Hosts,
    patience: Duration,
) -> Result<Opened, ConnectError> {
    let started = tokio::time::Instant::now();
    let mut pause = Duration::from_millis(100);
    loop {
        // Bounded by the selection itself, whose failure names each host.
        match hosts.connect(ACQUIRE_TIMEOUT).await {
            Ok(opened) => return Ok(opened),
            Err(source) if source.is_permanent() => return Err(ConnectError::Refused(source)),
            Err(source) if started.elapsed() >= patience => {
                return Err(ConnectError::Unreachable {
                    waited: started.elapsed(),
                    source,
                });
            }
            Err(source) => {
                tracing::warn!(error = %crate::report::ErrorChain(&source), "database not reachable yet; retrying");
                // The last pause ends at the patience, for a last try
                // then: the whole patience is waited, not the sum of
                // whole pauses that fit in it.
                let left = patience.saturating_sub(started.elapsed());
                tokio::time::sleep(pause.min(left)).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use items_domain::RepositoryError;

    use super::*;
    use crate::postgres::PostgresUrl;

    #[test]
    fn the_time_waited_is_reported_in_tenths_of_a_second() {
        let error = ConnectError::Unreachable {
            waited: Duration::from_nanos(16_512_223_983),
            source: OpenError::TimedOut(Duration::from_secs(3)),
        };

        assert_eq!(
            error.to_string(),
            "the database is unreachable after 16.5 s"
        );
    }

    #[test]
    fn a_refusal_without_a_database_code_is_retried() {
        assert!(!OpenError::TimedOut(Duration::from_secs(1)).is_permanent());
        assert!(
            !OpenError::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused))
                .is_permanent()
        );
    }

    #[test]
    fn each_connect_error_names_every_cause_once() {
        let refused = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let io = || OpenError::Io(refused());
        crate::report::assert_chains(vec![
            (
                Box::new(ConnectError::InvalidUrl(
                    PostgresUrl::parse("postgres:///db").expect_err("no host"),
                )),
                "the database URL cannot be used: the URL names no host",
            ),
            (
                Box::new(ConnectError::Unreachable {
                    waited: Duration::from_secs(15),
                    source: io(),
                }),
                "the database is unreachable after 15.0 s: cannot reach the server: refused",
            ),
            (
                Box::new(ConnectError::Refused(io())),
                "the database refused the connection: cannot reach the server: refused",
            ),
            (
                Box::new(RepositoryError::unavailable(io())),
                "the repository is unavailable: cannot reach the server: refused",
            ),
        ]);
    }
}
