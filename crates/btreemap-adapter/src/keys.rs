//! Idempotency keys (C7) as a stranger's adapter keeps them: each key with
//! its creation time and the row as first created, plus the keys ordered by
//! creation time, so expired ones are removed oldest first, a few per
//! create, without looking at the others. Kept under the same lock as the
//! rows, so a keyed create is one atomic step.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use items_domain::idempotency::{PURGE_BATCH, live_since, unix_millis};
use items_domain::{IdempotencyKey, Keyed, RepositoryError};

/// Its own on purpose, though much like the service's memory adapter's
/// (`items-adapters`, which an outside adapter cannot depend on): the rule
/// they share lives in the domain ([`Keyed::of_live_key`]).
#[derive(Debug)]
pub(crate) struct Keys<V> {
    by_key: BTreeMap<String, (i64, V)>,
    by_age: BTreeSet<(i64, String)>,
}

impl<V> Default for Keys<V> {
    fn default() -> Self {
        Self {
            by_key: BTreeMap::new(),
            by_age: BTreeSet::new(),
        }
    }
}

impl<V: Clone> Keys<V> {
    /// Replays or refuses a live `key`; else runs `create` and keeps the key
    /// with the row it made. `same` says whether a kept row has the new values.
    pub(crate) fn create(
        &mut self,
        key: &IdempotencyKey,
        at: SystemTime,
        same: impl FnOnce(&V) -> bool,
        create: impl FnOnce() -> Result<V, RepositoryError>,
    ) -> Result<Keyed<V>, RepositoryError> {
        let live_since = live_since(at);
        if let Some((created, row)) = self.by_key.get(key.as_str())
            && *created >= live_since
        {
            return Ok(Keyed::of_live_key(row.clone(), same));
        }
        for _ in 0..PURGE_BATCH {
            match self.by_age.first() {
                Some((created, _)) if *created < live_since => {}
                _ => break,
            }
            if let Some((_, old)) = self.by_age.pop_first() {
                self.by_key.remove(&old);
            }
        }
        let row = create()?;
        let now = unix_millis(at);
        if let Some((old, _)) = self.by_key.insert(key.to_string(), (now, row.clone())) {
            self.by_age.remove(&(old, key.to_string()));
        }
        self.by_age.insert((now, key.to_string()));
        Ok(Keyed::Created(row))
    }
}
