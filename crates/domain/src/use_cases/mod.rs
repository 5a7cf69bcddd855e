//! Use cases: one service per resource, holding the ports it needs.
//!
//! Each operation that can fail in more than one way has its own error enum,
//! so a caller matches exactly the failures that operation can produce.

mod changes;
mod items;
mod keyed;
mod products;
mod users;

pub use changes::ChangeService;
pub use items::{GetItemError, ItemService, Precondition, ReplaceItemError};
pub use keyed::{CreateError, Created};
pub use products::ProductService;
pub use users::UserService;
