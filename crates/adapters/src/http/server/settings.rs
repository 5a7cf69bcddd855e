//! How the public server behaves, from the service's configuration (C1),
//! and its defaults.

use std::sync::Arc;
use std::time::Duration;

use crate::http::edge::{RateLimitSettings, RequestLog, RequestTracer, default_request_log};
use crate::http::resources::{ChangeStreamSettings, UploadLimits};
use crate::http::support::{BodyLimits, Draining, SpoolSettings};

/// C12: a client that reads nothing of a response for this long is
/// disconnected, unless `SEND_TIMEOUT_MS` says otherwise.
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// event ([`TracingRequestLog`](crate::http::TracingRequestLog)).
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

/// The service's defaults (C1), one worker per core.
impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            body_limits: BodyLimits::default(),
            workers: std::thread::available_parallelism().map_or(1, usize::from),
            upload_limits: UploadLimits::default(),
            changes: ChangeStreamSettings::default(),
            rate_limit: RateLimitSettings::default(),
            draining: Draining::default(),
            request_log: default_request_log(),
            tracer: None,
            spool: SpoolSettings::default(),
            send_timeout: DEFAULT_SEND_TIMEOUT,
        }
    }
}
