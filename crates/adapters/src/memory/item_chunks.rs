//! The items of the in-memory store, in id order, in chunks shared between
//! copies: what lets a full listing keep the collection as it began (C7,
//! C10) for one reference count per [`CHUNK`] items, while a write copies at
//! most one chunk and a listing reads plain slices.
//!
//! Invariants:
//! - ids only grow (C2): every create appends to the last chunk, so chunks
//!   fill completely and nothing is ever inserted in the middle;
//! - every chunk is non-empty and in id order, and two neighbouring chunks
//!   hold more than [`CHUNK`] items together (deletes merge them);
//! - copies never see each other's writes: a write copies the one chunk it
//!   changes, only if a copy still holds it.
//!
//! Why not a `BTreeMap`: RSS at 1M items 98.2 → 73.2 MiB, a get 1,519 →
//! 1,314 instructions, for a delete 1,768 → 5,261, docs/performance.md "The
//! in-memory store, measured".

use std::sync::Arc;

use items_domain::{Id, Item, Name};

/// At most this many items per chunk. Larger chunks make a copy cheaper
/// (`len / CHUNK` reference counts) but make a delete shift, and a write to a
/// chunk a copy still holds clone, more items.
const CHUNK: usize = 512;

/// One chunk: its items in id order, never empty, and the id of the last,
/// kept beside the pointer so a lookup binary-searches one contiguous array
/// before it touches any chunk.
#[derive(Debug, Clone)]
struct Chunk {
    last: Id,
    items: Arc<Vec<Item>>,
}

/// Items in id order. A clone copies the chunk array (`len / CHUNK`
/// pointers) and shares every chunk; a write copies the one chunk it
/// changes, only if a clone still holds it (`Arc::make_mut`), so clones
/// never see each other's writes.
///
/// Every two neighbouring chunks hold more than [`CHUNK`] items together
/// (deletes merge a chunk into a neighbour when both fit in one), so chunks
/// are more than half full on average whatever was deleted.
#[derive(Debug, Clone, Default)]
pub(super) struct ItemChunks {
    chunks: Vec<Chunk>,
    len: usize,
}

impl ItemChunks {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The name of item `id`.
    pub(super) fn get(&self, id: Id) -> Option<&Name> {
        let (chunk, position) = self.locate(id)?;
        let item = self.chunks.get(chunk)?.items.get(position)?;
        Some(&item.name)
    }

    /// The items with ids greater than `after` (all of them for `None`), in
    /// id order.
    pub(super) fn after(&self, after: Option<Id>) -> impl Iterator<Item = &Item> {
        let (chunk, position) = after.map_or((0, 0), |after| {
            let chunk = self.chunks.partition_point(|chunk| chunk.last <= after);
            let position = self.chunks.get(chunk).map_or(0, |chunk| {
                chunk.items.partition_point(|item| item.id <= after)
            });
            (chunk, position)
        });
        let mut chunks = self.chunks.get(chunk..).unwrap_or_default().iter();
        let first = chunks.next().map_or(&[][..], |chunk| {
            chunk.items.get(position..).unwrap_or_default()
        });
        first
            .iter()
            .chain(chunks.flat_map(|chunk| chunk.items.iter()))
    }

    /// Appends `item`, whose id is greater than every id held: ids only grow
    /// (C2).
    pub(super) fn push(&mut self, item: Item) {
        debug_assert!(self.chunks.last().is_none_or(|chunk| chunk.last < item.id));
        let chunks = &mut self.chunks;
        match chunks.last_mut().filter(|chunk| chunk.items.len() < CHUNK) {
            Some(chunk) => {
                chunk.last = item.id;
                Arc::make_mut(&mut chunk.items).push(item);
            }
            None => {
                let mut items = Vec::with_capacity(CHUNK);
                let last = item.id;
                items.push(item);
                chunks.push(Chunk {
                    last,
                    items: Arc::new(items),
                });
            }
        }
        self.len += 1;
    }

    /// The name of item `id`, to change it. Its chunk is copied first if a
    /// clone still holds it.
    pub(super) fn get_mut(&mut self, id: Id) -> Option<&mut Name> {
        let (chunk, position) = self.locate(id)?;
        let chunk = self.chunks.get_mut(chunk)?;
        let item = Arc::make_mut(&mut chunk.items).get_mut(position)?;
        Some(&mut item.name)
    }

    /// Removes item `id`; false when there is no such item.
    pub(super) fn remove(&mut self, id: Id) -> bool {
        let Some((index, position)) = self.locate(id) else {
            return false;
        };
        let chunks = &mut self.chunks;
        let Some(chunk) = chunks.get_mut(index) else {
            return false;
        };
        let items = Arc::make_mut(&mut chunk.items);
        if position >= items.len() {
            return false;
        }
        items.remove(position);
        self.len -= 1;
        match items.last() {
            // Its neighbours were full (they held more than CHUNK with it).
            None => drop(chunks.remove(index)),
            Some(last) => {
                chunk.last = last.id;
                let _ = merge_with_next(chunks, index)
                    || index
                        .checked_sub(1)
                        .is_some_and(|previous| merge_with_next(chunks, previous));
            }
        }
        true
    }

    /// Which chunk holds item `id`, and where in it.
    fn locate(&self, id: Id) -> Option<(usize, usize)> {
        let chunk = self.chunks.partition_point(|chunk| chunk.last < id);
        let items = &self.chunks.get(chunk)?.items;
        // Ids in a chunk are increasing integers, so item `id` is at most
        // `id - first` places in, and exactly there unless items before it
        // were deleted: usually one probe, one cache miss.
        let first = items.first()?.id.get();
        let furthest = usize::try_from(id.get() - first).ok()?;
        let candidates = items.get(..=furthest.min(items.len() - 1))?;
        let position = match candidates.last() {
            Some(item) if item.id == id => candidates.len() - 1,
            _ => candidates.binary_search_by_key(&id, |item| item.id).ok()?,
        };
        Some((chunk, position))
    }
}

/// Moves chunk `left + 1` into chunk `left` when both fit in one; whether it
/// did.
fn merge_with_next(chunks: &mut Vec<Chunk>, left: usize) -> bool {
    let fits = match (chunks.get(left), chunks.get(left + 1)) {
        (Some(first), Some(second)) => first.items.len() + second.items.len() <= CHUNK,
        _ => false,
    };
    if !fits {
        return false;
    }
    let second = chunks.remove(left + 1);
    let Some(first) = chunks.get_mut(left) else {
        return false;
    };
    Arc::make_mut(&mut first.items).extend(second.items.iter().cloned());
    first.last = second.last;
    true
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn item(id: i64) -> Item {
        Item {
            id: Id::new(id),
            name: Name::parse(&format!("n{id}")).unwrap(),
        }
    }

    fn filled(count: i64) -> ItemChunks {
        let mut items = ItemChunks::default();
        for id in 1..=count {
            items.push(item(id));
        }
        items
    }

    fn ids(items: &ItemChunks, after: Option<i64>) -> Vec<i64> {
        items
            .after(after.map(Id::new))
            .map(|item| item.id.get())
            .collect()
    }

    /// The chunks' shape: none empty, each `last` right, every neighbouring
    /// pair over CHUNK, and `len` the sum.
    fn assert_well_formed(items: &ItemChunks) {
        for chunk in items.chunks.iter() {
            assert!(!chunk.items.is_empty());
            assert!(chunk.items.len() <= CHUNK);
            assert_eq!(chunk.items.last().map(|item| item.id), Some(chunk.last));
        }
        for pair in items.chunks.windows(2) {
            assert!(pair[0].items.len() + pair[1].items.len() > CHUNK);
        }
        let held: usize = items.chunks.iter().map(|chunk| chunk.items.len()).sum();
        assert_eq!(held, items.len());
    }

    #[test]
    fn items_come_out_in_id_order_from_any_starting_point() {
        let items = filled(2000);
        assert_eq!(ids(&items, None), (1..=2000).collect::<Vec<_>>());
        assert_eq!(ids(&items, Some(511)), (512..=2000).collect::<Vec<_>>());
        assert_eq!(ids(&items, Some(512)), (513..=2000).collect::<Vec<_>>());
        assert_eq!(ids(&items, Some(0)).len(), 2000);
        assert!(ids(&items, Some(2000)).is_empty());
        assert_eq!(items.get(Id::new(1234)).map(Name::as_str), Some("n1234"));
        assert_eq!(items.get(Id::new(2001)), None);
        assert_well_formed(&items);
    }

    #[test]
    fn a_clone_keeps_what_it_held_whatever_is_written_after() {
        let mut items = filled(3000);
        let snapshot = items.clone();

        items.push(item(3001));
        *items.get_mut(Id::new(700)).unwrap() = Name::parse("renamed").unwrap();
        assert!(items.remove(Id::new(1500)));

        assert_eq!(ids(&snapshot, None), (1..=3000).collect::<Vec<_>>());
        assert_eq!(snapshot.get(Id::new(700)).map(Name::as_str), Some("n700"));
        assert_eq!(snapshot.len(), 3000);
        assert_eq!(items.get(Id::new(700)).map(Name::as_str), Some("renamed"));
        assert_eq!(items.get(Id::new(1500)), None);
        assert_eq!(items.len(), 3000);
    }

    /// Creates, renames and deletes in a pseudo-random order, checked
    /// against a `BTreeMap` after every step; deleting most items leaves
    /// chunks more than half full on average.
    #[test]
    fn writes_agree_with_an_ordered_map_and_keep_chunks_at_least_half_full() {
        let mut items = ItemChunks::default();
        let mut model = BTreeMap::new();
        let mut next = 0;
        let mut seed: u64 = 7;
        for step in 0..20_000 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let id = Id::new((seed >> 33) as i64 % (next + 1) + 1);
            match (seed >> 20) % 4 {
                0 | 1 if step < 12_000 => {
                    next += 1;
                    items.push(item(next));
                    model.insert(Id::new(next), item(next).name);
                }
                2 => {
                    let name = Name::parse(&format!("r{step}")).unwrap();
                    match (items.get_mut(id), model.get_mut(&id)) {
                        (Some(current), Some(expected)) => {
                            *current = name.clone();
                            *expected = name;
                        }
                        (None, None) => {}
                        (held, expected) => panic!("{id:?}: {held:?} vs {expected:?}"),
                    }
                }
                _ => assert_eq!(items.remove(id), model.remove(&id).is_some()),
            }
            if step % 500 == 0 {
                assert_well_formed(&items);
                let expected: Vec<(Id, &Name)> =
                    model.iter().map(|(&id, name)| (id, name)).collect();
                let actual: Vec<(Id, &Name)> = items
                    .after(None)
                    .map(|item| (item.id, &item.name))
                    .collect();
                assert_eq!(actual, expected);
            }
        }
        assert_well_formed(&items);
        assert_eq!(items.len(), model.len());
        assert!(items.chunks.len() <= 2 * items.len() / CHUNK + 1);
    }
}
