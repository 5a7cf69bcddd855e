//! What became of a write transaction whose commit was sent and whose
//! answer did not come (C12): the store is asked, on a connection of its
//! own, and the request is answered by what it says.
//!
//! Invariants:
//! - A transaction that writes takes its id and its backend's pid when it
//!   begins, in the same round trip as `begin` ([`Transaction`]), so they
//!   are known before its commit is sent.
//! - Once a commit is sent its answer is awaited past the budget, by up to
//!   [`grace`]; a commit that is not stalled takes milliseconds.
//! - Without that answer (the wait ran out, the connection broke, or the
//!   server answered the commit with an error, which after a local commit
//!   can still happen under synchronous replication), `pg_xact_status` of
//!   the transaction's id decides: `committed` is a success, `aborted` is
//!   [`RepositoryError::Unavailable`] (nothing was written: a 503). A
//!   transaction still `in progress` (its connection stalled before the
//!   commit arrived, or the commit stalled) has its backend terminated, and
//!   is asked about again until it settles.
//! - Only when the fate cannot be learned within another [`grace`] (the
//!   server unreachable, the id too old to know) is the answer
//!   [`RepositoryError::OutcomeUnknown`] (a 504): never a 503 for a write
//!   that may have been applied.

use std::fmt;
use std::time::Duration;

use items_domain::RepositoryError;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection as _, PgConnection};
use tokio::time::Instant;

/// `begin` a write transaction and take its id and backend in one round
/// trip (a simple query of two statements; the id is assigned at once).
pub(super) const BEGIN_WRITE: &str = "begin; select pg_current_xact_id()::text, pg_backend_pid()";

/// A write transaction, as the server knows it.
#[derive(Debug, Clone)]
pub(super) struct Transaction {
    /// `pg_current_xact_id()`, as text (an `xid8`).
    pub(super) id: String,
    /// `pg_backend_pid()` of the connection it runs on.
    pub(super) backend: i32,
}

/// How long past the budget a sent commit's answer is awaited, and how long
/// learning its fate may take after that: the budget again, at most a
/// second.
pub(super) fn grace(budget: Duration) -> Duration {
    budget.min(Duration::from_secs(1))
}

/// Why a commit's answer is missing: the cause logged with the request.
#[derive(Debug)]
pub(super) enum LostAnswer {
    /// No answer within the budget and its grace.
    Unanswered { waited: Duration },
    /// The connection failed, or the server answered with an error.
    Failed(sqlx::Error),
}

impl fmt::Display for LostAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unanswered { waited } => write!(
                f,
                "the commit was not answered within {} ms",
                waited.as_millis()
            ),
            Self::Failed(_) => f.write_str("the commit failed"),
        }
    }
}

impl std::error::Error for LostAnswer {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Unanswered { .. } => None,
            Self::Failed(error) => Some(error),
        }
    }
}

/// What the store said of the transaction, as the cause of the request's
/// error.
#[derive(Debug, thiserror::Error)]
pub(super) enum Fate {
    #[error("PostgreSQL says the transaction was rolled back")]
    RolledBack(#[source] LostAnswer),
    #[error("its fate could not be learned: {why}")]
    Unknown {
        why: String,
        #[source]
        lost: LostAnswer,
    },
}

/// The answer for a write whose commit's answer was `lost`: `Ok` when
/// `transaction` committed, else the error the request gets. `options`
/// reach the server on a new connection (the lent one is not trusted
/// again); `None`, or no `transaction`, leaves the fate unknown.
pub(super) async fn learn(
    options: Option<PgConnectOptions>,
    transaction: Option<Transaction>,
    lost: LostAnswer,
    within: Duration,
) -> Result<(), RepositoryError> {
    let (Some(options), Some(transaction)) = (options, transaction) else {
        return Err(unknown("no transaction id was taken", lost));
    };
    let deadline = Instant::now() + within;
    match tokio::time::timeout_at(deadline, settled_status(&options, &transaction, deadline)).await
    {
        Ok(Ok(Status::Committed)) => {
            tracing::warn!(
                cause = %lost,
                transaction = %transaction.id,
                "a commit's answer was lost; PostgreSQL says it committed"
            );
            Ok(())
        }
        Ok(Ok(Status::Aborted)) => Err(RepositoryError::unavailable(Fate::RolledBack(lost))),
        Ok(Ok(Status::Forgotten)) => Err(unknown("PostgreSQL no longer knows the id", lost)),
        Ok(Err(error)) => Err(unknown(&error.to_string(), lost)),
        Err(_) => Err(unknown("the server did not say in time", lost)),
    }
}

fn unknown(why: &str, lost: LostAnswer) -> RepositoryError {
    RepositoryError::outcome_unknown(Fate::Unknown {
        why: why.to_owned(),
        lost,
    })
}

/// A transaction's status once it is no longer in progress.
#[derive(Debug, PartialEq, Eq)]
enum Status {
    Committed,
    Aborted,
    /// Too old for the server to know (`pg_xact_status` is null).
    Forgotten,
}

/// How often a transaction whose backend was told to end is asked about.
const SETTLE_POLL: Duration = Duration::from_millis(10);

/// The transaction's status, once it has settled: one still in progress has
/// its backend terminated (its connection is gone from the service's side,
/// so nothing else would end it soon), and is asked about again until
/// `deadline`.
async fn settled_status(
    options: &PgConnectOptions,
    transaction: &Transaction,
    deadline: Instant,
) -> Result<Status, sqlx::Error> {
    let mut connection = PgConnection::connect_with(options).await?;
    let mut terminated = false;
    let status = loop {
        let status: Option<String> = sqlx::query_scalar("select pg_xact_status($1::text::xid8)")
            .bind(&transaction.id)
            .fetch_one(&mut connection)
            .await?;
        match status.as_deref() {
            Some("committed") => break Status::Committed,
            Some("aborted") => break Status::Aborted,
            None => break Status::Forgotten,
            Some(_in_progress) => {
                if !terminated {
                    sqlx::query("select pg_terminate_backend($1)")
                        .bind(transaction.backend)
                        .execute(&mut connection)
                        .await?;
                    terminated = true;
                }
                if Instant::now() + SETTLE_POLL >= deadline {
                    return Err(sqlx::Error::Protocol(
                        "the transaction was still in progress".to_owned(),
                    ));
                }
                tokio::time::sleep(SETTLE_POLL).await;
            }
        }
    };
    // A courtesy to the server; the answer is known either way.
    let _ = connection.close().await;
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_is_the_budget_up_to_a_second() {
        assert_eq!(grace(Duration::from_millis(50)), Duration::from_millis(50));
        assert_eq!(grace(Duration::from_secs(5)), Duration::from_secs(1));
    }

    #[test]
    fn the_causes_say_what_was_lost_and_what_the_store_said() {
        let rolled_back = RepositoryError::unavailable(Fate::RolledBack(LostAnswer::Unanswered {
            waited: Duration::from_millis(1500),
        }));
        assert_eq!(
            crate::report::ErrorChain(&rolled_back).to_string(),
            "the repository is unavailable: PostgreSQL says the transaction was rolled back: \
             the commit was not answered within 1500 ms"
        );
        let unknown = unknown(
            "the server did not say in time",
            LostAnswer::Failed(sqlx::Error::PoolTimedOut),
        );
        assert!(unknown.is_outcome_unknown());
        assert_eq!(
            crate::report::ErrorChain(&unknown).to_string(),
            "the repository could not tell whether the write was applied: its fate could not \
             be learned: the server did not say in time: the commit failed: pool timed out \
             while waiting for an open connection"
        );
    }
}
