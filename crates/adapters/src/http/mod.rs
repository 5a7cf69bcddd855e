//! The driving adapter: the service over HTTP with actix-web.
//!
//! Handlers translate HTTP to use-case calls and back: they parse and
//! validate what the client sent into domain values (DTO → domain at the
//! edge), call a use case, and render its result or error. Business rules
//! stay in the domain; the only place that renders error bodies is
//! [`problem`].
//!
//! Its rooms, each a directory whose `mod.rs` says what it offers:
//! - `server`: the listeners, the public server ([`HttpServer`], built from
//!   [`Services`] and [`HttpSettings`]) and the [`admin`] listener, and the
//!   route table;
//! - `edge`: the one middleware around the routes: each connection's fate,
//!   CORS (C8), the rate limiter (C9), the request log (C1) and span (C11);
//! - `resources`: the handlers of each resource (spec §4);
//! - `support`: what the handlers share, and the edge with them: errors
//!   (C6), responses, request bodies, entity tags and conditional requests,
//!   content coding (C7), consistency tokens (C13), the listing's spool;
//! - [`openapi`]: the OpenAPI document, derived from the handlers;
//! - [`metrics`]: what the service reports to `/metrics` (C11).
//!
//! Dependencies go one way: the server wires the edge, the resources and
//! the document; the edge and the resources build on `support`, which
//! builds on nothing here; the document reads the resources; any room may
//! report to `metrics`. No handler imports anything of the edge.

mod edge;
pub mod metrics;
pub mod openapi;
mod resources;
mod server;
mod support;

pub use edge::{
    CLIENT_CLOSED, RateLimitSettings, RequestLog, RequestRecord, RequestTracer, TraceIds,
    TracingRequestLog,
};
pub use resources::{ChangeStreamSettings, UploadLimits};
pub use server::{
    AdminServer, ApiDocs, DEFAULT_SEND_TIMEOUT, HttpServer, HttpServerHandle, HttpSettings,
    Readiness, RenderMetrics, Services, admin, route_table,
};
pub use support::{BodyLimits, Draining, REQUEST_TARGET, SpoolSettings, problem};
