//! The one middleware of the public server: everything that happens to
//! every request around the routes, in one layer. The other modules hold
//! the work and this one the order, per request:
//! 1. the request body is watched, so an unread one closes the connection
//!    (C5), and so does a stop in progress (C1) — [`connection`];
//! 2. the request is counted in flight and its duration recorded by route
//!    template (C11) — [`metrics`];
//! 3. a CORS preflight is answered here, before the limiter, so it is never
//!    counted (C8, C9) — [`cors`];
//! 4. otherwise the client's budget is spent: a `429` is answered without
//!    routing, an admitted request gets the `RateLimit-*` headers (C9) —
//!    [`rate_limit`];
//! 5. the routes answer, an item or product answer of a store that gives
//!    positions with its `Consistency-Token` (C13) — [`consistency`]; a
//!    `200` to a `GET`/`HEAD` gets its `ETag`, in the content coding chosen
//!    for its body, or becomes a `304` (C7) — [`conditional`]; the answer
//!    to another method is compressed as the same rules say (C7) —
//!    [`compression`];
//! 6. every answer but a preflight's gets the CORS headers, a `429`
//!    included (C8) — [`cors`];
//! 7. every response is marked `nosniff` (C4) and logged in one line, also
//!    a request whose client went away before it was answered.
//!
//! With traces on (C11), steps 4 and 5 run inside the request's server
//! span ([`request_trace`]), which records the route and status, and the
//! log line carries the span's ids.
//!
//! Invariant: a request whose client reset the connection mid-request is
//! logged too: actix then drops the request's future, with no response, and
//! the [`RequestLine`] guard writes the line with status [`CLIENT_CLOSED`]
//! (without it an upload cut that way would leave no trace in the log).
//!
//! Why one layer: each actix-web layer costs a boxed future and a dynamic
//! call per request; four into one saved ~2,000 instructions a `GET /`, and
//! with CORS by hand, the limiter and `ETag`s folded in, 26,204 → 22,359
//! (docs/performance.md "The HTTP edge and the request log, measured").
//!
//! [`connection`]: super::connection
//! [`metrics`]: crate::http::metrics
//! [`cors`]: super::cors
//! [`rate_limit`]: super::rate_limit
//! [`conditional`]: crate::http::support::conditional
//! [`consistency`]: crate::http::support::consistency
//! [`compression`]: crate::http::support::compression
//! [`request_trace`]: super::request_trace

use std::future::{Ready, ready};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::body::BoxBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform, forward_ready};
use actix_web::http::Method;
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::uri::PathAndQuery;
use futures_util::future::LocalBoxFuture;
use tracing::Instrument;

use super::connection;
use super::cors;
use super::rate_limit::{Admission, Limiter};
use super::request_log::{CLIENT_CLOSED, RequestLog, RequestRecord};
use super::request_trace::{RequestTracer, TracedRequest};
use crate::http::metrics::RequestMetrics;
use crate::http::support::compression;
use crate::http::support::conditional::{self, Tagged};
use crate::http::support::{Draining, consistency};

/// The request line still to be written; written on drop as
/// [`CLIENT_CLOSED`] when the request's future is dropped before a response.
struct RequestLine<'a> {
    log: &'a dyn RequestLog,
    method: Method,
    /// The request target's path and query: cloning it shares its bytes,
    /// no copy of the path per request, and it is one shared buffer where
    /// the whole `Uri` is three (~50 instructions a request, callgrind).
    /// `None` for a target without a path (authority form).
    target: Option<PathAndQuery>,
    started: Instant,
    written: bool,
    /// The request's server span, when traces are on (boxed: a request
    /// not traced carries one pointer).
    traced: Option<Box<TracedRequest>>,
}

impl RequestLine<'_> {
    /// Reads the clock once: the request's latency and the line's time.
    fn finish(&self) -> (Instant, Duration) {
        let finished = Instant::now();
        (finished, finished.saturating_duration_since(self.started))
    }

    fn write(&mut self, status: u16, finished: Instant, latency: Duration) {
        self.written = true;
        self.log.write(&RequestRecord {
            method: self.method.as_str(),
            // What `Uri::path` answers for any target a request line carries.
            path: self.target.as_ref().map_or("", PathAndQuery::path),
            status,
            latency_us: u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
            finished,
            trace: self.traced.as_ref().and_then(|traced| traced.ids()),
        });
    }
}

impl Drop for RequestLine<'_> {
    fn drop(&mut self) {
        if !self.written {
            let (finished, latency) = self.finish();
            self.write(CLIENT_CLOSED, finished, latency);
        }
    }
}

/// What the edge of one worker holds.
pub(crate) struct Edge {
    pub(crate) draining: Draining,
    pub(crate) metrics: RequestMetrics,
    /// Shared by every worker, so a client's budget is per process (or per
    /// fleet, over Redis), not per worker thread.
    pub(crate) limiter: Arc<Limiter>,
    pub(crate) request_log: Arc<dyn RequestLog>,
    /// Set when traces are on (C11).
    pub(crate) tracer: Option<Arc<dyn RequestTracer>>,
}

/// The edge as an actix-web middleware, wrapped around the whole app.
///
/// Written out rather than made with `middleware::from_fn`: that helper
/// boxes the routes behind a `dyn` service, so each request paid a second
/// boxed future, a dynamic call and an empty extraction on top of the
/// edge's own future. Here the routes are the concrete service `S`, called
/// directly. The edge's future is boxed once per request and copied whole
/// into its box, so what it holds across an `await` is kept small: the
/// rare cases (a streamed body to tag, a refusal) are boxed where they
/// happen. Together: 1,336 → 712 bytes a future, and `GET /` 21,256 →
/// 21,107 instructions (callgrind, limiter on). Without `from_fn` but with
/// the large future it was 291 more, not fewer: a box of 1,336 bytes is
/// past glibc's per-thread cache of small blocks, so every request's
/// allocation took the slow path.
pub(crate) struct EdgeLayer(pub(crate) Rc<Edge>);

impl<S> Transform<S, ServiceRequest> for EdgeLayer
where
    S: Service<ServiceRequest, Response = ServiceResponse<BoxBody>, Error = actix_web::Error>
        + 'static,
{
    type Response = ServiceResponse<BoxBody>;
    type Error = actix_web::Error;
    type Transform = EdgeService<S>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, routes: S) -> Self::Future {
        ready(Ok(EdgeService {
            edge: Rc::clone(&self.0),
            routes: Rc::new(routes),
        }))
    }
}

/// One worker's edge around its routes (see [`EdgeLayer`]).
pub(crate) struct EdgeService<S> {
    edge: Rc<Edge>,
    routes: Rc<S>,
}

impl<S> Service<ServiceRequest> for EdgeService<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<BoxBody>, Error = actix_web::Error>
        + 'static,
{
    type Response = ServiceResponse<BoxBody>;
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self::Response, Self::Error>>;

    forward_ready!(routes);

    fn call(&self, request: ServiceRequest) -> Self::Future {
        Box::pin(edge(
            Rc::clone(&self.edge),
            request,
            Rc::clone(&self.routes),
        ))
    }
}

/// The middleware (see the module's documentation).
async fn edge<S>(
    edge: Rc<Edge>,
    mut request: ServiceRequest,
    routes: Rc<S>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error>
where
    S: Service<ServiceRequest, Response = ServiceResponse<BoxBody>, Error = actix_web::Error>,
{
    let mut line = RequestLine {
        log: &*edge.request_log,
        method: request.method().clone(),
        target: request.uri().path_and_query().cloned(),
        started: Instant::now(),
        written: false,
        traced: edge
            .tracer
            .as_ref()
            .map(|tracer| TracedRequest::start(tracer, &request)),
    };
    let body = connection::watch_body(&mut request);
    let _in_flight = edge.metrics.enter();
    let mut response = if cors::is_preflight(&request) {
        cors::answer_preflight(request)
    } else {
        let origin = cors::has_origin(&request);
        let served = serve(&edge.limiter, request, &*routes, line.started);
        let served = match &line.traced {
            None => served.await,
            // Boxed, so a request not traced keeps the smaller future.
            Some(traced) => Box::pin(served.instrument(traced.span.clone())).await,
        };
        match served {
            Ok(mut response) => {
                cors::decorate(response.headers_mut(), origin);
                response
            }
            // Inner layers answer with `Ok` responses (errors are rendered
            // by `ApiError`); an `Err` is actix-web's own, answered before
            // any route ran. Its response gets the CORS headers when
            // actix-web renders it.
            Err(mut error) => {
                let status = error.as_response_error().status_code();
                let (finished, elapsed) = line.finish();
                edge.metrics.record(&line.method, None, status, elapsed);
                if let Some(traced) = &line.traced {
                    traced.finish(&line.method, None, status.as_u16());
                }
                line.write(status.as_u16(), finished, elapsed);
                error.add_response_mapper(move |mut response| {
                    cors::decorate(response.headers_mut(), origin);
                    response
                });
                return Err(error);
            }
        }
    };
    // The edge is the only writer of this header, so it is appended (no
    // replaced value to move out; `every_response_carries_nosniff_c4`
    // would see a second line).
    response.headers_mut().append(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    let (finished, elapsed) = line.finish();
    let status = response.status();
    edge.metrics.record(
        &line.method,
        response.request().match_name(),
        status,
        elapsed,
    );
    if let Some(traced) = &line.traced {
        traced.finish(
            &line.method,
            response.request().match_name(),
            status.as_u16(),
        );
    }
    line.write(status.as_u16(), finished, elapsed);
    Ok(connection::finish(response, body.as_ref(), &edge.draining))
}

/// Steps 4 and 5: the limiter, the routes, the entity tag and the
/// content coding.
async fn serve<S>(
    limiter: &Limiter,
    request: ServiceRequest,
    routes: &S,
    arrived: Instant,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error>
where
    S: Service<ServiceRequest, Response = ServiceResponse<BoxBody>, Error = actix_web::Error>,
{
    let admission = match limiter.admit(&request, arrived).await {
        Admission::Refused(refusal) => return Ok(request.into_response(*refusal)),
        admission => admission,
    };
    let conditional = conditional::is_conditional(&request);
    // No clone of the request may be held across `routes.call`: routing
    // needs the only reference to write the path's match info.
    let mut response = consistency::stamp(routes.call(request).await?);
    admission.mark(response.headers_mut());
    if conditional {
        response = match conditional::tag(response) {
            Tagged::Now(tagged) => tagged,
            Tagged::Later(tagging) => tagging.await?,
        };
    } else {
        response = compression::compress(response);
    }
    Ok(response)
}
