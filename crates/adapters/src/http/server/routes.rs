//! The route table: which handler answers which method on which path.
//!
//! Every path is one `web::resource` built by [`Resource`] here, so that each
//! path also answers, without a line per route (C7):
//! - `HEAD` wherever it answers `GET` (actix-web's `get()` guard does not
//!   match `HEAD`; the response encoder drops the body and keeps the
//!   headers). actix-http still reads a `HEAD`'s body to its end, only to
//!   throw it away, so a handler whose body is streamed from the store
//!   (the full listing) answers `HEAD` with an empty one (C12: `HEAD` costs
//!   only the headers); the others' bodies are the page, item or constant
//!   whose hash is their `ETag`, bounded and needed for the tag anyway;
//! - `OPTIONS` with 204 and `Allow` listing the path's methods;
//! - any other method with 405, `Allow` and a problem body.

use actix_web::http::header;
use actix_web::{FromRequest, Handler, HttpResponse, Responder, web};

use crate::http::resources::{auxiliary, items, products, uploads, users};
use crate::http::support::ApiError;

/// Every route of the service (spec §4): one [`Resource`] per path.
fn resources() -> Vec<Resource> {
    vec![
        Resource::at("/").get(auxiliary::greeting),
        Resource::at("/hello").get(auxiliary::hello),
        Resource::at("/data").get(auxiliary::data),
        Resource::at("/login").post(auxiliary::login),
        Resource::at("/api/users").post(auxiliary::echo),
        Resource::at("/items")
            .get(items::handlers::list)
            .post(items::handlers::create),
        Resource::at("/items/{id}")
            .get(items::handlers::get)
            .put(items::handlers::replace)
            .delete(items::handlers::delete),
        Resource::at("/users").get(users::list),
        Resource::at("/products")
            .get(products::list)
            .post(products::create),
        Resource::at("/products/{id}").get(products::message),
        Resource::at("/profile").post(uploads::profile),
        Resource::at("/photos/upload").post(uploads::photos),
    ]
}

/// Registers every route on `config`.
pub(crate) fn configure(config: &mut web::ServiceConfig) {
    for resource in resources() {
        config.service(resource.build());
    }
}

/// The router's table: each path with the methods it answers, `HEAD` and
/// `OPTIONS` included. Built from the same `resources` as the router, so the
/// OpenAPI document can be checked against what is really served.
pub fn route_table() -> Vec<(String, Vec<&'static str>)> {
    resources()
        .into_iter()
        .map(|resource| {
            (
                resource.path,
                resource.methods.into_iter().chain(["OPTIONS"]).collect(),
            )
        })
        .collect()
}

/// One path and the methods it answers.
struct Resource {
    path: String,
    resource: actix_web::Resource,
    methods: Vec<&'static str>,
}

impl Resource {
    /// The resource at `path`, named after its template: the name is what
    /// the metrics label a request with (`HttpRequest::match_name`, which
    /// unlike `match_pattern` neither re-matches the path nor allocates).
    fn at(path: &str) -> Self {
        Self {
            path: path.to_owned(),
            resource: web::resource(path).name(path),
            methods: Vec::new(),
        }
    }

    fn route<F, Args>(mut self, method: &'static str, route: actix_web::Route, handler: F) -> Self
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.resource = self.resource.route(route.to(handler));
        self.methods.push(method);
        self
    }

    /// `GET`, and `HEAD` with the same handler.
    fn get<F, Args>(self, handler: F) -> Self
    where
        F: Handler<Args> + Clone,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.route("GET", web::get(), handler.clone())
            .route("HEAD", web::head(), handler)
    }

    fn post<F, Args>(self, handler: F) -> Self
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.route("POST", web::post(), handler)
    }

    fn put<F, Args>(self, handler: F) -> Self
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.route("PUT", web::put(), handler)
    }

    fn delete<F, Args>(self, handler: F) -> Self
    where
        F: Handler<Args>,
        Args: FromRequest + 'static,
        F::Output: Responder + 'static,
    {
        self.route("DELETE", web::delete(), handler)
    }

    /// Adds `OPTIONS` and the 405 fallback, both naming the same methods.
    fn build(mut self) -> actix_web::Resource {
        self.methods.push("OPTIONS");
        let allow = self.methods.join(", ");
        let options_allow = allow.clone();
        self.resource
            .route(
                web::route()
                    .method(actix_web::http::Method::OPTIONS)
                    .to(move || {
                        let allow = options_allow.clone();
                        async move {
                            HttpResponse::NoContent()
                                .insert_header((header::ALLOW, allow))
                                .finish()
                        }
                    }),
            )
            .default_service(web::to(move || {
                let allow = allow.clone();
                async move { Err::<HttpResponse, _>(ApiError::MethodNotAllowed { allow }) }
            }))
    }
}

/// The answer for a path no route has: 404 with a problem body (C7).
pub(crate) async fn not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::RouteNotFound)
}
