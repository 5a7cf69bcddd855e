//! `GET /items` with no query: the whole collection as a JSON array, read
//! from the store a batch at a time, so memory does not grow with the
//! collection (C10), under a tag derived from the store's version (C7).
//!
//! Invariants:
//! - the status is sent only once the first rows are read (C12): a store
//!   that fails before them gives 503, never a `200` with a cut body. A
//!   store that fails after rows were sent ends the body unterminated
//!   (actix closes the connection without the last chunk, so the client
//!   sees it incomplete), and the failure is logged as an error naming the
//!   request;
//! - the store is read at its own pace, never the client's (C12): past the
//!   first batch, a task of the worker's reads the listing to its end into
//!   a spool (`http/support/spool.rs`) and the client is served from it,
//!   so the store's connection, reader and snapshot are given back as soon
//!   as the store has been read, however slowly the client reads;
//! - a `HEAD`, and a `GET` whose `If-None-Match` names the current tag,
//!   read no row (C12: `HEAD` costs only the headers): the listing's head
//!   (version and total) decides every header, except for a listing too
//!   short for its count to say whether it reaches 1 KiB (the compression
//!   threshold, C7), whose few rows are read to measure it.

use std::io;

use actix_web::http::Method;
use actix_web::http::header::{self, HeaderValue};
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse};
use futures_util::stream::{self, BoxStream};
use futures_util::{Stream, StreamExt};
use items_domain::{Item, ItemBatch, ItemService, RepositoryError};

use super::listing_json::{listed_size, surely_at_least, write_item};
use super::query::total_count;
use crate::http::support::compression::{self, Encoding, StreamEncoder};
use crate::http::support::conditional::{listing_tag, none_match_fails};
use crate::http::support::respond::APPLICATION_JSON;
use crate::http::support::spool::{Refused, SpoolWriter, spool};
use crate::http::support::{ApiError, REQUEST_TARGET, SpoolSettings};
use crate::report::ErrorChain;

/// Listings of at least this many items are at least 1 KiB, whatever the
/// items: their headers need no row (C7's threshold, [`surely_at_least`]).
const SURELY_LARGE: u64 = surely_at_least(compression::MIN_BYTES);

/// Answers the full listing. The `ETag` is [`listing_tag`] of the store's
/// version, set here so the body-hashing middleware leaves the stream
/// alone (C7); `If-None-Match` naming it, in any coding, gets 304 without a
/// body. A listing of at least 1 KiB (known from its count, or once the
/// first rows are read) is sent in the [`Encoding`] [`compression`] chooses
/// for it, compressed as it streams (C7).
pub(super) async fn stream_all(
    service: &ItemService,
    request: &HttpRequest,
    spooling: &SpoolSettings,
) -> Result<HttpResponse, ApiError> {
    let head_only = request.method() == Method::HEAD;
    if head_only || request.headers().contains_key(header::IF_NONE_MATCH) {
        let head = service.listing_head().await?;
        if head.total >= SURELY_LARGE {
            let encoding = Encoding::for_large_body(request.headers());
            let shape = Shape::of(request, head.version, encoding)?;
            if head_only || shape.not_modified {
                return Ok(shape.respond(head.total, stream::empty()));
            }
        }
    }
    let listing = service.list_all().await?;
    // Fused: a listing may end at its first poll, and is not polled again.
    let mut batches = listing.batches.fuse();
    // The first rows before the status: a store failing here is a 503.
    let opening = batches.next().await.transpose()?.unwrap_or_default();
    let mut items = Items::default();
    let opening_chunk = items.chunk(&opening).map_err(ApiError::internal)?;
    let whole = listing.total <= opening.len() as u64;
    // A listing read whole in its first batch is measured, `[` and `]`
    // included; a longer one counts as large (a store's batch holds
    // hundreds of items).
    let encoding = if whole {
        Encoding::for_length(request.headers(), opening_chunk.len() + 2)
    } else {
        Encoding::for_large_body(request.headers())
    };
    let shape = Shape::of(request, listing.version, encoding)?;
    if head_only || shape.not_modified {
        return Ok(shape.respond(listing.total, stream::empty()));
    }
    let mut encoder = encoding.stream_encoder().map_err(ApiError::internal)?;
    // The array's brackets and each batch go through the encoder one push
    // (one flush) each, so the compressed bytes of a version are the same
    // from build to build, as its strong tag promises (C7).
    let mut first = encoder.push(b"[").map_err(ApiError::internal)?;
    first.extend(encoder.push(&opening_chunk).map_err(ApiError::internal)?);
    let rest: BoxStream<'static, ItemBatch> = if whole {
        // The store's end of the listing, so it closes its read now.
        match batches.next().await {
            None => {
                first.extend(encoder.push(b"]").map_err(ApiError::internal)?);
                first.extend(encoder.finish().map_err(ApiError::internal)?);
                let body = Bytes::from(first);
                return Ok(shape.respond(listing.total, stream::once(async { Ok(body) })));
            }
            // Nothing was sent yet: still a 503.
            Some(Err(error)) => return Err(error.into()),
            // More rows than the total said: served like any long listing.
            Some(Ok(more)) => stream::once(async { Ok(more) }).chain(batches).boxed(),
        }
    } else {
        batches.boxed()
    };
    let first = Bytes::from(first);
    let (writer, reader) = spool(spooling);
    // On the worker's thread, beside the response it feeds; it ends when
    // the store is read or the client is gone.
    actix_web::rt::spawn(read_the_rest(rest, items, encoder, writer));
    let body = stream::once(async { Ok(first) }).chain(reader);
    Ok(shape.respond(listing.total, body))
}

/// What the listing's headers say, decided before its body.
struct Shape {
    etag: HeaderValue,
    /// How the body is sent: what it varies by, and its coding.
    encoding: Encoding,
    /// `If-None-Match` names the listing's tag, in any coding.
    not_modified: bool,
}

impl Shape {
    fn of(request: &HttpRequest, version: u64, encoding: Encoding) -> Result<Self, ApiError> {
        let identity = listing_tag(version);
        let not_modified = none_match_fails(request.headers(), identity.as_bytes());
        Ok(Self {
            etag: HeaderValue::try_from(encoding.tag(identity)).map_err(ApiError::internal)?,
            encoding,
            not_modified,
        })
    }

    /// The response of `total` items with `body`: a 304 without it when
    /// `If-None-Match` named the tag. A `HEAD` gets an empty `body`, and
    /// the headers a `GET` would (`Transfer-Encoding: chunked` included).
    fn respond(
        &self,
        total: u64,
        body: impl Stream<Item = io::Result<Bytes>> + 'static,
    ) -> HttpResponse {
        let mut response = if self.not_modified {
            HttpResponse::NotModified().finish()
        } else {
            HttpResponse::Ok()
                .insert_header((
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(APPLICATION_JSON),
                ))
                .insert_header(total_count(total))
                .streaming(body)
        };
        let headers = response.headers_mut();
        headers.insert(header::ETAG, self.etag.clone());
        self.encoding.name_vary(headers);
        if !self.not_modified {
            self.encoding.name_coding(headers);
        }
        response
    }
}

/// Reads the listing's `rest` to its end at the store's pace, writing each
/// batch (as JSON, through `encoder`) into the spool, then the array's
/// end. Lets go of the store as soon as it is read, or as soon as the
/// client is gone.
async fn read_the_rest(
    mut rest: BoxStream<'static, ItemBatch>,
    mut items: Items,
    mut encoder: StreamEncoder,
    mut spool: SpoolWriter,
) {
    while let Some(batch) = rest.next().await {
        if spool.reader_gone() {
            return;
        }
        let chunk = match batch {
            Ok(batch) => items
                .chunk(&batch)
                .map_err(io::Error::other)
                .and_then(|chunk| encoder.push(&chunk)),
            Err(error) => {
                cut_short(&error);
                return spool.fail(io::Error::other(error));
            }
        };
        let pushed = match chunk {
            Ok(chunk) => spool.push(Bytes::from(chunk)).await,
            Err(error) => Err(Refused::File(error)),
        };
        match pushed {
            Ok(()) => {}
            Err(Refused::ReaderGone) => return,
            Err(Refused::File(error)) => {
                spool_failed(&error);
                return spool.fail(error);
            }
        }
        // A store whose batches are always ready (the in-memory one) would
        // otherwise keep the worker from every other request until the end.
        tokio::task::yield_now().await;
    }
    // The store is read: its connection, reader or snapshot goes back now.
    drop(rest);
    let last = encoder.push(b"]").and_then(|mut last| {
        last.extend(encoder.finish()?);
        Ok(last)
    });
    match last {
        Ok(last) => match spool.push(Bytes::from(last)).await {
            Ok(()) => spool.finish(),
            Err(Refused::ReaderGone) => {}
            Err(Refused::File(error)) => {
                spool_failed(&error);
                spool.fail(error);
            }
        },
        Err(error) => {
            spool_failed(&error);
            spool.fail(error);
        }
    }
}

/// The items of a listing, written a batch at a time as parts of one JSON
/// array: a comma before every item but the first.
#[derive(Debug, Default)]
struct Items {
    started: bool,
}

impl Items {
    fn chunk(&mut self, batch: &[Item]) -> Result<Vec<u8>, serde_json::Error> {
        let size = batch.iter().map(listed_size).sum::<usize>();
        let mut chunk = Vec::with_capacity(size);
        for item in batch {
            if std::mem::replace(&mut self.started, true) {
                chunk.push(b',');
            }
            write_item(&mut chunk, item)?;
        }
        Ok(chunk)
    }
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

/// Logs a listing whose spool could not be written (the temporary
/// directory is full or gone): the body is cut, as for a store failure.
fn spool_failed(error: &io::Error) {
    tracing::error!(
        target: REQUEST_TARGET,
        method = "GET",
        path = "/items",
        status = 200,
        %error,
        "the listing could not be spooled for its client; the body was cut unterminated",
    );
}
