//! The HTTP answer to each failure of the item use cases. The matches list
//! every variant, so a failure added to the domain fails to compile here
//! until it is given its status.

use items_domain::{GetItemError, ReplaceItemError};

use crate::http::support::ApiError;

impl From<GetItemError> for ApiError {
    fn from(error: GetItemError) -> Self {
        match error {
            GetItemError::NotFound(_) => Self::ItemNotFound,
            GetItemError::Unavailable(cause) => Self::from(cause),
        }
    }
}

impl From<ReplaceItemError> for ApiError {
    fn from(error: ReplaceItemError) -> Self {
        match error {
            ReplaceItemError::NotFound(_) => Self::ItemNotFound,
            ReplaceItemError::PreconditionFailed(_) => Self::PreconditionFailed,
            ReplaceItemError::Unavailable(cause) => Self::from(cause),
        }
    }
}
