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
pub(crate) async fn list(service: web::Data<ProductService>) -> Result<HttpResponse, ApiError> {
    let products = service.list().await?;
    respond::json(
        StatusCode::OK,
        &products.iter().map(ProductDto::from).collect::<Vec<_>>(),
    )
}

/// `POST /products`: 201 with the product and its `Location`; both fields are
/// checked and every refusal reported (C3).
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
pub(crate) async fn message() -> Result<HttpResponse, ApiError> {
    respond::json(
        StatusCode::OK,
        &Message {
            msg: "This is CORS-enabled for all origins!",
        },
    )
}
