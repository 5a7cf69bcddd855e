//! The check of [`UserRepository`]: the users every store is seeded with
//! (C4), exactly [`items_domain::seeded_users`].

use std::sync::Arc;

use items_domain::{UserRepository, seeded_users};

use crate::answer::Answer;

pub async fn users_are_the_two_seeded_users_c4(users: Arc<dyn UserRepository>) {
    let listed = users.list().await.answer("list the users");
    let pairs = |users: &[items_domain::User]| -> Vec<(i64, String)> {
        users
            .iter()
            .map(|user| (user.id.get(), user.name.clone()))
            .collect()
    };
    let expected = seeded_users();
    assert_eq!(
        pairs(&listed),
        pairs(&expected),
        "C4: a store serves exactly the seeded users, in id order: listing them returned {:?}, \
         expected {:?}",
        pairs(&listed),
        pairs(&expected)
    );
}
