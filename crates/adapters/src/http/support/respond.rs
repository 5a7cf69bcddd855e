//! Small builders for the success responses the handlers send.

use std::sync::OnceLock;

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::web::Bytes;
use serde::Serialize;

use super::conditional::etag_of;
use super::problem::{ApiError, TEXT_PLAIN};

pub(crate) const APPLICATION_JSON: &str = "application/json";

/// `value` as a JSON body with `status`.
pub(crate) fn json(status: StatusCode, value: &impl Serialize) -> Result<HttpResponse, ApiError> {
    let body = serde_json::to_vec(value).map_err(ApiError::internal)?;
    Ok(json_bytes(status, body))
}

pub(crate) fn json_bytes(status: StatusCode, body: Vec<u8>) -> HttpResponse {
    with_type(status, &JSON_TYPE, Bytes::from(body))
}

static JSON_TYPE: HeaderValue = HeaderValue::from_static(APPLICATION_JSON);
static TEXT_TYPE: HeaderValue = HeaderValue::from_static(TEXT_PLAIN);

/// A response of `status` with `body` of `content_type`. Not through
/// `HttpResponseBuilder`, whose generic header insert cost about 400
/// instructions a response (callgrind, `GET /items/{id}`). Headers set on a
/// response made here are appended: the map is empty, and `append` skips
/// moving out a replaced value that `insert` returns (about 90
/// instructions a header, callgrind).
fn with_type(status: StatusCode, content_type: &HeaderValue, body: Bytes) -> HttpResponse {
    let mut response = HttpResponse::with_body(status, body);
    response
        .headers_mut()
        .append(header::CONTENT_TYPE, content_type.clone());
    response.map_into_boxed_body()
}

/// A `201 Created` with `Location` (C7) and the created resource as JSON.
pub(crate) fn created(location: String, value: &impl Serialize) -> Result<HttpResponse, ApiError> {
    let mut response = json(StatusCode::CREATED, value)?;
    let location = HeaderValue::try_from(location).map_err(ApiError::internal)?;
    response.headers_mut().append(header::LOCATION, location);
    Ok(response)
}

/// A `200` with a `text/plain; charset=utf-8` body (C4).
pub(crate) fn text(body: impl Into<String>) -> HttpResponse {
    with_type(StatusCode::OK, &TEXT_TYPE, Bytes::from(body.into()))
}

/// A `200` whose body never changes (`GET /`, `GET /data`,
/// `GET /products/{id}`): built and hashed once, on first use, not per
/// request. The edge, finding its entity tag (C7) set, only compares it
/// with `If-None-Match`.
#[derive(Debug)]
pub(crate) struct Constant {
    content_type: &'static HeaderValue,
    make: fn() -> Vec<u8>,
    made: OnceLock<Made>,
}

/// A constant's body and tag, leaked once, so that every response shares
/// them without a reference count to write.
#[derive(Debug)]
struct Made {
    body: &'static [u8],
    tag: HeaderValue,
}

impl Constant {
    /// A `text/plain; charset=utf-8` body (C4).
    pub(crate) const fn text(make: fn() -> Vec<u8>) -> Self {
        Self::new(&TEXT_TYPE, make)
    }

    /// An `application/json` body.
    pub(crate) const fn json(make: fn() -> Vec<u8>) -> Self {
        Self::new(&JSON_TYPE, make)
    }

    const fn new(content_type: &'static HeaderValue, make: fn() -> Vec<u8>) -> Self {
        Self {
            content_type,
            make,
            made: OnceLock::new(),
        }
    }

    pub(crate) fn respond(&'static self) -> HttpResponse {
        let made = self.made.get_or_init(|| {
            let body: &'static [u8] = Box::leak((self.make)().into_boxed_slice());
            let tag: &'static str = Box::leak(etag_of(body).into_boxed_str());
            Made {
                body,
                tag: HeaderValue::from_static(tag),
            }
        });
        // Not through `HttpResponseBuilder`, whose generic header insert
        // cost more than the rest of the handler (callgrind).
        let mut response = HttpResponse::with_body(StatusCode::OK, Bytes::from_static(made.body));
        let headers = response.headers_mut();
        headers.append(header::CONTENT_TYPE, self.content_type.clone());
        headers.append(header::ETAG, made.tag.clone());
        response.map_into_boxed_body()
    }
}

#[cfg(test)]
mod tests {
    use actix_web::body::MessageBody;

    use super::*;

    #[test]
    fn a_constant_is_sent_with_the_tag_of_its_exact_bytes_made_once_c7() {
        static HELLO: Constant = Constant::text(|| b"Hello World!".to_vec());

        let first = HELLO.respond();
        let second = HELLO.respond();

        assert_eq!(first.status(), StatusCode::OK);
        assert_eq!(
            first.headers().get(header::CONTENT_TYPE).unwrap(),
            TEXT_PLAIN
        );
        assert_eq!(
            first.headers().get(header::ETAG).unwrap(),
            etag_of(b"Hello World!").as_str()
        );
        assert_eq!(
            first.headers().get(header::ETAG),
            second.headers().get(header::ETAG)
        );
        let body = first.into_body().try_into_bytes().ok().unwrap();
        assert_eq!(body, "Hello World!");
        let made = HELLO.made.get().unwrap();
        assert!(
            std::ptr::eq(
                made.body,
                &*second.into_body().try_into_bytes().ok().unwrap()
            ),
            "the second response shares the first's bytes"
        );
    }
}
