//! The route table: which handler answers which method on which path.
//!
//! Every path is one `web::resource` built by [`Resource`] here, so that each
//! path also answers, without a line per route (C7):
//! - `HEAD` wherever it answers `GET` (actix-web's `get()` guard does not
//!   match `HEAD`; the response encoder drops the body and keeps the headers);
//! - `OPTIONS` with 204 and `Allow` listing the path's methods;
//! - any other method with 405, `Allow` and a problem body.

use actix_web::http::header;
use actix_web::{FromRequest, Handler, HttpResponse, Responder, web};

use super::problem::ApiError;
use super::{auxiliary, items, products, uploads, users};

/// Registers every route of the service (spec §4) on `config`.
pub(crate) fn configure(config: &mut web::ServiceConfig) {
    config
        .service(Resource::at("/").get(auxiliary::greeting).build())
        .service(Resource::at("/hello").get(auxiliary::hello).build())
        .service(Resource::at("/data").get(auxiliary::data).build())
        .service(Resource::at("/login").post(auxiliary::login).build())
        .service(Resource::at("/api/users").post(auxiliary::echo).build())
        .service(
            Resource::at("/items")
                .get(items::list)
                .post(items::create)
                .build(),
        )
        .service(
            Resource::at("/items/{id}")
                .get(items::get)
                .put(items::replace)
                .delete(items::delete)
                .build(),
        )
        .service(Resource::at("/users").get(users::list).build())
        .service(
            Resource::at("/products")
                .get(products::list)
                .post(products::create)
                .build(),
        )
        .service(
            Resource::at("/products/{id}")
                .get(products::message)
                .build(),
        )
        .service(Resource::at("/profile").post(uploads::profile).build())
        .service(Resource::at("/photos/upload").post(uploads::photos).build());
}

/// One path and the methods it answers.
struct Resource {
    resource: actix_web::Resource,
    methods: Vec<&'static str>,
}

impl Resource {
    fn at(path: &str) -> Self {
        Self {
            resource: web::resource(path),
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
