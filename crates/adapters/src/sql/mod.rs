//! What the two SQL stores share, and nothing else: the budget of one store
//! operation (`DATABASE_STATEMENT_TIMEOUT_MS`, C12) and the rows both hold,
//! read back into the domain, the span around each operation of
//! either (C11), and the turns their full listings take (C12). Neither
//! store reaches into the other; each keeps its own SQL and its own engine.

pub mod budget;
#[cfg(feature = "postgres")]
pub(crate) mod migrations;
pub(crate) mod rows;
pub(crate) mod traced;
pub(crate) mod turns;
