//! Idempotent creates (C7): the [`IdempotencyKey`] a client sends, what a
//! keyed create did ([`Keyed`]), how long a key holds ([`KEY_LIFETIME`]) and
//! the in-process registry of keys in flight ([`InFlight`]).
//!
//! The key is stored by the repository with the created row, in the same
//! transaction, together with the values the row was created with: a replay
//! answers the first response even after the row was renamed or deleted.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::values::InvalidValue;

/// How long a key holds after the create that stored it (C7: 24 hours).
/// Older keys are ignored by lookups, may be reused, and are purged.
pub const KEY_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// Expired keys a store removes per keyed create at most: removing a few
/// more than one create adds keeps the table at about one lifetime of keys,
/// and no create ever pays for a full scan.
pub const PURGE_BATCH: usize = 16;

/// An `Idempotency-Key` (C7): 1 to 255 visible ASCII characters
/// (`0x21..=0x7E`), compared exactly.
///
/// ```
/// use items_domain::IdempotencyKey;
///
/// let key = IdempotencyKey::parse(b"order-42").expect("visible ASCII");
/// assert_eq!(key.as_str(), "order-42");
/// for refused in [&b""[..], b"has space", "é".as_bytes(), &[b'k'; 256]] {
///     assert!(IdempotencyKey::parse(refused).is_err());
/// }
/// assert!(IdempotencyKey::parse(&[b'k'; 255]).is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(Arc<str>);

impl IdempotencyKey {
    /// The longest key, in bytes (one byte per character).
    pub const MAX_LEN: usize = 255;
    /// The rule a refused key broke.
    pub const INVALID: InvalidValue =
        InvalidValue::new("must be 1 to 255 visible ASCII characters");

    /// Checks a key a client sent (the raw header bytes).
    ///
    /// # Errors
    /// [`InvalidValue`] when `raw` is empty, longer than
    /// [`MAX_LEN`](Self::MAX_LEN) or holds a byte outside `0x21..=0x7E`.
    pub fn parse(raw: &[u8]) -> Result<Self, InvalidValue> {
        let visible = raw.iter().all(|byte| (0x21..=0x7E).contains(byte));
        match std::str::from_utf8(raw) {
            Ok(text) if visible && !raw.is_empty() && raw.len() <= Self::MAX_LEN => {
                Ok(Self(Arc::from(text)))
            }
            _ => Err(Self::INVALID),
        }
    }

    /// The key as sent, for storage.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a create under an [`IdempotencyKey`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Keyed<T> {
    /// No live key: the row was created and the key stored with it.
    Created(T),
    /// The key was stored within [`KEY_LIFETIME`] by a create with the same
    /// values: nothing was written; this is the row as that create made it
    /// (its id and values then, even if it was changed or deleted since).
    Replayed(T),
    /// The key was stored within [`KEY_LIFETIME`] by a create with other
    /// values: nothing was written.
    Mismatch,
}

impl<T> Keyed<T> {
    /// What a keyed create answers for a live key whose create made
    /// `first`: its replay when `same` says `first` was created with the new
    /// values, else [`Keyed::Mismatch`]. Nothing is written either way; a
    /// store calls this once its lookup found the key live.
    pub fn of_live_key(first: T, same: impl FnOnce(&T) -> bool) -> Self {
        if same(&first) {
            Self::Replayed(first)
        } else {
            Self::Mismatch
        }
    }
}

/// A moment as stores keep it: milliseconds since the Unix epoch (0 for
/// any moment before it, which no real clock gives).
pub fn unix_millis(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |since| {
        i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
    })
}

/// The oldest creation time, in [`unix_millis`], at which a key is still
/// live at `at`: keys stored before it are expired.
pub fn live_since(at: SystemTime) -> i64 {
    unix_millis(at).saturating_sub(KEY_LIFETIME.as_millis() as i64)
}

/// The keys whose create is running in this process, so a duplicate that
/// arrives meanwhile is told so (C7: 409) instead of waiting. One registry
/// per collection; clones share it.
#[derive(Debug, Clone, Default)]
pub struct InFlight(Arc<Mutex<HashSet<IdempotencyKey>>>);

impl InFlight {
    /// Marks `key` in flight until the guard is dropped (also when the
    /// create's future is dropped mid-way); `None` when it already is.
    pub fn claim(&self, key: &IdempotencyKey) -> Option<InFlightGuard> {
        // A panic while the lock was held cannot leave the set half-changed
        // (one insert or remove), so a poisoned lock is still usable.
        let mut keys = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        keys.insert(key.clone()).then(|| InFlightGuard {
            keys: self.clone(),
            key: key.clone(),
        })
    }
}

/// A key in flight; dropping it releases the key.
#[derive(Debug)]
pub struct InFlightGuard {
    keys: InFlight,
    key: IdempotencyKey,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let mut keys = self.keys.0.lock().unwrap_or_else(PoisonError::into_inner);
        keys.remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_1_to_255_visible_ascii_characters_c7() {
        assert!(IdempotencyKey::parse(b"!").is_ok());
        assert!(IdempotencyKey::parse(b"~").is_ok());
        assert!(IdempotencyKey::parse(&[b'a'; 255]).is_ok());
        for refused in [
            &b""[..],
            &[b'a'; 256],
            b" ",
            b"a\tb",
            b"\x7f",
            b"caf\xc3\xa9",
        ] {
            assert!(IdempotencyKey::parse(refused).is_err(), "{refused:?}");
        }
    }

    #[test]
    fn a_live_key_replays_its_first_row_only_for_the_same_values_c7() {
        assert_eq!(
            Keyed::of_live_key(3, |first| *first == 3),
            Keyed::Replayed(3)
        );
        assert_eq!(Keyed::of_live_key(3, |first| *first == 4), Keyed::Mismatch);
    }

    #[test]
    fn a_claimed_key_is_in_flight_until_its_guard_drops_c7() {
        let registry = InFlight::default();
        let key = IdempotencyKey::parse(b"k").unwrap();
        let guard = registry.claim(&key).expect("free");
        assert!(registry.clone().claim(&key).is_none(), "shared by clones");
        let other = IdempotencyKey::parse(b"other").unwrap();
        assert!(registry.claim(&other).is_some());
        drop(guard);
        assert!(registry.claim(&key).is_some());
    }

    #[test]
    fn keys_live_for_24_hours_c7() {
        let at = UNIX_EPOCH + Duration::from_secs(100_000);
        assert_eq!(live_since(at), (100_000 - 86_400) * 1000);
        assert_eq!(unix_millis(UNIX_EPOCH - Duration::from_secs(1)), 0);
    }
}
