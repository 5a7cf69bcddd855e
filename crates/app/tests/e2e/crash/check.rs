//! The checker: Jepsen's set check in miniature. From the items the store
//! held when the round began and every write of the round with its outcome,
//! it works out, item by item, which states the store may legitimately show
//! now, and compares the listing read back with them.
//!
//! One writer owns each item and sends its writes to it one after another,
//! so each item's writes form one sequence. Walking it:
//! - an acknowledged write fixes the state (a `PUT` its name, a `DELETE`
//!   absence): whatever came before, this is what the store must show,
//!   unless a later write of uncertain fate may have changed it again;
//! - a write of uncertain fate (no answer; or, when the store's own
//!   connections were cut, a 503 — see [`Refusals::InDoubt`]) adds its
//!   result to the possible states, beside what was there;
//! - a refused write changes nothing (C12: a 503 writes nothing), nor does
//!   a request that found no process to connect to.
//!
//! Items no acknowledged create names may only come from creates of
//! uncertain fate, each at most once. Anything else is a violation: a
//! `lost` acknowledged write, or a `phantom` no writer sent.

use std::collections::BTreeMap;

use super::history::Op;
use super::model::Model;

/// What a refused write (a definite non-2xx answer) may have done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusals {
    /// Nothing (C12), checked strictly: a refused write that shows up is a
    /// violation.
    WroteNothing,
    /// Perhaps it was applied: when the store's connection is cut during a
    /// `COMMIT`, PostgreSQL may have committed without the service hearing
    /// so; the service can only answer 503. Such writes count as unknown.
    InDoubt,
}

/// The outcome of the check.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Acknowledged writes the store no longer shows.
    pub lost: Vec<String>,
    /// Items or names no writer sent, ids listed twice, refused writes applied.
    pub phantoms: Vec<String>,
    /// Creates of uncertain fate that were applied (legitimate).
    pub uncertain_creates_applied: usize,
}

impl Verdict {
    pub fn is_clean(&self) -> bool {
        self.lost.is_empty() && self.phantoms.is_empty()
    }

    /// Every violation, one a line, at most `limit` of each kind.
    pub fn describe(&self, limit: usize) -> String {
        let mut text = String::new();
        for (kind, lines) in [("LOST", &self.lost), ("PHANTOM", &self.phantoms)] {
            for line in lines.iter().take(limit) {
                text.push_str(&format!("  {kind}: {line}\n"));
            }
            if lines.len() > limit {
                text.push_str(&format!("  … and {} more {kind}\n", lines.len() - limit));
            }
        }
        text
    }
}

/// Checks `listed` (id, name) against the round's starting `items` and its
/// `ops`, given writer by writer in the order each writer sent them.
pub fn check(
    items: &BTreeMap<i64, String>,
    ops: &[Op],
    refusals: Refusals,
    listed: &[(i64, String)],
) -> Verdict {
    let mut model = Model::new(items);
    for op in ops {
        model.apply(op, refusals);
    }
    let mut verdict = Verdict {
        phantoms: std::mem::take(&mut model.ids_handed_out_twice),
        ..Verdict::default()
    };
    let mut shown: BTreeMap<i64, String> = BTreeMap::new();
    for (id, name) in listed {
        if shown.insert(*id, name.clone()).is_some() {
            verdict.phantoms.push(format!("id {id} listed twice"));
        }
    }
    model.compare_known_items(&shown, &mut verdict);
    model.compare_other_items(&shown, &mut verdict);
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crash::history::{Outcome, Write};

    fn op(write: Write, outcome: Outcome) -> Op {
        Op {
            writer: 0,
            write,
            outcome,
            receipt: None,
        }
    }

    fn unknown() -> Outcome {
        Outcome::Unknown {
            reason: "reset".to_owned(),
        }
    }

    fn refused() -> Outcome {
        Outcome::Refused {
            status: 503,
            retry_after: true,
        }
    }

    fn create(name: &str, id: i64) -> Write {
        Write::Create {
            name: name.to_owned(),
            id: Some(id),
        }
    }

    fn replace(id: i64, name: &str) -> Write {
        Write::Replace {
            id,
            name: name.to_owned(),
        }
    }

    fn listing(items: &[(i64, &str)]) -> Vec<(i64, String)> {
        items
            .iter()
            .map(|(id, name)| (*id, (*name).to_owned()))
            .collect()
    }

    #[test]
    fn the_checker_finds_a_lost_create_a_lost_replace_and_an_undone_delete() {
        let start = BTreeMap::from([(1, "old".to_owned()), (2, "two".to_owned())]);
        let ops = [
            op(replace(1, "new"), Outcome::Acknowledged),
            op(Write::Delete { id: 2 }, Outcome::Acknowledged),
            op(create("c", 3), Outcome::Acknowledged),
        ];

        let verdict = check(
            &start,
            &ops,
            Refusals::WroteNothing,
            &listing(&[(1, "old"), (2, "two")]),
        );

        assert_eq!(verdict.lost.len(), 3, "{verdict:?}");
        assert!(verdict.phantoms.is_empty());
    }

    #[test]
    fn an_uncertain_write_may_or_may_not_be_applied_and_nothing_else() {
        let start = BTreeMap::from([(1, "old".to_owned()), (2, "two".to_owned())]);
        let ops = [
            op(replace(1, "maybe"), unknown()),
            op(Write::Delete { id: 2 }, unknown()),
            op(
                Write::Create {
                    name: "u".to_owned(),
                    id: None,
                },
                unknown(),
            ),
        ];
        for listed in [
            listing(&[(1, "old"), (2, "two")]),
            listing(&[(1, "maybe"), (5, "u")]),
        ] {
            let verdict = check(&start, &ops, Refusals::WroteNothing, &listed);
            assert!(verdict.is_clean(), "{listed:?}: {verdict:?}");
        }

        let twice = check(
            &start,
            &ops,
            Refusals::WroteNothing,
            &listing(&[(1, "old"), (5, "u"), (6, "u")]),
        );
        let stranger = check(
            &start,
            &ops,
            Refusals::WroteNothing,
            &listing(&[(1, "zzz"), (7, "x")]),
        );

        assert_eq!(twice.phantoms.len(), 1, "{twice:?}");
        assert_eq!(stranger.phantoms.len(), 2, "{stranger:?}");
        assert!(stranger.lost.is_empty(), "item 2 may be gone: {stranger:?}");
    }

    #[test]
    fn a_refused_write_that_shows_up_is_a_violation_unless_its_fate_is_in_doubt() {
        let start = BTreeMap::from([(1, "old".to_owned())]);
        let ops = [
            op(replace(1, "refused"), refused()),
            op(
                Write::Create {
                    name: "r".to_owned(),
                    id: None,
                },
                refused(),
            ),
        ];
        let listed = listing(&[(1, "refused"), (2, "r")]);

        let strict = check(&start, &ops, Refusals::WroteNothing, &listed);
        let in_doubt = check(&start, &ops, Refusals::InDoubt, &listed);

        assert!(strict.lost.is_empty(), "{strict:?}");
        assert_eq!(strict.phantoms.len(), 2, "{strict:?}");
        assert!(in_doubt.is_clean(), "{in_doubt:?}");
    }
}
