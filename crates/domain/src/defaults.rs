//! The default of every setting, in one place (C1).
//!
//! The command line's defaults (`default_value_t = defaults::…`), the
//! adapters' `Default` impls and the examples read them here; nothing else
//! writes these numbers. They live in the innermost crate because the upload
//! policy ([`crate::UploadPolicy`]) is built from one of them.
//!
//! ```
//! use items_domain::defaults;
//!
//! assert_eq!(defaults::PORT, 3000);
//! assert_eq!(defaults::MAX_FILE_BYTES, 10 * 1024 * 1024);
//! ```

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

/// `PORT`: the TCP port.
pub const PORT: u16 = 3000;

/// `HOST`: every IPv4 interface.
pub const HOST: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

/// `UPLOADS_DIR`: where uploads are stored, relative to the working directory.
pub const UPLOADS_DIR: &str = "uploads";

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

/// `DATABASE_POOL_SIZE`: PostgreSQL connections per instance.
pub const DATABASE_POOL_SIZE: u32 = 10;

/// `SHUTDOWN_DRAIN_MS`: how long `/readyz` answers 503 before the server
/// drains, with an admin listener (C11).
pub const SHUTDOWN_DRAIN_MS: u64 = 5000;

/// `LOG_FORMAT`: one human-readable line per request.
pub const LOG_FORMAT: &str = "text";

/// Longest a client may take to send a whole JSON or form body. Not a
/// setting: it bounds how long a trickling client holds a connection.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest a client may stay silent in the middle of an upload. Not a
/// setting, for the same reason as [`BODY_READ_TIMEOUT`].
pub const UPLOAD_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
