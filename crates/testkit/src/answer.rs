//! How a check fails when the adapter returns an error instead of an
//! answer: a panic that says what the check was doing and what came back.

use std::fmt::{Debug, Display};

/// An adapter's result, which a check expects to be `Ok`.
pub(crate) trait Answer<T> {
    /// The answer, or a panic naming what was `doing` and the error.
    fn answer(self, doing: impl Display) -> T;
}

impl<T, E: Debug> Answer<T> for Result<T, E> {
    #[track_caller]
    fn answer(self, doing: impl Display) -> T {
        self.unwrap_or_else(|error| panic!("{doing}: failed with {error:?}"))
    }
}
