//! The driving adapter: the service over HTTP with actix-web.
//!
//! Handlers translate HTTP to use-case calls and back: they parse and
//! validate what the client sent into domain values (DTO → domain at the
//! edge), call a use case, and render its result or error. Business rules
//! stay in the domain; the only place that renders error bodies is
//! [`problem`].

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
