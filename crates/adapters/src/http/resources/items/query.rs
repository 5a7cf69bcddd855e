//! The query of `GET /items` (C10): `limit`, `after` and `name`, each
//! checked, every refusal reported; the `next` link of a page, and the
//! `X-Total-Count` of a page or of the whole listing.
//!
//! Any other parameter is ignored, as unknown body fields are (C3): a
//! client or proxy that adds one (a cache buster, a tracking tag) still
//! gets the listing it asked for, and never a name filter it did not ask for.

use actix_web::http::header::{HeaderName, HeaderValue};
use items_domain::{Id, ItemQuery, Name, PageLimit};
use serde_json::Value;

use crate::http::support::{ApiError, FieldError, Location};

/// The parameters `GET /items` reads; every other one is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parameter {
    Limit,
    After,
    Name,
}

impl Parameter {
    /// The parameter a query key names, or `None` for one that is ignored.
    fn from_key(key: &str) -> Option<Self> {
        match key {
            "limit" => Some(Self::Limit),
            "after" => Some(Self::After),
            "name" => Some(Self::Name),
            _ => None,
        }
    }

    /// The key, as the `path` of an `errors` entry (C6).
    fn key(self) -> &'static str {
        match self {
            Self::Limit => "limit",
            Self::After => "after",
            Self::Name => "name",
        }
    }

    /// Reads `raw` into `query`, or says which rule it broke.
    fn set(self, query: &mut ItemQuery, raw: &str) -> Result<(), String> {
        match self {
            Self::Limit => {
                query.limit = Some(PageLimit::parse(raw).map_err(|rule| format!("limit {rule}"))?);
            }
            Self::After => {
                query.after =
                    Some(Id::parse(raw).ok_or("after must be an item id (a base-10 integer)")?);
            }
            Self::Name => {
                query.name =
                    Some(Name::parse(raw).map_err(|_| "name must be 1 to 256 characters")?);
            }
        }
        Ok(())
    }
}

/// The query of `GET /items` (C10). Every value is checked and every refusal
/// reported, so a client fixes all of them in one round trip.
#[derive(Debug, Default)]
pub(super) struct ListParams {
    pub(super) query: ItemQuery,
}

impl ListParams {
    pub(super) fn parse(query_string: &str) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(query_string).map_err(|error| {
                ApiError::bad_request(format!("The query string is malformed: {error}"))
            })?;
        let mut query = ItemQuery::default();
        let mut seen: Vec<Parameter> = Vec::new();
        let mut errors = Vec::new();
        for (key, value) in pairs {
            let Some(parameter) = Parameter::from_key(&key) else {
                continue;
            };
            let refusal = if seen.contains(&parameter) {
                Some(format!("{} must be given at most once", parameter.key()))
            } else {
                seen.push(parameter);
                parameter.set(&mut query, &value).err()
            };
            if let Some(msg) = refusal {
                errors.push(FieldError::new(
                    Location::Query,
                    parameter.key(),
                    Some(Value::String(value)),
                    msg,
                ));
            }
        }
        if errors.is_empty() {
            Ok(Self { query })
        } else {
            Err(ApiError::invalid(
                "The query has invalid parameters.",
                errors,
            ))
        }
    }

    /// The `next` link of C10: same limit and name filter, after the last id.
    pub(super) fn next_link(&self, last: Id) -> Option<String> {
        let limit = self.query.limit?;
        let mut link = format!("</items?limit={}&after={last}", limit.get());
        if let Some(name) = &self.query.name {
            link.push('&');
            link.push_str(&serde_urlencoded::to_string([("name", name.as_str())]).ok()?);
        }
        link.push_str(">; rel=\"next\"");
        Some(link)
    }
}

/// The `X-Total-Count` header of `GET /items` (C10): how many items match
/// the query in the whole collection. Pages and the streamed full listing
/// both send it.
pub(super) fn total_count(total: u64) -> (HeaderName, HeaderValue) {
    (
        HeaderName::from_static("x-total-count"),
        HeaderValue::from(total),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_name_is_read_as_the_name_filter_and_other_keys_are_ignored_c10() {
        let params = ListParams::parse("names=b&filter=c&name=a&sort=").unwrap();
        assert_eq!(params.query.name.as_ref().map(Name::as_str), Some("a"));
        let params = ListParams::parse("nam=b&q=&limit=2").unwrap();
        assert_eq!(params.query.name, None);
        assert_eq!(params.query.limit.map(PageLimit::get), Some(2));
    }
}
