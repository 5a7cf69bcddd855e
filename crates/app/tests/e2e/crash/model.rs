//! The model of a round: from the items the store held when the round
//! began and each write with its outcome, the states each item may
//! legitimately be in now, and the comparison of a listing with them.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::check::{Refusals, Verdict};
use super::history::{Op, Outcome, Write};

/// An item's state: its name, or `None` when it is absent.
type State = Option<String>;

/// What the store may show, item by item, after a round's writes.
#[derive(Debug, Default)]
pub struct Model {
    /// The states each known item may be in.
    possible: BTreeMap<i64, Vec<State>>,
    /// Every name ever sent for an item, to tell a stale name from a phantom.
    sent: HashMap<i64, HashSet<String>>,
    /// The last acknowledged write of each item, for the failure message.
    last_acknowledged: HashMap<i64, String>,
    uncertain_creates: HashSet<String>,
    refused_creates: HashSet<String>,
    refused_replaces: HashSet<String>,
    pub ids_handed_out_twice: Vec<String>,
}

impl Model {
    pub fn new(items: &BTreeMap<i64, String>) -> Self {
        Self {
            possible: items
                .iter()
                .map(|(id, name)| (*id, vec![Some(name.clone())]))
                .collect(),
            sent: items
                .iter()
                .map(|(id, name)| (*id, HashSet::from([name.clone()])))
                .collect(),
            ..Self::default()
        }
    }

    pub fn apply(&mut self, op: &Op, refusals: Refusals) {
        let uncertain = match &op.outcome {
            Outcome::Acknowledged | Outcome::NotSent => false,
            Outcome::Unknown { .. } => true,
            // C12: a 504 says the write may have been applied.
            Outcome::Refused { status: 504, .. } => true,
            Outcome::Refused { .. } => refusals == Refusals::InDoubt,
        };
        let refused = op.outcome != Outcome::Acknowledged && !uncertain;
        let (id, state) = match &op.write {
            Write::Create { name, id } => {
                match (id, uncertain, refused) {
                    (Some(id), false, false) => self.acknowledged_create(*id, name, op),
                    (_, true, _) => drop(self.uncertain_creates.insert(name.clone())),
                    _ => drop(self.refused_creates.insert(name.clone())),
                }
                return;
            }
            Write::Replace { id, name } => {
                self.sent.entry(*id).or_default().insert(name.clone());
                if refused {
                    self.refused_replaces.insert(name.clone());
                }
                (*id, Some(name.clone()))
            }
            Write::Delete { id } => (*id, None),
        };
        let states = self.possible.entry(id).or_default();
        if uncertain {
            if !states.contains(&state) {
                states.push(state);
            }
        } else if !refused {
            *states = vec![state];
            self.last_acknowledged.insert(id, op.to_string());
        }
    }

    fn acknowledged_create(&mut self, id: i64, name: &str, op: &Op) {
        if self
            .possible
            .insert(id, vec![Some(name.to_owned())])
            .is_some()
        {
            self.ids_handed_out_twice
                .push(format!("id {id} handed out twice ({op})"));
        }
        self.sent.entry(id).or_default().insert(name.to_owned());
        self.last_acknowledged.insert(id, op.to_string());
    }

    /// Every item the model knows must be in one of its possible states.
    pub fn compare_known_items(&self, shown: &BTreeMap<i64, String>, verdict: &mut Verdict) {
        for (id, states) in &self.possible {
            let observed = shown.get(id).cloned();
            if states.contains(&observed) {
                continue;
            }
            let expected = describe_states(states);
            let last = self
                .last_acknowledged
                .get(id)
                .map_or("present when the round began", String::as_str);
            match observed {
                None => verdict.lost.push(format!(
                    "item {id} is gone; expected {expected} (last acknowledged: {last})"
                )),
                Some(name) if self.refused_replaces.contains(&name) => {
                    verdict.phantoms.push(format!(
                        "item {id} shows {name:?}, sent by a refused PUT (C12: refused \
                         writes leave nothing); expected {expected}"
                    ));
                }
                Some(name) if self.sent.get(id).is_some_and(|names| names.contains(&name)) => {
                    verdict.lost.push(format!(
                        "item {id} shows {name:?}; expected {expected} (last acknowledged: {last})"
                    ));
                }
                Some(name) => verdict.phantoms.push(format!(
                    "item {id} shows {name:?}, which no writer sent for it; expected {expected}"
                )),
            }
        }
    }

    /// Any other item must come from a create of uncertain fate, each at
    /// most once.
    pub fn compare_other_items(&mut self, shown: &BTreeMap<i64, String>, verdict: &mut Verdict) {
        for (id, name) in shown {
            if self.possible.contains_key(id) {
                continue;
            }
            if self.uncertain_creates.remove(name) {
                verdict.uncertain_creates_applied += 1;
            } else if self.refused_creates.contains(name) {
                verdict.phantoms.push(format!(
                    "item {id} {name:?} was created by a refused POST (C12: refused writes \
                     leave nothing)"
                ));
            } else {
                verdict
                    .phantoms
                    .push(format!("item {id} {name:?}: no writer created it"));
            }
        }
    }
}

fn describe_states(states: &[State]) -> String {
    let each: Vec<String> = states
        .iter()
        .map(|state| match state {
            Some(name) => format!("{name:?}"),
            None => "absent".to_owned(),
        })
        .collect();
    each.join(" or ")
}
