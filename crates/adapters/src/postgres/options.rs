//! The server settings every connection starts with, as its startup
//! `options` (`-c name=value …`).

use std::time::Duration;

use super::budget;

/// Server settings every connection starts with: PostgreSQL's notices
/// (e.g. `relation "_sqlx_migrations" already exists, skipping` when a
/// second instance starts) are not the operator's business; only warnings
/// and errors are sent to the client.
pub(super) const QUIET: &str = "-c client_min_messages=warning";

/// [`QUIET`], and the server's bound on each statement: `budget`
/// (`budget.rs`). The settings of every connection that serves requests.
pub(super) fn with_budget(budget: Duration) -> String {
    format!("{QUIET} {}", budget::statement_timeout(budget))
}
