//! How reads go to standbys (C1, C13): the settings a store is opened
//! with and their defaults.

use std::time::Duration;

/// How long a read with a token waits for a standby by default
/// (`DATABASE_READ_WAIT_MS`).
pub const DEFAULT_READ_WAIT: Duration = Duration::from_millis(100);
/// The most replay lag a standby may have to serve reads without a token,
/// by default (`DATABASE_READ_MAX_LAG_MS`).
pub const DEFAULT_READ_MAX_LAG: Duration = Duration::from_millis(1000);

/// How reads go to standbys (C1, C13).
#[derive(Debug, Clone, Copy)]
pub struct StandbySettings {
    /// How long a read with a token waits for a standby to replay it
    /// before the primary serves it (`DATABASE_READ_WAIT_MS`).
    pub wait: Duration,
    /// The most replay lag of a standby serving reads without a token
    /// (`DATABASE_READ_MAX_LAG_MS`).
    pub max_lag: Duration,
    /// How often the tracker polls while no read waits.
    pub interval: Duration,
    /// How often it polls while a read waits for a standby.
    pub eager_interval: Duration,
    /// Connections per standby at most.
    pub pool_size: u32,
}

impl Default for StandbySettings {
    fn default() -> Self {
        Self {
            wait: DEFAULT_READ_WAIT,
            max_lag: DEFAULT_READ_MAX_LAG,
            interval: Duration::from_millis(50),
            eager_interval: Duration::from_millis(5),
            pool_size: 4,
        }
    }
}
