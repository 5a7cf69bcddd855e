//! `/items` and `/items/{id}` (spec §4 "Items", C2, C3, C7, C10): the
//! handlers and what they read, write and answer, one concern per file.
//!
//! - [`handlers`]: the five operations and their OpenAPI descriptions;
//! - [`dto`]: the request body and the item as JSON, with their schemas;
//! - [`query`]: the query of `GET /items` (C10), its `next` link and its
//!   `X-Total-Count`;
//! - [`listing_json`]: the hand-written item JSON of the listing and of
//!   `GET /items/{id}`, byte for byte what serde_json writes;
//! - [`stream`]: the full listing streamed a batch at a time;
//! - [`changes`]: the change feed (C14), one task per stream, and [`sse`],
//!   its frames and how a request asks for it;
//! - [`errors`]: the HTTP answer to each failure of the item use cases.

mod changes;
mod dto;
mod errors;
pub(crate) mod handlers;
mod listing_json;
mod query;
mod sse;
mod stream;

pub use changes::ChangeStreamSettings;
pub(crate) use changes::ChangeStreams;
