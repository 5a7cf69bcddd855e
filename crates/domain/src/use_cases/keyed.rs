//! What a create under an idempotency key answers (C7), shared by the item
//! and product use cases: [`Created`] or a [`CreateError`].

use std::time::SystemTime;

use crate::RepositoryError;
use crate::idempotency::{IdempotencyKey, InFlight, Keyed};

/// A row a keyed create answers with.
#[derive(Debug, Clone, PartialEq)]
pub struct Created<T> {
    /// The row as first created under the key.
    pub value: T,
    /// True when an earlier create under the key made it and this call wrote
    /// nothing: the first response, answered again.
    pub replayed: bool,
}

/// Why a create under an idempotency key was refused. In every case this
/// call wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// The key was used within 24 hours by a create with other values (C7: 422).
    #[error("the idempotency key was used with other values")]
    KeyReused,
    /// A create with this key is still running in this process (C7: 409).
    #[error("a create with this idempotency key is in flight")]
    KeyInFlight,
    #[error(transparent)]
    Unavailable(#[from] RepositoryError),
}

/// Runs `create` (the repository's keyed create, as of now) unless the key
/// is already in flight here, and turns its answer into the use case's.
///
/// The registry only sees this process: across instances sharing a store,
/// the store's unique key makes the second create wait for the first and
/// then replay it (the port's MUST), so a duplicate is answered 201, not 409.
pub(crate) async fn create_once<T, F>(
    in_flight: &InFlight,
    key: &IdempotencyKey,
    create: impl FnOnce(SystemTime) -> F,
) -> Result<Created<T>, CreateError>
where
    F: Future<Output = Result<Keyed<T>, RepositoryError>>,
{
    let _claim = in_flight.claim(key).ok_or(CreateError::KeyInFlight)?;
    match create(SystemTime::now()).await? {
        Keyed::Created(value) => Ok(Created {
            value,
            replayed: false,
        }),
        Keyed::Replayed(value) => Ok(Created {
            value,
            replayed: true,
        }),
        Keyed::Mismatch => Err(CreateError::KeyReused),
    }
}
