//! What the writers did: each write they sent, and what they learned of
//! its fate: acknowledged (a 2xx arrived, so C12 says it is committed),
//! refused (a definite answer such as 503, which C12 says wrote nothing;
//! a 504 says the outcome is unknown), or unknown (no answer: the
//! connection was reset, or it timed out); and the requests that found no
//! process to connect to. With each, when it was sent, how long its answer
//! took and whether a 2xx body could be read ([`Receipt`]).

use std::fmt;
use std::time::{Duration, Instant};

/// One write a writer sent. Every name is unique to its write
/// (`c<round>.<writer>.<n>` for creates, `p…` for replaces), so a name in the
/// listing tells which write put it there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// `POST /items`; `id` is the one the service answered, when it did.
    Create { name: String, id: Option<i64> },
    /// `PUT /items/{id}`.
    Replace { id: i64, name: String },
    /// `DELETE /items/{id}`.
    Delete { id: i64 },
}

impl Write {
    /// The item a replace or delete is about.
    pub fn target(&self) -> Option<i64> {
        match self {
            Self::Create { .. } => None,
            Self::Replace { id, .. } | Self::Delete { id } => Some(*id),
        }
    }
}

impl fmt::Display for Write {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Create { name, id: Some(id) } => write!(f, "POST {name:?} (got id {id})"),
            Self::Create { name, id: None } => write!(f, "POST {name:?}"),
            Self::Replace { id, name } => write!(f, "PUT /items/{id} {name:?}"),
            Self::Delete { id } => write!(f, "DELETE /items/{id}"),
        }
    }
}

/// What the writer learned of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx arrived: committed (C12).
    Acknowledged,
    /// A definite answer that is not a 2xx (503 with or without
    /// `Retry-After`, a 404).
    Refused { status: u16, retry_after: bool },
    /// No answer: the connection was reset or the request timed out. May
    /// or may not have been applied.
    Unknown { reason: String },
    /// No connection could be opened (the process is gone): the request
    /// never left the client, so it wrote nothing.
    NotSent,
}

/// A write and its outcome, by writer `writer`.
#[derive(Debug, Clone)]
pub struct Op {
    pub writer: usize,
    pub write: Write,
    pub outcome: Outcome,
    /// When it went and came back (the load's writers record it).
    pub receipt: Option<Receipt>,
}

/// When a write was sent, how long its answer took, and what was wrong with
/// a 2xx body that could not be read as the write's answer.
#[derive(Debug, Clone)]
pub struct Receipt {
    pub sent: Instant,
    pub took: Duration,
    pub unreadable: Option<String>,
}

impl Receipt {
    /// When the answer (or the failure) came.
    pub fn answered(&self) -> Instant {
        self.sent + self.took
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = match &self.outcome {
            Outcome::Acknowledged => "acknowledged".to_owned(),
            Outcome::Refused { status, .. } => format!("refused {status}"),
            Outcome::Unknown { reason } => format!("unknown ({reason})"),
            Outcome::NotSent => "not sent (connection refused)".to_owned(),
        };
        write!(f, "writer {}: {} → {outcome}", self.writer, self.write)
    }
}

/// How many writes ended each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub acknowledged: usize,
    pub refused: usize,
    pub unknown: usize,
    pub not_sent: usize,
}

impl Tally {
    pub fn of(ops: &[Op]) -> Self {
        let mut tally = Self::default();
        for op in ops {
            match op.outcome {
                Outcome::Acknowledged => tally.acknowledged += 1,
                Outcome::Refused { .. } => tally.refused += 1,
                Outcome::Unknown { .. } => tally.unknown += 1,
                Outcome::NotSent => tally.not_sent += 1,
            }
        }
        tally
    }

    pub fn add(&mut self, other: Self) {
        self.acknowledged += other.acknowledged;
        self.refused += other.refused;
        self.unknown += other.unknown;
        self.not_sent += other.not_sent;
    }
}
