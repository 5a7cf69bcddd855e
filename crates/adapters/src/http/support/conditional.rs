//! Entity tags and conditional requests (C7).
//!
//! A `GET` (or `HEAD`) answered 200 gets a strong `ETag`: the XXH3 hash of the
//! exact body bytes. Hashing the representation, rather than keeping a
//! version number per row, gives every `GET` route a tag with no change to any
//! store, and two instances serving the same data give the same tag. XXH3
//! rather than `std`'s hasher because its output is specified, so tags stay
//! stable across Rust releases and across a rolling deploy.
//!
//! A body's tag names its content coding too: the edge tags a body in
//! memory in the [`Encoding`] [`compression`] chooses for it, so a 304 names
//! the tag the 200 would have carried, and `If-None-Match` matches a tag
//! in any coding of the same representation.
//!
//! Two kinds of response come with their tag already set, which [`tag`]
//! only compares with `If-None-Match`: the full item listing, which is
//! streamed and never held whole (a tag derived from the store's version,
//! [`listing_tag`]), and the constant bodies, whose hash is computed once
//! (`respond::Constant`).

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ResponseHead, ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderMap, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse};
use futures_util::future::LocalBoxFuture;

use super::compression::{self, Encoding};
use super::header_list;
use super::problem::ApiError;

/// The strong entity tag of a representation: `"` + 16 hex digits + `"`.
pub(crate) fn etag_of(body: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hash = xxhash_rust::xxh3::xxh3_64(body);
    // Written digit by digit: `format!("{:016x}")` cost more than hashing
    // a short body (callgrind, `GET /`).
    let mut tag = String::with_capacity(18);
    tag.push('"');
    for shift in (0..16).rev() {
        tag.push(char::from(HEX[(hash >> (shift * 4)) as usize & 0xf]));
    }
    tag.push('"');
    tag
}

/// The strong entity tag of the full item listing at `version` (C7, C10):
/// the store changes its version on every write and reads every batch of
/// the listing at that version, so equal tags mean equal bytes. `L` keeps it
/// apart from body hashes; the `1` is the listing's format, bumped if the
/// JSON written for the same items ever changes.
pub(crate) fn listing_tag(version: u64) -> String {
    format!("\"L1-{version:016x}\"")
}

/// The entity tags listed in every `name` header (comma-separated lists,
/// possibly over several header lines); `None` when the header is absent or
/// lists no tag at all: an empty `If-Match:` sets no condition.
fn listed_tags<'a>(headers: &'a HeaderMap, name: &header::HeaderName) -> Option<Vec<&'a str>> {
    let tags: Vec<&str> = header_list::elements(headers, name)
        .filter(|tag| !tag.is_empty())
        .collect();
    (!tags.is_empty()).then_some(tags)
}

/// `If-None-Match` holds a tag equal to `tag` under the weak comparison
/// (RFC 9110 §13.1.2: `W/` prefixes are ignored), or `*`. Asked of every
/// tagged response, so the list is walked as [`listed_tags`] would list
/// it, without collecting it: an absent header costs one lookup.
/// `tag` is compared as bytes, so a tag set by a handler needs no check
/// that it is text when nobody asked.
/// A tag in any content coding of the same representation matches too (C7:
/// `"…-gzip"` and the identity tag alike).
pub(crate) fn none_match_fails(headers: &HeaderMap, tag: &[u8]) -> bool {
    header_list::elements(headers, &header::IF_NONE_MATCH)
        .filter(|listed| !listed.is_empty())
        .any(|listed| {
            listed == "*"
                || compression::same_representation(listed.trim_start_matches("W/").as_bytes(), tag)
        })
}

/// Evaluates `If-Match` for the current representation's `tag` (RFC 9110
/// §13.1.1, strong comparison: a weak tag never matches). `None` when the
/// request has no `If-Match`, so there is nothing to check.
pub(crate) fn if_match(
    headers: &HeaderMap,
) -> Option<impl Fn(&str) -> bool + Send + Sync + 'static> {
    let tags: Vec<String> = listed_tags(headers, &header::IF_MATCH)?
        .into_iter()
        .map(str::to_owned)
        .collect();
    Some(move |tag: &str| tags.iter().any(|listed| listed == "*" || listed == tag))
}

/// Whether [`tag`] applies to the response to `request`: a `GET` or
/// `HEAD`. Asked before routing, which takes the request.
pub(crate) fn is_conditional(request: &ServiceRequest) -> bool {
    matches!(*request.method(), Method::GET | Method::HEAD)
}

/// A response tagged by [`tag`]: at once, or once its streamed body is read.
pub(crate) enum Tagged {
    Now(ServiceResponse<BoxBody>),
    /// The body was a stream, read whole first: a rare case (the streamed
    /// listing sets its own tag), boxed so that the edge's future, which
    /// holds this one across its `await`, stays small. Inline, the reading
    /// (680 bytes) was part of every request's edge future, boxed and
    /// copied per request (see `edge::EdgeLayer`).
    Later(LocalBoxFuture<'static, Result<ServiceResponse<BoxBody>, actix_web::Error>>),
}

/// Adds `ETag` to a successful response to a conditional request (see
/// [`is_conditional`]) and turns it into `304 Not Modified` when
/// `If-None-Match` names the current tag. Called by the edge
/// ([`crate::http::edge`]) on the routes' response.
pub(crate) fn tag(response: ServiceResponse<BoxBody>) -> Tagged {
    if response.status() != StatusCode::OK || is_event_stream(response.headers()) {
        return Tagged::Now(response);
    }
    // A handler that set its own tag keeps its body as it is: the streamed
    // listing (hashing it would mean holding all of it) and the constant
    // bodies, whose tag is computed once.
    if let Some(tag) = response.headers().get(header::ETAG) {
        let not_modified = none_match_fails(response.request().headers(), tag.as_bytes());
        return Tagged::Now(if not_modified {
            response.map_body(|head, _| not_modified_head(head))
        } else {
            response
        });
    }
    let (request, response) = response.into_parts();
    let (response, body) = response.into_parts();
    match body.try_into_bytes() {
        Ok(bytes) => Tagged::Now(tag_bytes(request, response, bytes)),
        Err(body) => Tagged::Later(Box::pin(async move {
            let bytes = actix_web::body::to_bytes(body)
                .await
                .map_err(|error| ApiError::internal(error.to_string()))?;
            Ok(tag_bytes(request, response, bytes))
        })),
    }
}

/// A change stream (C14): never read whole (it does not end), so it gets
/// no `ETag` (no fixed representation has one) and no compression (each
/// event must reach the client as it is sent).
fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"))
}

/// [`tag`], once the body's `bytes` are at hand.
fn tag_bytes(
    request: HttpRequest,
    mut response: HttpResponse<()>,
    bytes: Bytes,
) -> ServiceResponse<BoxBody> {
    let identity = etag_of(&bytes);
    let not_modified = none_match_fails(request.headers(), identity.as_bytes());
    let encoding = Encoding::for_response(request.headers(), response.headers(), bytes.len());
    encoding.name_vary(response.headers_mut());
    let tag = encoding.tag(identity);
    // The header takes the tag's own buffer: no second allocation and copy.
    // There is no `ETag` to replace (checked above): appended.
    if let Ok(value) = HeaderValue::from_maybe_shared(Bytes::from(tag)) {
        response.headers_mut().append(header::ETAG, value);
    }
    let response = if not_modified {
        let empty = not_modified_head(response.head_mut());
        response.set_body(empty)
    } else {
        let body = encoding.encode(bytes, response.headers_mut());
        response.set_body(BoxBody::new(body))
    };
    ServiceResponse::new(request, response)
}

/// Makes `head` a `304 Not Modified`'s, and gives the empty body it has.
fn not_modified_head(head: &mut ResponseHead) -> BoxBody {
    head.status = StatusCode::NOT_MODIFIED;
    head.headers_mut().remove(header::CONTENT_TYPE);
    BoxBody::new(())
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::{HeaderName, HeaderValue};

    use super::*;

    fn headers(name: HeaderName, values: &[&'static str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for value in values {
            map.append(name.clone(), HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn tags_are_strong_quoted_and_depend_on_every_byte_c7() {
        let tag = etag_of(b"{\"id\":1,\"name\":\"a\"}");
        assert_eq!(tag.len(), 18);
        assert_eq!(
            tag,
            format!(
                "\"{:016x}\"",
                xxhash_rust::xxh3::xxh3_64(b"{\"id\":1,\"name\":\"a\"}")
            ),
            "the hash in 16 lower-case hex digits, zero-padded"
        );
        assert_eq!(
            etag_of(b""),
            format!("\"{:016x}\"", xxhash_rust::xxh3::xxh3_64(b""))
        );
        assert!(tag.starts_with('"') && tag.ends_with('"'));
        assert_ne!(tag, etag_of(b"{\"id\":1,\"name\":\"b\"}"));
        assert_eq!(tag, etag_of(b"{\"id\":1,\"name\":\"a\"}"));
    }

    #[test]
    fn if_none_match_compares_weakly_and_accepts_lists_and_star_c7() {
        let tag = b"\"abc\"";
        assert!(none_match_fails(
            &headers(header::IF_NONE_MATCH, &["\"abc\""]),
            tag
        ));
        assert!(none_match_fails(
            &headers(header::IF_NONE_MATCH, &["W/\"abc\""]),
            tag
        ));
        assert!(none_match_fails(
            &headers(header::IF_NONE_MATCH, &["\"x\", \"abc\""]),
            tag
        ));
        assert!(none_match_fails(
            &headers(header::IF_NONE_MATCH, &["\"x\"", "\"abc\""]),
            tag
        ));
        assert!(none_match_fails(
            &headers(header::IF_NONE_MATCH, &["*"]),
            tag
        ));
        assert!(!none_match_fails(
            &headers(header::IF_NONE_MATCH, &["\"x\""]),
            tag
        ));
        assert!(!none_match_fails(&HeaderMap::new(), tag));
    }

    #[test]
    fn if_match_compares_strongly_c7() {
        let matches = if_match(&headers(header::IF_MATCH, &["\"x\", \"abc\""])).unwrap();
        assert!(matches("\"abc\""));
        assert!(!matches("\"y\""));
        let weak = if_match(&headers(header::IF_MATCH, &["W/\"abc\""])).unwrap();
        assert!(!weak("\"abc\""));
        let star = if_match(&headers(header::IF_MATCH, &["*"])).unwrap();
        assert!(star("\"anything\""));
        assert!(if_match(&HeaderMap::new()).is_none());
        assert!(
            if_match(&headers(header::IF_MATCH, &[""])).is_none(),
            "an empty If-Match sets no condition"
        );
        assert!(if_match(&headers(header::IF_MATCH, &[" , "])).is_none());
    }

    /// The routes' 200 to `GET /` with `if_none_match`, its body `body`.
    fn answered(if_none_match: Option<String>, body: BoxBody) -> ServiceResponse<BoxBody> {
        let mut request = actix_web::test::TestRequest::get().uri("/");
        if let Some(tags) = if_none_match {
            request = request.insert_header((header::IF_NONE_MATCH, tags));
        }
        let response = HttpResponse::Ok().content_type("text/plain").body(body);
        request.to_srv_request().into_response(response)
    }

    /// A body that arrives as a stream of two chunks.
    fn streamed(first: &'static str, second: &'static str) -> BoxBody {
        let chunks = [first, second]
            .map(|chunk| Ok::<_, actix_web::Error>(Bytes::from_static(chunk.as_bytes())));
        BoxBody::new(actix_web::body::BodyStream::new(
            futures_util::stream::iter(chunks),
        ))
    }

    async fn tagged(response: ServiceResponse<BoxBody>) -> ServiceResponse<BoxBody> {
        match tag(response) {
            Tagged::Now(response) => response,
            Tagged::Later(tagging) => tagging.await.expect("the stream is read whole"),
        }
    }

    fn etag(response: &ServiceResponse<BoxBody>) -> &str {
        response
            .headers()
            .get(header::ETAG)
            .and_then(|tag| tag.to_str().ok())
            .expect("an ETag")
    }

    #[actix_web::test]
    async fn a_body_in_memory_is_tagged_with_the_hash_of_its_bytes_c7() {
        let response = answered(None, BoxBody::new("Hello World!"));
        let response = match tag(response) {
            Tagged::Now(response) => response,
            Tagged::Later(_) => panic!("a body in memory needs no reading"),
        };
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(etag(&response), etag_of(b"Hello World!"));
        let body = actix_web::body::to_bytes(response.into_body())
            .await
            .expect("bytes");
        assert_eq!(body, "Hello World!");
    }

    #[actix_web::test]
    async fn a_streamed_body_is_read_whole_then_tagged_with_the_hash_of_all_of_it_c7() {
        let response = tagged(answered(None, streamed("Hello ", "World!"))).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(etag(&response), etag_of(b"Hello World!"));
        let body = actix_web::body::to_bytes(response.into_body())
            .await
            .expect("bytes");
        assert_eq!(body, "Hello World!", "the body is sent as it was streamed");
    }

    #[actix_web::test]
    async fn a_streamed_body_whose_tag_was_sent_becomes_a_304_without_a_body_c7() {
        let sent = etag_of(b"Hello World!");
        let response = tagged(answered(Some(sent.clone()), streamed("Hello ", "World!"))).await;
        assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(etag(&response), sent, "a 304 names the tag it confirms");
        assert!(response.headers().get(header::CONTENT_TYPE).is_none());
        let body = actix_web::body::to_bytes(response.into_body())
            .await
            .expect("bytes");
        assert!(body.is_empty());
    }

    #[actix_web::test]
    async fn a_streamed_body_that_fails_is_a_server_error_not_a_tag_c7() {
        let chunks = [Err::<Bytes, _>(actix_web::error::ErrorInternalServerError(
            "disk",
        ))];
        let body = BoxBody::new(actix_web::body::BodyStream::new(
            futures_util::stream::iter(chunks),
        ));
        let Tagged::Later(tagging) = tag(answered(None, body)) else {
            panic!("a stream must be read")
        };
        let error = tagging.await.expect_err("the failed read is an error");
        assert_eq!(
            error.as_response_error().status_code(),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
