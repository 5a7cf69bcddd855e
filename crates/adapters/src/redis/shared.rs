//! What every thread's lane of one store shares: the Redis client, the
//! settings of a lane's connection, the script, the key prefix and the
//! store's view of Redis.

use std::sync::Arc;
use std::time::Duration;

use redis::{AsyncConnectionConfig, Client};

use super::health::Health;

/// What every thread's lane of one store shares. A lane holds clones of
/// the `Arc` fields, never the `Shared` itself: the lanes' registry tells a
/// dropped store by its `Shared` being gone (`lanes.rs`).
pub(super) struct Shared {
    pub(super) client: Client,
    /// A lane's connection, for its script calls.
    pub(super) connection: AsyncConnectionConfig,
    pub(super) script: Arc<redis::Script>,
    pub(super) prefix: Arc<str>,
    pub(super) health: Arc<Health>,
}

impl Shared {
    /// What the lanes of a store on `client` share: its keys start with
    /// `prefix`, a call may take at most `timeout`, and Redis is not asked
    /// again for `retry_every` after a failure.
    pub(super) fn new(
        client: Client,
        prefix: &str,
        timeout: Duration,
        retry_every: Duration,
    ) -> Self {
        Self {
            client,
            connection: connection_config(timeout),
            script: Arc::new(gcra()),
            prefix: prefix.into(),
            health: Arc::new(Health::new(retry_every)),
        }
    }
}

/// The script every lane runs.
pub(super) fn gcra() -> redis::Script {
    redis::Script::new(include_str!("gcra.lua"))
}

/// A lane's connection: the crate's own timeouts no longer than a
/// decision's bound (`timeout`), which each call's deadline enforces
/// anyway.
pub(super) fn connection_config(timeout: Duration) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
}
