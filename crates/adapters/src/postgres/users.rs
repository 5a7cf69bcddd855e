//! The PostgreSQL user repository: the read-only `users` table, seeded by
//! the first migration (C4).

use async_trait::async_trait;
use items_domain::{RepositoryError, User, UserRepository};

use super::decode;
use super::pool::{Pool, lease};
use crate::sql::rows::stored_user;

/// The read-only users, seeded by the first migration (C4).
#[derive(Debug, Clone)]
pub struct PostgresUserRepository {
    pool: Pool,
}

impl PostgresUserRepository {
    pub(super) fn new(pool: Pool) -> Self {
        Self { pool }
    }
}

#[async_trait]
impl UserRepository for PostgresUserRepository {
    async fn list(&self) -> Result<Vec<User>, RepositoryError> {
        let rows = lease(&self.pool)
            .await?
            .query("select id, name from users order by id", &[])
            .await?;
        Ok(decode::users(&rows)?.into_iter().map(stored_user).collect())
    }
}
