//! Read-your-writes across instances (C13): the `Consistency-Token`
//! request header read into a [`Position`], the use cases of one request
//! scoped to it, and the token of the position served written on the
//! answer.
//!
//! Every item and product route takes its use cases through [`ItemsAt`] or
//! [`ProductsAt`]: they refuse a malformed token (400, C6) for every store,
//! and over a store that gives positions ([`ConsistentReads`], set with
//! [`Services::with_reads`](crate::http::Services::with_reads)) they run the
//! request in a scope of its own, whose report the edge reads once the
//! route answered ([`stamp`]): the token on a 2xx, a 304 or a 404, or a 409
//! `consistency-unmet` when no copy of the store could meet the request's
//! token. Over a store that gives none (memory, SQLite) the shared use
//! cases serve, and no token is sent.

use std::future::{Ready, ready};
use std::ops::Deref;
use std::sync::Arc;

use actix_web::body::BoxBody;
use actix_web::dev::{Payload, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{FromRequest, HttpMessage, HttpRequest, ResponseError, web};
use items_domain::{ConsistentReads, ItemService, Position, ProductService, ReadReport, ReadScope};
use serde_json::Value;

use super::problem::{ApiError, FieldError, Location};

/// The request and response header (C13).
pub(crate) const CONSISTENCY_TOKEN: HeaderName = HeaderName::from_static("consistency-token");

/// The store's consistent reads, when it gives positions (PostgreSQL).
#[derive(Clone, Default)]
pub(crate) struct Reads(pub(crate) Option<Arc<dyn ConsistentReads>>);

/// The item use cases of one request (C13).
pub(crate) struct ItemsAt(ItemService);

/// The product use cases of one request (C13).
pub(crate) struct ProductsAt(ProductService);

impl Deref for ItemsAt {
    type Target = ItemService;

    fn deref(&self) -> &ItemService {
        &self.0
    }
}

impl Deref for ProductsAt {
    type Target = ProductService;

    fn deref(&self) -> &ProductService {
        &self.0
    }
}

impl FromRequest for ItemsAt {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            scoped(request, |shared: &ItemService, scope| {
                shared.scoped(Arc::clone(&scope.repositories.items))
            })
            .map(Self),
        )
    }
}

impl FromRequest for ProductsAt {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            scoped(request, |shared: &ProductService, scope| {
                shared.scoped(Arc::clone(&scope.repositories.products))
            })
            .map(Self),
        )
    }
}

/// The shared use cases `S`, or over a store that gives positions, the
/// ones `narrow` makes for this request's scope (its report kept in the
/// request's extensions for [`stamp`]).
fn scoped<S: Clone + 'static>(
    request: &HttpRequest,
    narrow: impl FnOnce(&S, &ReadScope) -> S,
) -> Result<S, ApiError> {
    let at = token(request)?;
    let shared = request
        .app_data::<web::Data<S>>()
        .ok_or_else(|| ApiError::internal("the use cases are not registered"))?;
    let reads = request
        .app_data::<web::Data<Reads>>()
        .and_then(|reads| reads.0.clone());
    let Some(reads) = reads else {
        return Ok(S::clone(shared));
    };
    let scope = reads.scope(at);
    request.extensions_mut().insert(Arc::clone(&scope.report));
    Ok(narrow(shared, &scope))
}

/// The request's token: `None` without the header; 400 when it is sent
/// more than once or is not a position's text (C13, C6).
fn token(request: &HttpRequest) -> Result<Option<Position>, ApiError> {
    let mut values = request.headers().get_all(CONSISTENCY_TOKEN);
    let Some(first) = values.next() else {
        return Ok(None);
    };
    let refused = |msg: &str| {
        let text = String::from_utf8_lossy(first.as_bytes()).into_owned();
        ApiError::invalid(
            "The Consistency-Token header is invalid.",
            vec![FieldError::new(
                Location::Headers,
                "consistency-token",
                Some(Value::String(text)),
                format!("Consistency-Token {msg}"),
            )],
        )
    };
    if values.next().is_some() {
        return Err(refused("must be sent once"));
    }
    let text = first
        .to_str()
        .map_err(|_| refused("must be visible ASCII"))?;
    Position::parse(text)
        .map(Some)
        .map_err(|_| refused("must be a token this service sent"))
}

/// Writes what the request's scope served on the route's answer (C13): a
/// 409 `consistency-unmet` when no copy of the store could meet its token,
/// else the token of the position served on a 2xx or a 404 (a 200 that
/// becomes a 304 keeps it). A request without a scope (a store that gives
/// no positions, a route of neither items nor products) is left as it is.
pub(crate) fn stamp(response: ServiceResponse<BoxBody>) -> ServiceResponse<BoxBody> {
    let report = response
        .request()
        .extensions()
        .get::<Arc<ReadReport>>()
        .cloned();
    let Some(report) = report else {
        return response;
    };
    if report.is_unmet() {
        return response.into_response(ApiError::ConsistencyUnmet.error_response());
    }
    let status = response.status();
    let answered = status.is_success()
        || status == StatusCode::NOT_MODIFIED
        || status == StatusCode::NOT_FOUND;
    let mut response = response;
    if answered
        && let Some(position) = report.position()
        && let Ok(value) = HeaderValue::try_from(position.to_string())
    {
        response.headers_mut().insert(CONSISTENCY_TOKEN, value);
    }
    response
}
