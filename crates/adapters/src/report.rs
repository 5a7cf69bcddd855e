//! One line for an error and every cause under it, for logs, probes and the
//! operator.
//!
//! The workspace's own errors follow the Rust API guidelines: an error that
//! exposes its cause through [`Error::source`] does not repeat it in its
//! message, so a cause is printed once, by whoever reports the whole chain.
//! Some foreign errors do both (most of sqlx's print their source in their
//! message too): a cause whose text the line already ends with is not
//! repeated.

use std::error::Error;
use std::fmt;

/// Displays `error: cause: cause`, each cause once.
///
/// ```
/// use items_adapters::report::ErrorChain;
/// use items_domain::RepositoryError;
///
/// let error = RepositoryError::unavailable("connection refused");
/// assert_eq!(
///     ErrorChain(&error).to_string(),
///     "the repository is unavailable: connection refused"
/// );
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut line = self.0.to_string();
        let mut source = self.0.source();
        while let Some(cause) = source {
            let text = cause.to_string();
            if !line.ends_with(&text) {
                line.push_str(": ");
                line.push_str(&text);
            }
            source = cause.source();
        }
        f.write_str(&line)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use items_domain::{RepositoryError, UploadStoreError};

    use super::*;
    use crate::postgres::ConnectError;

    fn refused() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused")
    }

    /// Each error this workspace defines with a cause, and the line that
    /// reports it.
    fn errors_with_a_cause() -> Vec<(Box<dyn Error>, &'static str)> {
        let io = || sqlx::Error::Io(refused());
        vec![
            (
                Box::new(RepositoryError::unavailable(refused())),
                "the repository is unavailable: refused",
            ),
            (
                Box::new(UploadStoreError(Box::new(refused()))),
                "the upload store failed: refused",
            ),
            (
                Box::new(ConnectError::InvalidUrl(sqlx::Error::Configuration(
                    Box::new(refused()),
                ))),
                "the database URL cannot be used: error with configuration: refused",
            ),
            (
                Box::new(ConnectError::Unreachable {
                    waited: Duration::from_secs(15),
                    source: io(),
                }),
                "the database is unreachable after 15.0 s: error communicating with database: refused",
            ),
            (
                Box::new(ConnectError::Refused(io())),
                "the database refused the connection: error communicating with database: refused",
            ),
            (
                Box::new(ConnectError::Migrate(
                    sqlx::migrate::MigrateError::VersionMissing(2),
                )),
                "the database could not be migrated: migration 2 was previously applied but is missing in the resolved migrations",
            ),
        ]
    }

    #[test]
    fn an_error_with_a_source_does_not_repeat_it_in_its_message() {
        for (error, _) in errors_with_a_cause() {
            let Some(source) = error.source() else {
                panic!("{error:?} has no source");
            };
            assert!(
                !error.to_string().contains(&source.to_string()),
                "{error:?} prints its source and also exposes it"
            );
        }
    }

    #[test]
    fn the_chain_names_every_cause_once() {
        for (error, line) in errors_with_a_cause() {
            assert_eq!(ErrorChain(error.as_ref()).to_string(), line);
        }
    }

    #[test]
    fn a_foreign_cause_already_in_the_message_is_not_repeated() {
        // sqlx's Io variant prints its io::Error and returns it as its source.
        let error = RepositoryError::unavailable(sqlx::Error::Io(refused()));

        assert_eq!(
            ErrorChain(&error).to_string(),
            "the repository is unavailable: error communicating with database: refused"
        );
    }
}
