//! `POST /profile` and `POST /photos/upload`: multipart uploads streamed to
//! the upload store (spec §4, C4, C5).
//!
//! Read with actix-multipart's low-level `Multipart` stream rather than its
//! `MultipartForm` derive: the derive fixes limits at compile time, shares
//! one limit among all files of a field, has no cap on the number of files
//! and cannot echo text fields it does not know. Here each file is checked
//! as it arrives — wrong field or one file too many is refused before a byte
//! of it is stored, a file over `MAX_FILE_BYTES` the moment it grows past it —
//! and written chunk by chunk, so memory stays flat whatever the size.
//! Files become visible under their final names only after the whole request
//! was read and found valid; any failure drops the pending files, which
//! deletes them.

use std::future::Future;
use std::time::{Duration, Instant};

use actix_multipart::{Field, Multipart, MultipartError};
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::StreamExt;
use items_domain::{PendingUpload, UploadService, UploadStoreError};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::body::has_media_type;
use super::problem::{ApiError, Problem};
use super::respond;

/// Limits on uploads, shared by every worker as app data.
#[derive(Debug, Clone, Copy)]
pub struct UploadLimits {
    /// Largest single file (`MAX_FILE_BYTES`).
    pub max_file_bytes: u64,
    /// Longest the client may stay silent in the middle of a body; actix-web
    /// has no body timer, and a stalled upload holds an open file.
    pub idle_timeout: Duration,
}

/// Text fields are echoed, so they are held in memory: bounded per value and
/// for the whole request, whatever their names (C5). A repeated name must not
/// escape the bounds, so they count values and bytes, never distinct names.
const MAX_TEXT_VALUE_BYTES: usize = 64 * 1024;
const MAX_TEXT_BYTES: usize = 1024 * 1024;
/// Parts of any kind (files and text) in one request (C5): each part costs a
/// little memory and parsing even when empty.
const MAX_PARTS: usize = 1000;
/// After refusing a request early, read at most this much more of its body
/// (for at most `DRAIN_TIME`) so the client gets to read the answer instead
/// of a connection reset; beyond that the connection is simply closed.
const DRAIN_BYTES: u64 = 64 * 1024 * 1024;
const DRAIN_TIME: Duration = Duration::from_secs(5);

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

/// Which field holds the files of a route, and how many it may hold.
#[derive(Debug, Clone, Copy)]
struct FileRule {
    field: &'static str,
    max_files: usize,
}

const AVATAR: FileRule = FileRule {
    field: "avatar",
    max_files: 1,
};
const PHOTOS: FileRule = FileRule {
    field: "photos",
    max_files: 12,
};

/// A stored file, as multer describes one (C4).
// These are the names a client of the original Express service already reads.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = UploadedFile)]
struct FileDto {
    fieldname: String,
    /// The client's file name, reported only: never used as a path.
    originalname: String,
    mimetype: String,
    /// The stored name: 32 random lowercase hex characters.
    #[schema(pattern = "^[0-9a-f]{32}$")]
    filename: String,
    size: u64,
}

/// A file received but not yet committed.
struct Received {
    file: FileDto,
    pending: Box<dyn PendingUpload>,
}

/// Everything a valid request carried.
struct Form {
    files: Vec<Received>,
    fields: Map<String, Value>,
}

/// The answer of `POST /profile`.
#[derive(Serialize, ToSchema)]
#[schema(as = ProfileUpload)]
struct ProfileDto {
    file: FileDto,
    /// The text fields sent; a repeated field becomes an array.
    #[schema(value_type = std::collections::HashMap<String, Value>)]
    fields: Map<String, Value>,
}

/// The answer of `POST /photos/upload`.
#[derive(Serialize, ToSchema)]
#[schema(as = PhotosUpload)]
struct PhotosDto {
    #[schema(min_items = 1, max_items = 12)]
    files: Vec<FileDto>,
    /// The text fields sent; a repeated field becomes an array.
    #[schema(value_type = std::collections::HashMap<String, Value>)]
    fields: Map<String, Value>,
}

/// `POST /profile`: exactly one file in `avatar` (C5).
#[utoipa::path(
    post,
    path = "/profile",
    tag = "uploads",
    summary = "Upload one avatar (C5)",
    request_body(content = super::openapi::ProfileForm, content_type = "multipart/form-data"),
    responses(
        (status = 201, description = "The stored file and the text fields", body = ProfileDto),
        (status = 400, description = "No file in `avatar`, a second one, a file in another field, or a malformed body (C5)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "A file over `MAX_FILE_BYTES`, a text value over 64 KiB, text values over 1 MiB together, or more than 1000 parts (C5)", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "The file could not be stored; nothing was kept", body = Problem, content_type = "application/problem+json")
    )
)]
pub(crate) async fn profile(
    service: web::Data<UploadService>,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (mut files, fields) = store(&service, &request, payload, AVATAR).await?;
    let file = files
        .pop()
        .ok_or_else(|| ApiError::internal("a checked form lost its file"))?;
    respond::json(StatusCode::CREATED, &ProfileDto { file, fields })
}

/// `POST /photos/upload`: 1 to 12 files in `photos` (C5).
#[utoipa::path(
    post,
    path = "/photos/upload",
    tag = "uploads",
    summary = "Upload 1 to 12 photos (C5)",
    request_body(content = super::openapi::PhotosForm, content_type = "multipart/form-data"),
    responses(
        (status = 201, description = "The stored files and the text fields", body = PhotosDto),
        (status = 400, description = "No file in `photos`, a 13th one, a file in another field, or a malformed body (C5)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "A file over `MAX_FILE_BYTES`, a text value over 64 KiB, text values over 1 MiB together, or more than 1000 parts (C5)", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "The files could not be stored; nothing was kept", body = Problem, content_type = "application/problem+json")
    )
)]
pub(crate) async fn photos(
    service: web::Data<UploadService>,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let (files, fields) = store(&service, &request, payload, PHOTOS).await?;
    respond::json(StatusCode::CREATED, &PhotosDto { files, fields })
}

/// Receives the whole form, then commits its files all together (or none).
async fn store(
    service: &UploadService,
    request: &HttpRequest,
    payload: web::Payload,
    rule: FileRule,
) -> Result<(Vec<FileDto>, Map<String, Value>), ApiError> {
    if !has_media_type(request, "multipart/form-data") {
        return Err(ApiError::UnsupportedMediaType {
            expected: "multipart/form-data",
        });
    }
    let limits = request
        .app_data::<UploadLimits>()
        .copied()
        .unwrap_or(UploadLimits {
            max_file_bytes: 10 * 1024 * 1024,
            idle_timeout: Duration::from_secs(30),
        });
    let mut parts = Parts {
        stream: Multipart::new(request.headers(), payload),
        finished: false,
    };
    let form = match receive(service, &mut parts, rule, limits).await {
        Ok(form) => form,
        Err(error) => {
            drain(&mut parts).await;
            return Err(error);
        }
    };
    let (dtos, pending): (Vec<FileDto>, Vec<_>) = form
        .files
        .into_iter()
        .map(|received| (received.file, received.pending))
        .unzip();
    let names = service.commit_all(pending).await.map_err(store_failed)?;
    super::metrics::count_uploaded_bytes(dtos.iter().map(|file| file.size).sum());
    let files = dtos.into_iter().zip(names).map(|(file, name)| FileDto {
        filename: name.to_string(),
        ..file
    });
    Ok((files.collect(), form.fields))
}

/// Reads every part. Returning early drops the pending files (deleting them).
async fn receive(
    service: &UploadService,
    parts: &mut Parts,
    rule: FileRule,
    limits: UploadLimits,
) -> Result<Form, ApiError> {
    let mut form = Form {
        files: Vec::new(),
        fields: Map::new(),
    };
    let mut budget = TextBudget::default();
    while let Some(field) = within(limits.idle_timeout, parts.next()).await? {
        let mut field = field.map_err(malformed)?;
        budget.count_part()?;
        let name = field.name().unwrap_or_default().to_owned();
        match field
            .content_disposition()
            .and_then(|disposition| disposition.get_filename())
        {
            Some(original) => {
                let original = original.to_owned();
                if name != rule.field {
                    return Err(ApiError::bad_request(format!(
                        "A file was sent in field `{name}`; this route takes files only in `{}`.",
                        rule.field
                    )));
                }
                if form.files.len() == rule.max_files {
                    return Err(ApiError::bad_request(format!(
                        "At most {} file(s) may be sent in `{}`.",
                        rule.max_files, rule.field
                    )));
                }
                let received = receive_file(service, &mut field, name, original, limits).await?;
                form.files.push(received);
            }
            None => {
                let text = receive_text(&mut field, &mut budget, limits).await?;
                add_text_field(&mut form.fields, name, text);
            }
        }
    }
    if form.files.is_empty() {
        return Err(ApiError::bad_request(format!(
            "A file is required in field `{}`.",
            rule.field
        )));
    }
    Ok(form)
}

async fn receive_file(
    service: &UploadService,
    field: &mut Field,
    fieldname: String,
    originalname: String,
    limits: UploadLimits,
) -> Result<Received, ApiError> {
    let mimetype = field.content_type().map_or_else(
        || "application/octet-stream".to_owned(),
        ToString::to_string,
    );
    let mut pending = service.begin().await.map_err(store_failed)?;
    let mut size: u64 = 0;
    while let Some(chunk) = within(limits.idle_timeout, field.next()).await? {
        let chunk = chunk.map_err(malformed)?;
        size += chunk.len() as u64;
        if size > limits.max_file_bytes {
            return Err(ApiError::PayloadTooLarge {
                detail: format!("A file must not exceed {} bytes.", limits.max_file_bytes),
            });
        }
        pending.write(&chunk).await.map_err(store_failed)?;
    }
    let file = FileDto {
        fieldname,
        originalname,
        mimetype,
        filename: String::new(),
        size,
    };
    Ok(Received { file, pending })
}

/// What one request has spent of the part and text bounds (C5).
#[derive(Debug, Default)]
struct TextBudget {
    parts: usize,
    text_bytes: usize,
}

impl TextBudget {
    /// Counts one more part, refusing the 1001st.
    fn count_part(&mut self) -> Result<(), ApiError> {
        self.parts += 1;
        if self.parts > MAX_PARTS {
            return Err(ApiError::PayloadTooLarge {
                detail: format!("A form must not have more than {MAX_PARTS} parts."),
            });
        }
        Ok(())
    }

    /// Accounts for `more` bytes of a text value that already holds `held`,
    /// before they are kept.
    fn spend(&mut self, held: usize, more: usize) -> Result<(), ApiError> {
        if held + more > MAX_TEXT_VALUE_BYTES {
            return Err(ApiError::PayloadTooLarge {
                detail: format!("A text field must not exceed {MAX_TEXT_VALUE_BYTES} bytes."),
            });
        }
        if self.text_bytes + more > MAX_TEXT_BYTES {
            return Err(ApiError::PayloadTooLarge {
                detail: format!(
                    "The text fields of a form must not exceed {MAX_TEXT_BYTES} bytes together."
                ),
            });
        }
        self.text_bytes += more;
        Ok(())
    }
}

async fn receive_text(
    field: &mut Field,
    budget: &mut TextBudget,
    limits: UploadLimits,
) -> Result<String, ApiError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = within(limits.idle_timeout, field.next()).await? {
        let chunk = chunk.map_err(malformed)?;
        budget.spend(bytes.len(), chunk.len())?;
        bytes.extend_from_slice(&chunk);
    }
    // Echoed as JSON, which must be UTF-8: invalid bytes become U+FFFD rather
    // than failing an upload whose files are fine.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A repeated text field becomes an array of its values, as multer does.
fn add_text_field(fields: &mut Map<String, Value>, name: String, text: String) {
    match fields.get_mut(&name) {
        None => {
            fields.insert(name, Value::String(text));
        }
        Some(Value::Array(values)) => values.push(Value::String(text)),
        Some(first) => {
            let first = first.take();
            fields.insert(name, Value::Array(vec![first, Value::String(text)]));
        }
    }
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
                expected: "multipart/form-data",
            }
        }
        other => ApiError::bad_request(format!("The multipart body is malformed: {other}")),
    }
}

fn store_failed(error: UploadStoreError) -> ApiError {
    ApiError::internal(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_text_fields_become_arrays_c5() {
        let mut fields = Map::new();
        add_text_field(&mut fields, "tag".into(), "a".into());
        add_text_field(&mut fields, "note".into(), "n".into());
        add_text_field(&mut fields, "tag".into(), "b".into());
        add_text_field(&mut fields, "tag".into(), "c".into());
        assert_eq!(
            Value::Object(fields),
            serde_json::json!({ "tag": ["a", "b", "c"], "note": "n" })
        );
    }
}
