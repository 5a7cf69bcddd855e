//! Small builders for the success responses the handlers send.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use serde::Serialize;

use super::problem::{ApiError, TEXT_PLAIN};

pub(crate) const APPLICATION_JSON: &str = "application/json";

/// `value` as a JSON body with `status`.
pub(crate) fn json(status: StatusCode, value: &impl Serialize) -> Result<HttpResponse, ApiError> {
    let body = serde_json::to_vec(value).map_err(ApiError::internal)?;
    Ok(json_bytes(status, body))
}

pub(crate) fn json_bytes(status: StatusCode, body: Vec<u8>) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header((
            header::CONTENT_TYPE,
            HeaderValue::from_static(APPLICATION_JSON),
        ))
        .body(body)
}

/// A `201 Created` with `Location` (C7) and the created resource as JSON.
pub(crate) fn created(location: String, value: &impl Serialize) -> Result<HttpResponse, ApiError> {
    let mut response = json(StatusCode::CREATED, value)?;
    let location = HeaderValue::try_from(location).map_err(ApiError::internal)?;
    response.headers_mut().insert(header::LOCATION, location);
    Ok(response)
}

/// A `200` with a `text/plain; charset=utf-8` body (C4).
pub(crate) fn text(body: impl Into<String>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(TEXT_PLAIN)
        .body(body.into())
}
