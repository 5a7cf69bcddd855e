//! The in-memory user repository: the two read-only users of C4, fixed at
//! start.

use async_trait::async_trait;
use items_domain::{Id, RepositoryError, User, UserRepository};

/// The read-only users of C4, fixed at start.
#[derive(Debug)]
pub struct InMemoryUserRepository {
    users: Vec<User>,
}

impl InMemoryUserRepository {
    /// The two users every instance serves (C4).
    pub fn seeded() -> Self {
        Self {
            users: vec![
                User {
                    id: Id::new(1),
                    name: "John Doe".to_owned(),
                },
                User {
                    id: Id::new(2),
                    name: "Jane Doe".to_owned(),
                },
            ],
        }
    }
}

#[async_trait]
impl UserRepository for InMemoryUserRepository {
    async fn list(&self) -> Result<Vec<User>, RepositoryError> {
        Ok(self.users.clone())
    }
}
