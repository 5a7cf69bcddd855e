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
use futures_util::{Stream, StreamExt};
use items_domain::{Item, ItemService, RepositoryError};

use super::listing_json::{listed_size, write_item};
use super::total_count;
use crate::http::compress::{self, StreamEncoder};
use crate::http::conditional::{listing_tag, none_match_fails};
use crate::http::problem::ApiError;
use crate::http::request_log::REQUEST_TARGET;
use crate::http::respond::APPLICATION_JSON;
use crate::report::ErrorChain;

/// Streams every item in id order. The `ETag` is [`listing_tag`] of the
/// store's version, set here so the body-hashing middleware leaves the
/// stream alone (C7); `If-None-Match` naming it, in any coding, gets 304
/// without a body. A listing of at least 1 KiB (known once the first rows
/// are read: more rows follow, or these alone are that long) is compressed
/// as it streams when `Accept-Encoding` allows (C7, `compress.rs`).
pub(super) async fn stream_all(
    service: &ItemService,
    request: &HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let listing = service.list_all().await?;
    let identity = listing_tag(listing.version);
    // Fused: a listing may end at its first poll, and is not polled again.
    let mut batches = listing.batches.fuse();
    // The first rows before the status: a store failing here is a 503.
    let opening = batches.next().await.transpose()?.unwrap_or_default();
    let mut items = Items::default();
    let opening_chunk = items.chunk(&opening).map_err(ApiError::internal)?;
    let whole = listing.total <= opening.len() as u64;
    let large = !whole || opening_chunk.len() + 2 >= compress::MIN_BYTES;
    let coding = large.then(|| compress::chosen(request.headers())).flatten();
    let tag = coding.map_or_else(|| identity.clone(), |coding| coding.tag(&identity));
    let etag = HeaderValue::try_from(tag.as_str()).map_err(ApiError::internal)?;
    let not_modified = none_match_fails(request.headers(), identity.as_bytes());
    let mut response = if not_modified {
        HttpResponse::NotModified()
    } else {
        HttpResponse::Ok()
    };
    response.insert_header((header::ETAG, etag));
    if large {
        response.append_header((header::VARY, compress::VARY.clone()));
    }
    if not_modified {
        return Ok(response.finish());
    }
    let rest = batches.map(move |batch| {
        let batch = batch.inspect_err(cut_short)?;
        Ok::<_, Box<dyn std::error::Error>>(items.chunk(&batch)?)
    });
    let bracket = |text: &'static [u8]| {
        futures_util::stream::once(async move { Ok(Bytes::from_static(text)) })
    };
    let body = bracket(b"[")
        .chain(futures_util::stream::once(async move { Ok(opening_chunk) }))
        .chain(rest)
        .chain(bracket(b"]"));
    response
        .insert_header((
            header::CONTENT_TYPE,
            HeaderValue::from_static(APPLICATION_JSON),
        ))
        .insert_header(total_count(listing.total));
    Ok(match coding {
        Some(coding) => {
            let encoder = StreamEncoder::new(coding).map_err(ApiError::internal)?;
            response
                .insert_header((header::CONTENT_ENCODING, coding.header_value()))
                .streaming(compressed(Box::pin(body), encoder))
        }
        None => response.streaming(body),
    })
}

/// The items of a listing, written a batch at a time as parts of one JSON
/// array: a comma before every item but the first.
#[derive(Debug, Default)]
struct Items {
    started: bool,
}

impl Items {
    fn chunk(&mut self, batch: &[Item]) -> Result<Bytes, serde_json::Error> {
        let size = batch.iter().map(listed_size).sum::<usize>();
        let mut chunk = Vec::with_capacity(size);
        for item in batch {
            if std::mem::replace(&mut self.started, true) {
                chunk.push(b',');
            }
            write_item(&mut chunk, item)?;
        }
        Ok(Bytes::from(chunk))
    }
}

/// `body` compressed as it streams: each chunk through `encoder`, flushed,
/// then its end; a failure of `body` ends the stream there, unterminated.
fn compressed<E>(
    body: impl Stream<Item = Result<Bytes, E>> + Unpin + 'static,
    encoder: StreamEncoder,
) -> impl Stream<Item = Result<Bytes, Box<dyn std::error::Error>>> + 'static
where
    E: Into<Box<dyn std::error::Error>> + 'static,
{
    futures_util::stream::unfold((body, Some(encoder)), |(mut body, encoder)| async move {
        let mut encoder = encoder?;
        let out = match body.next().await {
            Some(Ok(chunk)) => match encoder.push(&chunk) {
                Ok(bytes) => Ok((bytes, Some(encoder))),
                Err(error) => Err(error.into()),
            },
            Some(Err(error)) => Err(error.into()),
            None => encoder
                .finish()
                .map(|last| (last, None))
                .map_err(Into::into),
        };
        Some(match out {
            Ok((bytes, encoder)) => (Ok(bytes), (body, encoder)),
            Err(error) => (Err(error), (body, None)),
        })
    })
    .filter(|chunk| std::future::ready(!matches!(chunk, Ok(bytes) if bytes.is_empty())))
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
