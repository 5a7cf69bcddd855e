//! The five item operations (spec §4, C2, C3, C7, C10), each with its
//! OpenAPI description: list, read, create, replace and delete.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};
use items_domain::{Id, Item, ItemQuery};

use super::dto::{ItemBody, ItemDto};
use super::listing_json::item_json;
use super::query::{ListParams, total_count};
use super::{changes, sse, stream};
use crate::http::support::conditional::{etag_of, if_match};
use crate::http::support::{
    ApiError, ItemsAt, JsonObject, Problem, SpoolSettings, idempotency, respond,
};

/// The `{id}` of the path (C2): anything that is not a base-10 i64 names no item.
fn path_id(request: &HttpRequest) -> Option<Id> {
    request.match_info().get("id").and_then(Id::parse)
}

fn location(id: Id) -> String {
    format!("/items/{id}")
}

/// `GET /items`: every item in id order, or one page of them (C10). Always
/// carries `X-Total-Count`; carries `Link: <…>; rel="next"` when more follow.
/// With `Accept: text/event-stream`, the change feed instead (C14,
/// `changes.rs`).
#[utoipa::path(
    get,
    path = "/items",
    tag = "items",
    summary = "List items, all or one page (C10), or follow their changes (C14)",
    description = include_str!("changes.md"),
    params(
        ("limit" = Option<u16>, Query, description = "At most this many items", minimum = 1, maximum = 1000),
        ("after" = Option<i64>, Query, description = "Only items with a greater id"),
        ("name" = Option<String>, Query, description = "Only items named exactly this", min_length = 1, max_length = 256),
        ("Last-Event-ID" = Option<String>, Header, description = "With `Accept: text/event-stream`: the `id:` of the last event seen; the stream resumes right after it, or starts with `event: reset` when the store no longer has it (C14). Ignored otherwise")
    ),
    responses(
        (status = 200, description = "The items, ordered by id. Without a query: every item, as of one snapshot of the store, streamed (chunked; its `ETag` names that snapshot, C7, C10). With `Accept: text/event-stream`: the change feed (C14)", content(
            ([ItemDto] = "application/json"),
            (String = "text/event-stream", example = "retry: 1000\nid: s3f9c2a7e41b0d865.41\n\nevent: created\nid: s3f9c2a7e41b0d865.42\ndata: {\"id\":7,\"name\":\"pen\"}\n\n")
        ), headers(
            ("X-Total-Count" = u64, description = "Items matching `name` in the whole collection (not on the change feed)"),
            ("Link" = String, description = "`</items?limit=L&after=ID>; rel=\"next\"` when more follow")
        )),
        (status = 400, description = "Invalid request; `errors` lists each refused value (C3, C6); the change feed takes no `limit`, `after` or `name`", body = Problem, content_type = "application/problem+json")
    )
)]
pub(crate) async fn list(
    service: ItemsAt,
    spooling: web::Data<SpoolSettings>,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let params = ListParams::parse(request.query_string())?;
    if sse::wanted(request.headers()) {
        if params.query != ItemQuery::default() {
            return Err(ApiError::bad_request(
                "The change feed (Accept: text/event-stream) takes no limit, after or name: it \
                 streams every change to items.",
            ));
        }
        return changes::serve(&request).await;
    }
    if params.query == ItemQuery::default() {
        return stream::stream_all(&service, &request, &spooling).await;
    }
    let page = service.list(&params.query).await?;
    let dtos: Vec<ItemDto<'_>> = page.items.iter().map(ItemDto::from).collect();
    let mut response = respond::json(StatusCode::OK, &dtos)?;
    let headers = response.headers_mut();
    let (name, total) = total_count(page.total);
    headers.append(name, total);
    let next = page
        .items
        .last()
        .filter(|_| page.has_more)
        .and_then(|last| params.next_link(last.id));
    if let Some(value) = next.and_then(|link| HeaderValue::try_from(link).ok()) {
        headers.append(header::LINK, value);
    }
    Ok(response)
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
pub(crate) async fn get(service: ItemsAt, request: HttpRequest) -> Result<HttpResponse, ApiError> {
    let id = path_id(&request).ok_or(ApiError::ItemNotFound)?;
    let item = service.get(id).await?;
    Ok(respond::json_bytes(StatusCode::OK, item_json(&item)?))
}

/// `POST /items`: 201 with the item and its `Location` (spec §4, C2, C3, C7);
/// with an `Idempotency-Key`, a repeat answers the first item again (C7).
#[utoipa::path(
    post,
    path = "/items",
    tag = "items",
    summary = "Create an item (idempotent with an Idempotency-Key, C7)",
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters. A repeat with the same key and body within 24 hours answers the first `201` again (same `Location` and body, plus `Idempotent-Replayed: true`) and creates nothing (C7)", min_length = 1, max_length = 255, pattern = "^[!-~]{1,255}$")
    ),
    request_body(content = ItemBody, content_type = "application/json"),
    responses(
        (status = 201, description = "The created item, or the item the first request with this `Idempotency-Key` created", body = ItemDto, headers(
            ("Location" = String, description = "The new resource, e.g. `/items/7`"),
            ("Idempotent-Replayed" = String, description = "`true` when this answers an earlier request with the same `Idempotency-Key` (C7)")
        )),
        (status = 400, description = "Invalid request; `errors` lists each refused value, the `Idempotency-Key` header included (C3, C6)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A request with this `Idempotency-Key` is still in progress; retry after `Retry-After` (C7)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "This `Idempotency-Key` was used within 24 hours with another body; nothing was created (C7)", body = Problem, content_type = "application/problem+json")
    )
)]
pub(crate) async fn create(
    service: ItemsAt,
    request: HttpRequest,
    JsonObject(body): JsonObject<ItemBody>,
) -> Result<HttpResponse, ApiError> {
    let (name, key) = idempotency::with_key(&request, body.into_fields())?;
    let Some(key) = key else {
        let item = service.create(name).await?;
        return respond::created(location(item.id), &ItemDto::from(&item));
    };
    let created = service.create_once(name, &key).await?;
    let item = &created.value;
    idempotency::created(&created, location(item.id), &ItemDto::from(item))
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
    service: ItemsAt,
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
    response.headers_mut().append(header::ETAG, tag);
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
    service: ItemsAt,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    if let Some(id) = path_id(&request) {
        service.delete(id).await?;
    }
    Ok(HttpResponse::NoContent().finish())
}
