//! `/items` and `/items/{id}` (spec §4 "Items", C2, C3, C7, C10).

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::StreamExt;
use items_domain::{
    GetItemError, Id, Item, ItemQuery, ItemService, Name, PageLimit, ReplaceItemError,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::body::JsonObject;
use super::conditional::{etag_of, if_match, listing_tag, none_match_fails};
use super::fields;
use super::problem::{ApiError, FieldError, Location, Problem};
use super::respond::{self, APPLICATION_JSON};

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
    fn into_name(self) -> Result<Name, ApiError> {
        fields::all_valid(fields::name(self.name).map_err(|error| vec![error]))
    }
}

/// An item (spec §2).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Item, example = json!({"id": 1, "name": "pen"}))]
struct ItemDto<'a> {
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

/// The exact bytes of an item's representation. `GET /items/{id}` sends
/// them, and `If-Match` on `PUT` is checked against their tag, so both must
/// come from this one function.
fn item_json(item: &Item) -> Result<Vec<u8>, ApiError> {
    let mut json = Vec::with_capacity(JSON_ITEM_OVERHEAD + item.name.as_str().len());
    write_item(&mut json, item).map_err(ApiError::internal)?;
    Ok(json)
}

/// The bytes of an item's JSON besides its name: `{"id":`, up to 20 digits,
/// `,"name":"`, `"}` and a comma.
const JSON_ITEM_OVERHEAD: usize = 38;

/// Appends the JSON of `item`, byte for byte what serde_json writes for
/// [`ItemDto`]. A name that needs no escaping (no `"`, `\\` or control
/// character: nearly all) is copied as it is, where serde_json would look
/// up every byte in its escape table: that loop was most of the cost of
/// streaming a listing (docs/performance.md, "Profile of the in-memory
/// listing").
fn write_item(out: &mut Vec<u8>, item: &Item) -> Result<(), serde_json::Error> {
    out.extend_from_slice(b"{\"id\":");
    out.extend_from_slice(itoa::Buffer::new().format(item.id.get()).as_bytes());
    out.extend_from_slice(b",\"name\":");
    let name = item.name.as_str();
    if name
        .bytes()
        .all(|byte| byte >= 0x20 && byte != b'"' && byte != b'\\')
    {
        out.push(b'"');
        out.extend_from_slice(name.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, name)?;
    }
    out.push(b'}');
    Ok(())
}

/// The `{id}` of the path (C2): anything that is not a base-10 i64 names no item.
fn path_id(request: &HttpRequest) -> Option<Id> {
    request.match_info().get("id").and_then(Id::parse)
}

fn location(id: Id) -> String {
    format!("/items/{id}")
}

impl From<GetItemError> for ApiError {
    fn from(error: GetItemError) -> Self {
        match error {
            GetItemError::NotFound(_) => Self::ItemNotFound,
            GetItemError::Unavailable(cause) => Self::Unavailable(cause),
            // A failure added to the domain after this adapter was written.
            unknown => Self::internal(unknown),
        }
    }
}

impl From<ReplaceItemError> for ApiError {
    fn from(error: ReplaceItemError) -> Self {
        match error {
            ReplaceItemError::NotFound(_) => Self::ItemNotFound,
            ReplaceItemError::PreconditionFailed(_) => Self::PreconditionFailed,
            ReplaceItemError::Unavailable(cause) => Self::Unavailable(cause),
            unknown => Self::internal(unknown),
        }
    }
}

/// The query of `GET /items` (C10). Every value is checked and every refusal
/// reported, so a client fixes all of them in one round trip.
#[derive(Debug, Default)]
struct ListParams {
    query: ItemQuery,
}

impl ListParams {
    fn parse(query_string: &str) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(query_string).map_err(|error| {
                ApiError::bad_request(format!("The query string is malformed: {error}"))
            })?;
        let mut query = ItemQuery::default();
        let mut seen: Vec<&'static str> = Vec::new();
        let mut errors = Vec::new();
        for (key, value) in pairs {
            // Unknown parameters are ignored, like unknown body fields.
            let Some(path) = ["limit", "after", "name"]
                .into_iter()
                .find(|known| *known == key)
            else {
                continue;
            };
            let refusal = if seen.contains(&path) {
                Some(format!("{path} must be given at most once"))
            } else {
                seen.push(path);
                set_parameter(&mut query, path, &value).err()
            };
            if let Some(msg) = refusal {
                errors.push(FieldError::new(
                    Location::Query,
                    path,
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
    fn next_link(&self, last: Id) -> Option<String> {
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

/// Reads one known query parameter into `query`, or says which rule it broke.
fn set_parameter(query: &mut ItemQuery, path: &str, raw: &str) -> Result<(), String> {
    match path {
        "limit" => {
            query.limit = Some(PageLimit::parse(raw).map_err(|rule| format!("limit {rule}"))?)
        }
        "after" => {
            query.after =
                Some(Id::parse(raw).ok_or("after must be an item id (a base-10 integer)")?)
        }
        _ => query.name = Some(Name::parse(raw).map_err(|_| "name must be 1 to 256 characters")?),
    }
    Ok(())
}

/// `GET /items`: every item in id order, or one page of them (C10). Always
/// carries `X-Total-Count`; carries `Link: <…>; rel="next"` when more follow.
#[utoipa::path(
    get,
    path = "/items",
    tag = "items",
    summary = "List items, all or one page (C10)",
    params(
        ("limit" = Option<u16>, Query, description = "At most this many items", minimum = 1, maximum = 1000),
        ("after" = Option<i64>, Query, description = "Only items with a greater id"),
        ("name" = Option<String>, Query, description = "Only items named exactly this", min_length = 1, max_length = 256)
    ),
    responses(
        (status = 200, description = "The items, ordered by id", body = [ItemDto], headers(
            ("X-Total-Count" = u64, description = "Items matching `name` in the whole collection"),
            ("Link" = String, description = "`</items?limit=L&after=ID>; rel=\"next\"` when more follow")
        )),
        (status = 400, description = "Invalid request; `errors` lists each refused value (C3, C6)", body = Problem, content_type = "application/problem+json")
    )
)]
pub(crate) async fn list(
    service: web::Data<ItemService>,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let params = ListParams::parse(request.query_string())?;
    if params.query == ItemQuery::default() {
        return stream_all(&service, &request).await;
    }
    let page = service.list(&params.query).await?;
    let dtos: Vec<ItemDto<'_>> = page.items.iter().map(ItemDto::from).collect();
    let mut response = respond::json(StatusCode::OK, &dtos)?;
    let headers = response.headers_mut();
    headers.insert(
        header::HeaderName::from_static("x-total-count"),
        HeaderValue::from(page.total),
    );
    let next = page
        .items
        .last()
        .filter(|_| page.has_more)
        .and_then(|last| params.next_link(last.id));
    if let Some(value) = next.and_then(|link| HeaderValue::try_from(link).ok()) {
        headers.insert(header::LINK, value);
    }
    Ok(response)
}

/// `GET /items` with no query: the whole collection streamed as a JSON array,
/// a batch at a time, so memory does not grow with the collection (C10). The
/// `ETag` is [`listing_tag`] of the store's version, set here so the
/// body-hashing middleware leaves the stream alone (C7).
async fn stream_all(
    service: &ItemService,
    request: &HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let listing = service.list_all().await?;
    let tag = listing_tag(listing.version);
    let etag = HeaderValue::try_from(tag.as_str()).map_err(ApiError::internal)?;
    if none_match_fails(request.headers(), &tag) {
        return Ok(HttpResponse::NotModified()
            .insert_header((header::ETAG, etag))
            .finish());
    }
    let mut first = true;
    let items = listing.batches.map(move |batch| {
        let batch = batch?;
        let size = batch
            .iter()
            .map(|item| JSON_ITEM_OVERHEAD + item.name.as_str().len())
            .sum();
        let mut chunk = Vec::with_capacity(size);
        for item in &batch {
            if !std::mem::take(&mut first) {
                chunk.push(b',');
            }
            write_item(&mut chunk, item)?;
        }
        Ok::<_, Box<dyn std::error::Error>>(Bytes::from(chunk))
    });
    let bracket = |text: &'static [u8]| {
        futures_util::stream::once(async move { Ok(Bytes::from_static(text)) })
    };
    let body = bracket(b"[").chain(items).chain(bracket(b"]"));
    Ok(HttpResponse::Ok()
        .insert_header((
            header::CONTENT_TYPE,
            HeaderValue::from_static(APPLICATION_JSON),
        ))
        .insert_header((header::ETAG, etag))
        .insert_header((
            header::HeaderName::from_static("x-total-count"),
            HeaderValue::from(listing.total),
        ))
        .streaming(body))
}

/// `GET /items/{id}`: the item, or 404 `Item not found` (spec §7, C2).
#[utoipa::path(
    get,
    path = "/items/{id}",
    tag = "items",
    summary = "Read one item",
    params(
        ("id" = String, Path, description = "A base-10 integer; anything else names no item (C2)", min_length = 1)
    ),
    responses(
        (status = 200, description = "The item", body = ItemDto),
        (status = 404, description = "No item has this id: the plain text `Item not found`", body = String, content_type = "text/plain")
    )
)]
pub(crate) async fn get(
    service: web::Data<ItemService>,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let id = path_id(&request).ok_or(ApiError::ItemNotFound)?;
    let item = service.get(id).await?;
    Ok(respond::json_bytes(StatusCode::OK, item_json(&item)?))
}

/// `POST /items`: 201 with the item and its `Location` (spec §4, C2, C3, C7).
#[utoipa::path(
    post,
    path = "/items",
    tag = "items",
    summary = "Create an item",
    request_body(content = ItemBody, content_type = "application/json"),
    responses(
        (status = 201, description = "The created item", body = ItemDto, headers(
            ("Location" = String, description = "The new resource, e.g. `/items/7`")
        )),
        (status = 400, description = "Invalid request; `errors` lists each refused value (C3, C6)", body = Problem, content_type = "application/problem+json")
    )
)]
pub(crate) async fn create(
    service: web::Data<ItemService>,
    JsonObject(body): JsonObject<ItemBody>,
) -> Result<HttpResponse, ApiError> {
    let item = service.create(body.into_name()?).await?;
    respond::created(location(item.id), &ItemDto::from(&item))
}

/// `PUT /items/{id}`: replaces the name; the body is checked before the id
/// (C3), and `If-Match` is honoured against the tag of `GET /items/{id}` (C7).
#[utoipa::path(
    put,
    path = "/items/{id}",
    tag = "items",
    summary = "Replace an item (the body is checked before the id, C3)",
    params(
        ("id" = String, Path, description = "A base-10 integer; anything else names no item (C2)", min_length = 1),
        ("If-Match" = Option<String>, Header, description = "Replace only if the item still has this `ETag` (or `*`)")
    ),
    request_body(content = ItemBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The replaced item: the path id and the new name", body = ItemDto, headers(
            ("ETag" = String, description = "The new item's strong entity tag, as a following `GET` would send it: usable at once in the next `If-Match` (C7)")
        )),
        (status = 400, description = "Invalid request; `errors` lists each refused value (C3, C6)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No item has this id: the plain text `Item not found`", body = String, content_type = "text/plain"),
        (status = 412, description = "`If-Match` does not name the current `ETag`; nothing changed (C7)", body = Problem, content_type = "application/problem+json")
    )
)]
pub(crate) async fn replace(
    service: web::Data<ItemService>,
    request: HttpRequest,
    JsonObject(body): JsonObject<ItemBody>,
) -> Result<HttpResponse, ApiError> {
    let name = body.into_name()?;
    let id = path_id(&request).ok_or(ApiError::ItemNotFound)?;
    let tag_matches = if_match(request.headers());
    let precondition = tag_matches.map(|matches| {
        move |current: &Item| item_json(current).is_ok_and(|json| matches(&etag_of(&json)))
    });
    let item = service
        .replace(
            Item { id, name },
            precondition.as_ref().map(|holds| holds as _),
        )
        .await?;
    // The new tag travels with the answer (C7 allows it), so a client's next
    // conditional write needs no `GET` first.
    let body = item_json(&item)?;
    let tag = HeaderValue::try_from(etag_of(&body)).map_err(ApiError::internal)?;
    let mut response = respond::json_bytes(StatusCode::OK, body);
    response.headers_mut().insert(header::ETAG, tag);
    Ok(response)
}

/// `DELETE /items/{id}`: 204 whether or not the item existed, and for ids
/// that name no item at all (spec §4 rule 2, C2).
#[utoipa::path(
    delete,
    path = "/items/{id}",
    tag = "items",
    summary = "Delete an item (204 whether or not it existed)",
    params(
        ("id" = String, Path, description = "A base-10 integer; anything else names no item (C2)", min_length = 1)
    ),
    responses(
        (status = 204, description = "Deleted, or there was no such item")
    )
)]
pub(crate) async fn delete(
    service: web::Data<ItemService>,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    if let Some(id) = path_id(&request) {
        service.delete(id).await?;
    }
    Ok(HttpResponse::NoContent().finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The listing and `GET /items/{id}` write items by hand; the pages and
    /// `POST` through serde: both must give the same bytes (C7: the tag of
    /// an item is the tag of these bytes), escapes included.
    #[test]
    fn items_are_written_byte_for_byte_as_serde_json_writes_them() {
        let names = [
            "a",
            "item-00000000001",
            "say \"hi\"",
            "back\\slash",
            "tab\tand\nnewline",
            "\u{1}\u{1f}",
            "\u{7f} del stays raw",
            "é 日本 🦀",
            "</script>",
        ];
        for (id, name) in [1, 42, i64::MAX]
            .into_iter()
            .flat_map(|id| names.iter().map(move |name| (id, name)))
        {
            let item = Item {
                id: Id::new(id),
                name: Name::parse(name).unwrap(),
            };
            let mut written = Vec::new();
            write_item(&mut written, &item).unwrap();
            let expected = serde_json::to_vec(&ItemDto::from(&item)).unwrap();
            assert_eq!(
                String::from_utf8(written).unwrap(),
                String::from_utf8(expected).unwrap()
            );
        }
    }
}
