//! `/products` and `/products/{id}` (spec §4 "Users and products", C3, C4, C7).

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use items_domain::{Product, ProductService};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::body::JsonObject;
use super::fields;
use super::problem::ApiError;
use super::respond;

/// The body of `POST /products`.
#[derive(Debug, Deserialize)]
pub(crate) struct ProductBody {
    #[serde(default, deserialize_with = "fields::present")]
    name: Option<Value>,
    #[serde(default, deserialize_with = "fields::present")]
    price: Option<Value>,
}

#[derive(Debug, Serialize)]
struct ProductDto<'a> {
    id: i64,
    name: &'a str,
    #[serde(serialize_with = "number")]
    price: f64,
}

/// Writes a whole price as an integer (`5`, not `5.0`), as a JavaScript
/// server would, so a client that sent `5` gets `5` back; other prices keep
/// serde's shortest round-trip form. Below 2^53 every integer is exact in an f64.
fn number<S: serde::Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if value.fract() == 0.0 && value.abs() < EXACT {
        serializer.serialize_i64(*value as i64)
    } else {
        serializer.serialize_f64(*value)
    }
}

impl<'a> From<&'a Product> for ProductDto<'a> {
    fn from(product: &'a Product) -> Self {
        Self {
            id: product.id.get(),
            name: product.name.as_str(),
            price: product.price.get(),
        }
    }
}

/// `GET /products`: every product in id order.
#[utoipa::path(
    get,
    path = "/products",
    tag = "products",
    summary = "List products",
    responses(
        (status = 200, description = "Every product, ordered by id", body = [super::openapi::ProductSchema], headers(
            ("ETag" = String, description = "Strong entity tag of the body")
        )),
        (status = 304, description = "Not modified: `If-None-Match` named the current `ETag`", headers(
            ("ETag" = String, description = "Strong entity tag of the body")
        )),
        (status = 503, description = "The store is unavailable; retry later", body = super::openapi::ProblemSchema, content_type = "application/problem+json", headers(
            ("Retry-After" = u64, description = "Seconds to wait before retrying")
        ))
    )
)]
pub(crate) async fn list(service: web::Data<ProductService>) -> Result<HttpResponse, ApiError> {
    let products = service.list().await?;
    respond::json(
        StatusCode::OK,
        &products.iter().map(ProductDto::from).collect::<Vec<_>>(),
    )
}

/// `POST /products`: 201 with the product and its `Location`; both fields are
/// checked and every refusal reported (C3).
#[utoipa::path(
    post,
    path = "/products",
    tag = "products",
    summary = "Create a product",
    request_body(content = super::openapi::NewProductSchema, content_type = "application/json"),
    responses(
        (status = 201, description = "The created product", body = super::openapi::ProductSchema, headers(
            ("Location" = String, description = "The new product, e.g. `/products/7`")
        )),
        (status = 400, description = "Invalid request; `errors` lists each refused value (C3, C6)", body = super::openapi::ProblemSchema, content_type = "application/problem+json"),
        (status = 408, description = "The body arrived too slowly", body = super::openapi::ProblemSchema, content_type = "application/problem+json"),
        (status = 413, description = "Body over `MAX_JSON_BYTES` (C3)", body = super::openapi::ProblemSchema, content_type = "application/problem+json"),
        (status = 415, description = "Not `application/json` (C3)", body = super::openapi::ProblemSchema, content_type = "application/problem+json"),
        (status = 503, description = "The store is unavailable; retry later", body = super::openapi::ProblemSchema, content_type = "application/problem+json", headers(
            ("Retry-After" = u64, description = "Seconds to wait before retrying")
        ))
    )
)]
pub(crate) async fn create(
    service: web::Data<ProductService>,
    JsonObject(body): JsonObject<ProductBody>,
) -> Result<HttpResponse, ApiError> {
    let (name, price) =
        fields::all_valid(match (fields::name(body.name), fields::price(body.price)) {
            (Ok(name), Ok(price)) => Ok((name, price)),
            (name, price) => Err(name.err().into_iter().chain(price.err()).collect()),
        })?;
    let product = service.create(name, price).await?;
    respond::created(
        format!("/products/{}", product.id),
        &ProductDto::from(&product),
    )
}

#[derive(Serialize)]
struct Message {
    msg: &'static str,
}

/// `GET /products/{id}`: the same message for any id (C4).
#[utoipa::path(
    get,
    path = "/products/{id}",
    tag = "products",
    summary = "The CORS message, for any id",
    params(
        ("id" = String, Path, description = "Any value", min_length = 1)
    ),
    responses(
        (status = 200, description = "The message", body = super::openapi::MessageSchema, headers(
            ("ETag" = String, description = "Strong entity tag of the body")
        )),
        (status = 304, description = "Not modified: `If-None-Match` named the current `ETag`", headers(
            ("ETag" = String, description = "Strong entity tag of the body")
        ))
    )
)]
pub(crate) async fn message() -> Result<HttpResponse, ApiError> {
    respond::json(
        StatusCode::OK,
        &Message {
            msg: "This is CORS-enabled for all origins!",
        },
    )
}
