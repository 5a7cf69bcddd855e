//! One line for an error and every cause under it, for logs, probes and the
//! operator.
//!
//! The workspace's own errors follow the Rust API guidelines: an error that
//! exposes its cause through [`Error::source`] does not repeat it in its
//! message, so a cause is printed once, by whoever reports the whole chain.
//! Some foreign errors do both (print their source in their message too):
//! a cause whose text the line already ends with is not repeated.

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

/// Checks that each error keeps its cause out of its own message and that
/// its chain is the expected line; each adapter runs it on the errors it
/// defines.
#[cfg(test)]
pub(crate) fn assert_chains(errors: Vec<(Box<dyn Error>, &'static str)>) {
    for (error, line) in errors {
        let Some(source) = error.source() else {
            panic!("{error:?} has no source");
        };
        assert!(
            !error.to_string().contains(&source.to_string()),
            "{error:?} prints its source and also exposes it"
        );
        assert_eq!(ErrorChain(error.as_ref()).to_string(), line);
    }
}

#[cfg(test)]
mod tests {
    use items_domain::{RepositoryError, UploadStoreError};

    use super::*;

    fn refused() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused")
    }

    #[test]
    fn the_domains_errors_name_every_cause_once() {
        assert_chains(vec![
            (
                Box::new(RepositoryError::unavailable(refused())),
                "the repository is unavailable: refused",
            ),
            (
                Box::new(UploadStoreError(Box::new(refused()))),
                "the upload store failed: refused",
            ),
        ]);
    }

    #[test]
    fn a_foreign_cause_already_in_the_message_is_not_repeated() {
        /// A foreign error that prints its source in its message too.
        #[derive(Debug)]
        struct Loud(std::io::Error);
        impl fmt::Display for Loud {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "error communicating with database: {}", self.0)
            }
        }
        impl Error for Loud {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(&self.0)
            }
        }
        let error = RepositoryError::unavailable(Loud(refused()));

        assert_eq!(
            ErrorChain(&error).to_string(),
            "the repository is unavailable: error communicating with database: refused"
        );
    }
}
