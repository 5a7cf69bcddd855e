//! What the coalescers did: the per-statement histogram the store
//! publishes, and the running tallies tests and the benchmark notes read.

/// Requests each statement served, per operation (a histogram: one sample
/// per statement, 1 for a request that went alone).
pub const REQUESTS_PER_STATEMENT: &str = "database_requests_per_statement";
/// Buckets for [`REQUESTS_PER_STATEMENT`]: powers of two up to a full batch.
pub const REQUESTS_PER_STATEMENT_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];

/// What a coalescer did so far (for tests and the benchmark notes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoalescingStats {
    /// Statements run, alone or for a batch.
    pub statements: u64,
    /// Requests those statements served.
    pub requests: u64,
    /// The most requests one statement served.
    pub largest: u64,
}

/// Describes the coalescing metrics to the installed recorder.
pub fn describe_metrics() {
    metrics::describe_histogram!(
        REQUESTS_PER_STATEMENT,
        "Requests one PostgreSQL statement served (1: alone; more: a coalesced batch), per operation."
    );
}
