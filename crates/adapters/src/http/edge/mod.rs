//! The edge: the one middleware of the public server, everything done to
//! every request around the routes, as one layer ([`EdgeLayer`];
//! `layer.rs` states the order of its steps, and why one layer). The
//! server builds it from the rate limiter (C9), the request log (C1) and
//! the request tracer (C11); the admin listener takes its body watch
//! alone (C5). Each step's work is a file of its own:
//!
//! - `connection.rs`: the watch on a request's body, and whether its
//!   connection is kept after the response (C1, C5);
//! - `cors.rs`: preflights and the CORS headers (C8);
//! - `rate_limit/`: the client's budget and the `RateLimit-*` headers (C9);
//! - `request_log.rs`: where the one line per request goes (C1);
//! - `request_trace.rs`: the server span of a traced request (C11).
//!
//! What the edge shares with the handlers (entity tags and conditional
//! requests, content coding, consistency tokens) is theirs, in `support`:
//! the edge calls it, and no handler imports anything from here.

mod connection;
mod cors;
mod layer;
mod rate_limit;
mod request_log;
mod request_trace;

pub(crate) use connection::close_when_done;
pub(crate) use layer::{Edge, EdgeLayer};
pub(crate) use rate_limit::Limiter;
pub use rate_limit::RateLimitSettings;
pub(crate) use request_log::default_sink as default_request_log;
pub use request_log::{CLIENT_CLOSED, RequestLog, RequestRecord, TracingRequestLog};
pub use request_trace::{RequestTracer, TraceIds};
