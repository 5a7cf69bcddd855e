//! The OpenAPI 3.1 document of the HTTP adapter: which operations it lists,
//! and the functions that print it and list its operations. It is derived
//! from the handlers' `#[utoipa::path]` annotations and the DTOs they read
//! and send, then completed by [`Modify`] steps with what holds for many
//! operations at once, so each is written once: store outages here
//! (`StoreOperations`), the others (conditional `GET`, consistency tokens,
//! body refusals, rate limiting, upload text fields, examples) in
//! `steps.rs`.
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

use utoipa::openapi::RefOr;
use utoipa::{Modify, OpenApi};

use super::steps::{
    BodyRefusals, ConditionalGet, ConsistencyTokens, ParameterExamples, RateLimiting, TextFields,
    operations, problem, retry_after, writes,
};
use crate::http::resources::{auxiliary, items, products, uploads, users};

/// The operations that read or write a store. Each may answer 503 with
/// `Retry-After` while the store is unreachable (nothing written), and each
/// that writes may answer 504 `outcome-unknown` when a commit's answer was
/// lost and its fate could not be learned (C12), so they are gathered in a
/// document of their own and get those responses here, once.
#[derive(OpenApi)]
#[openapi(paths(
    items::handlers::list,
    items::handlers::create,
    items::handlers::get,
    items::handlers::replace,
    items::handlers::delete,
    users::list,
    products::list,
    products::create,
))]
struct StoreOperations;

impl Modify for StoreOperations {
    /// Puts these operations first, in the order listed, then the others.
    fn modify(&self, document: &mut utoipa::openapi::OpenApi) {
        let mut stored = Self::openapi();
        let unavailable = |description| {
            RefOr::T(
                problem(description)
                    .header("Retry-After", retry_after())
                    .build(),
            )
        };
        for operation in operations(&mut stored.paths) {
            operation.responses.responses.insert(
                "503".to_owned(),
                unavailable("The store is unavailable; retry later"),
            );
        }
        for operation in writes(&mut stored.paths) {
            let responses = &mut operation.responses.responses;
            responses.insert(
                "503".to_owned(),
                unavailable("The store is unavailable and nothing was written; retry later"),
            );
            let unknown = problem(
                "Problem type `outcome-unknown`: the store did not say whether the write was \
                 applied, and it may have been; retry only with the same Idempotency-Key",
            )
            .build();
            responses.insert("504".to_owned(), RefOr::T(unknown));
        }
        let others = std::mem::take(&mut document.paths);
        document.merge(stored);
        document.paths.merge(others);
    }
}

/// The whole document: the operations that need no store are listed here,
/// and [`StoreOperations`] (the first step) adds the others.
#[derive(OpenApi)]
#[openapi(
    modifiers(
        &StoreOperations,
        &ConditionalGet,
        &ConsistencyTokens,
        &BodyRefusals,
        &TextFields,
        &RateLimiting,
        &ParameterExamples,
    ),
    info(
        title = "items-service",
        description = "A JSON-over-HTTP service for items, products and users. Every GET path also \
answers HEAD, with the headers GET would send and no body (C12: a HEAD costs only the headers); \
every path answers OPTIONS (204 with Allow) and any other method with 405, Allow and \
a problem body. Responses to requests with Origin carry Access-Control-Allow-Origin: *. Every \
response carries X-Content-Type-Options: nosniff. A client that reads nothing of a response for \
SEND_TIMEOUT_MS (30 s by default) is disconnected (C12).",
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

/// The document as pretty JSON ending in a newline, exactly as
/// `items-service openapi` prints it and the admin listener serves it.
pub fn openapi_json() -> String {
    let mut document = ApiDoc::openapi()
        .to_pretty_json()
        .unwrap_or_else(|error| format!("{{\"error\":\"{error}\"}}"));
    document.push('\n');
    document
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
