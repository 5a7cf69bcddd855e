//! `GET /items` with no query: the whole collection streamed as a JSON
//! array, a batch at a time, so memory does not grow with the collection
//! (C10), under a tag derived from the store's version (C7).
//!
//! The status is sent only once the first rows are read (C12): a store that
//! fails before them gives 503, never a `200` with a cut body. A store that
//! fails after rows were sent ends the body unterminated (actix closes the
//! connection without the last chunk, so the client sees it incomplete), and
//! the failure is logged as an error naming the request.

use actix_web::http::header::{self, HeaderValue};
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse};
use futures_util::StreamExt;
use items_domain::{ItemService, RepositoryError};

use super::listing_json::{listed_size, write_item};
use super::total_count;
use crate::http::conditional::{listing_tag, none_match_fails};
use crate::http::problem::ApiError;
use crate::http::request_log::REQUEST_TARGET;
use crate::http::respond::APPLICATION_JSON;
use crate::report::ErrorChain;

/// Streams every item in id order. The `ETag` is [`listing_tag`] of the
/// store's version, set here so the body-hashing middleware leaves the
/// stream alone (C7); `If-None-Match` naming it gets 304 without a body.
pub(super) async fn stream_all(
    service: &ItemService,
    request: &HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let listing = service.list_all().await?;
    let tag = listing_tag(listing.version);
    let etag = HeaderValue::try_from(tag.as_str()).map_err(ApiError::internal)?;
    if none_match_fails(request.headers(), tag.as_bytes()) {
        return Ok(HttpResponse::NotModified()
            .insert_header((header::ETAG, etag))
            .finish());
    }
    // Fused: a listing may end at its first poll, and is not polled again.
    let mut batches = listing.batches.fuse();
    // The first rows before the status: a store failing here is a 503.
    let opening = batches.next().await.transpose()?;
    let mut first = true;
    let rest = batches.map(|batch| batch.inspect_err(cut_short));
    let items = futures_util::stream::iter(opening.map(Ok))
        .chain(rest)
        .map(move |batch| {
            let batch = batch?;
            let size = batch.iter().map(listed_size).sum();
            let mut chunk = Vec::with_capacity(size);
            for item in &batch {
                if !std::mem::take(&mut first) {
                    chunk.push(b',');
                }
                write_item(&mut chunk, item)?;
            }
            Ok::<_, Box<dyn std::error::Error>>(Bytes::from(chunk))
        });
    let bracket = |text: &'static [u8]| {
        futures_util::stream::once(async move { Ok(Bytes::from_static(text)) })
    };
    let body = bracket(b"[").chain(items).chain(bracket(b"]"));
    Ok(HttpResponse::Ok()
        .insert_header((
            header::CONTENT_TYPE,
            HeaderValue::from_static(APPLICATION_JSON),
        ))
        .insert_header((header::ETAG, etag))
        .insert_header(total_count(listing.total))
        .streaming(body))
}

/// Logs a listing that failed after its status was sent: its request line
/// says 200, this line says the body was cut and why.
fn cut_short(error: &RepositoryError) {
    tracing::error!(
        target: REQUEST_TARGET,
        method = "GET",
        path = "/items",
        status = 200,
        error = %ErrorChain(error),
        "the listing failed after its status was sent; the body was cut unterminated",
    );
}
