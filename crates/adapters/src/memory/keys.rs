//! Idempotency keys in memory (C7): each key with its creation time and the
//! row as first created, kept under the same lock as the rows, so a keyed
//! create is one atomic step; expired keys leave from the front of an
//! insertion-ordered queue, a few per create, never by a full scan.

use std::collections::{HashMap, VecDeque};
use std::time::SystemTime;

use items_domain::idempotency::{PURGE_BATCH, live_since, unix_millis};
use items_domain::{IdempotencyKey, Keyed, RepositoryError};

/// The keys of one collection, with the rows (`V`) they created.
#[derive(Debug)]
pub(super) struct Keys<V> {
    /// Each key's creation time (Unix ms) and the row as first created.
    by_key: HashMap<IdempotencyKey, (i64, V)>,
    /// Keys in the order they were stored, with the time they were stored
    /// at. A key stored again after it expired is queued again; the older
    /// entry is then stale (its time no longer matches) and only dropped.
    queue: VecDeque<(i64, IdempotencyKey)>,
}

impl<V> Default for Keys<V> {
    fn default() -> Self {
        Self {
            by_key: HashMap::new(),
            queue: VecDeque::new(),
        }
    }
}

impl<V: Clone> Keys<V> {
    /// The keyed create of the port (C7), under the caller's write lock:
    /// replays or refuses a live key, else runs `create` and stores the key
    /// with its row; `same` says whether a stored row has the new values.
    pub(super) fn create(
        &mut self,
        key: &IdempotencyKey,
        at: SystemTime,
        same: impl FnOnce(&V) -> bool,
        create: impl FnOnce() -> Result<V, RepositoryError>,
    ) -> Result<Keyed<V>, RepositoryError> {
        let live_since = live_since(at);
        self.purge(live_since);
        if let Some((created, row)) = self.by_key.get(key)
            && *created >= live_since
        {
            return Ok(Keyed::of_live_key(row.clone(), same));
        }
        let row = create()?;
        let now = unix_millis(at);
        self.by_key.insert(key.clone(), (now, row.clone()));
        self.queue.push_back((now, key.clone()));
        Ok(Keyed::Created(row))
    }

    /// Drops up to [`PURGE_BATCH`] expired keys from the front of the queue.
    /// Keys are queued in the order of the calls; a caller's clock that went
    /// back leaves a key behind a younger one until the front reaches it
    /// (lookups ignore it meanwhile).
    fn purge(&mut self, live_since: i64) {
        for _ in 0..PURGE_BATCH {
            match self.queue.front() {
                Some((created, _)) if *created < live_since => {}
                _ => return,
            }
            let Some((created, key)) = self.queue.pop_front() else {
                return;
            };
            if self
                .by_key
                .get(&key)
                .is_some_and(|(now, _)| *now == created)
            {
                self.by_key.remove(&key);
            }
        }
    }

    /// How many keys are held (live or not yet purged), for tests.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.by_key.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use items_domain::KEY_LIFETIME;

    use super::*;

    fn key(i: usize) -> IdempotencyKey {
        IdempotencyKey::parse(format!("k{i}").as_bytes()).unwrap()
    }

    #[test]
    fn expired_keys_are_purged_a_batch_at_a_time_from_the_front_c7() {
        let mut keys = Keys::<usize>::default();
        let start = UNIX_EPOCH + Duration::from_secs(1_000_000);
        for i in 0..40 {
            keys.create(&key(i), start, |_| true, || Ok(i)).unwrap();
        }
        let later = start + KEY_LIFETIME + Duration::from_secs(1);
        keys.create(&key(100), later, |_| true, || Ok(100)).unwrap();
        assert_eq!(keys.len(), 41 - PURGE_BATCH, "one batch purged");
        keys.create(&key(101), later, |_| true, || Ok(101)).unwrap();
        assert_eq!(keys.len(), 42 - 2 * PURGE_BATCH);
    }

    #[test]
    fn a_key_stored_again_after_it_expired_survives_its_stale_queue_entry_c7() {
        let mut keys = Keys::<usize>::default();
        let start = UNIX_EPOCH + Duration::from_secs(1_000_000);
        keys.create(&key(1), start, |_| true, || Ok(1)).unwrap();
        let later = start + KEY_LIFETIME + Duration::from_secs(1);
        // The purge of this call removes the old entry first, then the key
        // is stored anew; a stale entry must never remove the new one.
        let again = keys.create(&key(1), later, |_| true, || Ok(2)).unwrap();
        assert_eq!(again, Keyed::Created(2));
        let replay = keys
            .create(&key(1), later, |row| *row == 2, || Ok(3))
            .unwrap();
        assert_eq!(replay, Keyed::Replayed(2));
    }
}
