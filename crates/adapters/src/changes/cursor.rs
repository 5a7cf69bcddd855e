//! Cursors as the service's stores write them: a prefix naming the store
//! (its kind and a random origin of its own), then a position in it.
//!
//! Invariant: a cursor this store wrote parses back to its position; a
//! cursor of any other store (another origin, another kind, a copy of this
//! one, a restarted in-memory store) or any made-up text does not, so it is
//! unknown here and gets a reset (C14), never a position it does not name.

use std::sync::Arc;

use items_domain::{Cursor, FeedError, RepositoryError};

/// How one store writes and reads its cursors: `{prefix}{position}`.
#[derive(Debug, Clone)]
pub(crate) struct CursorFormat {
    prefix: Arc<str>,
}

impl CursorFormat {
    /// Cursors of the store of kind `kind` (one letter) and `origin`.
    pub(crate) fn new(kind: char, origin: &str) -> Self {
        Self {
            prefix: Arc::from(format!("{kind}{origin}.")),
        }
    }

    /// The cursor of `position`.
    pub(crate) fn cursor(&self, position: u64) -> Result<Cursor, FeedError> {
        use std::fmt::Write as _;
        let mut text = String::with_capacity(self.prefix.len() + 20);
        text.push_str(&self.prefix);
        let _ = write!(text, "{position}");
        Cursor::parse(text.as_bytes()).map_err(|_| {
            FeedError::Unavailable(RepositoryError::unavailable(format!(
                "the store's cursor prefix {:?} makes no cursor",
                self.prefix
            )))
        })
    }

    /// The position `cursor` names, when this store wrote it: digits only
    /// after the prefix (no sign, no spaces), within `u64`.
    pub(crate) fn position(&self, cursor: &Cursor) -> Option<u64> {
        let digits = cursor.as_str().strip_prefix(&*self.prefix)?;
        if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }
}

/// Whether a store that pruned every change up to `floor` and issued
/// positions up to `issued` can resume after `position`: every change
/// after it is still retained (its own may be gone: nothing after it is
/// missed), and the store gave it.
pub(crate) fn retained(position: u64, floor: u64, issued: u64) -> bool {
    floor <= position && position <= issued
}

/// A random origin, 16 hex digits: a store's own, so its cursors are told
/// apart from those of any other store.
pub(crate) fn random_origin() -> String {
    let mut seed = [0u8; 8];
    // Without randomness cursors of two stores may look alike; each store
    // still reads only positions it has, so the loss is a resume where a
    // reset was due, after a restart of the in-memory store.
    let _ = getrandom::fill(&mut seed);
    format!("{:016x}", u64::from_le_bytes(seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_is_known_while_every_change_after_it_is_retained() {
        assert!(retained(5, 4, 9));
        assert!(retained(9, 4, 9));
        assert!(retained(4, 4, 9), "its own change is gone, none after it");
        assert!(!retained(3, 4, 9), "the change after it was pruned");
        assert!(!retained(10, 4, 9), "never issued");
    }

    #[test]
    fn a_cursor_names_its_store_and_position_and_nothing_else_parses() {
        let format = CursorFormat::new('m', "00ff");
        let cursor = format.cursor(42).unwrap();
        assert_eq!(cursor.as_str(), "m00ff.42");
        assert_eq!(format.position(&cursor), Some(42));
        for other in [
            "m00fe.42",
            "s00ff.42",
            "m00ff.",
            "m00ff.+4",
            "m00ff.4x",
            "m00ff.99999999999999999999",
            "42",
        ] {
            let cursor = Cursor::parse(other.as_bytes()).unwrap();
            assert_eq!(format.position(&cursor), None, "{other}");
        }
        let longest = CursorFormat::new('p', &random_origin())
            .cursor(u64::MAX)
            .unwrap();
        assert!(longest.as_str().len() <= Cursor::MAX_LEN);
    }
}
