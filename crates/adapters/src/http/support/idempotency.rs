//! The `Idempotency-Key` request header of `POST /items` and
//! `POST /products` (C7): reading it, and the `201` a keyed create answers,
//! first or replayed.

use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{HttpRequest, HttpResponse};
use items_domain::{Created, IdempotencyKey};
use serde::Serialize;
use serde_json::Value;

use super::fields;
use super::problem::{ApiError, FieldError, Location};
use super::respond;

/// The request header (C7).
pub(crate) const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// Set on a replayed `201`, so a client (and an operator reading logs) can
/// tell it from the first one; the status, `Location` and body are the
/// first response's.
pub(crate) const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The key of the request, if it sent one: 1 to 255 visible ASCII
/// characters, once (C7); anything else is refused with an `errors` entry
/// naming the header, as express-validator names one (`location:
/// "headers"`, C6).
fn key(request: &HttpRequest) -> Result<Option<IdempotencyKey>, FieldError> {
    let mut values = request.headers().get_all(IDEMPOTENCY_KEY);
    let Some(first) = values.next() else {
        return Ok(None);
    };
    let refused = |value: &HeaderValue, msg: &str| {
        let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
        FieldError::new(
            Location::Headers,
            "idempotency-key",
            Some(Value::String(text)),
            format!("Idempotency-Key {msg}"),
        )
    };
    if values.next().is_some() {
        return Err(refused(first, "must be sent once"));
    }
    IdempotencyKey::parse(first.as_bytes())
        .map(Some)
        .map_err(|rule| refused(first, rule.message()))
}

/// The body's values and the request's key, or one 400 listing every
/// refused value, the body's and the header's (C6).
pub(crate) fn with_key<T>(
    request: &HttpRequest,
    body: Result<T, Vec<FieldError>>,
) -> Result<(T, Option<IdempotencyKey>), ApiError> {
    match (body, key(request)) {
        (Ok(values), Ok(key)) => Ok((values, key)),
        (Ok(_), Err(refused)) => Err(ApiError::invalid(
            "The Idempotency-Key header is invalid.",
            vec![refused],
        )),
        (Err(mut errors), key) => {
            errors.extend(key.err());
            fields::all_valid(Err(errors))
        }
    }
}

/// The `201` of a create (C7): `Location` and the row as first created;
/// a replay says so in `Idempotent-Replayed: true`.
pub(crate) fn created<T>(
    created: &Created<T>,
    location: String,
    dto: &impl Serialize,
) -> Result<HttpResponse, ApiError> {
    let mut response = respond::created(location, dto)?;
    if created.replayed {
        response
            .headers_mut()
            .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    }
    Ok(response)
}
