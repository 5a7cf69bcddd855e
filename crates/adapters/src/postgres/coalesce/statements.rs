//! Running a kind's statements on a lease: a request alone, or a batch's
//! statement, each in a transaction committed only before the lease's
//! deadline when the kind writes (C12).

use items_domain::RepositoryError;

use super::operation::{Operation, Reply};
use crate::postgres::pool::Lease;

/// Opens the transaction a writing operation runs in ([`Operation::WRITES`]).
pub(super) async fn begin<O: Operation>(lease: &mut Lease) -> Result<(), RepositoryError> {
    if O::WRITES {
        lease.begin_write().await?;
    }
    Ok(())
}

/// Commits a writing operation's transaction, only before the deadline.
pub(super) async fn commit<O: Operation>(lease: &mut Lease) -> Result<(), RepositoryError> {
    if O::WRITES {
        lease.commit().await?;
    }
    Ok(())
}

/// One request alone, in a transaction when `O` writes.
pub(super) async fn one<O: Operation>(lease: &mut Lease, work: &O::Work) -> Reply<O> {
    begin::<O>(lease).await?;
    let output = O::one(lease, work).await?;
    commit::<O>(lease).await?;
    Ok(output)
}

/// A batch's statement, in the transaction its drainer opened when `O`
/// writes. A batch of one runs the statement a request alone runs: it plans
/// as a primary key lookup or a single insert, cheaper than the array form.
pub(super) async fn statement<O: Operation>(
    lease: &mut Lease,
    work: &[&O::Work],
) -> Result<Vec<O::Output>, RepositoryError> {
    let outputs = match work {
        [alone] => vec![O::one(lease, alone).await?],
        _ => O::many(lease, work).await?,
    };
    commit::<O>(lease).await?;
    Ok(outputs)
}
