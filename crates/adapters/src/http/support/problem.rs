//! The one HTTP error type and the one place that renders error bodies.
//!
//! Every failure the spec does not define is an RFC 9457 problem document
//! (`application/problem+json`, C6). The spec's own error bodies keep their
//! shape: `Item not found` stays plain text ([`ApiError::ItemNotFound`]).
//! Internal causes are logged here and never sent.

use std::fmt;

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, HttpResponseBuilder, ResponseError};
use items_domain::{CreateError, RepositoryError};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::report::ErrorChain;

pub(crate) const PROBLEM_JSON: &str = "application/problem+json";
pub(crate) const TEXT_PLAIN: &str = "text/plain; charset=utf-8";

/// Where a refused value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = FieldLocation)]
pub enum Location {
    Body,
    Query,
    /// A request header (`Idempotency-Key`, C7), as express-validator names it.
    Headers,
}

/// One refused value (C6), shaped like express-validator's entries.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct FieldError {
    /// Always `field`.
    #[serde(rename = "type")]
    kind: &'static str,
    /// The value as received; absent when the value was missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<serde_json::Value>)]
    value: Option<Box<Value>>,
    msg: String,
    path: &'static str,
    location: Location,
}

impl FieldError {
    pub fn new(
        location: Location,
        path: &'static str,
        value: Option<Value>,
        msg: impl Into<String>,
    ) -> Self {
        Self {
            kind: "field",
            value: value.map(Box::new),
            msg: msg.into(),
            path,
            location,
        }
    }
}

/// Every error the HTTP adapter answers with. Each variant says its status.
#[derive(Debug)]
pub enum ApiError {
    /// 400: the request broke a rule; `errors` name the refused values.
    BadRequest {
        detail: String,
        errors: Vec<FieldError>,
    },
    /// 404 with the spec's plain-text body `Item not found` (spec §7).
    ItemNotFound,
    /// 404 problem: no route has this path (C7).
    RouteNotFound,
    /// 405 problem with `Allow` (C7).
    MethodNotAllowed { allow: String },
    /// 408 problem: the client sent its body too slowly.
    RequestTimeout,
    /// 409 problem with `Retry-After`: a create with the same
    /// `Idempotency-Key` is still in flight (C7).
    KeyInFlight,
    /// 406 problem: the representation asked for cannot be served (the
    /// change feed of a store that keeps none, C14).
    NotAcceptable { detail: &'static str },
    /// 409 problem of type `consistency-unmet`: no copy of the store can
    /// answer at or after the request's `Consistency-Token` (its write was
    /// lost by a failover, C13).
    ConsistencyUnmet,
    /// 412 problem: `If-Match` did not match the current item (C7).
    PreconditionFailed,
    /// 413 problem: the body or a file is larger than allowed (C3, C5).
    PayloadTooLarge { detail: String },
    /// 415 problem: the body is not of the media type the route reads (C3, C5).
    UnsupportedMediaType { expected: &'static str },
    /// 422 problem: the `Idempotency-Key` was used with another body (C7).
    KeyReused,
    /// 429 problem with `Retry-After` (C9); the rate limiter adds its headers.
    TooManyRequests { retry_after_secs: u64 },
    /// 507 problem: the uploads bound (`UPLOADS_MAX_BYTES`) or the disk is
    /// full, so nothing was kept (C5); the cause is logged.
    InsufficientStorage(Box<dyn std::error::Error + Send + Sync>),
    /// 503 problem with `Retry-After`: a store is unreachable and nothing
    /// was written; the cause is logged.
    Unavailable(RepositoryError),
    /// 503 problem with `Retry-After`: no change stream can be opened now
    /// (the instance's limit is reached, or it is stopping, C14).
    StreamsRefused {
        detail: &'static str,
        retry_after_secs: u64,
    },
    /// 504 problem of type `outcome-unknown`: a write was sent for commit
    /// and whether it was applied could not be learned (C12); the cause is
    /// logged.
    OutcomeUnknown(RepositoryError),
    /// 500 problem: a bug or an I/O failure; the cause is logged, never sent.
    Internal(Box<dyn std::error::Error + Send + Sync>),
}

impl ApiError {
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::BadRequest {
            detail: detail.into(),
            errors: Vec::new(),
        }
    }

    pub fn invalid(detail: impl Into<String>, errors: Vec<FieldError>) -> Self {
        Self::BadRequest {
            detail: detail.into(),
            errors,
        }
    }

    pub fn internal(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Internal(cause.into())
    }

    /// How long a client should wait before retrying a 503.
    const RETRY_UNAVAILABLE_SECS: u64 = 5;

    fn detail(&self) -> String {
        match self {
            Self::BadRequest { detail, .. } | Self::PayloadTooLarge { detail } => detail.clone(),
            Self::ItemNotFound => "Item not found".to_owned(),
            Self::RouteNotFound => "No route has this path.".to_owned(),
            Self::MethodNotAllowed { allow } => format!("This route allows only: {allow}."),
            Self::RequestTimeout => "The request body arrived too slowly.".to_owned(),
            Self::KeyInFlight => {
                "A request with this Idempotency-Key is still in progress; retry later.".to_owned()
            }
            Self::KeyReused => {
                "This Idempotency-Key was used with another request body; nothing was created."
                    .to_owned()
            }
            Self::ConsistencyUnmet => "No copy of the store has the state this \
                 Consistency-Token names (its write was lost); read again without it."
                .to_owned(),
            Self::PreconditionFailed => {
                "If-Match does not match the current representation; nothing was changed."
                    .to_owned()
            }
            Self::UnsupportedMediaType { expected } => format!("The body must be {expected}."),
            Self::NotAcceptable { detail } | Self::StreamsRefused { detail, .. } => {
                (*detail).to_owned()
            }
            Self::TooManyRequests { retry_after_secs } => {
                format!("Too many requests; retry in {retry_after_secs} s.")
            }
            Self::Unavailable(_) => {
                "The service is temporarily unavailable; nothing was written; retry later."
                    .to_owned()
            }
            Self::OutcomeUnknown(_) => "The store did not say whether this write was applied; \
                 it may have been. Retry only with the same Idempotency-Key."
                .to_owned(),
            Self::InsufficientStorage(_) => {
                "There is no room left to store uploads; nothing was kept.".to_owned()
            }
            Self::Internal(_) => "The server failed to answer this request.".to_owned(),
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status_code().as_u16(), self.detail())
    }
}

impl std::error::Error for ApiError {}

impl From<CreateError> for ApiError {
    fn from(error: CreateError) -> Self {
        match error {
            CreateError::KeyReused => Self::KeyReused,
            CreateError::KeyInFlight => Self::KeyInFlight,
            CreateError::Unavailable(error) => Self::from(error),
        }
    }
}

impl From<RepositoryError> for ApiError {
    fn from(error: RepositoryError) -> Self {
        if error.is_outcome_unknown() {
            Self::OutcomeUnknown(error)
        } else {
            Self::Unavailable(error)
        }
    }
}

/// The problem type of a 504 whose write may have been applied (C12);
/// every other problem but [`CONSISTENCY_UNMET`] is `about:blank`.
pub const OUTCOME_UNKNOWN: &str = "outcome-unknown";

/// The problem type of a 409 whose `Consistency-Token` no copy of the
/// store can meet (C13).
pub const CONSISTENCY_UNMET: &str = "consistency-unmet";

/// An RFC 9457 problem document: every error the spec does not define (C6).
#[derive(Serialize, ToSchema)]
pub(crate) struct Problem<'a> {
    /// `about:blank`, `outcome-unknown` on a 504 whose write may have
    /// been applied (C12), or `consistency-unmet` on a 409 whose
    /// `Consistency-Token` no copy of the store can meet (C13).
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'static str,
    status: u16,
    detail: String,
    /// Present on validation failures: one entry per refused value.
    #[serde(skip_serializing_if = "<[FieldError]>::is_empty")]
    errors: &'a [FieldError],
}

/// Renders a problem document (C6) for `status`; the only function that
/// writes `application/problem+json` bodies.
pub(crate) fn problem_response(
    status: StatusCode,
    detail: String,
    errors: &[FieldError],
) -> ProblemResponse {
    typed_problem_response("about:blank", status, detail, errors)
}

/// [`problem_response`] with a problem type of its own.
fn typed_problem_response(
    kind: &'static str,
    status: StatusCode,
    detail: String,
    errors: &[FieldError],
) -> ProblemResponse {
    let problem = Problem {
        kind,
        title: status.canonical_reason().unwrap_or("Error"),
        status: status.as_u16(),
        detail,
        errors,
    };
    // Serialising these plain structs cannot fail; fall back to an empty
    // object rather than panic if it ever did.
    let body = serde_json::to_vec(&problem).unwrap_or_else(|_| b"{}".to_vec());
    let mut builder = HttpResponse::build(status);
    builder.insert_header((header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON)));
    ProblemResponse { builder, body }
}

/// A problem response whose headers may still be extended before it is sent.
pub(crate) struct ProblemResponse {
    builder: HttpResponseBuilder,
    body: Vec<u8>,
}

impl ProblemResponse {
    pub(crate) fn header(mut self, name: header::HeaderName, value: impl Into<String>) -> Self {
        if let Ok(value) = HeaderValue::try_from(value.into()) {
            self.builder.insert_header((name, value));
        }
        self
    }

    pub(crate) fn finish(mut self) -> HttpResponse {
        self.builder.body(self.body)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::ItemNotFound | Self::RouteNotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Self::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::KeyInFlight | Self::ConsistencyUnmet => StatusCode::CONFLICT,
            Self::NotAcceptable { .. } => StatusCode::NOT_ACCEPTABLE,
            Self::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
            Self::KeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable(_) | Self::StreamsRefused { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::OutcomeUnknown(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::InsufficientStorage(_) => StatusCode::INSUFFICIENT_STORAGE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        let problem = || problem_response(status, self.detail(), &[]);
        match self {
            Self::ItemNotFound => {
                return HttpResponse::NotFound()
                    .content_type(TEXT_PLAIN)
                    .body("Item not found");
            }
            Self::BadRequest { errors, .. } => problem_response(status, self.detail(), errors),
            Self::MethodNotAllowed { allow } => problem().header(header::ALLOW, allow.clone()),
            Self::TooManyRequests { retry_after_secs } => {
                problem().header(header::RETRY_AFTER, retry_after_secs.to_string())
            }
            Self::StreamsRefused {
                retry_after_secs, ..
            } => problem().header(header::RETRY_AFTER, retry_after_secs.to_string()),
            // The first request is usually done within a second.
            Self::KeyInFlight => problem().header(header::RETRY_AFTER, "1"),
            Self::Unavailable(cause) => {
                tracing::warn!(error = %ErrorChain(cause), "store unavailable");
                problem().header(
                    header::RETRY_AFTER,
                    Self::RETRY_UNAVAILABLE_SECS.to_string(),
                )
            }
            // No Retry-After: a blind retry could apply the write twice.
            Self::OutcomeUnknown(cause) => {
                tracing::error!(error = %ErrorChain(cause), "write outcome unknown");
                typed_problem_response(OUTCOME_UNKNOWN, status, self.detail(), &[])
            }
            Self::ConsistencyUnmet => {
                typed_problem_response(CONSISTENCY_UNMET, status, self.detail(), &[])
            }
            Self::InsufficientStorage(cause) => {
                tracing::warn!(error = %ErrorChain(cause.as_ref()), "uploads storage full");
                problem()
            }
            Self::Internal(cause) => {
                tracing::error!(error = %ErrorChain(cause.as_ref()), "internal error");
                problem()
            }
            Self::RouteNotFound
            | Self::RequestTimeout
            | Self::PreconditionFailed
            | Self::NotAcceptable { .. }
            | Self::KeyReused
            | Self::PayloadTooLarge { .. }
            | Self::UnsupportedMediaType { .. } => problem(),
        }
        .finish()
    }
}
