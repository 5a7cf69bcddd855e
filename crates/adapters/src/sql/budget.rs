//! The budget of one store operation (`DATABASE_STATEMENT_TIMEOUT_MS`, C1,
//! C12), shared by the durable stores: its default, and the cause a request
//! past it is answered 503 for. How each store keeps it: `postgres/budget.rs`,
//! and `sqlite/writer.rs` (writes) with `sqlite/readers.rs` (the wait for a
//! reader).

use std::time::Duration;

use items_domain::RepositoryError;

/// The budget of every store operation unless `DATABASE_STATEMENT_TIMEOUT_MS`
/// says otherwise (C1).
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);

/// A store operation took longer than its budget and was abandoned: the
/// cause of the 503, logged with it (its message names the setting, never
/// the SQL, C6).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error(
    "the store operation took longer than its budget of {} ms (DATABASE_STATEMENT_TIMEOUT_MS) and was abandoned",
    budget.as_millis()
)]
pub struct OverBudget {
    pub budget: Duration,
}

/// The error a store answers for an operation past its `budget`.
pub(crate) fn over_budget(budget: Duration) -> RepositoryError {
    RepositoryError::unavailable(OverBudget { budget })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_names_the_budget_and_the_setting_c6_c12() {
        let message = OverBudget {
            budget: Duration::from_millis(1500),
        }
        .to_string();
        assert!(message.contains("1500 ms"), "{message}");
        assert!(
            message.contains("DATABASE_STATEMENT_TIMEOUT_MS"),
            "{message}"
        );
    }
}
