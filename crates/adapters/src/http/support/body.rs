//! Request bodies: the media-type check, the size limit and the read timeout
//! shared by every route that reads a body, and the JSON extractor (C3).
//!
//! actix-web's own `Json` extractor answers a wrong content type with 400 and
//! accepts `text/json`; C3 wants 415 for anything but `application/json`, a
//! problem body for every failure and a limit set at run time, so bodies are
//! read here instead.

use std::future::Future;
use std::time::Duration;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::web::{Bytes, BytesMut};
use actix_web::{FromRequest, HttpRequest};
use futures_util::StreamExt;
use futures_util::future::LocalBoxFuture;
use items_domain::defaults;
use serde::de::DeserializeOwned;

use super::problem::ApiError;

/// Limits on request bodies, from the service's configuration (C1); the
/// server registers them as app data for every route.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// Largest JSON or form body, in bytes (`MAX_JSON_BYTES`).
    pub max_bytes: usize,
    /// Longest a client may take to send a whole JSON or form body. actix-web
    /// times out a slow request *head* but has no timer for the body, so
    /// without this a client could hold a connection open forever by
    /// trickling bytes.
    pub read_timeout: Duration,
}

impl Default for BodyLimits {
    fn default() -> Self {
        Self {
            // 100 KiB fits in any `usize`.
            max_bytes: defaults::MAX_JSON_BYTES as usize,
            read_timeout: defaults::BODY_READ_TIMEOUT,
        }
    }
}

/// Whether the request's `Content-Type` has this essence (type/subtype,
/// parameters such as `charset` ignored, case-insensitive).
pub(crate) fn has_media_type(request: &HttpRequest, essence: &str) -> bool {
    let Some(value) = request.headers().get(header::CONTENT_TYPE) else {
        return false;
    };
    // The usual header is the essence alone: one comparison, where the
    // general parse below cost 540 instructions a request (callgrind, PUT).
    value.as_bytes().eq_ignore_ascii_case(essence.as_bytes())
        || value
            .to_str()
            .ok()
            .and_then(|value| value.split(';').next())
            .is_some_and(|found| found.trim().eq_ignore_ascii_case(essence))
}

/// Reads the whole body, refusing more than `limits.max_bytes` (413) and a
/// body that takes longer than `limits.read_timeout` (408).
async fn read_limited(
    declared_length: Option<u64>,
    mut payload: Payload,
    limits: BodyLimits,
) -> Result<Bytes, ApiError> {
    let too_large = || ApiError::PayloadTooLarge {
        detail: format!("The body must not exceed {} bytes.", limits.max_bytes),
    };
    // Refuse a declared oversize body before reading any of it.
    if declared_length.is_some_and(|length| length > limits.max_bytes as u64) {
        return Err(too_large());
    }
    let read = async {
        let mut body = BytesMut::with_capacity(declared_length.map_or(1024, |l| l as usize));
        while let Some(chunk) = payload.next().await {
            let chunk = chunk.map_err(|error| {
                ApiError::bad_request(format!("The body could not be read: {error}"))
            })?;
            if body.len() + chunk.len() > limits.max_bytes {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    };
    tokio::time::timeout(limits.read_timeout, read)
        .await
        .map_err(|_| ApiError::RequestTimeout)?
}

fn declared_length(request: &HttpRequest) -> Option<u64> {
    request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok())
}

/// A JSON object body deserialised into `T` (C3): 415 unless the content
/// type is `application/json`, 413 over the limit, 400 when the body is not
/// JSON or not an object. Unknown fields are ignored by `T`'s `Deserialize`.
#[derive(Debug)]
pub struct JsonObject<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for JsonObject<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(request: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let body = read_typed(request, payload, "application/json");
        Box::pin(async move { parse_object(&body.await?).map(JsonObject) })
    }
}

/// The whole body of a request whose `Content-Type` must have `essence`:
/// 415 otherwise, then 413/408 as [`read_limited`] decides. Everything the
/// future needs is taken from the request now, so it borrows nothing.
pub(crate) fn read_typed(
    request: &HttpRequest,
    payload: &mut Payload,
    essence: &'static str,
) -> impl Future<Output = Result<Bytes, ApiError>> + 'static {
    let expected = has_media_type(request, essence);
    let length = declared_length(request);
    let limits = request.app_data::<BodyLimits>().copied();
    let payload = payload.take();
    async move {
        if !expected {
            return Err(ApiError::UnsupportedMediaType { expected: essence });
        }
        // The server registers the limits with every route; a missing one
        // is a wiring bug to report, never a reason to assume a limit.
        let limits = limits.ok_or_else(|| ApiError::internal("no BodyLimits app data"))?;
        read_limited(length, payload, limits).await
    }
}

/// Parses a JSON object. A derived `Deserialize` for a struct also accepts a
/// JSON array (fields by position), so the object check comes first.
pub(crate) fn parse_object<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let first = bytes.iter().find(|byte| !byte.is_ascii_whitespace());
    if first != Some(&b'{') {
        return match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            Err(error) => Err(malformed(&error)),
            Ok(_) => Err(ApiError::bad_request("The body must be a JSON object.")),
        };
    }
    serde_json::from_slice(bytes).map_err(|error| match error.classify() {
        serde_json::error::Category::Data => ApiError::bad_request(format!(
            "The body does not have the expected shape: {error}"
        )),
        _ => malformed(&error),
    })
}

fn malformed(error: &serde_json::Error) -> ApiError {
    ApiError::bad_request(format!("The body is not valid JSON: {error}"))
}
