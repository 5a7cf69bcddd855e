//! The domain of items-service: what an item, a product and a user are, the
//! rules their values obey, the ports the domain needs from the outside world
//! and the use cases that apply the rules.
//!
//! Design rules for this crate:
//! - no I/O, no HTTP, no SQL, no async runtime: adapters bring those;
//! - every value a client can send reaches an entity only through a
//!   fallible constructor ([`Name::parse`], [`Price::new`], [`Id::parse`]),
//!   so an item or a product that exists is valid; a [`User`]'s name is
//!   plain text, because users are seeded by the store (C4) and no client
//!   ever writes one;
//! - every port method documents, under `# Errors`, what each implementation
//!   MUST return; the contract checks of `items-testkit` test exactly that,
//!   for any adapter.

pub mod changes;
pub mod consistency;
pub mod defaults;
pub mod entities;
pub mod idempotency;
pub mod ports;
pub mod rate_limit;
mod repository_error;
pub mod transfer;
pub mod uploads;
pub mod use_cases;
pub mod values;

pub use changes::{Change, ChangeFeed, ChangeStream, Cursor, FeedError, ItemChange, Subscription};
pub use consistency::{
    ConsistentReads, MalformedPosition, Position, ReadReport, ReadScope, Unpositioned,
};
pub use entities::{
    Item, ItemBatch, ItemListing, ItemPage, ItemQuery, ListingHead, Product, User, seeded_users,
};
pub use idempotency::{IdempotencyKey, KEY_LIFETIME, Keyed};
pub use ports::{
    DependencyDown, HealthCheck, ItemRepository, ProductRepository, Replaced, Repositories,
    UserRepository,
};
pub use rate_limit::{Gcra, RateLimitStore, RateLimitStoreError, RateLimiter, Spent, Verdict};
pub use repository_error::RepositoryError;
pub use uploads::{
    FileWriter, PendingUpload, StorageFull, StoredFile, StoredFiles, StoredName, TextField,
    TextWriter, Upload, UploadError, UploadPolicy, UploadService, UploadSession, UploadStore,
    UploadStoreError,
};
pub use use_cases::{
    ChangeService, CreateError, Created, GetItemError, ItemService, Precondition, ProductService,
    ReplaceItemError, UserService,
};
pub use values::{Id, InvalidValue, Name, PageLimit, Price};
