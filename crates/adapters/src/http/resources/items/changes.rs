//! `GET /items` with `Accept: text/event-stream`: the change feed (C14),
//! one subscription per response, moved to the client by a task of its own.
//!
//! Invariants:
//! - at most [`ChangeStreamSettings::max_streams`] streams are open in this
//!   process: a slot is taken before the store is asked, and given back
//!   when the stream's task ends (the client left, was too slow, or the
//!   service began to stop); beyond, 503 with `Retry-After`;
//! - each subscriber has a buffer of [`ChangeStreamSettings::buffer`]
//!   frames between its task and its connection; a burst of changes waits
//!   in the store's hub, shared by every subscriber, not here. A client
//!   whose buffer stays full for [`ChangeStreamSettings::stall`] (it reads
//!   nothing, or slower than changes come) is cut: the body ends with an
//!   error, so the connection closes and an `EventSource` reconnects with
//!   its cursor. It never delays a writer, and holds at most its buffer
//!   (the hub, too, cuts a subscriber that falls out of it);
//! - a heartbeat comment goes into the buffer every
//!   [`ChangeStreamSettings::heartbeat`] (15 s at most), so proxies keep
//!   an idle stream open;
//! - once the service begins to stop, every stream ends (cleanly: the
//!   client reconnects, to another instance), and a new one is answered
//!   200 with a `retry:` alone and ended: `EventSource` retries after a
//!   200 that ends, never after a 503.
//!
//! The stream is one request for the rate limiter and gets the CORS
//! headers from the edge like every response; it is never compressed, and
//! has no `ETag` (it is no fixed representation): `support/conditional.rs`
//! leaves an event stream alone.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::{FutureExt, Stream, StreamExt};
use items_domain::{ChangeService, ChangeStream, FeedError, RepositoryError};
use tokio::sync::mpsc;

use super::sse::{self, EVENT_STREAM, HEARTBEAT};
use crate::http::metrics::changes as metrics;
use crate::http::support::{ApiError, Draining};
use crate::report::ErrorChain;

/// How the change streams of this process behave (C14; C1's
/// `CHANGES_MAX_STREAMS` and `CHANGES_HEARTBEAT_MS`).
#[derive(Debug, Clone, Copy)]
pub struct ChangeStreamSettings {
    /// Streams open at once in this process; beyond, 503.
    pub max_streams: usize,
    /// How often a heartbeat comment is sent (at most 15 s, C14).
    pub heartbeat: Duration,
    /// Changes held for one subscriber, between its task and its
    /// connection, in chunks of up to 32: never more changes than this.
    pub buffer: usize,
    /// How long a subscriber's buffer may stay full before it is cut as
    /// too slow.
    pub stall: Duration,
    /// The reconnection delay told to clients (`retry:`).
    pub retry: Duration,
}

impl ChangeStreamSettings {
    /// `CHANGES_MAX_STREAMS`'s default (C14).
    pub const DEFAULT_MAX_STREAMS: usize = 1000;
    /// The longest heartbeat interval C14 allows, and the default.
    pub const MAX_HEARTBEAT: Duration = Duration::from_secs(15);
}

impl Default for ChangeStreamSettings {
    fn default() -> Self {
        Self {
            max_streams: Self::DEFAULT_MAX_STREAMS,
            heartbeat: Self::MAX_HEARTBEAT,
            // A frame is at most ~1.1 KiB (a 256-character name, escaped):
            // a stalled subscriber holds at most ~300 KiB, ~20 KiB typically.
            buffer: 256,
            // Long enough for any client that reads to take a frame.
            stall: Duration::from_secs(5),
            retry: Duration::from_secs(1),
        }
    }
}

/// The change streams of this process: shared by every worker.
pub(crate) struct ChangeStreams {
    /// `None`: the store has no change feed, so nothing is streamed.
    service: Option<ChangeService>,
    settings: ChangeStreamSettings,
    open: Arc<AtomicUsize>,
    draining: Draining,
}

impl ChangeStreams {
    pub(crate) fn new(
        service: Option<ChangeService>,
        settings: ChangeStreamSettings,
        draining: Draining,
    ) -> Self {
        Self {
            service,
            settings,
            open: Arc::new(AtomicUsize::new(0)),
            draining,
        }
    }
}

/// The most changes one write to a subscriber carries: with many
/// subscribers and many writes, a write per change per subscriber is what
/// costs (a system call and a wake each).
const CHANGES_PER_CHUNK: usize = 32;

/// How long a client refused for the stream limit, or by a stopping
/// instance, waits before it tries again.
const RETRY_REFUSED_SECS: u64 = 5;

/// Answers a request for the change feed (see the module's documentation).
pub(super) async fn serve(request: &HttpRequest) -> Result<HttpResponse, ApiError> {
    let streams = request
        .app_data::<web::Data<ChangeStreams>>()
        .map(|streams| streams.get_ref());
    let Some((streams, service)) =
        streams.and_then(|streams| Some((streams, streams.service.as_ref()?)))
    else {
        return Err(ApiError::NotAcceptable {
            detail: "This store keeps no change feed; ask for application/json.",
        });
    };
    let slot = if streams.draining.has_begun() {
        None
    } else {
        let Some(slot) = Slot::take(&streams.open, streams.settings.max_streams) else {
            metrics::refused();
            return Err(ApiError::StreamsRefused {
                detail: "Too many change streams are open on this instance; retry later.",
                retry_after_secs: RETRY_REFUSED_SECS,
            });
        };
        Some(slot)
    };
    let mut response = HttpResponse::build(StatusCode::OK);
    response
        .insert_header((header::CONTENT_TYPE, HeaderValue::from_static(EVENT_STREAM)))
        .insert_header((header::CACHE_CONTROL, HeaderValue::from_static("no-cache")))
        // nginx buffers a proxied response unless told not to.
        .insert_header((
            HeaderName::from_static("x-accel-buffering"),
            HeaderValue::from_static("no"),
        ));
    if request.method() == Method::HEAD {
        return Ok(response.finish());
    }
    let Some(slot) = slot else {
        // A stopping instance opens no stream, but answers 200 with only a
        // `retry:` and ends: a browser's `EventSource` gives up for good on
        // any other status, and this way reconnects, through the balancer,
        // to an instance that is not stopping, with its cursor (C14).
        return Ok(response.body(sse::retry_only(streams.settings.retry)));
    };
    let last_event_id = request
        .headers()
        .get("last-event-id")
        .map(HeaderValue::as_bytes);
    let subscription = service.subscribe(last_event_id).await?;
    let settings = streams.settings;
    // The buffer holds `settings.buffer` changes at most, in chunks: a
    // subscriber that keeps up gets what came since its last chunk in one
    // (one wake of its connection, one write), not one write per change.
    let chunk = settings.buffer.clamp(1, CHANGES_PER_CHUNK);
    let (sender, receiver) = mpsc::channel((settings.buffer / chunk).max(1));
    let opening = sse::opening(&subscription.start, subscription.reset, settings.retry);
    // The channel is new and holds at least one frame.
    let _ = sender.try_send(opening);
    let cut = Arc::new(AtomicBool::new(false));
    let task = Pump {
        changes: subscription.changes,
        sender,
        cut: Arc::clone(&cut),
        heartbeat: settings.heartbeat,
        chunk,
        stall: settings.stall,
        draining: streams.draining.clone(),
        _slot: slot,
    };
    actix_web::rt::spawn(task.run());
    Ok(response.streaming(Body {
        receiver,
        cut,
        ended: false,
    }))
}

/// One of the process's stream slots, given back when dropped.
struct Slot {
    open: Arc<AtomicUsize>,
}

impl Slot {
    fn take(open: &Arc<AtomicUsize>, max: usize) -> Option<Self> {
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |count| {
            (count < max).then_some(count + 1)
        })
        .ok()?;
        metrics::opened();
        Some(Self {
            open: Arc::clone(open),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
        metrics::closed();
    }
}

/// The task of one stream: changes and heartbeats into the subscriber's
/// buffer, until the client leaves, falls behind, the store fails or the
/// service stops.
struct Pump {
    changes: ChangeStream,
    sender: mpsc::Sender<Bytes>,
    /// Set when the stream is cut rather than ended (see [`Body`]).
    cut: Arc<AtomicBool>,
    heartbeat: Duration,
    stall: Duration,
    /// The most changes one chunk of the buffer carries.
    chunk: usize,
    draining: Draining,
    _slot: Slot,
}

/// Why a stream's task ended.
enum End {
    /// The client went away.
    Gone,
    /// The service began to stop.
    Stopping,
    /// The subscriber's buffer was full, or the store left it behind.
    TooSlow,
    /// The store failed.
    Failed(RepositoryError),
}

impl Pump {
    async fn run(mut self) {
        let end = self.forward().await;
        match end {
            End::Gone => {}
            End::Stopping => metrics::disconnected("stopping"),
            End::TooSlow => {
                metrics::disconnected("slow");
                self.cut.store(true, Ordering::Release);
                tracing::debug!("a change stream's client fell behind; cut");
            }
            End::Failed(error) => {
                metrics::disconnected("store");
                self.cut.store(true, Ordering::Release);
                tracing::warn!(error = %ErrorChain(&error), "a change stream's store failed; cut");
            }
        }
        // Dropping the sender ends the body once what it holds is sent.
    }

    /// Moves one chunk at a time: first room for it in the subscriber's
    /// buffer (waiting at most `stall`), then a heartbeat, or a change and
    /// every change already waiting after it, up to `chunk` of them.
    async fn forward(&mut self) -> End {
        let start = tokio::time::Instant::now() + self.heartbeat;
        let mut beat = tokio::time::interval_at(start, self.heartbeat);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let draining = self.draining.clone();
        let mut stopping = std::pin::pin!(draining.begun());
        loop {
            let room = tokio::select! {
                biased;
                () = &mut stopping => return End::Stopping,
                room = tokio::time::timeout(self.stall, self.sender.reserve()) => room,
            };
            let permit = match room {
                Err(_) => return End::TooSlow,
                Ok(Err(_)) => return End::Gone,
                Ok(Ok(permit)) => permit,
            };
            let first = tokio::select! {
                biased;
                () = &mut stopping => return End::Stopping,
                () = self.sender.closed() => return End::Gone,
                _ = beat.tick() => {
                    permit.send(HEARTBEAT.clone());
                    continue;
                }
                next = self.changes.next() => next,
            };
            let mut chunk = Vec::with_capacity(256);
            let mut next = Some(first);
            let mut events = 0;
            let end = loop {
                let change = match next {
                    Some(Some(Ok(change))) => change,
                    // Nothing more ready: the chunk is complete.
                    None => break None,
                    Some(Some(Err(FeedError::TooSlow))) => break Some(End::TooSlow),
                    Some(Some(Err(FeedError::Unavailable(error)))) => {
                        break Some(End::Failed(error));
                    }
                    Some(None) => {
                        break Some(End::Failed(RepositoryError::unavailable(
                            "the change stream ended",
                        )));
                    }
                };
                if let Err(error) = sse::write_event(&mut chunk, &change) {
                    break Some(End::Failed(RepositoryError::unavailable(error)));
                }
                metrics::sent(change.at);
                events += 1;
                if events == self.chunk {
                    break None;
                }
                next = self.changes.next().now_or_never();
            };
            if !chunk.is_empty() {
                permit.send(Bytes::from(chunk));
            }
            if let Some(end) = end {
                return end;
            }
        }
    }
}

/// The response body: the frames of the subscriber's buffer; once its task
/// ended, the end of the body, or an error when the stream was cut, so
/// actix closes the connection without the body's last chunk and the
/// client knows it was cut.
struct Body {
    receiver: mpsc::Receiver<Bytes>,
    cut: Arc<AtomicBool>,
    ended: bool,
}

/// Why a change stream's body ended early.
#[derive(Debug, thiserror::Error)]
#[error("the change stream was cut: its client fell behind or its store failed")]
struct Cut;

impl Stream for Body {
    type Item = Result<Bytes, Cut>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.receiver.poll_recv(cx) {
            Poll::Ready(Some(frame)) => Poll::Ready(Some(Ok(frame))),
            Poll::Ready(None) if !self.ended && self.cut.load(Ordering::Acquire) => {
                self.ended = true;
                Poll::Ready(Some(Err(Cut)))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}
