//! The defaults of the limits the service's rules are stated in (C3, C5,
//! C9): the bodies, files and request budgets a client is held to.
//!
//! The command line's defaults (`default_value_t = defaults::…`), the HTTP
//! adapter's `Default` impls and the examples read them here; nothing else
//! writes these numbers. They live in the innermost crate because the upload
//! policy ([`crate::UploadPolicy`]) is built from one of them. Settings of
//! the process alone (its port, host, log format, uploads directory, drain
//! delay) have their defaults in the binary's crate, `items-app`; the
//! PostgreSQL pool's in its adapter.
//!
//! ```
//! use items_domain::defaults;
//!
//! assert_eq!(defaults::RATE_LIMIT_MAX, 100);
//! assert_eq!(defaults::MAX_FILE_BYTES, 10 * 1024 * 1024);
//! ```

use std::time::Duration;

/// `RATE_LIMIT_MAX`: requests per client per window (C9).
pub const RATE_LIMIT_MAX: u32 = 100;

/// `RATE_LIMIT_WINDOW_MS`: the rate-limit window, 15 minutes (C9).
pub const RATE_LIMIT_WINDOW_MS: u64 = 900_000;

/// `TRUST_PROXY`: how many proxies stand in front; none (`false`).
pub const TRUST_PROXY: u32 = 0;

/// `MAX_FILE_BYTES`: the largest single uploaded file, 10 MiB (C5).
pub const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// `MAX_JSON_BYTES`: the largest JSON or form body, 100 KiB (C3).
pub const MAX_JSON_BYTES: u64 = 100 * 1024;

/// Longest a client may take to send a whole JSON or form body. Not a
/// setting: it bounds how long a trickling client holds a connection.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest a client may stay silent in the middle of an upload. Not a
/// setting, for the same reason as [`BODY_READ_TIMEOUT`].
pub const UPLOAD_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
