//! Rows as rusqlite reads them, made into the domain's values: the room's
//! side of [`crate::sql::rows`], which holds the rules both SQL stores
//! share for a stored name or price.
//!
//! Invariants: a name is read as the bytes stored (a blob, as this service
//! writes it, or text, as another writer might), never assumed to be
//! UTF-8; a row that is no valid item or product is
//! [`RepositoryError::Unavailable`], never a panic. Each function reads the
//! columns its statement selects, in the order named.

use items_domain::{Id, Item, Product, RepositoryError, User};
use rusqlite::{Params, Row, Statement};

use crate::sql::rows::{stored_name, stored_product, stored_user};

fn unavailable(error: rusqlite::Error) -> RepositoryError {
    RepositoryError::unavailable(error)
}

/// The bytes of a stored name, blob or text.
fn name_bytes<'row>(row: &'row Row<'_>, column: usize) -> Result<&'row [u8], RepositoryError> {
    row.get_ref(column)
        .and_then(|value| Ok(value.as_bytes()?))
        .map_err(unavailable)
}

/// `id, name`.
pub(super) fn item(row: &Row<'_>) -> Result<Item, RepositoryError> {
    let id = row.get(0).map_err(unavailable)?;
    Ok(Item {
        id: Id::new(id),
        name: stored_name(id, name_bytes(row, 1)?)?,
    })
}

/// `id, name, price`.
pub(super) fn product(row: &Row<'_>) -> Result<Product, RepositoryError> {
    let id = row.get(0).map_err(unavailable)?;
    let name = name_bytes(row, 1)?.to_vec();
    let price = row.get(2).map_err(unavailable)?;
    stored_product((id, name, price))
}

/// `id, name`, the name as text (seeded by the first migration, C4).
pub(super) fn user(row: &Row<'_>) -> Result<User, RepositoryError> {
    let id = row.get(0).map_err(unavailable)?;
    let name = row.get(1).map_err(unavailable)?;
    Ok(stored_user((id, name)))
}

/// Every row `statement` yields with `params`, each made by `decode`, or
/// the first failure.
pub(super) fn all<T>(
    statement: &mut Statement<'_>,
    params: impl Params,
    decode: fn(&Row<'_>) -> Result<T, RepositoryError>,
) -> Result<Vec<T>, RepositoryError> {
    let mut rows = statement.query(params).map_err(unavailable)?;
    let mut all = Vec::new();
    while let Some(row) = rows.next().map_err(unavailable)? {
        all.push(decode(row)?);
    }
    Ok(all)
}
