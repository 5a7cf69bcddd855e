//! `/products` and `/products/{id}` (spec §4 "Users and products", C3, C4, C7).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use items_domain::Product;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::http::support::respond::{self, Constant};
use crate::http::support::{ApiError, JsonObject, Problem, ProductsAt, fields, idempotency};

/// The body of `POST /products`; other fields are ignored.
// Both fields are read as any JSON value, so that a wrong one can be
// reported in the `errors` of C6; the schema says what is accepted.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = NewProduct, example = json!({"name": "pen", "price": 1.5}))]
pub(crate) struct ProductBody {
    #[serde(default, deserialize_with = "fields::present")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 256)]
    name: Option<Value>,
    /// A finite JSON number, zero or more (a numeric string is refused, C3).
    #[serde(default, deserialize_with = "fields::present")]
    #[schema(value_type = f64, required = true, minimum = 0)]
    price: Option<Value>,
}

/// A product (spec §2).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Product, example = json!({"id": 1, "name": "pen", "price": 1.5}))]
struct ProductDto<'a> {
    #[schema(minimum = 1)]
    id: i64,
    #[schema(min_length = 1, max_length = 256)]
    name: &'a str,
    #[serde(serialize_with = "number")]
    #[schema(minimum = 0)]
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
        (status = 200, description = "Every product, ordered by id", body = [ProductDto])
    )
)]
pub(crate) async fn list(service: ProductsAt) -> Result<HttpResponse, ApiError> {
    let products = service.list().await?;
    respond::json(
        StatusCode::OK,
        &products.iter().map(ProductDto::from).collect::<Vec<_>>(),
    )
}

/// `POST /products`: 201 with the product and its `Location`; both fields are
/// checked and every refusal reported (C3); with an `Idempotency-Key`, a
/// repeat answers the first product again (C7).
#[utoipa::path(
    post,
    path = "/products",
    tag = "products",
    summary = "Create a product (idempotent with an Idempotency-Key, C7)",
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters. A repeat with the same key and body (name and price) within 24 hours answers the first `201` again and creates nothing; keys of products are apart from keys of items (C7)", min_length = 1, max_length = 255, pattern = "^[!-~]{1,255}$")
    ),
    request_body(content = ProductBody, content_type = "application/json"),
    responses(
        (status = 201, description = "The created product, or the product the first request with this `Idempotency-Key` created", body = ProductDto, headers(
            ("Location" = String, description = "The new product, e.g. `/products/7`"),
            ("Idempotent-Replayed" = String, description = "`true` when this answers an earlier request with the same `Idempotency-Key` (C7)")
        )),
        (status = 400, description = "Invalid request; `errors` lists each refused value, the `Idempotency-Key` header included (C3, C6)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A request with this `Idempotency-Key` is still in progress; retry after `Retry-After` (C7)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "This `Idempotency-Key` was used within 24 hours with another body; nothing was created (C7)", body = Problem, content_type = "application/problem+json")
    )
)]
pub(crate) async fn create(
    service: ProductsAt,
    request: HttpRequest,
    JsonObject(body): JsonObject<ProductBody>,
) -> Result<HttpResponse, ApiError> {
    let body = match (fields::name(body.name), fields::price(body.price)) {
        (Ok(name), Ok(price)) => Ok((name, price)),
        (name, price) => Err(name.err().into_iter().chain(price.err()).collect()),
    };
    let ((name, price), key) = idempotency::with_key(&request, body)?;
    let location = |product: &Product| format!("/products/{}", product.id);
    let Some(key) = key else {
        let product = service.create(name, price).await?;
        return respond::created(location(&product), &ProductDto::from(&product));
    };
    let created = service.create_once(name, price, &key).await?;
    let product = &created.value;
    idempotency::created(&created, location(product), &ProductDto::from(product))
}

/// The message of `GET /products/{id}` (C4).
#[derive(Serialize, ToSchema)]
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
        (status = 200, description = "The message", body = Message)
    )
)]
pub(crate) async fn message() -> HttpResponse {
    static MESSAGE: Constant = Constant::json(|| {
        let message = Message {
            msg: "This is CORS-enabled for all origins!",
        };
        // A struct of one string always serializes.
        serde_json::to_vec(&message).unwrap_or_default()
    });
    MESSAGE.respond()
}
