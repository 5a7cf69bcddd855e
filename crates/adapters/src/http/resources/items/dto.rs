//! The JSON the item routes read and send, with their OpenAPI schemas: the
//! body of `POST /items` and `PUT /items/{id}`, and an item.

use items_domain::{Item, Name};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::http::support::{ApiError, FieldError, fields};

/// The body of `POST /items` and `PUT /items/{id}`; other fields are ignored.
// `name` is read as any JSON value, so that a wrong one can be reported in
// the `errors` of C6; the schema says what is accepted.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = NewItem, example = json!({"name": "pen"}))]
pub(crate) struct ItemBody {
    /// 1 to 256 characters, kept exactly as sent (C3).
    #[serde(default, deserialize_with = "fields::present")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 256)]
    name: Option<Value>,
}

impl ItemBody {
    /// The name sent, or a 400 naming what is wrong with it (C3, C6).
    pub(super) fn into_name(self) -> Result<Name, ApiError> {
        fields::all_valid(self.into_fields())
    }

    /// The name, or the refusal of it as the `errors` of C6.
    pub(super) fn into_fields(self) -> Result<Name, Vec<FieldError>> {
        fields::name(self.name).map_err(|error| vec![error])
    }
}

/// An item (spec §2).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Item, example = json!({"id": 1, "name": "pen"}))]
pub(super) struct ItemDto<'a> {
    /// Assigned by the service from a counter that never goes back (C2).
    #[schema(minimum = 1)]
    id: i64,
    #[schema(min_length = 1, max_length = 256)]
    name: &'a str,
}

impl<'a> From<&'a Item> for ItemDto<'a> {
    fn from(item: &'a Item) -> Self {
        Self {
            id: item.id.get(),
            name: item.name.as_str(),
        }
    }
}
