//! `POST /profile` and `POST /photos/upload`: the handlers, their response
//! bodies and the HTTP status of each upload error (spec §4, C4, C5).
//!
//! The rules — which field, how many files, how large, the text bounds, all
//! or nothing — are the domain's [`UploadPolicy`] and [`UploadSession`]
//! (`items_domain::uploads`); the body is streamed into the session by
//! [`multipart`](super::multipart).

use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use items_domain::{
    StoredFile, TextField, Upload, UploadError, UploadPolicy, UploadService, defaults,
};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::multipart;
use crate::http::support::{ApiError, Problem, respond};

/// Limits on uploads, from the service's configuration (C1).
#[derive(Debug, Clone, Copy)]
pub struct UploadLimits {
    /// Largest single file (`MAX_FILE_BYTES`).
    pub max_file_bytes: u64,
    /// Longest the client may stay silent in the middle of a body; actix-web
    /// has no body timer, and a stalled upload holds an open file.
    pub idle_timeout: Duration,
}

impl Default for UploadLimits {
    fn default() -> Self {
        Self {
            max_file_bytes: defaults::MAX_FILE_BYTES,
            idle_timeout: defaults::UPLOAD_IDLE_TIMEOUT,
        }
    }
}

/// The upload routes' use case and limits, shared by every worker as one
/// piece of app data: a handler that has the service has its limits too, so
/// no limit can be missing and none is ever assumed.
#[derive(Debug)]
pub(crate) struct Uploads {
    service: UploadService,
    limits: UploadLimits,
}

impl Uploads {
    pub(crate) fn new(service: UploadService, limits: UploadLimits) -> Self {
        Self { service, limits }
    }

    /// Receives one request under the route's policy, built with the
    /// configured largest file.
    async fn receive(
        &self,
        policy: fn(u64) -> UploadPolicy,
        request: &HttpRequest,
        payload: web::Payload,
    ) -> Result<Upload, ApiError> {
        let session = self.service.session(policy(self.limits.max_file_bytes));
        let upload =
            multipart::receive(session, request, payload, self.limits.idle_timeout).await?;
        crate::http::metrics::count_uploaded_bytes(upload.files.total_bytes());
        Ok(upload)
    }
}

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

impl From<StoredFile> for FileDto {
    fn from(file: StoredFile) -> Self {
        Self {
            fieldname: file.field.to_owned(),
            originalname: file.original_name,
            mimetype: file.media_type,
            filename: file.name.to_string(),
            size: file.size,
        }
    }
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

// Multipart bodies are read part by part as they stream in, so the forms
// have no DTO to derive from: these types only describe them; the
// OpenAPI document adds their text fields.
/// The form of `POST /profile`: exactly one file in `avatar`, any text fields.
#[derive(Debug, ToSchema)]
#[expect(dead_code, reason = "a description: never built")]
#[schema(example = json!({"avatar": "a picture", "nickname": "ada"}))]
pub(crate) struct ProfileForm {
    #[schema(value_type = String, format = Binary)]
    avatar: Vec<u8>,
}

/// The form of `POST /photos/upload`: 1 to 12 files in `photos`, any text fields.
#[derive(Debug, ToSchema)]
#[expect(dead_code, reason = "a description: never built")]
#[schema(example = json!({"photos": ["one picture", "another"], "album": "trip"}))]
pub(crate) struct PhotosForm {
    #[schema(value_type = Vec<String>, format = Binary, min_items = 1, max_items = 12)]
    photos: Vec<Vec<u8>>,
}

/// `POST /profile`: exactly one file in `avatar` (C5).
#[utoipa::path(
    post,
    path = "/profile",
    tag = "uploads",
    summary = "Upload one avatar (C5)",
    request_body(content = ProfileForm, content_type = "multipart/form-data"),
    responses(
        (status = 201, description = "The stored file and the text fields", body = ProfileDto),
        (status = 400, description = "No file in `avatar`, a second one, a file in another field, or a malformed body (C5)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "A file over `MAX_FILE_BYTES`, a text value over 64 KiB, text values over 1 MiB together, or more than 1000 parts (C5)", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "The file could not be stored; nothing was kept", body = Problem, content_type = "application/problem+json"),
        (status = 507, description = "Storing the upload would pass `UPLOADS_MAX_BYTES`, or the disk is full; nothing was kept (C5)", body = Problem, content_type = "application/problem+json")
    )
)]
pub(crate) async fn profile(
    uploads: web::Data<Uploads>,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let upload = uploads
        .receive(UploadPolicy::avatar, &request, payload)
        .await?;
    // The avatar policy takes one file: `files.more` is empty.
    let body = ProfileDto {
        file: upload.files.first.into(),
        fields: echo(upload.fields),
    };
    respond::json(StatusCode::CREATED, &body)
}

/// `POST /photos/upload`: 1 to 12 files in `photos` (C5).
#[utoipa::path(
    post,
    path = "/photos/upload",
    tag = "uploads",
    summary = "Upload 1 to 12 photos (C5)",
    request_body(content = PhotosForm, content_type = "multipart/form-data"),
    responses(
        (status = 201, description = "The stored files and the text fields", body = PhotosDto),
        (status = 400, description = "No file in `photos`, a 13th one, a file in another field, or a malformed body (C5)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "A file over `MAX_FILE_BYTES`, a text value over 64 KiB, text values over 1 MiB together, or more than 1000 parts (C5)", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "The files could not be stored; nothing was kept", body = Problem, content_type = "application/problem+json"),
        (status = 507, description = "Storing the upload would pass `UPLOADS_MAX_BYTES`, or the disk is full; nothing was kept (C5)", body = Problem, content_type = "application/problem+json")
    )
)]
pub(crate) async fn photos(
    uploads: web::Data<Uploads>,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let upload = uploads
        .receive(UploadPolicy::photos, &request, payload)
        .await?;
    let body = PhotosDto {
        files: upload.files.into_iter().map(FileDto::from).collect(),
        fields: echo(upload.fields),
    };
    respond::json(StatusCode::CREATED, &body)
}

impl From<UploadError> for ApiError {
    fn from(error: UploadError) -> Self {
        match error {
            UploadError::UnexpectedFileField { .. }
            | UploadError::TooManyFiles { .. }
            | UploadError::MissingFile { .. } => Self::bad_request(error.to_string()),
            UploadError::FileTooLarge { .. }
            | UploadError::TextValueTooLarge { .. }
            | UploadError::TextTooLarge { .. }
            | UploadError::TooManyParts { .. } => Self::PayloadTooLarge {
                detail: error.to_string(),
            },
            UploadError::Store(cause) if cause.is_full() => Self::InsufficientStorage(cause.into()),
            UploadError::Store(cause) => Self::internal(cause),
        }
    }
}

/// The text fields as multer echoes them: a name sent once maps to its
/// value, a repeated name to an array of its values.
fn echo(fields: Vec<TextField>) -> Map<String, Value> {
    let mut echoed = Map::new();
    for field in fields {
        add_text_field(&mut echoed, field.name, field.value);
    }
    echoed
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
