//! The driving adapter: the service over HTTP with actix-web.
//!
//! Handlers translate HTTP to use-case calls and back: they parse and
//! validate what the client sent into domain values (DTO → domain at the
//! edge), call a use case, and render its result or error. Business rules
//! stay in the domain; the only place that renders error bodies is
//! [`problem`].

pub mod admin;
mod api_docs;
mod edge;
mod front_door;
pub mod metrics;
pub mod openapi;
mod resources;
mod routes;
mod server;
mod support;

use std::sync::Arc;
use std::time::Duration;

use items_domain::{
    ChangeService, ConsistentReads, ItemService, ProductService, RateLimiter, Repositories,
    UploadService, UploadStore, UserService,
};

pub use admin::{AdminServer, Readiness, RenderMetrics};
pub use api_docs::ApiDocs;
pub use edge::{
    CLIENT_CLOSED, RateLimitSettings, RequestLog, RequestRecord, RequestTracer, TraceIds,
    TracingRequestLog,
};
pub use resources::{ChangeStreamSettings, UploadLimits};
pub use routes::route_table;
pub use server::{DEFAULT_SEND_TIMEOUT, HttpServer, HttpServerHandle};
pub use support::{BodyLimits, Draining, REQUEST_TARGET, SpoolSettings, problem};

/// The use cases the HTTP adapter drives.
#[derive(Clone)]
pub struct Services {
    pub items: ItemService,
    /// The change feed of the items (C14); `None` for a store without one.
    pub changes: Option<ChangeService>,
    pub products: ProductService,
    pub users: UserService,
    pub uploads: UploadService,
    /// Rate-limit budgets (C9); used when `HttpSettings::rate_limit` sets a maximum.
    pub rate_limits: RateLimiter,
    /// The store's reads at or after a `Consistency-Token`, for a store
    /// that gives positions (C13); `None`: tokens are checked and ignored.
    pub reads: Option<Arc<dyn ConsistentReads>>,
}

impl Services {
    /// The use cases wired over one store's `repositories` (in memory,
    /// PostgreSQL, or any adapter's), an upload store and the rate-limit
    /// budgets: the one place they are put together.
    pub fn new(
        repositories: Repositories,
        uploads: Arc<dyn UploadStore>,
        rate_limits: RateLimiter,
    ) -> Self {
        let Repositories {
            items,
            products,
            users,
            changes,
        } = repositories;
        Self {
            items: ItemService::new(items),
            changes: changes.map(ChangeService::new),
            products: ProductService::new(products),
            users: UserService::new(users),
            uploads: UploadService::new(uploads),
            rate_limits,
            reads: None,
        }
    }

    /// The same use cases, each item and product request scoped by `reads`
    /// to its `Consistency-Token`, and answered with the position it was
    /// served at (C13).
    #[must_use]
    pub fn with_reads(mut self, reads: Arc<dyn ConsistentReads>) -> Self {
        self.reads = Some(reads);
        self
    }
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("reads", &self.reads.is_some())
            .finish_non_exhaustive()
    }
}

/// How the HTTP adapter behaves, from the service's configuration (C1).
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub body_limits: BodyLimits,
    /// Worker threads, each with its own event loop.
    pub workers: usize,
    pub rate_limit: RateLimitSettings,
    pub upload_limits: UploadLimits,
    /// The change streams (C14): how many, how often a heartbeat.
    pub changes: ChangeStreamSettings,
    /// Set when the service begins to stop: responses then say
    /// `Connection: close` (C1).
    pub draining: Draining,
    /// Where the one line per request goes (C1); by default a `tracing`
    /// event ([`TracingRequestLog`]).
    pub request_log: Arc<dyn RequestLog>,
    /// The server span of each request when traces are on (C11); `None`:
    /// no span, and nothing else to pay.
    pub tracer: Option<Arc<dyn RequestTracer>>,
    /// Where a streamed response waits for a client slower than the store
    /// (C12: the full listing's spool).
    pub spool: SpoolSettings,
    /// How long a client may read nothing of a response before its
    /// connection is cut (`SEND_TIMEOUT_MS`, C12).
    pub send_timeout: Duration,
}
