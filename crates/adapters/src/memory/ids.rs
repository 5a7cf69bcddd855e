//! Ids as the in-memory repositories hand them out (C2).

use items_domain::{Id, RepositoryError};

/// The last id handed out by a repository. It only grows, so an id is never
/// reused, not even after the newest row is deleted (C2). Callers advance it
/// under the same write lock as the insert, so concurrent creates can neither
/// share an id nor lose a row.
#[derive(Debug, Default)]
pub(super) struct IdCounter(i64);

impl IdCounter {
    pub(super) fn next(&mut self) -> Result<Id, RepositoryError> {
        let next = self
            .0
            .checked_add(1)
            .ok_or_else(|| RepositoryError::unavailable("the id counter is exhausted"))?;
        self.0 = next;
        Ok(Id::new(next))
    }
}
