//! What a [`Position`] means in PostgreSQL (C13): the era is the timeline
//! of the primary's history, the offset a WAL position (LSN) in it. A
//! primary's position is its WAL flushed to disk, a standby's the WAL it
//! has replayed: a snapshot taken before either was read holds no commit
//! after it, so a position read *after* a statement is an upper bound of
//! what the statement saw (and, after a commit, of the commit's record).
//!
//! A position of an older timeline is met only where the current history
//! kept it: at or before the point where that timeline was left, which the
//! primary's history file of its timeline says (`.history`, read with
//! `pg_read_file`). When that file cannot be read (the service's role is
//! neither a superuser nor in `pg_read_server_files`) the point is
//! unknown, and such a position is taken as unmet: a 409, never an answer
//! from a state that may lack the write.

use items_domain::{Position, RepositoryError};
use parking_lot::Mutex;
use tokio_postgres::Row;

use super::decode::column;

/// Where the server stands, read after a statement on the same
/// connection: the WAL it flushed (a primary) or replayed (a standby), as
/// `X/Y` text, and its timeline as hex. `pg_walfile_name` is refused
/// during recovery, so a standby says the timeline its WAL receiver
/// follows, else the one of its last restart point.
macro_rules! position_columns {
    () => {
        "case when pg_is_in_recovery() \
         then coalesce(pg_last_wal_replay_lsn(), '0/0') \
         else pg_current_wal_flush_lsn() end::text, \
         case when pg_is_in_recovery() \
         then to_hex(coalesce((select received_tli from pg_stat_wal_receiver), \
         (pg_control_checkpoint()).timeline_id)) \
         else substr(pg_walfile_name(pg_current_wal_flush_lsn()), 1, 8) end"
    };
}
pub(super) const POSITION: &str = concat!("select ", position_columns!());

/// A primary's flushed position, read after a write's commit (`pool.rs`):
/// the commit succeeded, so the server is a primary, and the statement is
/// simpler than [`POSITION`] (no view of the WAL receiver to plan).
pub(super) const FLUSHED: &str = "select pg_current_wal_flush_lsn()::text, \
     substr(pg_walfile_name(pg_current_wal_flush_lsn()), 1, 8)";

/// What the standbys' tracker asks each standby (`standbys/tracker.rs`):
/// whether it is still one, then its position.
pub(super) const STANDBY_STATE: &str = concat!("select pg_is_in_recovery(), ", position_columns!());

/// A WAL position `X/Y` (two hex numbers, high and low 32 bits).
pub(super) fn lsn(text: &str) -> Option<u64> {
    let (high, low) = text.split_once('/')?;
    let high = u32::from_str_radix(high, 16).ok()?;
    let low = u32::from_str_radix(low, 16).ok()?;
    Some((u64::from(high) << 32) | u64::from(low))
}

/// The position in a row of [`POSITION`] (or any row whose columns `at`
/// and `at + 1` are a WAL position and a hex timeline).
pub(super) fn read(row: &Row, at: usize) -> Result<Position, RepositoryError> {
    let wal: &str = column(row, at)?;
    let timeline: &str = column(row, at + 1)?;
    parse(wal, timeline)
}

/// The position of WAL `wal` (`X/Y`) on timeline `timeline` (hex).
pub(super) fn parse(wal: &str, timeline: &str) -> Result<Position, RepositoryError> {
    let offset = lsn(wal).ok_or_else(|| {
        RepositoryError::unavailable(format!("the server gave no WAL position: {wal:?}"))
    })?;
    let era = u32::from_str_radix(timeline, 16).map_err(|_| {
        RepositoryError::unavailable(format!("the server gave no timeline: {timeline:?}"))
    })?;
    Ok(Position::new(era, offset))
}

/// What a read found, and the server's position around it (C13).
#[derive(Debug)]
pub(super) struct Read<T> {
    pub(super) value: T,
    /// The server's position before the read, on the same connection,
    /// asked on a standby only: the read's snapshot is at or after it, so
    /// it says whether the read met a token.
    pub(super) before: Option<Position>,
    /// The server's position after the read: at or after what it read.
    pub(super) after: Position,
}

/// The position in a row of [`POSITION`] asked before a read, if it was.
pub(super) fn before(row: Option<&Row>) -> Result<Option<Position>, RepositoryError> {
    row.map(|row| read(row, 0)).transpose()
}

/// Whether a server at `now` has the state `wanted` names: on the same
/// timeline, at or past it. (An older timeline's position needs the
/// server's history: `histories.rs`.)
pub(super) fn meets(now: Position, wanted: Position) -> bool {
    now.era() == wanted.era() && now.offset() >= wanted.offset()
}

/// The latest position the primary was seen at after a commit, shared by
/// every connection of a store: what a write's token is read from. A
/// commit's own flush position is read on its connection, pipelined after
/// the `commit` with [`FLUSHED`] (`pool.rs`), and kept here when later; the token of a
/// write is this value once the write returned, so at or after its commit.
#[derive(Debug, Default)]
pub(super) struct Latest(Mutex<Option<Position>>);

impl Latest {
    /// Keeps `position` if it is later (a newer timeline, or further on
    /// the same one).
    pub(super) fn observe(&self, position: Position) {
        let mut kept = self.0.lock();
        let later = kept
            .is_none_or(|kept| (position.era(), position.offset()) > (kept.era(), kept.offset()));
        if later {
            *kept = Some(position);
        }
    }

    pub(super) fn get(&self) -> Option<Position> {
        *self.0.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wal_position_is_its_two_halves_joined() {
        assert_eq!(lsn("0/0"), Some(0));
        assert_eq!(lsn("16/B374D848"), Some(0x0016_B374_D848));
        assert_eq!(lsn("FFFFFFFF/FFFFFFFF"), Some(u64::MAX));
        for bad in ["", "16", "/1", "1/", "1/2/3", "G/1", "100000000/0"] {
            assert_eq!(lsn(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_position_is_the_timeline_and_the_wal_position() {
        let position = parse("16/B374D848", "0000000A").expect("well formed");
        assert_eq!(position, Position::new(10, 0x0016_B374_D848));
        assert_eq!(position.to_string(), "A-16B374D848");
        assert!(parse("16/B374D848", "").is_err());
        assert!(parse("", "1").is_err());
    }

    #[test]
    fn a_server_meets_positions_of_its_timeline_at_or_before_its_own() {
        let now = Position::new(2, 100);
        assert!(meets(now, Position::new(2, 100)));
        assert!(meets(now, Position::new(2, 99)));
        assert!(!meets(now, Position::new(2, 101)), "not replayed yet");
        assert!(!meets(now, Position::new(3, 1)), "a newer timeline");
        assert!(
            !meets(now, Position::new(1, 1)),
            "an older timeline, without its history"
        );
    }

    #[test]
    fn the_latest_position_never_goes_back() {
        let latest = Latest::default();
        assert_eq!(latest.get(), None);
        latest.observe(Position::new(1, 50));
        latest.observe(Position::new(1, 40));
        assert_eq!(latest.get(), Some(Position::new(1, 50)));
        latest.observe(Position::new(2, 10));
        assert_eq!(latest.get(), Some(Position::new(2, 10)));
    }
}
