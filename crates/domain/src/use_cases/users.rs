//! The use cases of the read-only `users` collection ([`UserService`]): list
//! (C4).

use std::sync::Arc;

use crate::RepositoryError;
use crate::entities::User;
use crate::ports::UserRepository;

/// The use cases of the read-only `users` collection; the
/// [`ports`](crate::ports#implementing-a-port) module shows it over a
/// repository written for the occasion.
#[derive(Clone)]
pub struct UserService {
    repository: Arc<dyn UserRepository>,
}

impl std::fmt::Debug for UserService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserService").finish_non_exhaustive()
    }
}

impl UserService {
    /// The use cases over `repository`.
    pub fn new(repository: Arc<dyn UserRepository>) -> Self {
        Self { repository }
    }

    /// Every user, in id order.
    pub async fn list(&self) -> Result<Vec<User>, RepositoryError> {
        self.repository.list().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::MockUserRepository;
    use crate::values::Id;

    #[tokio::test]
    async fn list_returns_the_stored_users() {
        let users = vec![User {
            id: Id::new(1),
            name: "John Doe".into(),
        }];
        let mut repository = MockUserRepository::new();
        let returned = users.clone();
        repository
            .expect_list()
            .times(1)
            .return_once(move || Ok(returned));

        assert_eq!(
            UserService::new(Arc::new(repository)).list().await.unwrap(),
            users
        );
    }

    #[tokio::test]
    async fn list_reports_an_unavailable_store() {
        let mut repository = MockUserRepository::new();
        repository
            .expect_list()
            .times(1)
            .return_once(|| Err(RepositoryError::unavailable("down")));

        let result = UserService::new(Arc::new(repository)).list().await;
        assert!(
            matches!(result, Err(RepositoryError::Unavailable(ref cause)) if cause.to_string() == "down"),
            "{result:?}"
        );
    }
}
