//! The entities the service manages and the shapes of a listing.

use crate::values::{Id, Name, PageLimit, Price};

/// An item: the service's main resource.
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

/// A read-only user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: Id,
    pub name: String,
}

/// Which items a listing asks for (C10). The default asks for every item.
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
