//! The OpenAPI 3.1 document of the HTTP adapter, derived from the
//! handlers' `#[utoipa::path]` annotations and the DTOs they read and send,
//! then completed with what holds for many operations at once.
//! [`openapi_json`] prints it (`items-service openapi`, the admin
//! listener's `/openapi.json`); [`documented_operations`] lists what it
//! describes, for the test that holds it to the route table.
//!
//! - `document.rs`: the document, which operations it lists, and the
//!   failures of a store added to those that use one (C12);
//! - `steps.rs`: the other steps: conditional `GET` (C7), consistency
//!   tokens (C13), body refusals, rate limiting (C9), upload text fields
//!   (C5) and parameter examples.

mod document;
mod steps;

pub use document::{documented_operations, openapi_json};
