//! Validation of body fields into domain values, with the `errors` entries
//! of C6 for whatever is refused.

use items_domain::{Name, Price};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::problem::{ApiError, FieldError, Location};

/// Deserialises a field that is present into `Some`, even when it is `null`,
/// so a missing field (`None`, via `#[serde(default)]`) and an explicit
/// `null` can be told apart in the error entry's `value`.
pub(crate) fn present<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// `name`: a JSON string of 1 to 256 characters (C3).
pub(crate) fn name(value: Option<Value>) -> Result<Name, FieldError> {
    let refused =
        |value, rule: &str| FieldError::new(Location::Body, "name", value, format!("name {rule}"));
    match value {
        Some(Value::String(raw)) => {
            Name::parse(&raw).map_err(|rule| refused(Some(Value::String(raw)), rule.message()))
        }
        Some(other) => Err(refused(Some(other), Name::INVALID.message())),
        None => Err(refused(None, "is required")),
    }
}

/// `price`: a finite JSON number >= 0; a numeric string is refused (C3).
pub(crate) fn price(value: Option<Value>) -> Result<Price, FieldError> {
    let refused = |value, rule: &str| {
        FieldError::new(Location::Body, "price", value, format!("price {rule}"))
    };
    match value {
        Some(Value::Number(number)) => match number.as_f64().map(Price::new) {
            Some(Ok(price)) => Ok(price),
            Some(Err(rule)) => Err(refused(Some(Value::Number(number)), rule.message())),
            None => Err(refused(
                Some(Value::Number(number)),
                Price::INVALID.message(),
            )),
        },
        Some(other) => Err(refused(Some(other), Price::INVALID.message())),
        None => Err(refused(None, "is required")),
    }
}

/// Turns the refusals of a body's fields into one 400, or passes the values.
pub(crate) fn all_valid<T>(result: Result<T, Vec<FieldError>>) -> Result<T, ApiError> {
    result.map_err(|errors| ApiError::invalid("The body has invalid fields.", errors))
}
