//! Rows as the durable stores hold them, read back into the domain: shared
//! by the PostgreSQL and SQLite adapters (and their copy sources), which
//! store items, products and users the same way (ids as 64-bit integers,
//! item and product names as UTF-8 bytes, prices as doubles) and read them
//! by id-ordered pages.
//!
//! A neutral module: it knows plain row tuples and the domain, not either
//! adapter; each adapter keeps its own SQL.

use items_domain::{Id, Item, Name, Price, Product, RepositoryError, User};

/// An item row as read: `(id, name)`.
pub(crate) type ItemRow = (i64, Vec<u8>);
/// A product row as read: `(id, name, price)`.
pub(crate) type ProductRow = (i64, Vec<u8>, f64);
/// A user row as read: `(id, name)`, the name as text (users are seeded by
/// the migrations, never written through the service).
pub(crate) type UserRow = (i64, String);

/// A name as stored (UTF-8 bytes). Names were validated on the way in and the
/// table's check holds them to a matching bound, so a row that fails here was
/// written by someone who bypassed both: reported as an unavailable store,
/// never a panic.
pub(crate) fn stored_name(id: i64, bytes: &[u8]) -> Result<Name, RepositoryError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| Name::parse(text).ok())
        .ok_or_else(|| RepositoryError::unavailable(format!("row {id} holds an invalid name")))
}

/// An item row as read; see [`stored_name`] for why a bad name is not a
/// panic.
pub(crate) fn stored_item((id, name): ItemRow) -> Result<Item, RepositoryError> {
    Ok(Item {
        id: Id::new(id),
        name: stored_name(id, &name)?,
    })
}

/// A product row as read: a bad name or price is an unavailable store, as
/// for [`stored_name`].
pub(crate) fn stored_product((id, name, price): ProductRow) -> Result<Product, RepositoryError> {
    let price = Price::new(price).map_err(|rule| {
        RepositoryError::unavailable(format!("product {id} holds an invalid price: {rule}"))
    })?;
    Ok(Product {
        id: Id::new(id),
        name: stored_name(id, &name)?,
        price,
    })
}

/// A user row as read.
pub(crate) fn stored_user((id, name): UserRow) -> User {
    User {
        id: Id::new(id),
        name,
    }
}

/// Item rows as read, or the first that cannot be an item. (PostgreSQL
/// fetches a page as tuples; SQLite makes each row an item as it steps.)
#[cfg(feature = "postgres")]
pub(crate) fn stored_items(rows: Vec<ItemRow>) -> Result<Vec<Item>, RepositoryError> {
    rows.into_iter().map(stored_item).collect()
}

/// Product rows as read, or the first that cannot be a product.
#[cfg(feature = "postgres")]
pub(crate) fn stored_products(rows: Vec<ProductRow>) -> Result<Vec<Product>, RepositoryError> {
    rows.into_iter().map(stored_product).collect()
}

/// The bounds of an id-ordered page as bound to `where id > ? order by id
/// limit ?`: no `after` starts below every id, and a limit past `i64` is
/// no limit.
pub(crate) fn page_bounds(after: Option<Id>, limit: usize) -> (i64, i64) {
    (
        after.map_or(i64::MIN, Id::get),
        i64::try_from(limit).unwrap_or(i64::MAX),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_product_with_a_negative_price_is_refused_not_a_panic() {
        assert!(stored_product((1, b"pen".to_vec(), -1.0)).is_err());
        assert!(stored_product((1, vec![0xff], 1.0)).is_err());
        let product = stored_product((2, "пен".as_bytes().to_vec(), 0.5)).unwrap();
        assert_eq!(product.name, Name::parse("пен").unwrap());
    }

    #[test]
    fn a_stored_item_with_a_name_that_is_not_utf8_is_refused_not_a_panic() {
        assert!(stored_item((1, vec![0xff])).is_err());
        assert_eq!(stored_item((3, b"a".to_vec())).unwrap().id, Id::new(3));
    }

    #[test]
    fn the_first_page_starts_below_every_id_and_a_huge_limit_is_none() {
        assert_eq!(page_bounds(None, 10), (i64::MIN, 10));
        assert_eq!(page_bounds(Some(Id::new(7)), usize::MAX), (7, i64::MAX));
    }
}
