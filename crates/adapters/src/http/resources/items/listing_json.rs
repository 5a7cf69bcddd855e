//! The JSON of an item, written by hand: the streamed listing writes every
//! item with it, and `GET /items/{id}` and the `If-Match` check of `PUT`
//! use the same bytes.
//!
//! Invariants: the bytes are byte for byte what serde_json writes for
//! [`ItemDto`](super::dto::ItemDto) (a test holds it); a name that needs no
//! escaping is copied as it is, one that does takes serde_json's own path.
//!
//! Why by hand, without serde_json's per-byte escape lookup: a 1,000-item
//! listing 709,668 → 432,303 instructions, docs/performance.md "The
//! in-memory store, measured".

use items_domain::Item;

use crate::http::support::ApiError;

/// What comes before the id: `{"id":`.
const BEFORE_ID: &[u8] = b"{\"id\":";
/// What comes between the id and the quoted name: `,"name":`.
const BEFORE_NAME: &[u8] = b",\"name\":";
/// The quotes around a name that needs no escaping.
const NAME_QUOTES: usize = 2;
/// What closes the object: `}`.
const CLOSE: &[u8] = b"}";
/// The comma between two items of the listing.
const SEPARATOR: usize = 1;
/// The longest id written: an `i64` with its sign, `-9223372036854775808`.
const LONGEST_ID: usize = i64::MAX.ilog10() as usize + 1 + 1;

/// The bytes of an item's JSON in the listing besides its name: everything
/// around the id, the longest id, the quotes and the separating comma (38).
/// A name that needs escaping may take more; the buffer then grows.
pub(super) const ITEM_OVERHEAD: usize =
    BEFORE_ID.len() + LONGEST_ID + BEFORE_NAME.len() + NAME_QUOTES + CLOSE.len() + SEPARATOR;

/// The fewest bytes an item's JSON takes: a one-digit id and a one-byte
/// name, `{"id":1,"name":"a"}` (19). What a listing's size is known to be
/// at least from its count alone.
pub(super) const SMALLEST_ITEM: usize =
    BEFORE_ID.len() + 1 + BEFORE_NAME.len() + NAME_QUOTES + 1 + CLOSE.len();

/// The fewest items whose listing, `[` and `]` and the commas included,
/// is surely at least `bytes` long, whatever the items: `n` items take at
/// least `n × (SMALLEST_ITEM + 1) + 1` bytes.
pub(super) const fn surely_at_least(bytes: usize) -> u64 {
    (bytes.saturating_sub(1)).div_ceil(SMALLEST_ITEM + SEPARATOR) as u64
}

/// The bytes the listing needs for `item`, room for its comma included.
pub(super) fn listed_size(item: &Item) -> usize {
    ITEM_OVERHEAD + item.name.as_str().len()
}

/// The exact bytes of an item's representation. `GET /items/{id}` sends
/// them, and `If-Match` on `PUT` is checked against their tag, so both must
/// come from this one function.
pub(super) fn item_json(item: &Item) -> Result<Vec<u8>, ApiError> {
    let mut json = Vec::with_capacity(listed_size(item));
    write_item(&mut json, item).map_err(ApiError::internal)?;
    Ok(json)
}

/// Appends the JSON of `item`, byte for byte what serde_json writes for
/// [`ItemDto`](super::dto::ItemDto). A name that needs no escaping (no `"`,
/// `\\` or control character: nearly all) is copied as it is, where
/// serde_json would look up every byte in its escape table: that loop was
/// most of the cost of streaming a listing (docs/performance.md, "The
/// in-memory store, measured").
pub(super) fn write_item(out: &mut Vec<u8>, item: &Item) -> Result<(), serde_json::Error> {
    out.extend_from_slice(BEFORE_ID);
    out.extend_from_slice(itoa::Buffer::new().format(item.id.get()).as_bytes());
    out.extend_from_slice(BEFORE_NAME);
    let name = item.name.as_str();
    if name
        .bytes()
        .all(|byte| byte >= 0x20 && byte != b'"' && byte != b'\\')
    {
        out.push(b'"');
        out.extend_from_slice(name.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, name)?;
    }
    out.extend_from_slice(CLOSE);
    Ok(())
}

#[cfg(test)]
mod tests {
    use items_domain::{Id, Name};

    use super::super::dto::ItemDto;
    use super::*;

    /// The listing and `GET /items/{id}` write items by hand; the pages and
    /// `POST` through serde: both must give the same bytes (C7: the tag of
    /// an item is the tag of these bytes), escapes included.
    #[test]
    fn items_are_written_byte_for_byte_as_serde_json_writes_them() {
        let names = [
            "a",
            "item-00000000001",
            "say \"hi\"",
            "back\\slash",
            "tab\tand\nnewline",
            "\u{1}\u{1f}",
            "\u{7f} del stays raw",
            "é 日本 🦀",
            "</script>",
        ];
        for (id, name) in [1, 42, i64::MAX]
            .into_iter()
            .flat_map(|id| names.iter().map(move |name| (id, name)))
        {
            let item = Item {
                id: Id::new(id),
                name: Name::parse(name).unwrap(),
            };
            let mut written = Vec::new();
            write_item(&mut written, &item).unwrap();
            let expected = serde_json::to_vec(&ItemDto::from(&item)).unwrap();
            assert_eq!(
                String::from_utf8(written).unwrap(),
                String::from_utf8(expected).unwrap()
            );
        }
    }

    /// A listing of `surely_at_least(n)` of the smallest items is `n`
    /// bytes or more, and one item fewer falls short: the count alone
    /// decides whether a large listing is compressed (C7).
    #[test]
    fn a_count_of_smallest_items_bounds_the_listing_from_below() {
        let smallest = Item {
            id: Id::new(1),
            name: Name::parse("a").unwrap(),
        };
        let mut one = Vec::new();
        write_item(&mut one, &smallest).unwrap();
        assert_eq!(one.len(), SMALLEST_ITEM);
        let listing = |count: u64| {
            let items = vec![String::from_utf8(one.clone()).unwrap(); count as usize];
            format!("[{}]", items.join(",")).len()
        };
        for bytes in [1024, 1, 21, 22, 4096] {
            let count = surely_at_least(bytes);
            assert!(listing(count) >= bytes, "{bytes}: {count} items");
            if count > 0 {
                assert!(listing(count - 1) < bytes, "{bytes}: {count} is the fewest");
            }
        }
        assert_eq!(surely_at_least(1024), 52);
    }

    /// The overhead is the 38 bytes the buffer sizes always reserved, and
    /// an item with the longest positive id and a plain name, plus its
    /// comma, fits in it without growing.
    #[test]
    fn the_item_overhead_covers_the_longest_id_and_the_comma() {
        assert_eq!(ITEM_OVERHEAD, 38);
        assert_eq!(LONGEST_ID, i64::MIN.to_string().len());
        let item = Item {
            id: Id::new(i64::MAX),
            name: Name::parse("pen").unwrap(),
        };
        let mut written = Vec::new();
        write_item(&mut written, &item).unwrap();
        assert!(written.len() + SEPARATOR <= listed_size(&item));
    }
}
