//! Ports: what the domain needs from storage and from the dependencies a
//! readiness probe asks about, as contracts.
//!
//! All traits are `Send + Sync` because one repository is shared by every
//! worker thread of the HTTP server, and their futures are `Send` (the
//! `async_trait` default) so a handler can be moved between threads. They are
//! object safe: the use cases hold `Arc<dyn …>`, which keeps the use cases free
//! of generic parameters and lets the binary pick an adapter at run time.
//!
//! The repositories' errors are [`RepositoryError`]: the only failure a
//! caller can act on is "the store is unreachable right now" (an HTTP adapter
//! answers 503). A [`HealthCheck`] fails with [`DependencyDown`]. Absence
//! is not an error of the port: it is part of the answer (`Option`, `bool`,
//! [`Replaced`]), because what absence means is for the use case to decide.
//!
//! # Implementing a port
//!
//! An adapter implements a trait with [`async_trait`] and hands an `Arc` of
//! itself to the use case. The smallest port, kept in memory:
//!
//! ```
//! use std::sync::Arc;
//!
//! use async_trait::async_trait;
//! use items_domain::{Id, RepositoryError, User, UserRepository, UserService};
//!
//! struct FixedUsers(Vec<User>);
//!
//! #[async_trait]
//! impl UserRepository for FixedUsers {
//!     async fn list(&self) -> Result<Vec<User>, RepositoryError> {
//!         Ok(self.0.clone())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), RepositoryError> {
//! let ada = User { id: Id::new(1), name: "Ada".to_owned() };
//! let users = UserService::new(Arc::new(FixedUsers(vec![ada.clone()])));
//! assert_eq!(users.list().await?, [ada]);
//! # Ok(())
//! # }
//! ```
//!
//! A store that can fail maps every failure to
//! [`RepositoryError::unavailable`], keeping the cause for the logs: it
//! means nothing was written (C12). The one exception is a write whose
//! commit was sent and whose answer was lost: a store that then cannot learn
//! the transaction's fate MUST return [`RepositoryError::OutcomeUnknown`]
//! instead, and MUST NOT return `Unavailable` for a write that may have been
//! applied. The repository contract checks hold an adapter to every `MUST`
//! below.
//!
//! [`async_trait`]: https://docs.rs/async-trait

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;

use crate::changes::ChangeFeed;
use crate::entities::{Item, ItemListing, ItemPage, ItemQuery, ListingHead, Product, User};
use crate::idempotency::{IdempotencyKey, Keyed};
pub use crate::repository_error::RepositoryError;
use crate::values::{Id, Name, Price};

/// What [`ItemRepository::replace`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replaced {
    /// The item now has the new name.
    Yes,
    /// No item has that id; nothing was written.
    NotFound,
    /// The item's current name was not the expected one; nothing was written.
    Changed,
}

/// Storage of items.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait ItemRepository: Send + Sync {
    /// The items matching `query`, ordered by id ascending (C10).
    ///
    /// Implementations MUST return only items with id > `query.after`, at most
    /// `query.limit` of them, only those named exactly `query.name`; `total`
    /// MUST count every item matching `query.name` (ignoring `after` and
    /// `limit`), and `has_more` MUST be true exactly when a matching item
    /// follows the last one returned.
    ///
    /// # Errors
    /// MUST return [`RepositoryError::Unavailable`] when the store cannot be read.
    async fn list(&self, query: &ItemQuery) -> Result<ItemPage, RepositoryError>;

    /// Every item, in id order, in batches, with the collection's version
    /// and total (C7, C10): a snapshot of the collection as it was when the
    /// call returned.
    ///
    /// Implementations MUST yield exactly the items of `version`, each once,
    /// whole, in id order, and `total` MUST be their count: a create,
    /// replace or delete after the call neither shows up in the listing nor
    /// ends it, however long the caller takes to read it. The version MUST
    /// change on every create, on every replace that wrote and on every
    /// delete that removed an item, and MUST NOT change on a read nor on a
    /// write that wrote nothing (a [`Replaced::Changed`] or
    /// [`Replaced::NotFound`] replace, a delete of a missing id). The items
    /// MUST come in more than one batch when there are many (the contract
    /// checks stream 1,500; the service's stores yield 1,000 a batch), so a
    /// caller holds one batch at a time.
    ///
    /// A store MAY bound how many listings read from it at once (the SQL
    /// stores let a quarter of their connections serve listings), making a
    /// call wait until another listing ends or is dropped: a caller MUST NOT
    /// wait for a second listing while it holds a first one unread, and
    /// SHOULD read a listing to its end at the store's pace (the HTTP
    /// adapter spools it for a slow client, C12).
    ///
    /// How the snapshot is taken is the store's choice, and the contract
    /// checks cannot see it: a database reads it in one transaction, the
    /// service's in-memory store shares chunks of 512 items with it (a
    /// pointer per chunk), and a small store may copy every item under one
    /// lock (the kit's `BTreeMap` example: a pointer per item while the
    /// listing lasts). For a large collection, share or stream rather than
    /// copy.
    ///
    /// # Errors
    /// MUST return [`RepositoryError::Unavailable`] when the store cannot be
    /// read, from the call or, when it fails mid-listing, as the stream's
    /// last element.
    async fn list_all(&self) -> Result<ItemListing, RepositoryError>;

    /// The version and total a [`list_all`](Self::list_all) made now
    /// would carry, read without its rows (C7, C12: a `HEAD` of the
    /// listing, or a `GET` whose `If-None-Match` already names its tag,
    /// costs one small read, not the collection).
    ///
    /// Implementations MUST return exactly the `version` and `total` of a
    /// listing taken at the same moment, read together (one statement, one
    /// snapshot or one lock). The default opens a listing and reads none of
    /// its rows; a store whose listing costs more than its tally to open (a
    /// transaction, a reader, a snapshot) SHOULD answer from the tally
    /// alone.
    ///
    /// # Errors
    /// MUST return [`RepositoryError::Unavailable`] when the store cannot be read.
    async fn listing_head(&self) -> Result<ListingHead, RepositoryError> {
        let listing = self.list_all().await?;
        Ok(ListingHead {
            version: listing.version,
            total: listing.total,
        })
    }

    /// The item with this id, or `None`.
    ///
    /// # Errors
    /// MUST return [`RepositoryError::Unavailable`] when the store cannot be read.
    async fn get(&self, id: Id) -> Result<Option<Item>, RepositoryError>;

    /// Stores a new item and returns it with its id (C2): ids come from a
    /// counter that starts at 1 and never goes back, so an id is never handed
    /// out twice, not even after a delete; concurrent creates MUST get
    /// distinct ids and none may be lost.
    ///
    /// # Errors
    /// MUST return [`RepositoryError::Unavailable`] when the store cannot be
    /// written; the item MUST then not be stored.
    async fn create(&self, name: Name) -> Result<Item, RepositoryError>;

    /// Creates an item under an idempotency `key` (C7), as of the caller's
    /// clock `at`, storing the key, `at` and the item's values in the
    /// item's transaction. A key is live when stored less than
    /// [`KEY_LIFETIME`](crate::KEY_LIFETIME) before `at`. Implementations MUST:
    /// - with no live `key`, create as [`create`](Self::create) does and
    ///   answer [`Keyed::Created`] (an expired key is taken over);
    /// - with a live `key` of the same name, write nothing and answer
    ///   [`Keyed::Replayed`] with the item as first created (its id and name
    ///   then, even if renamed or deleted since); of another name, write
    ///   nothing and answer [`Keyed::Mismatch`];
    /// - keep keys of items apart from keys of products;
    /// - for creates with one key at once, create one item: the others wait
    ///   for it and replay it (or mismatch), never create a second;
    /// - remove expired keys without scanning every key (a few per keyed
    ///   create, through an index on the creation time).
    ///
    /// # Errors
    /// MUST return [`RepositoryError::Unavailable`] when the store cannot be
    /// written; then neither the item nor the key MUST be stored.
    async fn create_keyed(
        &self,
        name: Name,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Item>, RepositoryError>;

    /// Gives `item.id` the name `item.name`, atomically.
    ///
    /// When `expected` is `Some`, the write happens only if the current name
    /// equals it (compare-and-swap); otherwise it MUST return
    /// [`Replaced::Changed`] and change nothing. An unknown id MUST give
    /// [`Replaced::NotFound`] and create nothing.
    ///
    /// # Errors
    /// MUST return [`RepositoryError::Unavailable`] when the store cannot be
    /// written; the item MUST then be unchanged.
    async fn replace(
        &self,
        item: &Item,
        expected: Option<Name>,
    ) -> Result<Replaced, RepositoryError>;

    /// Removes the item; returns whether it existed. Deleting an unknown id is
    /// not an error and writes nothing: it MUST return `false` and MUST NOT
    /// change the listing's version ([`list_all`](Self::list_all)), so a
    /// client's cached full listing stays valid (C7).
    ///
    /// # Errors
    /// MUST return [`RepositoryError::Unavailable`] when the store cannot be written.
    async fn delete(&self, id: Id) -> Result<bool, RepositoryError>;
}

/// Storage of products.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait ProductRepository: Send + Sync {
    /// Every product, ordered by id ascending.
    ///
    /// # Errors
    /// MUST return [`RepositoryError::Unavailable`] when the store cannot be read.
    async fn list(&self) -> Result<Vec<Product>, RepositoryError>;

    /// Stores a new product with an id from a counter that never goes back
    /// (C2, as for items).
    ///
    /// # Errors
    /// MUST return [`RepositoryError::Unavailable`] when the store cannot be
    /// written; the product MUST then not be stored.
    async fn create(&self, name: Name, price: Price) -> Result<Product, RepositoryError>;

    /// Creates a product under an idempotency `key` (C7), as
    /// [`ItemRepository::create_keyed`] does for items: the same MUSTs,
    /// with "the same values" meaning the same name and the same price, and
    /// a replay answering the product with its id, name and price as first
    /// created. Keys of products are apart from keys of items.
    ///
    /// # Errors
    /// MUST return [`RepositoryError::Unavailable`] when the store cannot be
    /// written; then neither the product nor the key MUST be stored.
    async fn create_keyed(
        &self,
        name: Name,
        price: Price,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Product>, RepositoryError>;
}

/// Read-only storage of users.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait UserRepository: Send + Sync {
    /// Every user, ordered by id ascending.
    ///
    /// # Errors
    /// MUST return [`RepositoryError::Unavailable`] when the store cannot be read.
    async fn list(&self) -> Result<Vec<User>, RepositoryError>;
}

/// Something the service depends on at run time, which can say whether it
/// answers right now: what a readiness probe asks (C11).
///
/// ```
/// use async_trait::async_trait;
/// use items_domain::{DependencyDown, HealthCheck};
///
/// /// A dependency that is down.
/// struct Down;
///
/// #[async_trait]
/// impl HealthCheck for Down {
///     fn name(&self) -> &'static str {
///         "database"
///     }
///
///     async fn ping(&self) -> Result<(), DependencyDown> {
///         Err(DependencyDown::new("connection refused"))
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// assert!(Down.ping().await.is_err());
/// # }
/// ```
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait HealthCheck: Send + Sync {
    /// What the dependency is, as a readiness report names it (`database`).
    fn name(&self) -> &'static str;

    /// One cheap round trip to the dependency.
    ///
    /// # Errors
    /// MUST return [`DependencyDown`] when the dependency does not answer.
    async fn ping(&self) -> Result<(), DependencyDown>;
}

/// A dependency did not answer its [`HealthCheck::ping`]; the cause (its
/// [`source`](std::error::Error::source)) says why, for the readiness report.
///
/// ```
/// use std::error::Error;
/// use items_domain::DependencyDown;
///
/// let error = DependencyDown::new("connection refused");
/// assert_eq!(error.to_string(), "the dependency does not answer");
/// assert_eq!(error.source().unwrap().to_string(), "connection refused");
/// ```
#[derive(Debug, thiserror::Error)]
#[error("the dependency does not answer")]
pub struct DependencyDown(#[source] Box<dyn std::error::Error + Send + Sync>);

impl DependencyDown {
    /// The dependency is down, for this `cause` (an error or a message).
    pub fn new(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(cause.into())
    }
}

/// One store's three repositories, as the use cases and the contract checks
/// take them: what a storage adapter hands over, whatever it keeps them in.
///
/// ```
/// # use std::sync::Arc;
/// # use std::time::SystemTime;
/// # use async_trait::async_trait;
/// # use items_domain::{IdempotencyKey, Keyed, Id, Item, ItemListing, ItemPage, ItemQuery, ItemRepository, Name,
/// #     Price, Product, ProductRepository, Replaced, Repositories, RepositoryError, User,
/// #     UserRepository};
/// # struct Nothing;
/// # #[async_trait]
/// # impl ItemRepository for Nothing {
/// #     async fn list(&self, _: &ItemQuery) -> Result<ItemPage, RepositoryError> { unimplemented!() }
/// #     async fn list_all(&self) -> Result<ItemListing, RepositoryError> { unimplemented!() }
/// #     async fn get(&self, _: Id) -> Result<Option<Item>, RepositoryError> { Ok(None) }
/// #     async fn create(&self, _: Name) -> Result<Item, RepositoryError> { unimplemented!() }
/// #     async fn create_keyed(&self, _: Name, _: &IdempotencyKey, _: SystemTime) -> Result<Keyed<Item>, RepositoryError> { unimplemented!() }
/// #     async fn replace(&self, _: &Item, _: Option<Name>) -> Result<Replaced, RepositoryError> { unimplemented!() }
/// #     async fn delete(&self, _: Id) -> Result<bool, RepositoryError> { Ok(false) }
/// # }
/// # #[async_trait]
/// # impl ProductRepository for Nothing {
/// #     async fn list(&self) -> Result<Vec<Product>, RepositoryError> { Ok(vec![]) }
/// #     async fn create(&self, _: Name, _: Price) -> Result<Product, RepositoryError> { unimplemented!() }
/// #     async fn create_keyed(&self, _: Name, _: Price, _: &IdempotencyKey, _: SystemTime) -> Result<Keyed<Product>, RepositoryError> { unimplemented!() }
/// # }
/// # #[async_trait]
/// # impl UserRepository for Nothing {
/// #     async fn list(&self) -> Result<Vec<User>, RepositoryError> { Ok(vec![]) }
/// # }
/// let repositories = Repositories::new(Nothing, Nothing, Nothing);
/// let shared = repositories.clone(); // the same store, not a copy of it
/// # let _ = shared;
/// ```
#[derive(Clone)]
pub struct Repositories {
    pub items: Arc<dyn ItemRepository>,
    pub products: Arc<dyn ProductRepository>,
    pub users: Arc<dyn UserRepository>,
    /// The changes of `items` (C14), when the store keeps them: every store
    /// of the service does; an adapter without one serves no change feed.
    pub changes: Option<Arc<dyn ChangeFeed>>,
}

impl Repositories {
    /// Bundles an adapter's three repositories, without a change feed.
    pub fn new(
        items: impl ItemRepository + 'static,
        products: impl ProductRepository + 'static,
        users: impl UserRepository + 'static,
    ) -> Self {
        Self {
            items: Arc::new(items),
            products: Arc::new(products),
            users: Arc::new(users),
            changes: None,
        }
    }

    /// The same repositories with the changes of their items (C14): `feed`
    /// MUST report the writes made through `items`, and through every other
    /// writer of the same store.
    #[must_use]
    pub fn with_changes(mut self, feed: impl ChangeFeed + 'static) -> Self {
        self.changes = Some(Arc::new(feed));
        self
    }
}

impl std::fmt::Debug for Repositories {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repositories").finish_non_exhaustive()
    }
}
