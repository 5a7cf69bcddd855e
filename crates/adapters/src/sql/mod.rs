//! What the two SQL stores share, and nothing else: the budget of one store
//! operation (`DATABASE_STATEMENT_TIMEOUT_MS`, C12) and the rows both hold,
//! read back into the domain, the span around each operation of either
//! (C11), the turns their full listings take (C12), and the migration
//! runner that applies the schema of each (`migrations`, with each store's
//! executor there, over its driver alone). Neither store reaches into the
//! other; each keeps its own SQL and its own engine.

pub mod budget;
pub mod migrations;
pub(crate) mod rows;
pub(crate) mod traced;
pub(crate) mod turns;
