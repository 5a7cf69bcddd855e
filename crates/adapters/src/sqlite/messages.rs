//! What goes between the repositories and the writer thread: the write a
//! repository queues ([`Write`]), what the writer answers once the write's
//! batch is committed ([`Written`], [`Reply`]), and why the statements of a
//! batch failed ([`Failure`]). Plain data: this module imports no other
//! module of the room, so the repositories, the writer and its statements
//! all depend on it and never on each other in a circle.

use std::time::SystemTime;

use items_domain::{
    Id, IdempotencyKey, Item, Keyed, Name, Price, Product, Replaced, RepositoryError,
};

/// One write a repository asks for.
#[derive(Debug)]
pub(super) enum Write {
    CreateItem(Name),
    ReplaceItem {
        item: Item,
        expected: Option<Name>,
    },
    DeleteItem(Id),
    CreateProduct(Name, Price),
    /// A create under an idempotency key (C7), applied alone (`keys.rs`).
    CreateItemKeyed {
        name: Name,
        key: IdempotencyKey,
        at: SystemTime,
    },
    CreateProductKeyed {
        name: Name,
        price: Price,
        key: IdempotencyKey,
        at: SystemTime,
    },
}

/// What a write did, once committed.
#[derive(Debug)]
pub(super) enum Written {
    Item(Item),
    Replaced(Replaced),
    Deleted(bool),
    Product(Product),
    KeyedItem(Keyed<Item>),
    KeyedProduct(Keyed<Product>),
}

/// The answer a caller gets.
pub(super) type Reply = Result<Written, RepositoryError>;

/// Why a batch failed: a SQLite error, or a stored row that does not decode.
pub(super) type Failure = Box<dyn std::error::Error + Send + Sync>;

/// The writer answered with another kind of result than the write asked
/// for: a bug, reported as an unavailable store rather than a panic.
pub(super) fn mismatched(written: &Written) -> RepositoryError {
    RepositoryError::unavailable(format!("the SQLite writer answered {written:?}"))
}
