//! The domain of items-service: what an item, a product and a user are, the
//! rules their values obey, the ports the domain needs from the outside world
//! and the use cases that apply the rules.
//!
//! Design rules for this crate:
//! - no I/O, no HTTP, no SQL, no async runtime: adapters bring those;
//! - every value that reaches an entity went through a fallible constructor
//!   ([`Name::parse`], [`Price::new`], [`Id::parse`]), so an entity that
//!   exists is valid;
//! - every port method documents, under `# Errors`, what each implementation
//!   MUST return; the repository contract checks test exactly that, for
//!   every adapter.

pub mod entities;
pub mod ports;
pub mod rate_limit;
pub mod uploads;
pub mod use_cases;
pub mod values;

pub use entities::{Item, ItemBatch, ItemListing, ItemPage, ItemQuery, Product, User};
pub use ports::{
    HealthCheck, ItemRepository, ProductRepository, Replaced, RepositoryError, UserRepository,
};
pub use rate_limit::{Gcra, RateLimitStore, RateLimiter, Spent, Verdict};
pub use uploads::{PendingUpload, StoredName, UploadService, UploadStore, UploadStoreError};
pub use use_cases::{
    GetItemError, ItemService, Precondition, ProductService, ReplaceItemError, UserService,
};
pub use values::{Id, InvalidValue, Name, PageLimit, Price};
