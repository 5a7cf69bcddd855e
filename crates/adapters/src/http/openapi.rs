//! The OpenAPI 3.1 document of the HTTP adapter, derived from the handlers'
//! `#[utoipa::path]` annotations and the DTOs they read and send, then
//! completed by the [`Modify`] steps below with what holds for many
//! operations at once (conditional `GET`, body refusals, store outages, rate
//! limiting), so each is written once.
//!
//! The response schemas are derived from the very structs the handlers
//! serialise. The request bodies are read leniently (any JSON value, so that
//! a wrong one can be reported in `errors`), so their schemas state what is
//! accepted with `value_type` overrides; schemathesis replays the document
//! against the running binary and fails on any answer that does not match it
//! (`scripts/schemathesis.sh`), and `docs/openapi.json` must equal
//! `items-service openapi` (a test says how to regenerate it).
//!
//! Not described as operations: `HEAD` (every `GET` path answers it with the
//! same headers and no body) and `OPTIONS` (204 with `Allow`), which every
//! path has (C7); and 405 with `Allow` for any other method.

use serde_json::json;
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::path::{Operation, Parameter};
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, Type};
use utoipa::openapi::{ContentBuilder, Paths, Ref, RefOr};
use utoipa::{Modify, OpenApi, PartialSchema, ToSchema};

use super::problem::Problem;
use super::{auxiliary, items, products, uploads, users};

// The three forms below have no DTO to derive from: the login form is read
// as name–value pairs (the first `username` counts), and multipart bodies
// part by part as they stream in. These types only describe them.

/// The form of `POST /login`.
#[derive(Debug, ToSchema)]
#[expect(dead_code, reason = "a description: never built")]
#[schema(example = json!({"username": "ada"}))]
pub(crate) struct LoginForm {
    #[schema(min_length = 1)]
    username: String,
}

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

/// Adds to the upload forms what their derive cannot say: besides the file
/// field, any number of text fields (echoed in `fields`). A part's name
/// travels quoted in its `Content-Disposition` header, where a control
/// character, a quote or a backslash makes the body malformed (400); any
/// other name is accepted. A text value over 64 KiB is refused with 413
/// (documented on that response, not as a schema bound, since a bound
/// would promise a 400).
struct TextFields;

/// The names a text field may have: no control character, quote or backslash.
const FIELD_NAME_PATTERN: &str = "^[^\\x00-\\x1f\\x7f\"\\\\]*$";

impl Modify for TextFields {
    fn modify(&self, document: &mut utoipa::openapi::OpenApi) {
        let Some(components) = document.components.as_mut() else {
            return;
        };
        for form in [ProfileForm::name(), PhotosForm::name()] {
            if let Some(RefOr::T(Schema::Object(object))) =
                components.schemas.get_mut(form.as_ref())
            {
                // Any value: in multipart every value travels as text, and a
                // repeated name comes back as an array of its values.
                object.additional_properties = Some(Box::new(AdditionalProperties::FreeForm(true)));
                let name = ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some(FIELD_NAME_PATTERN))
                    .build();
                object.property_names = Some(Box::new(Schema::Object(name)));
            }
        }
    }
}

/// The operations (`GET`, `POST`, `PUT`, `DELETE`: the methods the service
/// routes) of every path, for the steps below.
fn operations(paths: &mut Paths) -> impl Iterator<Item = &mut Operation> {
    paths.paths.values_mut().flat_map(|item| {
        [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.delete,
        ]
        .into_iter()
        .flatten()
    })
}

fn header(schema: impl Into<RefOr<Schema>>, description: impl Into<String>) -> Header {
    HeaderBuilder::new()
        .schema(schema)
        .description(Some(description.into()))
        .build()
}

/// A response with a problem body (C6).
fn problem(description: &str) -> ResponseBuilder {
    let body = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name(Problem::name())))
        .build();
    ResponseBuilder::new()
        .description(description)
        .content("application/problem+json", body)
}

fn retry_after() -> Header {
    header(u64::schema(), "Seconds to wait before retrying")
}

/// Conditional `GET` (C7) holds for every `GET`: its 200 carries a strong
/// `ETag`, and `If-None-Match` naming the current one gets 304.
struct ConditionalGet;

impl ConditionalGet {
    fn etag() -> Header {
        header(String::schema(), "Strong entity tag of the body")
    }
}

impl Modify for ConditionalGet {
    fn modify(&self, document: &mut utoipa::openapi::OpenApi) {
        for item in document.paths.paths.values_mut() {
            let Some(get) = item.get.as_mut() else {
                continue;
            };
            let responses = &mut get.responses.responses;
            if let Some(RefOr::T(ok)) = responses.get_mut("200") {
                ok.headers.insert("ETag".to_owned(), Self::etag());
            }
            let not_modified = ResponseBuilder::new()
                .description("Not modified: `If-None-Match` named the current `ETag`")
                .header("ETag", Self::etag())
                .build();
            responses.insert("304".to_owned(), RefOr::T(not_modified));
        }
    }
}

/// Every operation that reads a body refuses it the same ways (C3, C5): too
/// slow (408), too large (413, unless the operation says more precisely
/// why) and of another media type than the one it reads (415).
struct BodyRefusals;

impl Modify for BodyRefusals {
    fn modify(&self, document: &mut utoipa::openapi::OpenApi) {
        for operation in operations(&mut document.paths) {
            let Some(media_type) = operation
                .request_body
                .as_ref()
                .and_then(|body| body.content.keys().next().cloned())
            else {
                continue;
            };
            let rule = if media_type == "multipart/form-data" {
                "C5"
            } else {
                "C3"
            };
            let refusals = [
                ("408", "The body arrived too slowly".to_owned()),
                ("413", "Body over `MAX_JSON_BYTES` (C3)".to_owned()),
                ("415", format!("Not `{media_type}` ({rule})")),
            ];
            for (status, description) in refusals {
                operation
                    .responses
                    .responses
                    .entry(status.to_owned())
                    .or_insert_with(|| RefOr::T(problem(&description).build()));
            }
        }
    }
}

/// The operations that read or write a store. Each may answer 503 with
/// `Retry-After` while the store is unreachable, so they are gathered in a
/// document of their own and get that response here, once.
#[derive(OpenApi)]
#[openapi(paths(
    items::list,
    items::create,
    items::get,
    items::replace,
    items::delete,
    users::list,
    products::list,
    products::create,
))]
struct StoreOperations;

impl Modify for StoreOperations {
    /// Puts these operations first, in the order listed, then the others.
    fn modify(&self, document: &mut utoipa::openapi::OpenApi) {
        let mut stored = Self::openapi();
        for operation in operations(&mut stored.paths) {
            let unavailable = problem("The store is unavailable; retry later")
                .header("Retry-After", retry_after())
                .build();
            operation
                .responses
                .responses
                .insert("503".to_owned(), RefOr::T(unavailable));
        }
        let others = std::mem::take(&mut document.paths);
        document.merge(stored);
        document.paths.merge(others);
    }
}

/// Rate limiting applies to every operation (C9), so it is described here
/// once instead of on each handler: a 429 response on every operation, and
/// the `RateLimit-*` headers on every response (present when limiting is on).
struct RateLimiting;

impl RateLimiting {
    const HEADERS: [(&'static str, &'static str, Type); 4] = [
        (
            "RateLimit-Policy",
            "The budget and window, e.g. `100;w=900`",
            Type::String,
        ),
        ("RateLimit-Limit", "Requests per window", Type::Integer),
        ("RateLimit-Remaining", "Requests left now", Type::Integer),
        (
            "RateLimit-Reset",
            "Seconds until the whole budget is back",
            Type::Integer,
        ),
    ];

    fn header(description: &str, kind: Type) -> Header {
        let schema = ObjectBuilder::new().schema_type(kind).build();
        header(schema, format!("{description} (when rate limiting is on)"))
    }

    fn too_many_requests() -> Response {
        problem("Over the rate-limit budget (C9)")
            .header(
                "Retry-After",
                Self::header("Seconds to wait before retrying", Type::Integer),
            )
            .build()
    }
}

impl Modify for RateLimiting {
    fn modify(&self, document: &mut utoipa::openapi::OpenApi) {
        for operation in operations(&mut document.paths) {
            let responses = &mut operation.responses.responses;
            responses
                .entry("429".to_owned())
                .or_insert_with(|| RefOr::T(Self::too_many_requests()));
            for response in responses.values_mut() {
                if let RefOr::T(response) = response {
                    for (name, description, kind) in Self::HEADERS {
                        response
                            .headers
                            .insert(name.to_owned(), Self::header(description, kind));
                    }
                }
            }
        }
    }
}

/// An example value for every parameter, by name, so schemathesis's examples
/// phase sends a realistic request to each operation (instead of skipping
/// it) and a reader sees one. Set here once rather than on each handler.
struct ParameterExamples;

impl ParameterExamples {
    fn example(parameter: &Parameter) -> Option<serde_json::Value> {
        Some(match parameter.name.as_str() {
            "id" => json!("1"),
            "limit" => json!(10),
            "after" => json!(0),
            "name" => json!("pen"),
            "person" => json!("Ada"),
            "If-Match" => json!("*"),
            _ => return None,
        })
    }
}

impl Modify for ParameterExamples {
    fn modify(&self, document: &mut utoipa::openapi::OpenApi) {
        for operation in operations(&mut document.paths) {
            for parameter in operation.parameters.iter_mut().flatten() {
                let example = Self::example(parameter);
                if let (Some(example), Some(RefOr::T(Schema::Object(schema)))) =
                    (example, parameter.schema.as_mut())
                {
                    schema.examples = vec![example];
                }
            }
        }
    }
}

/// The whole document: the operations that need no store are listed here,
/// and [`StoreOperations`] (the first step) adds the others.
#[derive(OpenApi)]
#[openapi(
    modifiers(
        &StoreOperations,
        &ConditionalGet,
        &BodyRefusals,
        &TextFields,
        &RateLimiting,
        &ParameterExamples,
    ),
    info(
        title = "items-service",
        description = "A JSON-over-HTTP service for items, products and users. Every GET path also \
answers HEAD; every path answers OPTIONS (204 with Allow) and any other method with 405, Allow and \
a problem body. Responses to requests with Origin carry Access-Control-Allow-Origin: *. Every \
response carries X-Content-Type-Options: nosniff.",
        license(name = "MIT")
    ),
    paths(
        products::message,
        auxiliary::greeting,
        auxiliary::hello,
        auxiliary::data,
        auxiliary::login,
        auxiliary::echo,
        uploads::profile,
        uploads::photos,
    ),
    tags(
        (name = "items", description = "The items collection"),
        (name = "users", description = "Read-only users"),
        (name = "products", description = "The products collection"),
        (name = "auxiliary", description = "Greeting, validation, sample data, login, echo"),
        (name = "uploads", description = "Multipart file uploads"),
    )
)]
struct ApiDoc;

/// The document as pretty JSON, exactly as `items-service openapi` prints it.
pub fn openapi_json() -> String {
    ApiDoc::openapi()
        .to_pretty_json()
        .unwrap_or_else(|error| format!("{{\"error\":\"{error}\"}}"))
}

/// The (path, method) pairs the document describes, for the test that
/// compares them with the router's table.
pub fn documented_operations() -> Vec<(String, String)> {
    let document = ApiDoc::openapi();
    let mut operations = Vec::new();
    for (path, item) in &document.paths.paths {
        let methods = [
            ("GET", item.get.is_some()),
            ("POST", item.post.is_some()),
            ("PUT", item.put.is_some()),
            ("DELETE", item.delete.is_some()),
            ("PATCH", item.patch.is_some()),
            ("HEAD", item.head.is_some()),
            ("OPTIONS", item.options.is_some()),
        ];
        for (method, present) in methods {
            if present {
                operations.push((path.clone(), method.to_owned()));
            }
        }
    }
    operations
}
