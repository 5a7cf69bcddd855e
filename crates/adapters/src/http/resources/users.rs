//! `GET /users` (spec §4, C4).

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use items_domain::{User, UserService};
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::support::{ApiError, respond};

/// A read-only user.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = User, example = json!({"id": 1, "name": "John Doe"}))]
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
        (status = 200, description = "Every user", body = [UserDto])
    )
)]
pub(crate) async fn list(service: web::Data<UserService>) -> Result<HttpResponse, ApiError> {
    let users = service.list().await?;
    respond::json(
        StatusCode::OK,
        &users.iter().map(UserDto::from).collect::<Vec<_>>(),
    )
}
