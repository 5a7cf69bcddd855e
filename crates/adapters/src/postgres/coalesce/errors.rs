//! What a coalesced request is answered when its batch has no rows for it:
//! the batch's failure, shared by each request and read as its own cause,
//! or why the queue gave no answer (late: over the budget, C12).

use std::fmt;
use std::sync::Arc;

use items_domain::RepositoryError;

use crate::batch::{self, Batch};

/// Answers every request of `batch` with the batch's failure, `error`: each
/// gets its kind (nothing written, or a commit whose fate is unknown, C12).
pub(super) fn fail<W, T>(batch: Batch<W, Result<T, RepositoryError>>, error: RepositoryError) {
    let cause = Arc::new(error);
    batch.answer_each(|_| Err(cause.with_cause(Shared(Arc::clone(&cause)))));
}

/// A batch's failure, shared by each of its requests: it shows as the
/// failure's own cause, so each request's error reads (and logs, with its
/// chain) as the same failure of a request alone would, e.g. the budget
/// (`OverBudget`) rather than "unavailable: unavailable: …".
#[derive(Debug)]
struct Shared(Arc<RepositoryError>);

impl fmt::Display for Shared {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::error::Error::source(&*self.0) {
            Some(cause) => fmt::Display::fmt(cause, formatter),
            None => fmt::Display::fmt(&*self.0, formatter),
        }
    }
}

impl std::error::Error for Shared {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.0).and_then(std::error::Error::source)
    }
}

/// Why a queued request got no answer from its batch, as the store's error.
pub(super) fn unanswered(why: batch::Unanswered, budget: std::time::Duration) -> RepositoryError {
    match why {
        // Never run, nor will be: 503 for the budget (C12).
        batch::Unanswered::Late => crate::sql::budget::over_budget(budget),
        batch::Unanswered::Stopped => {
            RepositoryError::unavailable("the request was dropped before it was run")
        }
    }
}
