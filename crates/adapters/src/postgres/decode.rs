//! The driver's rows as the neutral row tuples of `sql::rows`: a column
//! of the wrong type (a schema changed under the service) is an
//! unavailable store, never a panic.

use items_domain::RepositoryError;
use tokio_postgres::Row;
use tokio_postgres::types::FromSql;

use crate::sql::rows::{ItemRow, ProductRow, UserRow};

/// Column `at` of `row`.
pub(super) fn column<'a, T: FromSql<'a>>(row: &'a Row, at: usize) -> Result<T, RepositoryError> {
    row.try_get(at).map_err(RepositoryError::unavailable)
}

/// `(id, name)`.
pub(super) fn item(row: &Row) -> Result<ItemRow, RepositoryError> {
    Ok((column(row, 0)?, column(row, 1)?))
}

/// `(id, name)` of each row.
pub(super) fn items(rows: &[Row]) -> Result<Vec<ItemRow>, RepositoryError> {
    rows.iter().map(item).collect()
}

/// `(id, name, price)` of each row.
pub(super) fn products(rows: &[Row]) -> Result<Vec<ProductRow>, RepositoryError> {
    rows.iter()
        .map(|row| Ok((column(row, 0)?, column(row, 1)?, column(row, 2)?)))
        .collect()
}

/// `(id, name)` of each user row.
pub(super) fn users(rows: &[Row]) -> Result<Vec<UserRow>, RepositoryError> {
    rows.iter()
        .map(|row| Ok((column(row, 0)?, column(row, 1)?)))
        .collect()
}
