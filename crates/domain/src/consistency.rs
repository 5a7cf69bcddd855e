//! Read-your-writes across instances (C13): a [`Position`] in a store's
//! history, what one request's reads were served at ([`ReadReport`]), and
//! the port through which the edge asks a store for repositories that read
//! at or after a position ([`ConsistentReads`]).
//!
//! A store with one copy of its data (memory, SQLite) meets every position
//! at once: it accepts a well-formed one, ignores it, and reports none
//! ([`Unpositioned`]). A store with copies that lag (a primary and its
//! standbys) gives positions their meaning.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use crate::ports::Repositories;

/// A position in a store's history: an era (a store whose history can
/// fork numbers each branch, newer ones higher) and an offset in it. Only
/// the store that handed a position out knows how two of them compare
/// across eras, so this type has no order of its own.
///
/// Its text is `<era hex>-<offset hex>`, at most 8 and 16 upper- or
/// lower-case hex digits (25 visible ASCII characters at most, C13), and
/// it is parsed strictly: anything else is refused.
///
/// ```
/// use items_domain::Position;
///
/// let position = Position::parse("1-16B374D848").expect("well formed");
/// assert_eq!((position.era(), position.offset()), (1, 0x0016_B374_D848));
/// assert_eq!(position.to_string(), "1-16B374D848");
/// assert!(Position::parse("1/16B374D848").is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Position {
    era: u32,
    offset: u64,
}

/// A `Consistency-Token` that is not a [`Position`]'s text (C13: 400).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("must be two hex numbers joined by `-`: an era of 1 to 8 digits, an offset of 1 to 16")]
pub struct MalformedPosition;

impl Position {
    /// The position `offset` in era `era`.
    pub const fn new(era: u32, offset: u64) -> Self {
        Self { era, offset }
    }

    /// The branch of the history the position is on.
    pub const fn era(self) -> u32 {
        self.era
    }

    /// How far along its era the position is.
    pub const fn offset(self) -> u64 {
        self.offset
    }

    /// The position whose text is `text`.
    ///
    /// # Errors
    /// [`MalformedPosition`] unless `text` is two runs of hex digits (1–8,
    /// then 1–16) joined by one `-`: no sign, no space, no prefix.
    pub fn parse(text: &str) -> Result<Self, MalformedPosition> {
        let (era, offset) = text.split_once('-').ok_or(MalformedPosition)?;
        Ok(Self {
            era: u32::try_from(hex(era, 8)?).map_err(|_| MalformedPosition)?,
            offset: hex(offset, 16)?,
        })
    }
}

/// The value of `digits`, 1 to `most` hex digits and nothing else
/// (`from_str_radix` alone would take a leading `+`).
fn hex(digits: &str, most: usize) -> Result<u64, MalformedPosition> {
    if digits.is_empty()
        || digits.len() > most
        || !digits.bytes().all(|byte| byte.is_ascii_hexdigit())
    {
        return Err(MalformedPosition);
    }
    u64::from_str_radix(digits, 16).map_err(|_| MalformedPosition)
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}-{:X}", self.era, self.offset)
    }
}

/// What one request's reads and writes were served at, filled in by the
/// store as they run and read by the edge once they are done.
///
/// A store records each answer's position with [`ReadReport::served`];
/// the report keeps the latest, which is what the whole answer reflects.
/// A store that finds the request's position can be met by none of its
/// copies (its write was lost) marks it [`ReadReport::unmet`] and fails
/// the operation as unavailable: the edge then answers 409 (C13).
#[derive(Debug, Default)]
pub struct ReadReport {
    state: Mutex<Served>,
}

#[derive(Debug, Default)]
struct Served {
    position: Option<Position>,
    unmet: bool,
}

impl ReadReport {
    /// Records an answer served at `position`: kept if it is later than
    /// the one kept (a newer era, or further along the same one).
    pub fn served(&self, position: Position) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let later = state
            .position
            .is_none_or(|kept| (position.era, position.offset) > (kept.era, kept.offset));
        if later {
            state.position = Some(position);
        }
    }

    /// Records that no copy of the store can meet the request's position.
    pub fn unmet(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .unmet = true;
    }

    /// The latest position an answer was served at, if any was recorded.
    pub fn position(&self) -> Option<Position> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .position
    }

    /// Whether the request's position was found unmeetable.
    pub fn is_unmet(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .unmet
    }
}

/// The repositories one request uses, and the report they fill.
#[derive(Debug, Clone)]
pub struct ReadScope {
    pub repositories: Repositories,
    pub report: Arc<ReadReport>,
}

/// A store that can serve one request's reads at or after a position in
/// its history, and say what position its answers reflect (C13).
///
/// ```
/// use items_domain::{ConsistentReads, Position, Unpositioned};
///
/// # let repositories = items_domain::Repositories::new(Nothing, Nothing, Nothing);
/// # use async_trait::async_trait;
/// # use items_domain::*;
/// # struct Nothing;
/// # #[async_trait]
/// # impl ItemRepository for Nothing {
/// #     async fn list(&self, _: &ItemQuery) -> Result<ItemPage, RepositoryError> { unimplemented!() }
/// #     async fn list_all(&self) -> Result<ItemListing, RepositoryError> { unimplemented!() }
/// #     async fn get(&self, _: Id) -> Result<Option<Item>, RepositoryError> { Ok(None) }
/// #     async fn create(&self, _: Name) -> Result<Item, RepositoryError> { unimplemented!() }
/// #     async fn create_keyed(&self, _: Name, _: &IdempotencyKey, _: std::time::SystemTime) -> Result<Keyed<Item>, RepositoryError> { unimplemented!() }
/// #     async fn replace(&self, _: &Item, _: Option<Name>) -> Result<Replaced, RepositoryError> { unimplemented!() }
/// #     async fn delete(&self, _: Id) -> Result<bool, RepositoryError> { Ok(false) }
/// # }
/// # #[async_trait]
/// # impl ProductRepository for Nothing {
/// #     async fn list(&self) -> Result<Vec<Product>, RepositoryError> { Ok(vec![]) }
/// #     async fn create(&self, _: Name, _: Price) -> Result<Product, RepositoryError> { unimplemented!() }
/// #     async fn create_keyed(&self, _: Name, _: Price, _: &IdempotencyKey, _: std::time::SystemTime) -> Result<Keyed<Product>, RepositoryError> { unimplemented!() }
/// # }
/// # #[async_trait]
/// # impl UserRepository for Nothing {
/// #     async fn list(&self) -> Result<Vec<User>, RepositoryError> { Ok(vec![]) }
/// # }
/// let store = Unpositioned(repositories);
/// let scope = store.scope(Some(Position::new(1, 42)));
/// assert_eq!(scope.report.position(), None);
/// ```
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
pub trait ConsistentReads: Send + Sync {
    /// Repositories for one request, which read at or after `at` when it
    /// is given, and record in the scope's report the position each
    /// answer reflects.
    ///
    /// Implementations MUST answer every read made through the scope from
    /// a state that includes `at` (never an older one), MUST record for
    /// each answer a position at or after both `at` and the state read
    /// (so a client that sends it back reads nothing older: monotonic
    /// reads), and for a write a position at or after its commit. A store
    /// with one copy of its data MAY ignore `at` and record nothing.
    ///
    /// # Errors
    /// None here: a read of the scope that no copy of the store can serve
    /// at or after `at` MUST mark the report [`ReadReport::unmet`] and fail
    /// with [`RepositoryError::Unavailable`](crate::RepositoryError).
    fn scope(&self, at: Option<Position>) -> ReadScope;
}

/// A store with one copy of its data: every position is met at once, so
/// its scope is the store itself, and it reports none (C13).
#[derive(Debug, Clone)]
pub struct Unpositioned(pub Repositories);

impl ConsistentReads for Unpositioned {
    fn scope(&self, _at: Option<Position>) -> ReadScope {
        ReadScope {
            repositories: self.0.clone(),
            report: Arc::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_reads_back_as_the_text_it_was_parsed_from() {
        for text in ["1-0", "1-16B374D848", "FFFFFFFF-FFFFFFFFFFFFFFFF", "2A-1"] {
            let position = Position::parse(text).expect(text);
            assert_eq!(position.to_string(), text);
        }
        assert_eq!(
            Position::parse("a-ff"),
            Ok(Position::new(10, 255)),
            "lower case is taken"
        );
    }

    #[test]
    fn anything_but_two_hex_runs_joined_by_a_dash_is_malformed() {
        for text in [
            "",
            "-",
            "1-",
            "-1",
            "1",
            "1--2",
            "1-2-3",
            "+1-2",
            "1-+2",
            " 1-2",
            "1-2 ",
            "0x1-2",
            "1/16B374D8",
            "g-1",
            "123456789-1",
            "1-12345678901234567",
            "1-é",
        ] {
            assert_eq!(Position::parse(text), Err(MalformedPosition), "{text:?}");
        }
    }

    #[test]
    fn the_longest_position_fits_in_a_token_of_64_visible_characters() {
        let text = Position::new(u32::MAX, u64::MAX).to_string();
        assert!(text.len() <= 64);
        assert!(text.bytes().all(|byte| byte.is_ascii_graphic()));
    }

    #[test]
    fn a_report_keeps_the_latest_position_served() {
        let report = ReadReport::default();
        assert_eq!(report.position(), None);
        report.served(Position::new(1, 20));
        report.served(Position::new(1, 10));
        assert_eq!(report.position(), Some(Position::new(1, 20)));
        report.served(Position::new(2, 5));
        assert_eq!(
            report.position(),
            Some(Position::new(2, 5)),
            "a newer era is later"
        );
        assert!(!report.is_unmet());
        report.unmet();
        assert!(report.is_unmet());
    }
}
