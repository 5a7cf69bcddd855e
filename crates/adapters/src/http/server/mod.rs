//! The listeners: the public server ([`HttpServer`], the edge around the
//! route table) and what it is built from ([`Services`], [`HttpSettings`]),
//! and the admin listener ([`AdminServer`]: probes, metrics and the API's
//! documents, C11).
//!
//! - `public.rs`: binding the public server, its timeouts and its
//!   graceful stop (C1, C12);
//! - `routes.rs`: the route table, and every path's `HEAD`, `OPTIONS` and
//!   405 (C7);
//! - `front_door.rs`: the listener closed to new clients before a stop,
//!   so none already connected is reset (C1);
//! - [`admin`]: the admin listener, and `api_docs.rs` the documents it
//!   serves (`/openapi.json`, `/docs`);
//! - `services.rs` and `settings.rs`: the use cases and the settings the
//!   public server is given.

pub mod admin;
mod api_docs;
mod front_door;
mod public;
mod routes;
mod services;
mod settings;

pub use admin::{AdminServer, Readiness, RenderMetrics};
pub use api_docs::ApiDocs;
pub use public::{HttpServer, HttpServerHandle};
pub use routes::route_table;
pub use services::Services;
pub use settings::{DEFAULT_SEND_TIMEOUT, HttpSettings};
