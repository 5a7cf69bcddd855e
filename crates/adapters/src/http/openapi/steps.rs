//! The steps that complete the derived document with what holds for many
//! operations at once, so each is written once: the text fields of the
//! upload forms, conditional `GET` (C7), consistency tokens (C13), body
//! refusals (C3, C5), rate limiting (C9) and parameter examples; and the
//! small builders they share.

use serde_json::json;
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::path::{Operation, Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, Type};
use utoipa::openapi::{ContentBuilder, Paths, Ref, RefOr, Required};
use utoipa::{Modify, PartialSchema, ToSchema};

use crate::http::resources::uploads::{PhotosForm, ProfileForm};
use crate::http::support::Problem;

/// Adds to the upload forms what their derive cannot say: besides the file
/// field, any number of text fields (echoed in `fields`). A part's name
/// travels quoted in its `Content-Disposition` header, where a control
/// character, a quote or a backslash makes the body malformed (400); any
/// other name is accepted. A text value over 64 KiB is refused with 413
/// (documented on that response, not as a schema bound, since a bound
/// would promise a 400).
pub(super) struct TextFields;

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
pub(super) fn operations(paths: &mut Paths) -> impl Iterator<Item = &mut Operation> {
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

/// The operations of `paths` that write: `POST`, `PUT` and `DELETE`.
pub(super) fn writes(paths: &mut Paths) -> impl Iterator<Item = &mut Operation> {
    paths.paths.values_mut().flat_map(|item| {
        [&mut item.post, &mut item.put, &mut item.delete]
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
pub(super) fn problem(description: &str) -> ResponseBuilder {
    let body = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name(Problem::name())))
        .build();
    ResponseBuilder::new()
        .description(description)
        .content("application/problem+json", body)
}

pub(super) fn retry_after() -> Header {
    header(u64::schema(), "Seconds to wait before retrying")
}

/// Conditional `GET` (C7) holds for every `GET`: its 200 carries a strong
/// `ETag`, and `If-None-Match` naming the current one gets 304.
pub(super) struct ConditionalGet;

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

/// Every item and product operation takes and gives a `Consistency-Token`
/// (C13): the request header (a malformed one is a 400; one no copy of the
/// store can meet a 409 `consistency-unmet`), and on a PostgreSQL-backed
/// instance the response header on 2xx, 304 and 404 answers. Runs after
/// [`ConditionalGet`], so the 304s get it too.
pub(super) struct ConsistencyTokens;

impl ConsistencyTokens {
    /// What a token looks like: the text of a position (`items_domain::Position`).
    const PATTERN: &'static str = "^[0-9A-Fa-f]{1,8}-[0-9A-Fa-f]{1,16}$";

    fn schema() -> Schema {
        Schema::Object(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(Self::PATTERN))
                .max_length(Some(25))
                .build(),
        )
    }

    fn parameter() -> Parameter {
        ParameterBuilder::new()
            .name("Consistency-Token")
            .parameter_in(ParameterIn::Header)
            .required(Required::False)
            .description(Some(
                "A `Consistency-Token` an earlier answer carried: this one is answered from a \
                 state at or after it, on any instance (C13). Stores of one copy (memory, \
                 SQLite) check it and ignore it; a malformed one is a 400",
            ))
            .schema(Some(Self::schema()))
            .build()
    }

    fn header() -> Header {
        header(
            Self::schema(),
            "PostgreSQL-backed instances: the position in the store's history this answer \
             reflects (a write's: its commit's), opaque, valid on every instance and across a \
             failover; send it back as `Consistency-Token` to read at or after it (C13)",
        )
    }

    fn unmet() -> &'static str {
        "Problem type `consistency-unmet`: no copy of the store can answer at or after the \
         `Consistency-Token` (its write was lost by a failover); read again without it (C13)"
    }
}

impl Modify for ConsistencyTokens {
    fn modify(&self, document: &mut utoipa::openapi::OpenApi) {
        for (path, item) in &mut document.paths.paths {
            if !(path.starts_with("/items") || path == "/products") {
                continue;
            }
            let operations = [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
            ];
            for operation in operations.into_iter().flatten() {
                operation
                    .parameters
                    .get_or_insert_with(Vec::new)
                    .push(Self::parameter());
                let responses = &mut operation.responses.responses;
                for (status, response) in responses.iter_mut() {
                    let answered = status.starts_with('2') || status == "304" || status == "404";
                    if let (true, RefOr::T(response)) = (answered, response) {
                        response
                            .headers
                            .insert("Consistency-Token".to_owned(), Self::header());
                    }
                }
                match responses.get_mut("409") {
                    Some(RefOr::T(conflict)) => {
                        conflict.description =
                            format!("{}; or {}", conflict.description, Self::unmet());
                    }
                    _ => {
                        responses
                            .insert("409".to_owned(), RefOr::T(problem(Self::unmet()).build()));
                    }
                }
                responses.entry("400".to_owned()).or_insert_with(|| {
                    RefOr::T(
                        problem("Invalid request: the `Consistency-Token` header is malformed (C13, C6)")
                            .build(),
                    )
                });
            }
        }
    }
}

/// Every operation that reads a body refuses it the same ways (C3, C5): too
/// slow (408), too large (413, unless the operation says more precisely
/// why) and of another media type than the one it reads (415).
pub(super) struct BodyRefusals;

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

/// Rate limiting applies to every operation (C9), so it is described here
/// once instead of on each handler: a 429 response on every operation, and
/// the `RateLimit-*` headers on every response (present when limiting is on).
pub(super) struct RateLimiting;

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
pub(super) struct ParameterExamples;

impl ParameterExamples {
    fn example(parameter: &Parameter) -> Option<serde_json::Value> {
        Some(match parameter.name.as_str() {
            "id" => json!("1"),
            "limit" => json!(10),
            "after" => json!(0),
            "name" => json!("pen"),
            "person" => json!("Ada"),
            "If-Match" => json!("*"),
            "Idempotency-Key" => json!("order-4f9c2a7e"),
            "Last-Event-ID" => json!("s3f9c2a7e41b0d865.42"),
            "Consistency-Token" => json!("1-16B374D848"),
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
