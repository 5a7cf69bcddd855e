//! The entities the service manages and the shapes of a listing.

use futures_util::stream::BoxStream;

use crate::repository_error::RepositoryError;
use crate::values::{Id, Name, PageLimit, Price};

/// An item: the service's main resource. Its fields are already-checked
/// values, so an `Item` that exists is valid.
///
/// ```
/// use items_domain::{Id, Item, Name};
///
/// let item = Item {
///     id: Id::new(1),
///     name: Name::parse("pen")?,
/// };
/// assert_eq!(item.name.as_str(), "pen");
/// # Ok::<(), items_domain::InvalidValue>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub id: Id,
    pub name: Name,
}

/// A product of the `products` collection.
#[derive(Debug, Clone, PartialEq)]
pub struct Product {
    pub id: Id,
    pub name: Name,
    pub price: Price,
}

/// A read-only user. Its name is plain text, not a [`Name`]: users are
/// seeded by the store (C4) and never written by a client, so the rules of
/// an item's name (C3) do not apply to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: Id,
    pub name: String,
}

/// The users every store starts with and serves forever (C4), in id order:
/// John Doe (id 1) and Jane Doe (id 2). The in-memory store serves this list;
/// the SQL stores seed the same two rows in their first migration, and the
/// kit's users check compares any store against it.
///
/// ```
/// use items_domain::{seeded_users, Id};
///
/// let users = seeded_users();
/// assert_eq!(users[0].id, Id::new(1));
/// assert_eq!(users[0].name, "John Doe");
/// assert_eq!(users[1].name, "Jane Doe");
/// ```
pub fn seeded_users() -> Vec<User> {
    SEEDED_USERS
        .iter()
        .map(|&(id, name)| User {
            id: Id::new(id),
            name: name.to_owned(),
        })
        .collect()
}

/// The seeded users as `(id, name)` pairs; [`seeded_users`] builds them.
const SEEDED_USERS: [(i64, &str); 2] = [(1, "John Doe"), (2, "Jane Doe")];

/// Which items a listing asks for (C10). The default asks for every item.
///
/// ```
/// use items_domain::{Id, ItemQuery, Name};
///
/// // The items named "pen" after id 10.
/// let mut query = ItemQuery::default();
/// query.after = Some(Id::new(10));
/// query.name = Some(Name::parse("pen")?);
/// assert_ne!(query, ItemQuery::default());
/// # Ok::<(), items_domain::InvalidValue>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ItemQuery {
    /// Only items whose id is greater than this one.
    pub after: Option<Id>,
    /// At most this many items.
    pub limit: Option<PageLimit>,
    /// Only items whose name is exactly this one.
    pub name: Option<Name>,
}

/// One page of a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ItemPage {
    /// The items of the page, ordered by id.
    pub items: Vec<Item>,
    /// How many items match the `name` filter in the whole collection,
    /// regardless of `after` and `limit`.
    pub total: u64,
    /// Whether items matching the query follow the last one of this page.
    pub has_more: bool,
}

/// What a full listing is without its rows: its version and how many
/// items it holds ([`ItemRepository::listing_head`](crate::ItemRepository::listing_head)),
/// all a `HEAD` or a conditional `GET` of it needs (C7, C12).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListingHead {
    /// The collection's version, as [`ItemListing::version`].
    pub version: u64,
    /// How many items a listing at that version holds.
    pub total: u64,
}

/// One batch of a full listing, in id order, or why the listing ended.
pub type ItemBatch = Result<Vec<Item>, RepositoryError>;

/// The whole collection, read in batches (C10): what a full listing streams
/// to the client without holding every item at once.
///
/// An adapter builds one from any stream of batches:
///
/// ```
/// use futures_util::StreamExt;
/// use items_domain::{Id, Item, ItemListing, Name};
///
/// let pen = Item { id: Id::new(1), name: Name::parse("pen")? };
/// let listing = ItemListing {
///     version: 7,
///     total: 1,
///     batches: futures_util::stream::iter([Ok(vec![pen])]).boxed(),
/// };
/// assert_eq!(listing.total, 1);
/// # Ok::<(), items_domain::InvalidValue>(())
/// ```
pub struct ItemListing {
    /// Changes on every write to the collection (and on nothing else), so
    /// a listing's `ETag` (C7) can be derived from it: two listings with the
    /// same version have the same items.
    pub version: u64,
    /// How many items the listing holds.
    pub total: u64,
    /// The items of `version` in id order, a batch at a time; a write after
    /// the listing began neither shows up in it nor ends it
    /// ([`ItemRepository::list_all`](crate::ItemRepository::list_all)). A
    /// batch that fails (the store became unreachable) ends the listing.
    pub batches: BoxStream<'static, ItemBatch>,
}

impl std::fmt::Debug for ItemListing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ItemListing")
            .field("version", &self.version)
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}
