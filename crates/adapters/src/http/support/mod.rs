//! What the handlers share, and the edge with them: the one error type and
//! its problem documents, the builders of success responses, request
//! bodies and their fields, and the rules each answer follows whichever
//! handler makes it. Nothing here imports a handler or the edge.
//!
//! - [`problem`]: [`ApiError`], the one place that renders error bodies (C6);
//! - [`respond`]: the success responses, constant bodies among them;
//! - [`body`]: media type, size limit and read timeout of request bodies,
//!   and the [`JsonObject`] extractor (C3); [`fields`]: body fields read
//!   into domain values (C3, C6);
//! - [`idempotency`]: the `Idempotency-Key` of creates (C7);
//! - [`consistency`]: the `Consistency-Token` of item and product requests,
//!   read by [`ItemsAt`] and [`ProductsAt`], stamped on their answers (C13);
//! - [`conditional`]: entity tags and conditional requests (C7);
//!   [`compression`]: content coding (C7);
//! - [`header_list`]: headers whose value is a list, q-values included;
//! - [`spool`]: what a streamed body waits in for a slow client (C12);
//! - [`Draining`]: whether the service has begun to stop (C1, C14);
//!   [`REQUEST_TARGET`]: where lines about one request are logged (C1).

pub(crate) mod body;
pub(crate) mod compression;
pub(crate) mod conditional;
pub(crate) mod consistency;
mod draining;
pub(crate) mod fields;
pub(crate) mod header_list;
pub(crate) mod idempotency;
mod log_target;
pub mod problem;
pub(crate) mod respond;
pub(crate) mod spool;

pub use body::BodyLimits;
pub(crate) use body::JsonObject;
pub(crate) use consistency::{ItemsAt, ProductsAt};
pub use draining::Draining;
pub use log_target::REQUEST_TARGET;
pub(crate) use problem::{ApiError, FieldError, Location, Problem};
pub use spool::SpoolSettings;
