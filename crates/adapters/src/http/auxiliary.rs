//! The auxiliary routes: greeting, validation, sample data, form login and
//! JSON echo (spec §4 "Auxiliary routes", C3, C4).
//!
//! Every text response is `text/plain; charset=utf-8` and every response
//! carries `X-Content-Type-Options: nosniff` (added by the server), so a
//! `<script>` sent as a name comes back as inert text.

use actix_web::dev::Payload;
use actix_web::http::StatusCode;
use actix_web::{FromRequest, HttpRequest, HttpResponse};
use futures_util::future::LocalBoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::body::{JsonObject, read_typed};
use super::problem::{ApiError, FieldError, Location};
use super::respond;

/// `GET /`: `Hello World!` (C4).
pub(crate) async fn greeting() -> HttpResponse {
    respond::text("Hello World!")
}

#[derive(Serialize)]
struct ValidationErrors {
    errors: Vec<FieldError>,
}

/// `GET /hello?person=X`: `Hello, X!`; without a non-empty `person`, the
/// spec's own validation body with status 200 (spec §7, C4).
pub(crate) async fn hello(request: HttpRequest) -> Result<HttpResponse, ApiError> {
    let person = serde_urlencoded::from_str::<Vec<(String, String)>>(request.query_string())
        .unwrap_or_default()
        .into_iter()
        .find_map(|(key, value)| (key == "person").then_some(value));
    match person {
        Some(person) if !person.is_empty() => Ok(respond::text(format!("Hello, {person}!"))),
        missing_or_empty => {
            let value = missing_or_empty.map(Value::String);
            let errors = vec![FieldError::new(
                Location::Query,
                "person",
                value,
                "Invalid value",
            )];
            respond::json(StatusCode::OK, &ValidationErrors { errors })
        }
    }
}

#[derive(Serialize)]
struct SampleData {
    name: &'static str,
    age: u32,
    email: &'static str,
}

/// `GET /data`: the fixed sample object of C4.
pub(crate) async fn data() -> Result<HttpResponse, ApiError> {
    let sample = SampleData {
        name: "John Doe",
        age: 30,
        email: "john.doe@example.com",
    };
    respond::json(StatusCode::OK, &sample)
}

/// A URL-encoded form body (C3): 415 for another content type, 413 over
/// `MAX_JSON_BYTES`, 400 when it does not decode.
#[derive(Debug)]
pub(crate) struct UrlEncodedForm(Vec<(String, String)>);

impl FromRequest for UrlEncodedForm {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(request: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let body = read_typed(request, payload, "application/x-www-form-urlencoded");
        Box::pin(async move {
            serde_urlencoded::from_bytes(&body.await?)
                .map(UrlEncodedForm)
                .map_err(|error| ApiError::bad_request(format!("The form is malformed: {error}")))
        })
    }
}

/// `POST /login`: `welcome, USERNAME` for a non-empty `username` (C3, C4).
pub(crate) async fn login(
    UrlEncodedForm(fields): UrlEncodedForm,
) -> Result<HttpResponse, ApiError> {
    let username = fields
        .into_iter()
        .find_map(|(key, value)| (key == "username").then_some(value));
    match username {
        Some(username) if !username.is_empty() => Ok(respond::text(format!("welcome, {username}"))),
        missing_or_empty => Err(ApiError::invalid(
            "The form has invalid fields.",
            vec![FieldError::new(
                Location::Body,
                "username",
                missing_or_empty.map(Value::String),
                "username is required",
            )],
        )),
    }
}

/// Any JSON object.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub(crate) struct AnyObject(Map<String, Value>);

/// `POST /api/users`: the JSON object sent, unchanged (key order included),
/// with 200; the users collection itself stays read-only (C3).
pub(crate) async fn echo(
    JsonObject(AnyObject(object)): JsonObject<AnyObject>,
) -> Result<HttpResponse, ApiError> {
    respond::json(StatusCode::OK, &object)
}
