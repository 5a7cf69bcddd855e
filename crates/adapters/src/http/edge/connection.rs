//! What becomes of a connection after its response: it is closed when the
//! request's body was not read to its end (C5), and when the service has
//! begun to stop (C1); otherwise it is kept alive for the next request.
//!
//! Why the body matters: actix-http "drains" a chunked body nobody reads,
//! reading and discarding it until its last chunk — for ever, if the client
//! never sends one. A `GET /` with `Transfer-Encoding: chunked` and no body
//! kept its connection (and a file descriptor) after its 200, 429 or 408;
//! one was still open 230 s later. actix-http closes instead when the
//! request's payload is unfinished *and still held* when the response is
//! written, so [`finish`] holds it: the response body keeps the
//! payload until the last byte is written, whatever the handler did with it.

use std::cell::RefCell;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use actix_web::HttpMessage as _;
use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::ConnectionType;
use actix_web::middleware::Next;
use actix_web::web::Bytes;
use futures_util::Stream;

use crate::http::support::Draining;

/// The middleware form of [`watch_body`] and [`finish`], for a server
/// without the public edge (the admin listener).
pub(crate) async fn close_when_done(
    draining: Draining,
    mut request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let body = watch_body(&mut request);
    let response = next.call(request).await?.map_into_boxed_body();
    Ok(finish(response, body.as_ref(), &draining))
}

/// Gives the routes a view of the request's body that remembers whether it
/// reached its end; `None` when the request has no body.
pub(crate) fn watch_body(request: &mut ServiceRequest) -> Option<WatchedBody> {
    match request.take_payload() {
        Payload::None => None,
        payload => {
            let shared = Rc::new(SharedBody {
                payload: RefCell::new(payload),
                ended: std::cell::Cell::new(false),
            });
            request.set_payload(Payload::Stream {
                payload: Box::pin(BodyView(Rc::clone(&shared))),
            });
            Some(WatchedBody(shared))
        }
    }
}

/// Answers with `Connection: close` when the service is stopping or (by
/// holding the unfinished body until the response is written) when the
/// request's body was not read to its end.
pub(crate) fn finish(
    mut response: ServiceResponse<BoxBody>,
    body: Option<&WatchedBody>,
    draining: &Draining,
) -> ServiceResponse<BoxBody> {
    if draining.has_begun() {
        response
            .response_mut()
            .head_mut()
            .set_connection_type(ConnectionType::Close);
    }
    match body {
        Some(WatchedBody(body)) if !body.ended.get() => {
            let body = Rc::clone(body);
            response.map_body(|_, inner| {
                BoxBody::new(HoldingBody {
                    inner,
                    _request_body: body,
                })
            })
        }
        _ => response,
    }
}

/// A request body seen by [`watch_body`].
pub(crate) struct WatchedBody(Rc<SharedBody>);

/// The request's body, shared by the route's view of it and, once the
/// response is built, by the response body that holds it.
struct SharedBody {
    payload: RefCell<Payload>,
    /// The view has yielded the body's end (or an error ending it).
    ended: std::cell::Cell<bool>,
}

/// What the routes read the request body through.
struct BodyView(Rc<SharedBody>);

impl Stream for BodyView {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let shared = &self.0;
        // Only this view borrows the payload, and never across polls.
        let Ok(mut payload) = shared.payload.try_borrow_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(&mut *payload).poll_next(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            shared.ended.set(true);
        }
        polled
    }
}

/// A response body that keeps the unfinished request body alive until the
/// response is written, so actix-http closes the connection rather than
/// draining a body that may never end.
struct HoldingBody {
    inner: BoxBody,
    _request_body: Rc<SharedBody>,
}

impl MessageBody for HoldingBody {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        self.inner.size()
    }

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Pin::new(&mut self.inner).poll_next(cx)
    }
}
