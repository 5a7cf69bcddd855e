//! The in-memory user repository: the two read-only users of C4, fixed at
//! start.

use async_trait::async_trait;
use items_domain::{RepositoryError, User, UserRepository, seeded_users};

/// The read-only users of C4, fixed at start.
#[derive(Debug)]
pub struct InMemoryUserRepository {
    users: Vec<User>,
}

impl InMemoryUserRepository {
    /// The two users every instance serves (C4): the domain's list.
    pub fn seeded() -> Self {
        Self {
            users: seeded_users(),
        }
    }
}

#[async_trait]
impl UserRepository for InMemoryUserRepository {
    async fn list(&self) -> Result<Vec<User>, RepositoryError> {
        Ok(self.users.clone())
    }
}
