//! The read-only users, seeded by the first migration (C4).

use async_trait::async_trait;
use items_domain::{RepositoryError, User, UserRepository};
use sqlx::SqlitePool;

use super::unavailable;
use crate::sql::rows::{UserRow, stored_user};

/// The users of the `users` table of one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteUserRepository {
    readers: SqlitePool,
}

impl SqliteUserRepository {
    pub(super) fn new(readers: SqlitePool) -> Self {
        Self { readers }
    }
}

#[async_trait]
impl UserRepository for SqliteUserRepository {
    async fn list(&self) -> Result<Vec<User>, RepositoryError> {
        let rows: Vec<UserRow> = sqlx::query_as("select id, name from users order by id")
            .fetch_all(&self.readers)
            .await
            .map_err(unavailable)?;
        Ok(rows.into_iter().map(stored_user).collect())
    }
}
