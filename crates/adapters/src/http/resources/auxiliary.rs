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
use utoipa::ToSchema;

use crate::http::support::body::read_typed;
use crate::http::support::respond::{self, Constant};
use crate::http::support::{ApiError, FieldError, JsonObject, Location, Problem};

/// `GET /`: `Hello World!` (C4).
#[utoipa::path(
    get,
    path = "/",
    tag = "auxiliary",
    summary = "Greeting",
    responses(
        (status = 200, description = "`Hello World!`", body = String, content_type = "text/plain")
    )
)]
pub(crate) async fn greeting() -> HttpResponse {
    static GREETING: Constant = Constant::text(|| b"Hello World!".to_vec());
    GREETING.respond()
}

/// The body of `GET /hello` without a non-empty `person` (spec §7, C4).
#[derive(Serialize, ToSchema)]
struct ValidationErrors {
    errors: Vec<FieldError>,
}

/// `GET /hello?person=X`: `Hello, X!`; without a non-empty `person`, the
/// spec's own validation body with status 200 (spec §7, C4).
#[utoipa::path(
    get,
    path = "/hello",
    tag = "auxiliary",
    summary = "Greet a person, or report that `person` is missing",
    params(
        ("person" = Option<String>, Query, description = "The name to greet")
    ),
    responses(
        (status = 200, description = "`Hello, X!` as text, or the validation errors as JSON when `person` is missing or empty (spec §7)", content(
            (String = "text/plain"),
            (ValidationErrors = "application/json")
        ))
    )
)]
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

/// The sample object of `GET /data` (C4).
#[derive(Serialize, ToSchema)]
struct SampleData {
    name: &'static str,
    age: i64,
    email: &'static str,
}

/// `GET /data`: the fixed sample object of C4.
#[utoipa::path(
    get,
    path = "/data",
    tag = "auxiliary",
    summary = "Sample data",
    responses(
        (status = 200, description = "The sample object", body = SampleData)
    )
)]
pub(crate) async fn data() -> HttpResponse {
    static SAMPLE: Constant = Constant::json(|| {
        let sample = SampleData {
            name: "John Doe",
            age: 30,
            email: "john.doe@example.com",
        };
        // A struct of strings and an integer always serializes.
        serde_json::to_vec(&sample).unwrap_or_default()
    });
    SAMPLE.respond()
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

// The login form is read as name–value pairs (the first `username`
// counts), so it has no DTO to derive from: this type only describes it.
/// The form of `POST /login`.
#[derive(Debug, ToSchema)]
#[expect(dead_code, reason = "a description: never built")]
#[schema(example = json!({"username": "ada"}))]
pub(crate) struct LoginForm {
    #[schema(min_length = 1)]
    username: String,
}

/// `POST /login`: `welcome, USERNAME` for a non-empty `username` (C3, C4).
#[utoipa::path(
    post,
    path = "/login",
    tag = "auxiliary",
    summary = "Form login",
    request_body(content = LoginForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "`welcome, USERNAME`", body = String, content_type = "text/plain"),
        (status = 400, description = "Missing or empty `username` (C3)", body = Problem, content_type = "application/problem+json")
    )
)]
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

/// Any JSON object (`POST /api/users` echoes it).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(transparent)]
#[schema(
    value_type = std::collections::HashMap<String, Value>,
    example = json!({"any": "object"})
)]
pub(crate) struct AnyObject(Map<String, Value>);

/// `POST /api/users`: the JSON object sent, unchanged (key order included),
/// with 200; the users collection itself stays read-only (C3).
#[utoipa::path(
    post,
    path = "/api/users",
    tag = "auxiliary",
    summary = "Echo a JSON object",
    request_body(content = AnyObject, content_type = "application/json"),
    responses(
        (status = 200, description = "The object sent, unchanged", body = AnyObject),
        (status = 400, description = "Not JSON, or not an object (C3)", body = Problem, content_type = "application/problem+json")
    )
)]
pub(crate) async fn echo(
    JsonObject(AnyObject(object)): JsonObject<AnyObject>,
) -> Result<HttpResponse, ApiError> {
    respond::json(StatusCode::OK, &object)
}
