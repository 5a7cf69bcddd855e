//! `GET /users` (spec §4, C4).

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use items_domain::{User, UserService};
use serde::Serialize;

use super::problem::ApiError;
use super::respond;

#[derive(Debug, Serialize)]
struct UserDto<'a> {
    id: i64,
    name: &'a str,
}

impl<'a> From<&'a User> for UserDto<'a> {
    fn from(user: &'a User) -> Self {
        Self {
            id: user.id.get(),
            name: &user.name,
        }
    }
}

#[utoipa::path(
    get,
    path = "/users",
    tag = "users",
    summary = "List the read-only users",
    responses(
        (status = 200, description = "Every user", body = [super::openapi::UserSchema], headers(
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
pub(crate) async fn list(service: web::Data<UserService>) -> Result<HttpResponse, ApiError> {
    let users = service.list().await?;
    respond::json(
        StatusCode::OK,
        &users.iter().map(UserDto::from).collect::<Vec<_>>(),
    )
}
