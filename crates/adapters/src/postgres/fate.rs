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
//! - The fate is asked on a new connection made by the store's host
//!   selection (`hosts`), and believed only from the server the
//!   transaction ran on, on the timeline it ran on: a standby promoted
//!   since may have handed the same transaction id to another transaction
//!   (ids the old primary used without replicating them are free again on
//!   the new one), so its answer would be about someone else's write. From
//!   another server, or another timeline, the fate is unknown.
//! - A commit still waiting for a synchronous standby when its fate is
//!   asked (its backend's `wait_event` is `SyncRep`) is answered
//!   [`RepositoryError::OutcomeUnknown`], and its backend is left to wait:
//!   terminating it would end the wait with the transaction committed on
//!   the primary alone, visible, and `pg_xact_status` would then call it
//!   committed, a 2xx for a write no standby has. (`statement_timeout`
//!   never cuts that wait short: PostgreSQL turns it off before the commit
//!   proper, and the service sends no cancel requests.)
//! - Under synchronous replication (the lookup's session has
//!   `synchronous_standby_names` set and `synchronous_commit` waiting for
//!   it, as the transaction's session had: the same settings), `committed`
//!   is not enough for a 2xx: a wait ended by anyone else (another
//!   session's `pg_terminate_backend`, or our own termination racing the
//!   backend into its wait) also leaves the transaction committed on the
//!   primary alone, and whether a standby confirmed it cannot be learned.
//!   It is [`RepositoryError::OutcomeUnknown`]; so is a commit answered
//!   with a warning ([`unconfirmed`]: the wait cancelled), or whose lost
//!   answer came after one.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use items_domain::RepositoryError;
use tokio::time::Instant;

use super::hosts::{Hosts, Opened, Server};
use super::link::OpenError;

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
    /// The server it runs on, as the connection was told at connect time.
    pub(super) server: Option<Server>,
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
    Failed(tokio_postgres::Error),
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
    #[error("PostgreSQL answered the commit with a warning, so no standby may have it: {warning}")]
    Unconfirmed { warning: String },
    #[error("PostgreSQL says the transaction was rolled back")]
    RolledBack(#[source] LostAnswer),
    #[error("its fate could not be learned: {why}")]
    Unknown {
        why: String,
        #[source]
        lost: LostAnswer,
    },
}

/// The answer for a write whose commit was answered as a success with
/// `warning`: PostgreSQL ended its wait for a synchronous standby (a
/// cancel request), having committed on the primary alone. Never a 2xx.
pub(super) fn unconfirmed(warning: String) -> RepositoryError {
    RepositoryError::outcome_unknown(Fate::Unconfirmed { warning })
}

/// The answer for a write whose commit's answer was `lost` (after
/// `warning`, if the server sent one meanwhile): `Ok` when `transaction`
/// committed and no standby's confirmation was wanted or given up, else the
/// error the request gets. `hosts` reach the server on a new connection
/// (the lent one is not trusted again); `None`, or no `transaction`,
/// leaves the fate unknown.
pub(super) async fn learn(
    hosts: Option<Arc<Hosts>>,
    transaction: Option<Transaction>,
    lost: LostAnswer,
    warning: Option<String>,
    within: Duration,
) -> Result<(), RepositoryError> {
    let (Some(hosts), Some(transaction)) = (hosts, transaction) else {
        return Err(unknown("no transaction id was taken", lost));
    };
    let deadline = Instant::now() + within;
    match tokio::time::timeout_at(
        deadline,
        settled_status(&hosts, &transaction, deadline, within),
    )
    .await
    {
        Ok(Ok(Status::Committed)) if warning.is_some() => Err(unknown(
            &format!(
                "it committed, after PostgreSQL warned: {}",
                warning.unwrap_or_default()
            ),
            lost,
        )),
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
        Ok(Ok(Status::AwaitingStandby)) => Err(unknown(
            "it is committed on the primary, waiting for a synchronous standby to confirm it",
            lost,
        )),
        Ok(Ok(Status::Unconfirmed)) => Err(unknown(
            "it is committed on the primary; with synchronous replication set, whether a \
             standby confirmed it cannot be learned",
            lost,
        )),
        Ok(Ok(Status::Elsewhere(server))) => Err(unknown(
            &format!("only {server} answers now, not the server the transaction ran on"),
            lost,
        )),
        Ok(Err(error)) => Err(unknown(
            &crate::report::ErrorChain(&error).to_string(),
            lost,
        )),
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
    /// Committed locally, its backend waiting for a synchronous standby.
    AwaitingStandby,
    /// Committed, its wait for a synchronous standby over: confirmed, or
    /// ended by someone (there is no telling which).
    Unconfirmed,
    /// The lookup reached another server, or the same host on another
    /// timeline, named here: its answer would not be about this transaction.
    Elsewhere(String),
}

/// How often a transaction whose backend was told to end is asked about.
const SETTLE_POLL: Duration = Duration::from_millis(10);

/// The status of a transaction, what its backend waits for, and whether
/// a commit waits for a synchronous standby (in this session, whose
/// settings are the transaction's session's: the same URL and options).
const STATUS: &str = "select pg_xact_status($1::text::xid8), \
     (select wait_event from pg_stat_activity where pid = $2), \
     current_setting('synchronous_standby_names') <> '' \
     and current_setting('synchronous_commit') not in ('off', 'local')";

/// What the store's answer ([`STATUS`]) says of the transaction: its
/// status once it has settled, `None` while it is still in progress and
/// not waiting for a standby (its backend is then terminated).
fn status_of(status: Option<&str>, waiting: Option<&str>, synchronous: bool) -> Option<Status> {
    match status {
        Some("committed") if synchronous => Some(Status::Unconfirmed),
        Some("committed") => Some(Status::Committed),
        Some("aborted") => Some(Status::Aborted),
        None => Some(Status::Forgotten),
        Some(_in_progress) if waiting == Some("SyncRep") => Some(Status::AwaitingStandby),
        Some(_in_progress) => None,
    }
}

/// The transaction's status, once it has settled: one still in progress has
/// its backend terminated (its connection is gone from the service's side,
/// so nothing else would end it soon), and is asked about again until
/// `deadline` — unless the backend waits for a synchronous standby, which
/// only the standby can end. The connection is made by the host selection
/// within `within`, and trusted only on the transaction's server.
async fn settled_status(
    hosts: &Hosts,
    transaction: &Transaction,
    deadline: Instant,
    within: Duration,
) -> Result<Status, LookupError> {
    let Opened { link, server } = hosts.connect(within).await?;
    if transaction
        .server
        .as_ref()
        .is_some_and(|ran_on| *ran_on != server)
    {
        link.close(within).await;
        let timeline = server
            .timeline
            .map_or_else(|| "none".to_owned(), |timeline| timeline.to_string());
        return Ok(Status::Elsewhere(format!(
            "{} (timeline {timeline})",
            hosts.label(server.host)
        )));
    }
    let mut terminated = false;
    let status = loop {
        let row = link
            .query_one(STATUS, &[&transaction.id, &transaction.backend])
            .await?;
        let status: Option<String> = row.try_get(0)?;
        let waiting: Option<String> = row.try_get(1)?;
        let synchronous: bool = row.try_get(2)?;
        match status_of(status.as_deref(), waiting.as_deref(), synchronous) {
            Some(status) => break status,
            None => {
                if !terminated {
                    link.execute("select pg_terminate_backend($1)", &[&transaction.backend])
                        .await?;
                    terminated = true;
                }
                if Instant::now() + SETTLE_POLL >= deadline {
                    return Err(LookupError::StillInProgress);
                }
                tokio::time::sleep(SETTLE_POLL).await;
            }
        }
    };
    // A courtesy to the server; the answer is known either way.
    link.close(within).await;
    Ok(status)
}

/// Why a transaction's status could not be read.
#[derive(Debug, thiserror::Error)]
enum LookupError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Query(#[from] tokio_postgres::Error),
    #[error("the transaction was still in progress")]
    StillInProgress,
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
    fn under_synchronous_replication_committed_is_not_enough_c12() {
        let cases = [
            ((Some("committed"), None, false), Some(Status::Committed)),
            ((Some("committed"), None, true), Some(Status::Unconfirmed)),
            ((Some("aborted"), None, true), Some(Status::Aborted)),
            ((None, None, true), Some(Status::Forgotten)),
            (
                (Some("in progress"), Some("SyncRep"), true),
                Some(Status::AwaitingStandby),
            ),
            ((Some("in progress"), Some("ClientRead"), true), None),
            ((Some("in progress"), None, false), None),
        ];
        for ((status, waiting, synchronous), expected) in cases {
            assert_eq!(
                status_of(status, waiting, synchronous),
                expected,
                "{status:?} {waiting:?} {synchronous}"
            );
        }
        let warned = unconfirmed(
            "canceling wait for synchronous replication due to user request".to_owned(),
        );
        assert!(warned.is_outcome_unknown());
        assert_eq!(
            crate::report::ErrorChain(&warned).to_string(),
            "the repository could not tell whether the write was applied: PostgreSQL answered \
             the commit with a warning, so no standby may have it: canceling wait for \
             synchronous replication due to user request"
        );
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
            LostAnswer::Unanswered {
                waited: Duration::from_millis(2000),
            },
        );
        assert!(unknown.is_outcome_unknown());
        assert_eq!(
            crate::report::ErrorChain(&unknown).to_string(),
            "the repository could not tell whether the write was applied: its fate could not \
             be learned: the server did not say in time: the commit was not answered within \
             2000 ms"
        );
    }
}
