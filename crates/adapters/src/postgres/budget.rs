//! The budget of one store operation (`DATABASE_STATEMENT_TIMEOUT_MS`, C1,
//! C12): how the PostgreSQL server and this client each bound it.
//!
//! - The server's own `statement_timeout`, set per connection, cancels a
//!   statement that runs or waits for a lock longer than the budget, so the
//!   server stops working for a request that has been answered 503 and lets
//!   go of its locks. A `lock_timeout` is not set: a lock wait is part of
//!   the statement, so a `lock_timeout` equal to the budget would fire at
//!   the same moment, and a shorter one would refuse writes the budget
//!   allows.
//! - A server that does not answer at all (stalled, or a network that
//!   silently drops packets) cancels nothing, so the client also keeps a
//!   deadline: the whole operation, from asking the pool for a connection
//!   to its last reply, must end by `start + budget` (`pool.rs`). The wait
//!   for a connection counts against the budget and is cut at
//!   `min(budget, 3 s)`, so a request gets its 503 after at most about the
//!   budget, never the budget plus the pool's wait.
//!
//! A connection whose work passed the deadline is closed, never lent again:
//! its socket may be stuck, and a transaction open on it is rolled back by
//! the server when the connection goes. Writes run in an explicit
//! transaction whose `commit` is sent only before the deadline, so a write
//! answered 503 is not committed later; a `commit` already sent is awaited
//! past the deadline and, without its answer, the transaction's fate is
//! asked of the server (`fate.rs`): a 503 always means nothing was written
//! (C12).

use std::time::Duration;

/// The server setting, as a connection's startup `options`, that makes the
/// server cancel a statement running longer than `budget` (in
/// milliseconds, at least 1: `0` would turn the server's bound off).
pub(super) fn statement_timeout(budget: Duration) -> String {
    let millis = budget.as_millis().clamp(1, i32::MAX as u128);
    format!("-c statement_timeout={millis}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_bound_is_the_budget_in_whole_milliseconds_never_0_c12() {
        assert_eq!(
            statement_timeout(Duration::from_millis(500)),
            "-c statement_timeout=500"
        );
        assert_eq!(
            statement_timeout(Duration::from_micros(10)),
            "-c statement_timeout=1"
        );
    }
}
