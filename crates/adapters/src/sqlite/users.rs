//! The read-only users, seeded by the first migration (C4): two rows, read
//! on the reader pool on the calling thread (a hop to a blocking thread
//! would cost more than the read).

use super::readers::Readers;
use super::rows;
use async_trait::async_trait;
use items_domain::{RepositoryError, User, UserRepository};

/// The users of the `users` table of one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteUserRepository {
    readers: Readers,
}

impl SqliteUserRepository {
    pub(super) fn new(readers: Readers) -> Self {
        Self { readers }
    }
}

#[async_trait]
impl UserRepository for SqliteUserRepository {
    async fn list(&self) -> Result<Vec<User>, RepositoryError> {
        self.readers
            .read_here(|connection| {
                let mut statement = connection
                    .prepare_cached("select id, name from users order by id")
                    .map_err(RepositoryError::unavailable)?;
                rows::all(&mut statement, [], rows::user)
            })
            .await
    }
}
