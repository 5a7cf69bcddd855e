//! The store's readiness: a ping on a pooled connection, and why it failed
//! while a host is fenced.

use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use items_domain::{DependencyDown, HealthCheck, RepositoryError};

use super::pool;
use super::store::PostgresStore;

/// How long the readiness ping may take: under the readiness probe's own
/// bound of 1 s (`http/server/admin.rs`), so a ping that cannot answer says why
/// (a fenced host, what each host did) rather than just "no answer".
const PING_WITHIN: Duration = Duration::from_millis(900);

/// The database answers when a pooled connection's server says it still
/// has the URL's attribute (`target_session_attrs`, `any` by default) and
/// is not fenced, in one round trip, within `PING_WITHIN` (0.9 s). A connection
/// whose server lost it is closed, so the next request's connection goes
/// to another host. While a host is fenced, each ping also asks it again
/// what it is (so one rejoined as a standby is no longer reported), and a
/// failure names the fenced hosts first: why no primary is left.
#[async_trait]
impl HealthCheck for PostgresStore {
    fn name(&self) -> &'static str {
        "database"
    }

    async fn ping(&self) -> Result<(), DependencyDown> {
        let hosts = &self.pool.manager().hosts;
        let answered = async {
            let mut lease = pool::lease(&self.pool).await?;
            lease.confirm().await?;
            Ok(lease.host())
        };
        let (answered, ()) = tokio::join!(
            tokio::time::timeout(PING_WITHIN, answered),
            hosts.recheck_fenced(PING_WITHIN)
        );
        // The repository error says "unavailable" and holds why: the why is
        // what the readiness report shows.
        let cause: Box<dyn std::error::Error + Send + Sync> = match answered {
            Ok(Ok(host)) => {
                if let Some(host) = host {
                    self.pinged.store(host, Ordering::SeqCst);
                }
                return Ok(());
            }
            Ok(Err(
                RepositoryError::Unavailable(cause) | RepositoryError::OutcomeUnknown(cause),
            )) => cause,
            Err(_) => format!("no answer within {} ms", PING_WITHIN.as_millis()).into(),
        };
        Err(DependencyDown::new(match hosts.fenced_report() {
            Some(fenced) => Box::new(NoPrimary { fenced, cause }),
            None => cause,
        }))
    }
}

/// Why the readiness ping failed while a host is fenced: the fenced hosts,
/// then what the others did.
#[derive(Debug, thiserror::Error)]
#[error("no primary this instance may write to; {fenced}")]
struct NoPrimary {
    fenced: String,
    #[source]
    cause: Box<dyn std::error::Error + Send + Sync>,
}
