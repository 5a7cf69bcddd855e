//! The resources the public server answers (spec §4): for each, its
//! handlers with their OpenAPI descriptions, the DTOs they read and send,
//! and the HTTP answer to each failure of its use cases.
//!
//! - [`items`]: `/items` and `/items/{id}`: pages, the streamed full
//!   listing and the change feed (C2, C3, C7, C10, C14);
//! - [`products`]: `/products` and `/products/{id}`;
//! - [`users`]: `/users`, read only (C4);
//! - [`auxiliary`]: `/`, `/hello`, `/data`, `/login` and `/api/users`;
//! - [`uploads`]: `/profile` and `/photos/upload`, their multipart bodies
//!   streamed into the upload use case by `multipart.rs` (C5).
//!
//! Handlers build on `support` alone, and count what they do in
//! `metrics`; which path and method reach which handler is the server's
//! route table.

pub(crate) mod auxiliary;
pub(crate) mod items;
mod multipart;
pub(crate) mod products;
pub(crate) mod uploads;
pub(crate) mod users;

pub use items::ChangeStreamSettings;
pub(crate) use items::ChangeStreams;
pub use uploads::UploadLimits;
pub(crate) use uploads::Uploads;
