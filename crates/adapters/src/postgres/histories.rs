//! Tokens of older timelines (C13): a position of a timeline older than
//! the primary's is met iff it is at or before where the primary's history
//! left that timeline, as its history file says (`pg_wal/0000000N.history`,
//! read with `pg_read_file`, which needs a superuser or a member of
//! `pg_read_server_files`). A history that cannot be read makes such a
//! token unmet: a 409, never an answer from a state that may lack its
//! write.

use std::collections::HashMap;
use std::sync::Arc;

use items_domain::{Position, RepositoryError};
use parking_lot::Mutex;

use super::decode::column;
use super::pool::{Pool, lease};
use super::positions;

/// The history file of timeline `$1` (`pg_wal/0000000N.history`): each
/// older timeline of its past and the WAL position where it was left.
/// `pg_read_file` needs a superuser or a member of `pg_read_server_files`.
const HISTORY: &str =
    "select pg_read_file('pg_wal/' || lpad(upper(to_hex($1::int)), 8, '0') || '.history')";

/// Each older timeline of a history file's text with where it was left:
/// `<timeline>\t<X/Y>\t<reason>` lines; comments and blank lines skipped.
pub(super) fn parse_history(text: &str) -> History {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let timeline = fields.next()?.parse().ok()?;
            let left_at = positions::lsn(fields.next()?)?;
            Some((timeline, left_at))
        })
        .collect()
}

/// The histories of the primary's timelines, read once each (C13: a token
/// of a timeline older than the primary's is met iff it is at or before
/// where the primary's history left that timeline).
#[derive(Debug, Default)]
pub(super) struct Histories(Mutex<HashMap<u32, Arc<History>>>);

/// Each older timeline of a history and the WAL position where it was left.
type History = Vec<(u32, u64)>;

impl Histories {
    /// Whether a server at `now` has the state `wanted` names, reading the
    /// history of `now`'s timeline on `pool`'s server when `wanted` is of
    /// an older one. A history that cannot be read (no permission, no
    /// server) means "not met": a 409, never a stale answer.
    pub(super) async fn meets(&self, pool: &Pool, now: Position, wanted: Position) -> bool {
        if wanted.era() >= now.era() {
            return positions::meets(now, wanted);
        }
        let history = self.0.lock().get(&now.era()).cloned();
        let history = match history {
            Some(history) => history,
            None => match read_history(pool, now.era()).await {
                Ok(history) => {
                    let history = Arc::new(history);
                    self.0.lock().insert(now.era(), Arc::clone(&history));
                    history
                }
                Err(error) => {
                    tracing::warn!(
                        timeline = now.era(),
                        error = %crate::report::ErrorChain(&error),
                        "the primary's timeline history cannot be read: tokens of older \
                         timelines are answered 409 (grant pg_read_server_files, C13)"
                    );
                    return false;
                }
            },
        };
        history
            .iter()
            .any(|&(timeline, left_at)| timeline == wanted.era() && wanted.offset() <= left_at)
    }
}

/// The history of `timeline`, read on a connection of `pool`.
async fn read_history(pool: &Pool, timeline: u32) -> Result<History, RepositoryError> {
    let timeline = i32::try_from(timeline).map_err(RepositoryError::unavailable)?;
    let mut connection = lease(pool).await?;
    let row = connection.query_one(HISTORY, &[&timeline]).await?;
    let text: &str = column(&row, 0)?;
    Ok(parse_history(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_file_says_where_each_older_timeline_was_left() {
        let text = "1\t0/3000148\tno recovery target specified\n\n\
                    2\t1/A0\tno recovery target specified\n";
        assert_eq!(
            parse_history(text),
            [(1, 0x0300_0148), (2, 0x0001_0000_00A0)]
        );
        assert_eq!(parse_history(""), []);
        assert_eq!(parse_history("# a comment\nnot a line\n"), []);
    }
}
