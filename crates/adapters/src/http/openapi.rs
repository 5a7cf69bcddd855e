//! The OpenAPI 3.1 document of the HTTP adapter, derived from the handlers'
//! `#[utoipa::path]` annotations and the wire-format schemas below.
//!
//! The schemas describe the JSON on the wire; the handlers' own DTOs borrow
//! from domain values and stay private. Nothing keeps the two in step by
//! construction, so CI does: schemathesis replays the document against the
//! running binary and fails on any response that does not match it
//! (`scripts/schemathesis.sh`), and `docs/openapi.json` must equal
//! `items-service openapi` (a test says how to regenerate it).
//!
//! Not described as operations: `HEAD` (every `GET` path answers it with the
//! same headers and no body) and `OPTIONS` (204 with `Allow`), which every
//! path has (C7); and 405 with `Allow` for any other method.

use std::collections::HashMap;

use serde_json::json;
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::path::{Operation, Parameter};
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, Type};
use utoipa::openapi::{ContentBuilder, Ref, RefOr};
use utoipa::{Modify, OpenApi, ToSchema};

use super::{auxiliary, items, products, uploads, users};

/// An item (spec §2).
#[derive(Debug, ToSchema)]
#[schema(as = Item, example = json!({"id": 1, "name": "pen"}))]
pub struct ItemSchema {
    /// Assigned by the service from a counter that never goes back (C2).
    #[schema(minimum = 1)]
    pub id: i64,
    #[schema(min_length = 1, max_length = 256)]
    pub name: String,
}

/// The body of `POST /items` and `PUT /items/{id}`; other fields are ignored.
#[derive(Debug, ToSchema)]
#[schema(as = NewItem, example = json!({"name": "pen"}))]
pub struct NewItemSchema {
    /// 1 to 256 characters, kept exactly as sent (C3).
    #[schema(min_length = 1, max_length = 256)]
    pub name: String,
}

/// A product (spec §2).
#[derive(Debug, ToSchema)]
#[schema(as = Product, example = json!({"id": 1, "name": "pen", "price": 1.5}))]
pub struct ProductSchema {
    #[schema(minimum = 1)]
    pub id: i64,
    #[schema(min_length = 1, max_length = 256)]
    pub name: String,
    #[schema(minimum = 0)]
    pub price: f64,
}

/// The body of `POST /products`; other fields are ignored.
#[derive(Debug, ToSchema)]
#[schema(as = NewProduct, example = json!({"name": "pen", "price": 1.5}))]
pub struct NewProductSchema {
    #[schema(min_length = 1, max_length = 256)]
    pub name: String,
    /// A finite JSON number, zero or more (a numeric string is refused, C3).
    #[schema(minimum = 0)]
    pub price: f64,
}

/// A read-only user.
#[derive(Debug, ToSchema)]
#[schema(as = User, example = json!({"id": 1, "name": "John Doe"}))]
pub struct UserSchema {
    pub id: i64,
    pub name: String,
}

/// The message of `GET /products/{id}` (C4).
#[derive(Debug, ToSchema)]
#[schema(as = Message)]
pub struct MessageSchema {
    pub msg: String,
}

/// The sample object of `GET /data` (C4).
#[derive(Debug, ToSchema)]
#[schema(as = SampleData)]
pub struct SampleDataSchema {
    pub name: String,
    pub age: i64,
    pub email: String,
}

/// Where a refused value came from.
#[derive(Debug, ToSchema)]
#[schema(as = FieldLocation)]
#[allow(dead_code)] // a schema: only its shape is used
pub enum FieldLocationSchema {
    #[schema(rename = "body")]
    Body,
    #[schema(rename = "query")]
    Query,
    #[schema(rename = "params")]
    Params,
}

/// One refused value (C6), shaped like express-validator's entries.
#[derive(Debug, ToSchema)]
#[schema(as = FieldError)]
pub struct FieldErrorSchema {
    /// Always `field`.
    #[schema(rename = "type")]
    pub kind: String,
    /// The value as received; absent when the value was missing.
    #[schema(value_type = Option<serde_json::Value>, required = false)]
    pub value: Option<serde_json::Value>,
    pub msg: String,
    pub path: String,
    pub location: FieldLocationSchema,
}

/// The body of `GET /hello` without a non-empty `person` (spec §7, C4).
#[derive(Debug, ToSchema)]
#[schema(as = ValidationErrors)]
pub struct ValidationErrorsSchema {
    pub errors: Vec<FieldErrorSchema>,
}

/// An RFC 9457 problem document: every error the spec does not define (C6).
#[derive(Debug, ToSchema)]
#[schema(as = Problem)]
pub struct ProblemSchema {
    /// Always `about:blank`.
    #[schema(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// Present on validation failures: one entry per refused value.
    #[schema(required = false)]
    pub errors: Option<Vec<FieldErrorSchema>>,
}

/// The form of `POST /login`.
#[derive(Debug, ToSchema)]
#[schema(as = LoginForm, example = json!({"username": "ada"}))]
pub struct LoginFormSchema {
    #[schema(min_length = 1)]
    pub username: String,
}

/// Any JSON object (`POST /api/users` echoes it).
#[derive(Debug, ToSchema)]
#[schema(as = AnyObject, example = json!({"any": "object"}))]
pub struct AnyObjectSchema(pub HashMap<String, serde_json::Value>);

/// A stored file, as multer describes one (C4).
#[derive(Debug, ToSchema)]
#[schema(as = UploadedFile)]
pub struct UploadedFileSchema {
    pub fieldname: String,
    /// The client's file name, reported only: never used as a path.
    pub originalname: String,
    pub mimetype: String,
    /// The stored name: 32 random lowercase hex characters.
    #[schema(pattern = "^[0-9a-f]{32}$")]
    pub filename: String,
    pub size: u64,
}

/// The answer of `POST /profile`.
#[derive(Debug, ToSchema)]
#[schema(as = ProfileUpload)]
pub struct ProfileUploadSchema {
    pub file: UploadedFileSchema,
    /// The text fields sent; a repeated field becomes an array.
    pub fields: HashMap<String, serde_json::Value>,
}

/// The answer of `POST /photos/upload`.
#[derive(Debug, ToSchema)]
#[schema(as = PhotosUpload)]
pub struct PhotosUploadSchema {
    #[schema(min_items = 1, max_items = 12)]
    pub files: Vec<UploadedFileSchema>,
    pub fields: HashMap<String, serde_json::Value>,
}

/// The form of `POST /profile`: exactly one file in `avatar`, any text fields.
#[derive(Debug, ToSchema)]
#[schema(as = ProfileForm, example = json!({"avatar": "a picture", "nickname": "ada"}))]
pub struct ProfileFormSchema {
    #[schema(value_type = String, format = Binary)]
    pub avatar: Vec<u8>,
}

/// The form of `POST /photos/upload`: 1 to 12 files in `photos`, any text fields.
#[derive(Debug, ToSchema)]
#[schema(as = PhotosForm, example = json!({"photos": ["one picture", "another"], "album": "trip"}))]
pub struct PhotosFormSchema {
    #[schema(value_type = Vec<String>, format = Binary, min_items = 1, max_items = 12)]
    pub photos: Vec<Vec<u8>>,
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
        for form in ["ProfileForm", "PhotosForm"] {
            if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(form) {
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
        HeaderBuilder::new()
            .schema(ObjectBuilder::new().schema_type(kind).build())
            .description(Some(format!("{description} (when rate limiting is on)")))
            .build()
    }

    fn too_many_requests() -> Response {
        let problem = ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("Problem")))
            .build();
        ResponseBuilder::new()
            .description("Over the rate-limit budget (C9)")
            .content("application/problem+json", problem)
            .header(
                "Retry-After",
                Self::header("Seconds to wait before retrying", Type::Integer),
            )
            .build()
    }

    fn apply(operation: &mut Operation) {
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

impl Modify for RateLimiting {
    fn modify(&self, document: &mut utoipa::openapi::OpenApi) {
        for item in document.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
            ];
            for operation in operations.into_iter().flatten() {
                Self::apply(operation);
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
        for item in document.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
            ];
            for operation in operations.into_iter().flatten() {
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
}

#[derive(OpenApi)]
#[openapi(
    modifiers(&TextFields, &RateLimiting, &ParameterExamples),
    info(
        title = "items-service",
        description = "A JSON-over-HTTP service for items, products and users. Every GET path also \
answers HEAD; every path answers OPTIONS (204 with Allow) and any other method with 405, Allow and \
a problem body. Responses to requests with Origin carry Access-Control-Allow-Origin: *. Every \
response carries X-Content-Type-Options: nosniff.",
        license(name = "MIT")
    ),
    paths(
        items::list,
        items::create,
        items::get,
        items::replace,
        items::delete,
        users::list,
        products::list,
        products::create,
        products::message,
        auxiliary::greeting,
        auxiliary::hello,
        auxiliary::data,
        auxiliary::login,
        auxiliary::echo,
        uploads::profile,
        uploads::photos,
    ),
    components(schemas(
        ItemSchema, NewItemSchema, ProductSchema, NewProductSchema, UserSchema, MessageSchema,
        SampleDataSchema, FieldErrorSchema, FieldLocationSchema, ValidationErrorsSchema, ProblemSchema,
        LoginFormSchema, AnyObjectSchema, UploadedFileSchema, ProfileUploadSchema, PhotosUploadSchema,
        ProfileFormSchema, PhotosFormSchema,
    )),
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
