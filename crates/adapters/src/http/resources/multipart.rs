//! Multipart bodies fed, part by part and chunk by chunk, into the domain's
//! [`UploadSession`] (C5). This module knows HTTP — the media type, the idle
//! timer, which parser failures are 400 or 415, draining a refused body —
//! and no upload rule: the session accepts or refuses every part.
//!
//! Read with actix-multipart's low-level `Multipart` stream rather than its
//! `MultipartForm` derive: the derive fixes limits at compile time, shares
//! one limit among all files of a field, has no cap on the number of files
//! and cannot echo text fields it does not know. Here each chunk reaches the
//! session as it arrives, so a refused part is refused before a byte of it
//! is stored and memory stays flat whatever the file sizes.

use std::future::Future;
use std::time::{Duration, Instant};

use actix_multipart::{Field, Multipart, MultipartError};
use actix_web::{HttpRequest, web};
use futures_util::StreamExt;
use items_domain::{Upload, UploadSession};

use crate::http::support::ApiError;
use crate::http::support::body::has_media_type;

const MULTIPART: &str = "multipart/form-data";
/// The media type of a file part that declares none.
const UNDECLARED_MEDIA_TYPE: &str = "application/octet-stream";
/// After refusing a request early, read at most this much more of its body
/// (for at most `DRAIN_TIME`) so the client gets to read the answer instead
/// of a connection reset; beyond that the connection is simply closed.
const DRAIN_BYTES: u64 = 64 * 1024 * 1024;
const DRAIN_TIME: Duration = Duration::from_secs(5);

/// Reads the whole body into `session`, then lets it keep the files (or
/// none). 415 unless the body is multipart; 408 when the client stays silent
/// for `idle_timeout`; 400 when the body does not parse; whatever the
/// session refuses otherwise. A refused body is drained within bounds after
/// the session, and every file it received, is dropped.
pub(crate) async fn receive(
    mut session: UploadSession,
    request: &HttpRequest,
    payload: web::Payload,
    idle_timeout: Duration,
) -> Result<Upload, ApiError> {
    if !has_media_type(request, MULTIPART) {
        return Err(ApiError::UnsupportedMediaType {
            expected: MULTIPART,
        });
    }
    let mut parts = Parts {
        stream: Multipart::new(request.headers(), payload),
        finished: false,
    };
    if let Err(error) = feed(&mut session, &mut parts, idle_timeout).await {
        // Discard the received files now, not after the drain.
        drop(session);
        drain(&mut parts).await;
        return Err(error);
    }
    // The commit runs as a task of its own: a client that vanishes while
    // its files are renamed drops this future, not the commit, so the
    // files end all kept or all removed (C5), never some of each.
    actix_web::rt::spawn(session.finish())
        .await
        .map_err(ApiError::internal)?
        .map_err(ApiError::from)
}

/// The multipart stream, never polled again once it has ended or failed:
/// actix-multipart panics when polled after finishing, and a request must
/// not be able to reach a panic.
struct Parts {
    stream: Multipart,
    finished: bool,
}

impl Parts {
    async fn next(&mut self) -> Option<Result<Field, MultipartError>> {
        if self.finished {
            return None;
        }
        let next = self.stream.next().await;
        self.finished = !matches!(next, Some(Ok(_)));
        next
    }
}

/// Hands every part to the session: a part with a file name is a file, any
/// other part is text (as multer decides).
async fn feed(
    session: &mut UploadSession,
    parts: &mut Parts,
    idle: Duration,
) -> Result<(), ApiError> {
    while let Some(field) = within(idle, parts.next()).await? {
        let mut field = field.map_err(malformed)?;
        let name = field.name().unwrap_or_default().to_owned();
        let file_name = field
            .content_disposition()
            .and_then(|disposition| disposition.get_filename())
            .map(str::to_owned);
        match file_name {
            Some(original_name) => {
                let media_type = field
                    .content_type()
                    .map_or_else(|| UNDECLARED_MEDIA_TYPE.to_owned(), ToString::to_string);
                let mut file = session.file(&name, original_name, media_type).await?;
                while let Some(chunk) = within(idle, field.next()).await? {
                    file.write(&chunk.map_err(malformed)?).await?;
                }
            }
            None => {
                let mut text = session.text(name)?;
                while let Some(chunk) = within(idle, field.next()).await? {
                    text.write(&chunk.map_err(malformed)?)?;
                }
            }
        }
    }
    Ok(())
}

/// The next item of a body stream, or 408 when the client stays silent too long.
async fn within<T>(idle: Duration, next: impl Future<Output = T>) -> Result<T, ApiError> {
    tokio::time::timeout(idle, next)
        .await
        .map_err(|_| ApiError::RequestTimeout)
}

/// Reads and discards what is left of a refused body, within bounds.
async fn drain(parts: &mut Parts) {
    let started = Instant::now();
    let mut drained: u64 = 0;
    let deadline = started + DRAIN_TIME;
    while drained < DRAIN_BYTES {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let Ok(Some(Ok(mut field))) = tokio::time::timeout(remaining, parts.next()).await else {
            return;
        };
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(remaining, field.next()).await {
                Ok(Some(Ok(chunk))) => drained += chunk.len() as u64,
                Ok(None) => break,
                _ => return,
            }
            if drained >= DRAIN_BYTES {
                return;
            }
        }
    }
}

fn malformed(error: MultipartError) -> ApiError {
    match error {
        MultipartError::ContentTypeIncompatible | MultipartError::ContentTypeMissing => {
            ApiError::UnsupportedMediaType {
                expected: MULTIPART,
            }
        }
        other => ApiError::bad_request(format!("The multipart body is malformed: {other}")),
    }
}
