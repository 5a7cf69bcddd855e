//! `TEST_LOG=1`: tracing output for tests, off unless asked for.

use std::sync::Once;

/// The variable that turns tracing output on in tests.
pub const TEST_LOG: &str = "TEST_LOG";

/// When `TEST_LOG` is set, installs (once per test process) a tracing
/// subscriber that prints to the test's output, filtered by `RUST_LOG`
/// (`info` by default). Otherwise it installs nothing, so events go nowhere
/// and cost nothing: zero2prod's sink writer, without formatting for it.
pub fn init_test_log() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        if std::env::var_os(TEST_LOG).is_none() {
            return;
        }
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        // `try_init`: a subscriber the test installed itself wins.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    });
}
