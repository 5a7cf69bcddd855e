//! The change feed (C14): every committed change to items, once, in commit
//! order, to every subscriber of every instance sharing a store.
//!
//! - [`ChangeFeed`]: the port a store implements, with its contract;
//! - [`Cursor`]: where a subscriber stands, opaque text a client keeps
//!   (`Last-Event-ID`) and gives back to resume;
//! - [`ItemChange`] and [`Change`]: what happened, and where it stands;
//! - [`Subscription`]: what [`ChangeFeed::subscribe`] answers;
//! - [`FeedError`]: why a subscription's stream ended.
//!
//! The domain says nothing of how a store orders its changes or tells
//! other instances about them; it states what every subscriber MUST see.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use futures_util::stream::BoxStream;

use crate::entities::Item;
use crate::repository_error::RepositoryError;
use crate::values::{Id, InvalidValue};

/// Where a subscriber stands in a store's changes: the position of one
/// change, as text a client keeps and sends back (`Last-Event-ID`, C14).
///
/// Invariant: 1 to [`MAX_LEN`](Self::MAX_LEN) visible ASCII characters
/// (`0x21..=0x7E`), so it fits an SSE `id:` line and an HTTP header as it
/// is. What the text means is the store's own business: a cursor of
/// another store (or a made-up one) is well formed and merely unknown.
///
/// ```
/// use items_domain::Cursor;
///
/// let cursor = Cursor::parse(b"m1f.42").expect("visible ASCII");
/// assert_eq!(cursor.as_str(), "m1f.42");
/// for refused in [&b""[..], b"has space", "é".as_bytes(), &[b'c'; 65]] {
///     assert!(Cursor::parse(refused).is_err());
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cursor(Arc<str>);

impl Cursor {
    /// The longest cursor, in bytes (one byte per character, C14).
    pub const MAX_LEN: usize = 64;
    /// The rule a refused cursor broke.
    pub const INVALID: InvalidValue = InvalidValue::new("must be 1 to 64 visible ASCII characters");

    /// Checks a cursor a client sent (the raw `Last-Event-ID` bytes), or
    /// one a store wrote.
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

    /// The cursor as text, for the wire and for the store that wrote it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One committed write to items: what a subscriber is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemChange {
    /// The item was created, with this id and name.
    Created(Item),
    /// The item now has this name.
    Replaced(Item),
    /// The item with this id was deleted.
    Deleted(Id),
}

impl ItemChange {
    /// The id of the item that changed.
    pub fn id(&self) -> Id {
        match self {
            Self::Created(item) | Self::Replaced(item) => item.id,
            Self::Deleted(id) => *id,
        }
    }

    /// The change's name on the wire (the SSE `event:` field, C14):
    /// `created`, `replaced` or `deleted`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Created(_) => "created",
            Self::Replaced(_) => "replaced",
            Self::Deleted(_) => "deleted",
        }
    }
}

/// A change with where it stands: resuming from `cursor` gives exactly the
/// changes committed after this one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub cursor: Cursor,
    pub change: ItemChange,
    /// When the store recorded the change, by its clock: what the feed's
    /// lag is measured from. Not part of what a subscriber is told.
    pub at: SystemTime,
}

/// Why a subscription's stream ended; after the error it yields nothing.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// The subscriber fell further behind than the store keeps for it: it
    /// resumes with the cursor of the last change it got (C14).
    #[error("the subscriber fell too far behind")]
    TooSlow,
    /// The store could not be read; resuming with the last cursor later
    /// misses nothing within the retention.
    #[error(transparent)]
    Unavailable(#[from] RepositoryError),
}

/// The changes of a subscription, each once, in commit order; the stream
/// ends only with a [`FeedError`] (or when dropped).
pub type ChangeStream = BoxStream<'static, Result<Change, FeedError>>;

/// What [`ChangeFeed::subscribe`] answers.
pub struct Subscription {
    /// Where the stream begins: the cursor asked for when the store still
    /// had it, else the present. Resuming from it gives exactly what
    /// `changes` gives, so a client that saw no change yet keeps its place.
    pub start: Cursor,
    /// The cursor asked for was unknown (malformed, of another store, or
    /// older than the retention): the stream starts at the present, and
    /// what happened between that cursor and now is lost to the subscriber,
    /// which must list the items again (the SSE `reset` event, C14).
    pub reset: bool,
    pub changes: ChangeStream,
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("start", &self.start)
            .field("reset", &self.reset)
            .finish_non_exhaustive()
    }
}

/// The changes of a store's items, for subscribers (C14).
///
/// The contract, which `items-testkit`'s `changes` checks hold a store to:
/// - **every committed change, once, in commit order**: every create, every
///   replace that wrote and every delete that removed an item MUST reach
///   every subscription open when it committed, exactly once, after every
///   change committed before it. A change to an item always comes after
///   the changes to that item committed before it; changes to different
///   items that commit at the same moment come in an order they could
///   have committed in. A write that wrote nothing (a replace of a missing
///   id or with a stale expected name, a delete of a missing id) is no
///   change;
/// - **nothing uncommitted**: a write that failed, or was rolled back,
///   MUST never appear;
/// - **resumable**: `subscribe(Some(cursor))` with the cursor of a change
///   the store still retains MUST give exactly the changes committed after
///   it (none missed, none repeated), then every later one; with any other
///   cursor (malformed for this store, of another store, older than the
///   retention) it MUST answer `reset` and start at the present;
/// - **starts at the present**: `subscribe(None)` MUST give every change
///   committed after it returned, and none committed before it began;
/// - **bounded**: a subscriber that does not read MUST NOT delay a write,
///   and MUST NOT make the store hold more than a bounded number of
///   changes for it: past the bound, its stream ends with
///   [`FeedError::TooSlow`];
/// - **timely**: a change reaches an open subscription within 1 s of its
///   commit, whichever instance (or process) wrote it.
///
/// The retention (how long or how many changes a cursor stays resumable) is
/// the store's, and stated in its documentation.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait ChangeFeed: Send + Sync {
    /// Subscribes from just after `after`, or from the present (`None`).
    ///
    /// # Errors
    /// MUST return [`RepositoryError::Unavailable`] when the store cannot
    /// be read to start the subscription.
    async fn subscribe(&self, after: Option<Cursor>) -> Result<Subscription, RepositoryError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::Name;

    #[test]
    fn a_cursor_is_1_to_64_visible_ascii_characters_c14() {
        assert!(Cursor::parse(b"!").is_ok());
        assert!(Cursor::parse(&[b'~'; 64]).is_ok());
        for refused in [
            &b""[..],
            &[b'a'; 65],
            b" x",
            b"a\tb",
            b"\x7f",
            b"caf\xc3\xa9",
        ] {
            assert!(Cursor::parse(refused).is_err(), "{refused:?}");
        }
    }

    #[test]
    fn a_change_names_its_kind_and_item_c14() {
        let item = Item {
            id: Id::new(7),
            name: Name::parse("x").unwrap(),
        };
        assert_eq!(ItemChange::Created(item.clone()).kind(), "created");
        assert_eq!(ItemChange::Replaced(item.clone()).id(), Id::new(7));
        assert_eq!(ItemChange::Deleted(Id::new(7)).kind(), "deleted");
        assert_eq!(ItemChange::Deleted(Id::new(7)).id(), Id::new(7));
    }
}
